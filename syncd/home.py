"""The memory home on disk: layout, scope from paths, id validation, safe writes, the writer lock.

Scope comes from the path alone (``memory/users/<user>/...``), so isolation between users is
structural: validating ids before they become paths or filters is the whole defence, and it lives
here so every caller gets it.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import fcntl
import hashlib
import logging
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from .errors import ConflictError, HomeError, InvalidIdError, LockedError

__all__ = [
    "ID_MAX_LEN",
    "ID_RULE",
    "Home",
    "FileScope",
    "HomeLock",
    "validate_id",
    "validate_label",
    "blob_sha",
    "file_blob_sha",
    "atomic_write",
    "durable_append",
    "find_home",
    "is_indexable",
    "classify_path",
]

log = logging.getLogger(__name__)

ID_MAX_LEN = 128
# Letters, digits and . _ @ + -, starting with a letter or digit: enough for telegram ids, emails,
# uuids and slugs, and nothing that can be a separator, a glob, a quote or a filter operator.
_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@+-]*\Z")
ID_RULE = (
    "ids are 1-128 characters of A-Z a-z 0-9 . _ @ + -, starting with a letter or digit, "
    "and never contain '..'"
)
_LABEL_RE = re.compile(r"[a-z][a-z0-9_-]{0,63}\Z")
_DAILY_RE = re.compile(r"(\d{4})-(\d{2})-(\d{2})\.md\Z")

# Files and folders the engine never treats as memory: VCS, our own state, editor droppings.
_IGNORED_DIRS = {".git", ".syncd", ".obsidian", ".trash", ".stfolder", "__pycache__", "node_modules"}
_TEMP_SUFFIXES = ("~", ".swp", ".swx", ".swo", ".tmp", ".part", ".crdownload", ".bak")


def validate_id(kind: str, value: object) -> str:
    """Return ``value`` if it is a safe user/chat/session id, else raise InvalidIdError."""
    if not isinstance(value, str):
        raise InvalidIdError(kind, value, "must be a string")
    if value == "":
        raise InvalidIdError(kind, value, "must not be empty")
    if len(value) > ID_MAX_LEN:
        raise InvalidIdError(kind, value[:40] + "...", f"longer than {ID_MAX_LEN} characters")
    if "\x00" in value:
        raise InvalidIdError(kind, value, "contains NUL")
    if "/" in value or "\\" in value:
        raise InvalidIdError(kind, value, "contains a path separator")
    if ".." in value:
        raise InvalidIdError(kind, value, "contains '..'")
    if not _ID_RE.match(value):
        raise InvalidIdError(kind, value, ID_RULE)
    return value


def validate_label(label: object) -> str:
    """Core block labels become file names: lowercase word, at most 64 characters."""
    if not isinstance(label, str) or not _LABEL_RE.match(label):
        raise InvalidIdError("block label", label, "labels are a lowercase word: a-z 0-9 _ -")
    return label


def blob_sha(data: bytes) -> str:
    """The id git gives these bytes (``git hash-object``), so index and history speak one hash."""
    h = hashlib.sha1()
    h.update(b"blob %d\0" % len(data))
    h.update(data)
    return h.hexdigest()


def file_blob_sha(path: Path) -> str | None:
    """Blob sha of a file's current bytes, or None when it does not exist."""
    try:
        return blob_sha(path.read_bytes())
    except FileNotFoundError:
        return None


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


_ABSENT = object()


def atomic_write(path: Path, data: bytes, expected_sha: str | None | object = _ABSENT) -> str:
    """Write ``data`` to ``path`` atomically; return the new blob sha.

    With ``expected_sha`` (a blob sha, or None meaning "must not exist yet") this is a
    compare-and-swap: the file is re-hashed right before the rename and a ConflictError is raised,
    with nothing written, if someone else changed it since the caller read it.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".syncd-tmp", dir=path.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        with contextlib.suppress(FileNotFoundError):
            os.chmod(tmp, _mode_to_keep(path))
        if expected_sha is not _ABSENT:
            found = file_blob_sha(path)
            if found != expected_sha:
                raise ConflictError(path, expected_sha, found)  # type: ignore[arg-type]
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise
    _fsync_dir(path.parent)
    return blob_sha(data)


def _mode_to_keep(path: Path) -> int:
    try:
        return path.stat().st_mode & 0o7777
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def durable_append(path: Path, data: bytes, expected_size: int | None = None) -> int:
    """Append ``data`` and fsync; return the file's new size.

    ``expected_size`` guards appends the same way CAS guards rewrites: if the file is not the size
    the caller last saw, someone else wrote to it and we refuse rather than interleave.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        size = os.fstat(fd).st_size
        if expected_size is not None and size != expected_size:
            raise ConflictError(path, f"size {expected_size}", f"size {size}")
        os.write(fd, data)
        os.fsync(fd)
        return size + len(data)
    finally:
        os.close(fd)


class HomeLock:
    """The single-writer lock ``.syncd/lock`` (an flock, so a killed holder releases it at once)."""

    def __init__(self, path: Path):
        self.path = path
        self._fd: int | None = None

    def acquire(self, what: str = "syncd") -> HomeLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EACCES, errno.EAGAIN):
                raise LockedError(self.path, self.holder() or "another process") from None
            raise
        os.ftruncate(fd, 0)
        os.write(fd, f"pid {os.getpid()} ({what})\n".encode())
        os.fsync(fd)
        self._fd = fd
        return self

    def holder(self) -> str | None:
        try:
            return self.path.read_text(encoding="utf-8", errors="replace").strip() or None
        except FileNotFoundError:
            return None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        if self._fd is None:
            return
        with contextlib.suppress(OSError):
            os.ftruncate(self._fd, 0)
        os.close(self._fd)
        self._fd = None

    def __enter__(self) -> HomeLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


