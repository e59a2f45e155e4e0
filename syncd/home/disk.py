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
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any, BinaryIO

from ..errors import ConflictError, HomeError, InvalidIdError, ParseError, StorageError
from .layout import case_twin, validate_id, validate_label
from .lock import HomeLock

__all__ = [
    "blob_sha",
    "file_blob_sha",
    "read_at_most",
    "disk_failure",
    "write_refused",
    "atomic_write",
    "replace_unsynced",
    "ignore_write_temp_files",
    "remove_stale_temp_files",
    "read_regular",
    "read_memory_file",
    "durable_append",
    "write_some",
    "git_dir",
    "common_git_dir",
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


# Growth past the size fstat reported is read in pieces of this size, never in one limit-sized read.
_READ_PIECE = 1 << 20


def read_at_most(handle: BinaryIO, limit: int) -> bytes:
    """Up to ``limit`` bytes of an open file, read with a buffer the size of the file.

    ``handle.read(limit)`` allocates ``limit`` bytes up front and shrinks the result afterwards;
    above glibc's mmap threshold that allocation is a memory mapping of its own, which the shrink
    keeps. A scan that kept 100,000 small files read that way held 100,000 mappings and ran out of
    ``vm.max_map_count`` (65,530), failing far away (the model's shared library could not be
    mapped). Sizing the read from ``fstat`` keeps a small file's bytes on the ordinary heap.
    """
    size = os.fstat(handle.fileno()).st_size
    # One byte past the size reported, so a file that grew since is noticed and read on.
    data = handle.read(min(size + 1, limit))
    if len(data) <= size or len(data) >= limit:
        return data
    pieces = [data]
    total = len(data)
    while total < limit:
        piece = handle.read(min(_READ_PIECE, limit - total))
        if not piece:
            break
        pieces.append(piece)
        total += len(piece)
    return b"".join(pieces)


# What a failing disk says, in the words of the OS, of Rust's std::io (LanceDB) and of SQLite.
_DISK_ERRNOS = {
    errno.ENOSPC: "no space left on the device",
    errno.EDQUOT: "the disk quota is exceeded",
    errno.EROFS: "the file system is read-only",
    errno.EIO: "the disk reported an I/O error",
    errno.EFBIG: "the file is too large for the file system",
}
_DISK_MESSAGES = (
    ("no space left on device", errno.ENOSPC),
    ("database or disk is full", errno.ENOSPC),
    ("disk quota exceeded", errno.EDQUOT),
    ("read-only file system", errno.EROFS),
    ("input/output error", errno.EIO),
    ("disk i/o error", errno.EIO),
)


def disk_failure(exc: BaseException, folder: Path | None = None) -> str | None:
    """Why the disk refused a write, in plain words, when ``exc`` (or what caused it) says the
    disk did: full, over quota, read-only or failing. None for any other error.

    Libraries report the same condition in their own words (LanceDB as a RuntimeError naming
    "os error 28", SQLite as "database or disk is full" or a bare "disk I/O error"), so their
    messages are read too; for SQLite's vague "disk I/O error", ``folder``'s file system is
    asked whether it is full or read-only, which names the usual real cause.
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno in _DISK_ERRNOS:
            return _DISK_ERRNOS[current.errno]
        text = str(current).lower()
        for code, reason in _DISK_ERRNOS.items():
            if f"os error {code})" in text:
                return reason
        for needle, code in _DISK_MESSAGES:
            if needle in text:
                return _filesystem_state(folder) or _DISK_ERRNOS[code]
        current = current.__cause__ or current.__context__
    return None


# What SQLite says when it may not write a database or make one in its folder.
_WRITE_REFUSALS = ("readonly database", "unable to open database file")


def write_refused(exc: BaseException) -> bool:
    """Whether ``exc`` says this process may not write there at all (a read-only mount, a home
    that is someone else's), as opposed to a disk that is full or failing: what a reader of such
    a home shrugs off, since it only ever wanted to keep a cache there."""
    if isinstance(exc, OSError):
        return exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS)
    return any(words in str(exc).lower() for words in _WRITE_REFUSALS)


def _filesystem_state(folder: Path | None) -> str | None:
    if folder is None:
        return None
    try:
        st = os.statvfs(folder)
    except OSError:
        return None
    if st.f_flag & os.ST_RDONLY:
        return _DISK_ERRNOS[errno.EROFS]
    if st.f_bavail == 0 or st.f_favail == 0:
        return _DISK_ERRNOS[errno.ENOSPC]
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
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise OSError(errno.EISDIR, "a folder is there, not a file (move it away)", rel)
        if not stat.S_ISREG(mode):
            raise OSError(errno.EINVAL, "not a regular file", rel)
        with os.fdopen(fd, "rb") as handle:
            fd = -1
            return handle.read()
    finally:
        if fd >= 0:
            os.close(fd)


def read_memory_file(root: Path, rel: str) -> bytes | None:
    """:func:`read_regular` for a file syncd reads in order to change it (a block, MEMORY.md, a
    daily log), or to show it: None when absent, ParseError (a 409 over REST, one line in the CLI)
    when something else sits at ``rel`` (a symbolic link on the way): the link is never written
    through, nor replaced by a file."""
    try:
        return read_regular(root, rel)
    except OSError as exc:
        raise ParseError(f"cannot be read or changed: {exc.strerror or exc}", rel) from None


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

# atomic_write's temp files: ``.<name>.<random>.syncd-tmp`` beside the target. Hidden, so neither
# the index nor the committer takes them; a kill -9 between write and rename leaves one behind.
_TEMP_SUFFIX = ".syncd-tmp"


def atomic_write(path: Path, data: bytes, expected_sha: str | object | None = _ABSENT, sync_folder: bool = True) -> str:
    """Write ``data`` to ``path`` atomically; return the new blob sha.

    The bytes are fsynced before the rename, so the file is the old one or the new one whole,
    even after a power cut; the rename itself is made durable by an fsync of the folder, or, with
    ``sync_folder`` false, left to the caller, who must :func:`sync_folders` before telling anyone
    the write is kept (the write path does it once per commit pass for all its writes, outside
    the write turn every writer waits for).

    With ``expected_sha`` (a blob sha, or None meaning "must not exist yet") this is a
    compare-and-swap: the file is re-hashed right before the rename and a ConflictError is raised,
    with nothing written, if someone else changed it since the caller read it.

    When the disk refuses (full, over quota, read-only, failing, or any other OSError) a
    StorageError with ``saved=False`` is raised: the old file, if any, is untouched and the
    temporary file is gone. Only a failure to sync the folder after the rename says ``saved=True``:
    the new bytes are in place, their durability across a power cut is what is in doubt.
    """
    tmp: Path | None = None
    try:
        fd, tmp_name = _in_folder(
            path, lambda: tempfile.mkstemp(prefix=f".{path.name}.", suffix=_TEMP_SUFFIX, dir=path.parent)
        )
        tmp = Path(tmp_name)
        try:
            _write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        with contextlib.suppress(FileNotFoundError):
            os.chmod(tmp, _mode_to_keep(path))
        if expected_sha is not _ABSENT:
            found = file_blob_sha(path)
            if found != expected_sha:
                raise ConflictError(path, expected_sha, found)  # type: ignore[arg-type]
        try:
            os.replace(tmp, path)
        except FileNotFoundError:
            # The folder went away under us (a `git stash -u` cleaning an untracked folder): the
            # file changed as surely as if someone had written it; nothing was written.
            raise ConflictError(path, "its folder", "the folder removed") from None
    except BaseException as exc:
        if tmp is not None:
            with contextlib.suppress(OSError):
                tmp.unlink()
        if isinstance(exc, OSError):
            raise _not_saved(path, exc) from exc
        raise
    if sync_folder:
        try:
            _fsync_dir(path.parent)
        except OSError as exc:
            raise StorageError(
                f"{path} was written, but its folder could not be synced to disk: {_reason(exc)}",
                path,
                saved=True,
            ) from exc
    return blob_sha(data)


def sync_folders(paths: Iterable[Path]) -> None:
    """Make the renames of :func:`atomic_write` with ``sync_folder`` false durable: one fsync of
    each folder holding one of ``paths``. StorageError (``saved=False``: the caller has told no
    one the writes are kept) when one cannot be synced."""
    for folder in sorted({path.parent for path in paths}):
        try:
            _fsync_dir(folder)
        except FileNotFoundError:
            continue  # removed since (a git command of the person's): nothing of ours to keep there
        except OSError as exc:
            raise StorageError(
                f"cannot sync {folder} to disk: {_reason(exc)}; the change there was not kept", folder, saved=False
            ) from exc


def _in_folder(path: Path, create):
    """``create()`` a file in ``path``'s folder, made first if missing. A git command of the
    person's (a stash, a checkout) may remove that folder, emptied, between the two: then it is
    made again, a few times, before the failure is the caller's."""
    for attempt in range(3):
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            return create()
        except FileNotFoundError:
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


def write_some(fd: int, data: memoryview) -> int:
    """One ``write(2)`` of the markdown writes here: the single place their bytes reach the disk,
    and so where tests make the disk full on machines that cannot mount a small file system."""
    return os.write(fd, data)


def replace_unsynced(target: Path, data: bytes, temporary: Path, mode: int) -> None:
    """Write ``data`` to ``target`` through ``temporary`` (created with ``mode``, in the same
    folder, which is made if missing) renamed over it: a reader sees the old file or the new one
    whole, never half of one. Nothing is fsynced: for files that need only outlive the process (an
    intent this process commits itself) or that git rewrites anyway (a loose object). Raises the
    OSError; the temporary file is gone then."""
    try:
        try:
            fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
        except FileNotFoundError:  # the folder's first file: made on the way
            temporary.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
        try:
            _write_all(fd, data)
        finally:
            os.close(fd)
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(OSError):
            temporary.unlink()
        raise


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        # A write may take only part of the bytes (a disk filling up): go on with the rest.
        view = view[write_some(fd, view) :]


def _reason(exc: OSError) -> str:
    return disk_failure(exc) or exc.strerror or str(exc)


def _not_saved(path: Path, exc: OSError) -> StorageError:
    return StorageError(f"cannot write {path}: {_reason(exc)}; nothing was written", path, saved=False)


def remove_stale_temp_files(root: Path, older_than_s: float = 5.0) -> list[str]:
    """Remove the temp files a killed :func:`atomic_write` left under ``root`` (not under
    ``.git``, never through a symlink); return their relative paths. Only those older than
    ``older_than_s``: a younger one may belong to a write in flight in another process. Their
    content is never needed: the write they belonged to was not acknowledged."""
    removed = []
    cutoff = time.time() - older_than_s
    stack = [Path(root)]
    while stack:  # a stack, not recursion: depth is no reason to fail
        folder = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    if entry.name != ".git":
                        stack.append(Path(entry.path))
                elif (
                    entry.name.startswith(".")
                    and entry.name.endswith(_TEMP_SUFFIX)
                    and entry.stat(follow_symlinks=False).st_mtime < cutoff
                ):
                    os.unlink(entry.path)
                    removed.append(Path(entry.path).relative_to(root).as_posix())
            except OSError:  # gone already, or not ours to remove: the committer skips it anyway
                continue
    return sorted(removed)


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

    When the disk refuses (full, over quota, read-only, failing) a StorageError with
    ``saved=False`` is raised and the file is cut back to its size before the append: a disk that
    fills up part way through takes part of the bytes, and a half line must not stay behind.
    """
    try:
        fd = _in_folder(path, lambda: os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666))
    except OSError as exc:
        raise _not_saved(path, exc) from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        size = os.fstat(fd).st_size
        if expected_size is not None and size != expected_size:
            raise ConflictError(path, f"size {expected_size}", f"size {size}")
        try:
            _write_all(fd, data)
            os.fsync(fd)
        except OSError as exc:
            try:
                os.ftruncate(fd, size)
            except OSError as undo:
                raise StorageError(
                    f"cannot append to {path}: {_reason(exc)}, and cutting it back to its "
                    f"{size} bytes failed too ({_reason(undo)}): its end may hold part of the "
                    "new text",
                    path,
                    saved=False,
                ) from exc
            raise _not_saved(path, exc) from exc
        return size + len(data)
    finally:
        os.close(fd)


def git_dir(root: Path) -> Path | None:
    """The git folder of the repository whose top is ``root``, found as git finds it: ``.git``
    itself, or the folder a ``.git`` file names (``gitdir: <path>``, relative to that file's
    folder), which is how a linked worktree or a submodule points at its own git folder. None
    when ``root`` is not the top of a repository."""
    dot = Path(root) / ".git"
    if dot.is_dir():
        return dot
    try:
        text = dot.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    if text.startswith("gitdir:"):
        target = Path(text[len("gitdir:") :].strip())
        return target if target.is_absolute() else (Path(root) / target)
    return None


def common_git_dir(root: Path) -> Path | None:
    """The git folder the worktrees of ``root``'s repository share (its branches, their reflogs,
    ``info/exclude``): :func:`git_dir` itself, or the folder a linked worktree's ``commondir``
    names. None when ``root`` is not the top of a repository."""
    folder = git_dir(root)
    if folder is None:
        return None
    with contextlib.suppress(OSError, UnicodeDecodeError):
        shared = Path((folder / "commondir").read_text(encoding="utf-8").strip())
        return shared if shared.is_absolute() else folder / shared
    return folder


# What a repository's own exclude file gets so that git never lists atomic_write's temp files.
_TEMP_EXCLUDE = f"# syncd: a write in flight; never the person's, never to be stashed or committed\n.*{_TEMP_SUFFIX}\n"


def ignore_write_temp_files(root: Path) -> None:
    """Make git ignore :func:`atomic_write`'s temp files in the repository whose top is ``root``.

    Why: git lists an untracked temp file of a write in flight, so ``git stash -u`` took one
    away mid-write and ``git stash pop`` brought it back after the write had given up, where it
    stayed, an orphan nobody's process owned. Ignored files are left alone by ``stash -u``,
    ``status`` and ``add -A``. The repository's ``info/exclude`` (shared by its worktrees) rather
    than any ``.gitignore`` in the tree: it is never committed and edits none of the person's
    files. Idempotent and cheap (one small read) once done; a repository we cannot write to is
    left as it is, since the committer skips these files anyway."""
    folder = common_git_dir(root)
    if folder is None:
        return
    exclude = folder / "info" / "exclude"
    try:
        current = exclude.read_bytes()
    except FileNotFoundError:
        current = b""
    except OSError:
        return
    if _TEMP_EXCLUDE.encode() in current:
        return
    with contextlib.suppress(OSError):
        exclude.parent.mkdir(parents=True, exist_ok=True)
        separator = b"" if not current or current.endswith(b"\n") else b"\n"
        atomic_write(exclude, current + separator + _TEMP_EXCLUDE.encode())


# What ``.syncd/.gitignore`` says: everything in it is derived, so git never lists or commits it.
# Inside the folder, not in the user's own .gitignore, so that adopting a folder edits none of theirs.
_STATE_GITIGNORE = b"*\n"


def find_home(start: Path | None = None) -> Path:
    """The nearest enclosing memory home, as git finds its repository."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / ".syncd").is_dir() or ((folder / "memory").is_dir() and (folder / "vault").is_dir()):
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
    def state_dir(self) -> Path:
        """Derived, disposable state: the index, caches, logs. It may be deleted at any moment,
        even under a running daemon, which builds it again (see :meth:`ensure_state_dir`)."""
        return self.root / ".syncd"

    def ensure_state_dir(self) -> Path:
        """``.syncd/`` and its ``.gitignore``, made again when they are gone."""
        folder = self.state_dir
        folder.mkdir(exist_ok=True)
        ignore = folder / ".gitignore"
        if not ignore.exists():
            atomic_write(ignore, _STATE_GITIGNORE)
        return folder

    def require_writable_state(self) -> Path:
        """``.syncd/`` (made if missing), refused as a HomeError when this process may not write
        it or the index's folders in it: a writer would otherwise fail deep inside LanceDB, after
        a sync's parsing and embedding, in its words. The common cause is a ``sudo syncd sync``
        that left them root's."""
        try:
            folder = self.ensure_state_dir()
        except OSError as exc:
            if not write_refused(exc):
                raise
            raise HomeError(
                f"cannot make {self.state_dir}, where syncd keeps the home's index "
                f"({disk_failure(exc) or 'permission denied'}): changing the home needs write access to {self.root}"
            ) from exc
        for path in (folder, folder / "index", folder / "index" / "lance"):
            if path.is_dir() and not os.access(path, os.W_OK | os.X_OK):
                raise self._state_refused(path, _filesystem_state(path) or "permission denied")
        return folder

    def _state_refused(self, path: Path, reason: str) -> HomeError:
        return HomeError(
            f"{path} cannot be written ({reason}): syncd keeps the home's index there. It is derived "
            f"and safe to delete: make {self.state_dir} yours again (chown -R) or remove it, then run "
            "`syncd reindex`"
        )

    @property
    def private_dir(self) -> Path:
        """State that nothing can rebuild, so it must outlive ``rm -rf .syncd``: the single-writer
        lock, the servers' tokens and where they listen, the daemon's socket, the provenance of
        writes not committed yet, the holds of open change groups, the write journals.

        ``<git dir>/syncd/``: outside the working tree (never indexed, committed or listed by
        ``git status``), private to this clone, and one per linked worktree (each worktree is a
        home of its own). A folder with no repository of its own has nowhere to keep it: that
        is a HomeError whose fix, ``syncd init``, creates the repository. This only names the
        folder; :meth:`ensure_private_dir` makes it."""
        folder = git_dir(self.root)
        if folder is None:
            raise HomeError(
                f"{self.root} has no git repository of its own, so no place for its lock "
                f"and tokens; run `syncd init {self.root}` to create one"
            )
        return folder / "syncd"

    def ensure_private_dir(self) -> Path:
        """:attr:`private_dir`, made now if needed, readable by its owner only (it holds tokens)."""
        folder = self.private_dir
        try:
            folder.mkdir(mode=0o700)
        except FileExistsError:
            if not folder.is_dir():
                # Else each command meets it deep down, as 'File exists' or 'Not a directory'.
                raise HomeError(
                    f"{folder} is not a folder: syncd keeps the home's lock, tokens and writes not yet "
                    "committed there; move it away"
                ) from None
        except OSError as exc:
            raise HomeError(f"cannot make {folder} for the home's lock and tokens: {exc.strerror or exc}") from exc
        return folder

    @property
    def lock_path(self) -> Path:
        return self.private_dir / "lock"

    def user_dir(self, user_id: str) -> Path:
        """``memory/users/<user>/``. An id that differs only by case from a user folder already
        there (``ana`` beside ``Ana``) is refused, on every file system: where case is ignored
        (macOS, Windows, a FAT stick) the two would be one folder, each user reading and writing
        the other's memory, and a home must mean the same on every machine it is cloned to."""
        return _unique_by_case(self.memory_dir / "users", "user", validate_id("user", user_id))

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
            chats = self.user_dir(user_id) / "chats"
            return _unique_by_case(chats, "chat", validate_id("chat", chat_id)) / "core" / name
        if user_id is not None:
            return self.user_dir(user_id) / "core" / name
        return self.memory_dir / "core" / name

    def sessions_dir_of(self, user_id: str) -> Path:
        """``memory/users/<user>/sessions/``: the sessions of one user."""
        return self.user_dir(user_id) / "sessions"

    def session_dir(self, user_id: str, session_id: str) -> Path:
        return _unique_by_case(self.sessions_dir_of(user_id), "session", validate_id("session", session_id))

    def transcript_path(self, user_id: str, session_id: str) -> Path:
        """The append-only transcript (JSON lines) of a user's session."""
        return self.session_dir(user_id, session_id) / "transcript.jsonl"

    def state_path(self, user_id: str, session_id: str) -> Path:
        """The agent-state snapshot (JSON v2) of a user's session."""
        return self.session_dir(user_id, session_id) / "state.json"

    def session_meta_path(self, user_id: str, session_id: str) -> Path:
        """The lifecycle fields (created_at, last_active_at, turn_count, resets) of a session."""
        return self.session_dir(user_id, session_id) / "session.json"

    def rel(self, path: Path) -> str:
        """Home-relative posix path of ``path`` (relative to the home, or absolute); refuses
        anything that escapes the home. Symbolic links inside the home are not resolved: the path
        names the link itself, never wherever it points (a write there is refused, not sent to
        the link's target). Only an absolute path that is outside the home as written is resolved
        (the home reached through a link to it)."""
        full = Path(os.path.normpath(self.root / path))
        if not full.is_relative_to(self.root) and path.is_absolute():
            full = path.resolve()
        try:
            return full.relative_to(self.root).as_posix()
        except ValueError:
            raise HomeError(f"{path} is outside the home {self.root}") from None

    def require_readable(self) -> None:
        """An unreadable home must never read as "every file was deleted": refuse instead."""
        if not self.root.is_dir() or not os.access(self.root, os.R_OK | os.X_OK):
            raise HomeError(f"cannot read the home {self.root}; refusing to touch the index")

    def require(self) -> Home:
        """This home, or HomeError when its folder is not a syncd home (yet)."""
        if not self.memory_dir.is_dir() and not self.state_dir.is_dir():
            raise HomeError(f"{self.root} is not a syncd home; run `syncd init {self.root}` first")
        if self.state_dir.exists() and not self.state_dir.is_dir():
            # Else each command meets it deep down, as "File exists" from the embedding cache.
            raise HomeError(
                f"{self.state_dir} is not a folder: syncd keeps the home's index and caches there; "
                "move it away (whatever syncd kept there is rebuilt)"
            )
        return self

    def lock(self) -> HomeLock:
        return _HomeLock(self.ensure_private_dir() / "lock", self.root)


class _HomeLock(HomeLock):
    """The home's lock, refused in syncd's words when the home cannot be written: a raw
    'Read-only file system: .../.git/syncd/lock' said neither what was refused nor what needs
    write access (changing the home does; reading it does not), and 'No space left on device'
    not where."""

    def __init__(self, path: Path, root: Path):
        super().__init__(path)
        self._root = root

    def acquire(self, *args: Any, **kwargs: Any) -> HomeLock:
        # Looked at first: on a full disk the holder's name cannot be written once the flock is
        # taken (HomeLock.acquire then lets go of it and raises the bare OSError, said below).
        if _no_room(self.path.parent):
            raise self._full(_DISK_ERRNOS[errno.ENOSPC])
        try:
            return super().acquire(*args, **kwargs)
        except OSError as exc:
            if not write_refused(exc):
                full = disk_failure(exc)
                if full is None:
                    raise
                raise self._full(full) from exc
            raise HomeError(
                f"cannot change the home {self._root}: its lock {self.path} cannot be written "
                f"({disk_failure(exc) or os.strerror(exc.errno or 0).lower()}); sync, reindex, watch, serve, "
                "revert, pull, push and agents' writes need write access to the home and its .git folder "
                "(search, status and log do not)"
            ) from exc

    def _full(self, reason: str) -> StorageError:
        return StorageError(
            f"cannot take the home's lock {self.path}: {reason}; free space on the disk holding it",
            self.path,
            saved=False,
        )


def _no_room(folder: Path) -> bool:
    """Whether the file system holding ``folder`` has not one block free for this process (one
    that reports no size at all, as some network mounts do, is given the benefit of the doubt).
    Root may write into the blocks a file system reserves (ext4's 5%): counted for root alone."""
    try:
        st = os.statvfs(folder)
    except OSError:
        return False
    free = st.f_bfree if os.geteuid() == 0 else st.f_bavail
    return st.f_blocks > 0 and free == 0


def _unique_by_case(folder: Path, kind: str, name: str) -> Path:
    """``folder / name``, or InvalidIdError when ``folder`` holds a folder whose name differs
    from ``name`` only by case (see :meth:`Home.user_dir`); nothing is read or written there.
    One listing of ``folder``, names only (no entry is followed)."""
    try:
        names = os.listdir(folder)
    except OSError:
        return folder / name  # no folder yet (or none to read): no twin to share it with
    twin = case_twin(name, names)
    if twin is not None:
        raise InvalidIdError(
            kind,
            name,
            f"differs only by case from the {kind} folder {twin!r} already in this home; where "
            f"case is ignored (macOS, Windows) the two would share one folder: use {twin!r}, or "
            "rename that folder",
        )
    return folder / name
