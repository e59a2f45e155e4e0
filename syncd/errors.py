"""One error tree for everything syncd raises on purpose.

Each subclass carries the fields a person needs to act on it (a path, a line); ``str(err)`` is the
one line the CLI prints. Errors of the libraries underneath (git, LanceDB, onnxruntime, litellm,
the disk) are mapped to these where syncd calls them, so a caller catches ``SyncdError`` alone.
The tree (tests/test_errors.py checks it against the classes)::

    SyncdError
    ├── ConfigError              a setting is missing or unusable
    ├── InvalidIdError           a user, chat or session id outside the safe set (also ValueError)
    ├── InvalidInputError        a value that passed its schema but cannot be used (also ValueError)
    ├── QueryError               a search that cannot run as asked (also ValueError)
    ├── SessionError             a session value that cannot be used (also ValueError)
    ├── ParseError               a file that cannot be read as markdown (or a broken session.json)
    ├── UnsafePickleError        a legacy pickled agent state refused
    ├── HomeError                the home is missing, unreadable or not a home
    ├── LockedError              another process holds the home's writer lock
    ├── ConflictError            a file changed between our read and our write
    ├── OverwrittenError         a write handed to the daemon, changed by someone else before its commit
    ├── NotFoundError            a fact, file or commit that does not exist
    ├── AccessError              the one asking may not do this (also PermissionError)
    ├── BlockLimitError          a core block over its size limit
    ├── EmbeddingError           the embedding model cannot be loaded or run
    ├── IndexError_              the index is unusable
    │   ├── IndexUnreachable     its database cannot be reached: the markdown is kept, the index behind
    │   └── IndexDamaged         its tables cannot be read: `syncd reindex` rebuilds them from the markdown
    ├── ExtractionError          fact extraction failed; nothing was written
    ├── StorageError             the disk refused a write (``saved`` says whether the markdown is)
    ├── HistoryError             a git command failed
    │   └── RemoteRefused        a remote refuses us for good: waiting and retrying do not help
    ├── RevertError              a revert that cannot apply cleanly; nothing changed
    ├── GitBusyError             the person's own git operation is under way
    │   ├── CommitDeferredError  saved, committed once git is free: do not write it again
    │   └── ChangedMeanwhileError  a git command put another version there: retry
    └── RemoteError              the daemon holding the home refused or failed a request
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing not imported: this runs first in every `syncd` command (__main__)
if TYPE_CHECKING:
    from pathlib import Path

__all__ = [
    "SyncdError",
    "ConfigError",
    "InvalidIdError",
    "ParseError",
    "LockedError",
    "ConflictError",
    "OverwrittenError",
    "HomeError",
    "EmbeddingError",
    "IndexError_",
    "IndexUnreachable",
    "IndexDamaged",
    "ExtractionError",
    "BlockLimitError",
    "NotFoundError",
    "RevertError",
    "GitBusyError",
    "CommitDeferredError",
    "ChangedMeanwhileError",
    "HistoryError",
    "RemoteRefused",
    "StorageError",
    "QueryError",
    "UnsafePickleError",
    "SessionError",
    "InvalidInputError",
    "AccessError",
    "RemoteError",
]


class SyncdError(Exception):
    """Base of every error syncd raises deliberately."""


class ConfigError(SyncdError):
    """A setting is missing or has a value syncd cannot use."""


class InvalidIdError(SyncdError, ValueError):
    """A user, chat or session id is outside the documented safe character set."""

    def __init__(self, kind: str, value: object, reason: str):
        self.kind = kind
        self.value = value
        self.reason = reason
        super().__init__(f"invalid {kind} id {value!r}: {reason}")


class ParseError(SyncdError):
    """A file cannot be read as what its place says it is: markdown (for example it is not valid
    UTF-8), or a session's ``session.json`` a person broke (which is then never written over)."""

    def __init__(self, message: str, path: Path | str | None = None, line: int | None = None):
        self.path = str(path) if path is not None else None
        self.line = line
        where = self.path or ""
        if line is not None:
            where = f"{where}:{line}"
        super().__init__(f"{where}: {message}" if where else message)


class HomeError(SyncdError):
    """The memory home is missing, unreadable or not a syncd home."""


class LockedError(SyncdError):
    """Another process holds the single-writer lock of this home."""

    def __init__(self, lock_path: Path, holder: str):
        self.lock_path = lock_path
        self.holder = holder
        super().__init__(f"{lock_path} is held by {holder}; only one writer may run per home")


class ConflictError(SyncdError):
    """A file changed between our read and our write (compare-and-swap failed)."""

    def __init__(self, path: Path | str, expected: str | None, found: str | None):
        self.path = str(path)
        self.expected = expected
        self.found = found
        super().__init__(
            f"{self.path} changed since it was read (expected {expected or 'absent'}, "
            f"found {found or 'absent'}); nothing was written"
        )


class OverwrittenError(SyncdError):
    """A write handed to the daemon holding the home was changed by someone else (a person's
    editor, another writer) before any commit took it in, so that neither HEAD nor the file holds
    it any more (a line it added is gone, or one it took out is back): it is not kept. Not a
    ConflictError, which callers retry at once: written again, it would undo the other's edit.
    ``paths`` are the files concerned."""

    def __init__(self, paths: list[str]):
        self.paths = paths
        super().__init__(
            f"not kept: {', '.join(paths)} changed by someone else before this change was committed, "
            "and no longer holds it (a line it added is gone, or one it took out is back); "
            "read the file again before writing it anew"
        )