@dataclass(frozen=True)
class FileScope:
    """What a path in the home means. ``kind`` is one of KINDS."""

    kind: str
    user: str | None = None
    chat: str | None = None
    label: str | None = None
    date: str | None = None
    session: str | None = None


KINDS = ("daily_log", "memory_md", "block", "vault_page", "transcript", "state", "note")


def classify_path(rel: str) -> FileScope:
    """Scope of a home-relative posix path. Ids taken from a path are validated like any other:
    a folder named ``..x`` or with odd characters is a plain note, never a user's memory."""
    parts = PurePosixPath(rel).parts
    try:
        if parts[:1] == ("vault",):
            return FileScope("vault_page")
        if parts[:2] == ("sessions", "transcripts") and len(parts) == 3 and rel.endswith(".jsonl"):
            return FileScope("transcript", session=validate_id("session", parts[2][: -len(".jsonl")]))
        if parts[:2] == ("sessions", "state") and len(parts) == 3:
            return FileScope("state", session=validate_id("session", Path(parts[2]).stem))
        if parts[:1] != ("memory",):
            return FileScope("note")
        if len(parts) == 3 and parts[1] == "core":
            return FileScope("block", label=validate_label(parts[2][:-3]))
        if len(parts) >= 4 and parts[1] == "users":
            user = validate_id("user", parts[2])
            rest = parts[3:]
            if rest == ("MEMORY.md",):
                return FileScope("memory_md", user=user)
            if len(rest) == 1 and (m := _DAILY_RE.match(rest[0])):
                return FileScope("daily_log", user=user, date=f"{m[1]}-{m[2]}-{m[3]}")
            if len(rest) == 2 and rest[0] == "core":
                return FileScope("block", user=user, label=validate_label(rest[1][:-3]))
            if len(rest) == 4 and rest[0] == "chats" and rest[2] == "core":
                chat = validate_id("chat", rest[1])
                return FileScope("block", user=user, chat=chat, label=validate_label(rest[3][:-3]))
            return FileScope("note", user=user)
    except InvalidIdError:
        return FileScope("note")
    return FileScope("note")


def is_indexable(rel: str) -> bool:
    """Markdown (and transcripts) outside ignored folders, and not an editor's temp file."""
    parts = PurePosixPath(rel).parts
    if not parts or any(p in _IGNORED_DIRS for p in parts[:-1]):
        return False
    name = parts[-1]
    if name.startswith((".#", "~$")) or name.endswith(_TEMP_SUFFIXES) or name.startswith("."):
        return False
    if name.endswith(".md"):
        return True
    return parts[:2] == ("sessions", "transcripts") and name.endswith(".jsonl")


def find_home(start: Path | None = None) -> Path:
    """The nearest enclosing memory home, as git finds its repository."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / ".syncd").is_dir() or (folder / "memory").is_dir() and (folder / "vault").is_dir():
            return folder
    raise HomeError(f"no syncd home at or above {here}; run `syncd init` or pass --home")


class Home:
    """Paths of one memory home. Every id passes validation before it becomes a path."""

    def __init__(self, root: Path | str):
        self.root = Path(root).expanduser().resolve()

    def __repr__(self) -> str:
        return f"Home({str(self.root)!r})"

    @property
    def memory_dir(self) -> Path:
        return self.root / "memory"

    @property
    def vault_dir(self) -> Path:
        return self.root / "vault"

    @property
    def sessions_dir(self) -> Path:
        return self.root / "sessions"

    @property
    def state_dir(self) -> Path:
        """Derived, disposable state: the index, the lock, caches, logs."""
        return self.root / ".syncd"

    @property
    def lock_path(self) -> Path:
        return self.state_dir / "lock"

    def user_dir(self, user_id: str) -> Path:
        return self.memory_dir / "users" / validate_id("user", user_id)

    def daily_log_path(self, user_id: str, date: dt.date | str) -> Path:
        day = date if isinstance(date, str) else date.isoformat()
        if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", day):
            raise InvalidIdError("date", day, "dates are YYYY-MM-DD")
        return self.user_dir(user_id) / f"{day}.md"

    def memory_md_path(self, user_id: str) -> Path:
        return self.user_dir(user_id) / "MEMORY.md"

    def block_path(self, label: str, user_id: str | None = None, chat_id: str | None = None) -> Path:
        """``memory/core/`` (global), ``users/<u>/core/`` or ``users/<u>/chats/<c>/core/``."""
        name = validate_label(label) + ".md"
        if chat_id is not None:
            if user_id is None:
                raise InvalidIdError("chat", chat_id, "a chat block needs its user")
            return self.user_dir(user_id) / "chats" / validate_id("chat", chat_id) / "core" / name
        if user_id is not None:
            return self.user_dir(user_id) / "core" / name
        return self.memory_dir / "core" / name

    def transcript_path(self, session_id: str) -> Path:
        return self.sessions_dir / "transcripts" / f"{validate_id('session', session_id)}.jsonl"

    def session_state_path(self, session_id: str) -> Path:
        return self.sessions_dir / "state" / f"{validate_id('session', session_id)}.json"

    def rel(self, path: Path) -> str:
        """Home-relative posix path; refuses anything that escapes the home."""
        resolved = (self.root / path).resolve() if not path.is_absolute() else path.resolve()
        try:
            return resolved.relative_to(self.root).as_posix()
        except ValueError:
            raise HomeError(f"{path} is outside the home {self.root}") from None

    def lock(self) -> HomeLock:
        return HomeLock(self.lock_path)
