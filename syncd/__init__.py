"""syncd: a filesystem-native memory engine for AI agents.

Markdown files are the only truth; a LanceDB index and a git history are kept in step with them.
"""

from __future__ import annotations

from .config import Settings
from .errors import (
    BlockLimitError,
    ConfigError,
    ConflictError,
    EmbeddingError,
    ExtractionError,
    HomeError,
    InvalidIdError,
    LockedError,
    NotFoundError,
    ParseError,
    SyncdError,
)
from .initialize import InitReport, init


def open(home=None, read_only: bool = False, settings: Settings | None = None, embedder=None):  # noqa: A001
    """Open a memory home: ``syncd.open(home).search("tea")``. See :class:`syncd.engine.Engine`."""
    from .engine import open_engine

    return open_engine(home, read_only=read_only, settings=settings, embedder=embedder)

__version__ = "0.1.0"

__all__ = [
    "__version__",
    "init",
    "open",
    "InitReport",
    "Settings",
    "SyncdError",
    "ConfigError",
    "ConflictError",
    "EmbeddingError",
    "ExtractionError",
    "BlockLimitError",
    "HomeError",
    "InvalidIdError",
    "LockedError",
    "NotFoundError",
    "ParseError",
]
