"""The memory home on disk: its folders, atomic and compare-and-swap writes, durable appends,
and the single-writer lock. Path rules (scope, id validation) are pure and live in layout.py.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import fcntl
import hashlib
import os
import re
import stat
import tempfile
from pathlib import Path

from .errors import ConflictError, HomeError, InvalidIdError, LockedError
from .layout import validate_id, validate_label

__all__ = [
    "blob_sha",
    "file_blob_sha",
    "read_regular",
    "atomic_write",
    "durable_append",
    "HomeLock",
    "find_home",
    "Home",
]


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


def read_regular(root: Path, rel: str) -> bytes | None:
    """The bytes of the regular file at home-relative ``rel``, or None when there is none.

    No symbolic link is followed at any depth: each folder is opened relative to the one before
    with O_NOFOLLOW, so a link anywhere on the path (``memory/core/persona.md -> /etc/passwd``, or
    ``memory -> /elsewhere``), even one swapped in while we read, raises OSError(ELOOP) instead of
    reading outside the home. Anything else that is not a regular file raises OSError too.
    """
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
    parts = Path(rel).parts
    if not parts or any(p in ("..", "/") for p in parts):
        raise HomeError(f"{rel!r} is not a path inside the home")
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            try:
                child = os.open(part, flags | (os.O_NONBLOCK if last else os.O_DIRECTORY), dir_fd=fd)
            except FileNotFoundError:
                return None
            except OSError as exc:
                # O_DIRECTORY|O_NOFOLLOW on a link says ENOTDIR, not ELOOP: ask what it is.
                if exc.errno == errno.ENOTDIR and not _is_link(part, fd):
                    return None
                if exc.errno in (errno.ELOOP, errno.EMLINK, errno.ENOTDIR):
                    where = "/".join(parts[: i + 1])
                    raise OSError(errno.ELOOP, f"{where} is a symbolic link; syncd never follows links", rel) from None
                raise
            os.close(fd)
            fd = child
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", rel)
        with os.fdopen(fd, "rb") as handle:
            fd = -1
            return handle.read()
    finally:
        if fd >= 0:
            os.close(fd)


def _is_link(name: str, dir_fd: int) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


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

