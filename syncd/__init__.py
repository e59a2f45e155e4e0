"""syncd: a filesystem-native memory engine for AI agents.

Markdown files are the only truth; a LanceDB index and a git history are kept in step with them.
"""

from __future__ import annotations

from ._version import __version__
from .errors import (
    AccessError,
    BlockLimitError,
    ChangedMeanwhileError,
    CommitDeferredError,
    ConfigError,
    ConflictError,
    EmbeddingError,
    ExtractionError,
    GitBusyError,
    HistoryError,
    HomeError,
    IndexDamaged,
    IndexError_,
    IndexUnreachable,
    InvalidIdError,
    InvalidInputError,
    LockedError,
    NotFoundError,
    OverwrittenError,
    ParseError,
    QueryError,
    RemoteError,
    RemoteRefused,
    RevertError,
    SessionError,
    StorageError,
    SyncdError,
    UnsafePickleError,
)

# Not typing.TYPE_CHECKING: importing typing is most of what importing syncd costs, and the
# `syncd` command reaches its Ctrl-C handling only after (__main__).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from .config import Settings
    from .engine.initialize import InitReport, init
del TYPE_CHECKING  # not a name of syncd's


def open(home=None, read_only: bool = False, settings: Settings | None = None, embedder=None):  # noqa: A001
    """Open a memory home: ``syncd.open(home).search("tea")``. See :class:`syncd.engine.facade.Engine`."""
    from .engine.facade import open_engine
    from .wiki.store import follow_index

    engine = open_engine(home, read_only=read_only, settings=settings, embedder=embedder)
    follow_index(engine)  # the whole of syncd: the wiki's link graph follows the index
    return engine


# Names load on first use: LanceDB and onnxruntime behind the engine, pydantic behind Settings,
# so `syncd --help` and a search answered by the daemon stay quick.
_LAZY = {
    "Settings": ("syncd.config", "Settings"),
    "init": ("syncd.engine.initialize", "init"),
    "InitReport": ("syncd.engine.initialize", "InitReport"),
    "Engine": ("syncd.engine.facade", "Engine"),
    "Status": ("syncd.engine.facade", "Status"),
    "Hit": ("syncd.index.search", "Hit"),
    "Intent": ("syncd.history.intents", "Intent"),
    "WikiManager": ("syncd.wiki.manager", "WikiManager"),
    "TranscriptManager": ("syncd.session", "TranscriptManager"),
    "StateMirror": ("syncd.session", "StateMirror"),
    "SessionPolicy": ("syncd.session", "SessionPolicy"),
    "SessionLifecycle": ("syncd.session", "SessionLifecycle"),
    "ContextCompressor": ("syncd.session", "ContextCompressor"),
    "TranscriptIndexer": ("syncd.session", "TranscriptIndexer"),
    "MarkdownIndexer": ("syncd.session", "MarkdownIndexer"),
    "SessionRunner": ("syncd.session", "SessionRunner"),
}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        return getattr(importlib.import_module(module), attr)
    raise AttributeError(f"module 'syncd' has no attribute {name!r}")


__all__ = [
    "__version__",
    "init",
    "open",
    "Engine",
    "Status",
    "Hit",
    "Intent",
    "InitReport",
    "WikiManager",
    "Settings",
    "AccessError",
    "BlockLimitError",
    "ChangedMeanwhileError",
    "CommitDeferredError",
    "ConfigError",
    "ConflictError",
    "EmbeddingError",
    "ExtractionError",
    "GitBusyError",
    "HistoryError",
    "HomeError",
    "IndexDamaged",
    "IndexError_",
    "IndexUnreachable",
    "InvalidIdError",
    "InvalidInputError",
    "LockedError",
    "NotFoundError",
    "OverwrittenError",
    "ParseError",
    "QueryError",
    "RemoteError",
    "RemoteRefused",
    "RevertError",
    "SessionError",
    "StorageError",
    "SyncdError",
    "UnsafePickleError",
    "TranscriptManager",
    "StateMirror",
    "SessionPolicy",
    "SessionLifecycle",
    "ContextCompressor",
    "TranscriptIndexer",
    "MarkdownIndexer",
    "SessionRunner",
]
