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

__version__ = "0.1.0"

__all__ = [
    "__version__",
    "init",
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