class EmbeddingError(SyncdError):
    """The embedding model cannot be loaded or run."""


class IndexError_(SyncdError):
    """The index is unusable (named with a trailing underscore to not shadow IndexError)."""


class IndexUnreachable(IndexError_):
    """The index's database cannot be reached (down, unreachable, refusing us): what the
    markdown holds is kept, and the index is behind until the database is back."""

    #: What ``Status.index`` says meanwhile (``syncd.index.backend.INDEX_UNREACHABLE``).
    status = "unreachable"


class IndexDamaged(IndexError_):
    """The index's own files cannot be read (cut short by a disk error or a bad copy, or not
    readable by this account): nothing of the markdown is touched, and the index, derived from it,
    is rebuilt by removing it and running ``syncd reindex``."""


class ExtractionError(SyncdError):
    """Fact extraction could not run or returned something unusable; nothing was written."""


class BlockLimitError(SyncdError):
    """A core memory block would exceed its size limit."""

    def __init__(self, label: str, size: int, limit: int):
        self.label = label
        self.size = size
        self.limit = limit
        super().__init__(f"block {label!r} would be {size} characters, over its limit of {limit}")


class NotFoundError(SyncdError):
    """A fact, file or commit that was asked for does not exist."""


class RevertError(SyncdError):
    """``git revert`` could not apply cleanly (later changes touch the same lines); nothing changed."""


class GitBusyError(SyncdError):
    """The user's own git operation (a merge, a rebase, a held ``index.lock``) is under way, so
    syncd will not touch git now. ``reason`` says which and how to finish it."""

    def __init__(self, reason: str):
        self.reason = reason
        super().__init__(reason)


class CommitDeferredError(GitBusyError):
    """A write handed to the daemon that holds the home is saved, with its provenance, but the
    daemon could not commit it within ``lock_wait_s`` (git busy): it commits it once git is free.
    Unlike its parent, this one says the change *is* kept: do not write it again."""


class ChangedMeanwhileError(GitBusyError):
    """A file a commit pass was to commit as an API writer wrote it holds something else (a git
    command of the person's put another version there): nothing was committed. Waiting does not
    help; the writers' changes are undone and they retry."""


class HistoryError(SyncdError):
    """A git command failed for a reason other than the user's own operation (mapped from the
    git process's exit and stderr at the history seam). ``command`` and ``detail`` say what and why."""

    def __init__(self, command: str, detail: str):
        self.command = command
        self.detail = detail
        super().__init__(f"git {command} failed: {detail}")


class RemoteRefused(HistoryError):
    """A git remote refuses us for a reason that trying again does not change: its history is
    not this home's, its hook declines our push, it does not know our credentials, or there is no
    such repository. Someone has to act (the remote's URL, its hook, the credentials) before a
    retry can succeed; a remote that is only unreachable now is a plain HistoryError."""


class StorageError(SyncdError):
    """The disk refused a write (full, read-only, I/O error). ``saved`` tells the caller whether
    the markdown change itself reached the disk (True: only the index or the commit is behind, and
    the next pass heals it) or not (False: nothing was written)."""

    def __init__(self, message: str, path: Path | str | None = None, saved: bool = False):
        self.path = str(path) if path is not None else None
        self.saved = saved
        super().__init__(message)

    @classmethod
    def not_indexed(cls, paths: set[str], exc: Exception) -> StorageError:
        """Files saved (and committed) whose index write failed: ``saved``."""
        more = "" if isinstance(exc, StorageError) else "; the next sync indexes them"
        return cls(f"{len(paths)} file(s) were saved but not indexed: {exc}{more}", None, saved=True)


class QueryError(SyncdError, ValueError):
    """A search cannot run as asked (an empty query); ``query`` is what was given."""

    def __init__(self, query: object, reason: str):
        self.query = query
        self.reason = reason
        super().__init__(reason)


class InvalidInputError(SyncdError, ValueError):
    """A value a caller gave (a client, an agent's tool call) that passed its schema but cannot be
    used: a path that climbs out of the home, a search_replace whose passage is not in the block,
    a scope that does not exist. The caller's to fix (422 over REST), never a server fault; a
    ValueError, so code that catches those still does."""


class UnsafePickleError(SyncdError):
    """A legacy pickled agent state was refused: unpickling was not asked for (``allowed`` False),
    or the pickle names ``module.name``, a class outside the fixed list it may build."""

    def __init__(self, reason: str, module: str | None = None, name: str | None = None):
        self.reason = reason
        self.module = module
        self.name = name
        super().__init__(reason)


class SessionError(SyncdError, ValueError):
    """A session value cannot be used as given (a naive datetime, a policy out of range); ``field``
    names which."""

    def __init__(self, field: str, reason: str):
        self.field = field
        self.reason = reason
        super().__init__(f"{field}: {reason}")


class AccessError(SyncdError, PermissionError):
    """The one asking may not do this: a user's token naming another user's memory, or an
    operation only the admin may make (403 over REST); a PermissionError, so code that catches
    those still does."""


class RemoteError(SyncdError):
    """The daemon holding the home refused or failed a request; ``kind`` names its error type there."""

    def __init__(self, kind: str, message: str):
        self.kind = kind
        super().__init__(message)
