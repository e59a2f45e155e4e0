"""Scan the tree: stat every markdown file and hash only those whose size or mtime differ from
what the index recorded (and those that failed last time, since a permission fix changes neither).
"""

from __future__ import annotations

import errno
import logging
import os
import stat
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ..home import Home, blob_sha, is_indexable, read_at_most
from ..index.records import FileRecord
from .walk import walk

log = logging.getLogger(__name__)

__all__ = ["DiskFile", "DiskScan", "scan_disk", "list_tree", "read_limited", "printable_path", "tree_agrees"]


# A file modified this close to the scan may be modified again within the same mtime tick, same
# size, and look unchanged ("racy git"). Such files are recorded with mtime 0, so the next scan
# hashes them again instead of trusting their stat.
_RACY_NS = 2_000_000_000


# Bytes read while hashing are kept for parsing, up to this much; past it the apply step reads the
# file again, so a rebuild of a large tree never holds the whole tree in memory.
_KEEP_CONTENT_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class DiskFile:
    path: str
    size: int
    mtime_ns: int
    sha: str | None = None  # filled in only when the stat differs from the index
    error: str | None = None


@dataclass
class DiskScan:
    files: dict[str, DiskFile]
    # Folders we could not list: their indexed files are not "deleted", merely unseen.
    unreadable_dirs: list[str] = field(default_factory=list)
    contents: dict[str, bytes] = field(default_factory=dict, repr=False)
    started_ns: int = field(default_factory=time.time_ns)

    def recorded_mtime(self, mtime_ns: int) -> int:
        return 0 if mtime_ns >= self.started_ns - _RACY_NS else mtime_ns


def read_limited(path: Path, max_bytes: int) -> tuple[bytes | None, str | None]:
    """Up to ``max_bytes`` of the file at ``path``, never through a symbolic link (a link swapped
    in after the scan's lstat is refused, not followed), and never blocking on a FIFO."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return None, _LINK_ERROR
        return None, f"cannot read: {exc.strerror or exc}"
    try:
        with os.fdopen(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                return None, "not a regular file"
            data = read_at_most(handle, max_bytes + 1)
    except OSError as exc:
        return None, f"cannot read: {exc.strerror or exc}"
    if len(data) > max_bytes:
        return None, f"larger than the {max_bytes} byte limit (max_file_bytes)"
    return data, None


_LINK_ERROR = (
    "a symbolic link; syncd never follows links, so nothing at or below it is indexed "
    "(put the real file or folder in the home)"
)
_NAME_ERROR = (
    "the file name is not valid UTF-8 (shown here with \\x escapes), so it cannot be indexed or committed; rename it"
)


def printable_path(rel: str) -> str:
    """``rel`` as the index can store it. A name that is not valid UTF-8 reaches Python with its
    bad bytes as lone surrogates, which neither LanceDB, a chunk id nor git's pathspec can take;
    those bytes are shown as ``\\xff`` escapes (distinct per name, and stable from scan to scan)."""
    try:
        rel.encode("utf-8")
        return rel
    except UnicodeEncodeError:
        return rel.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def _report(scan: DiskScan, rel: str, error: str) -> None:
    """A path that cannot be indexed at all: recorded with its reason, once, like an unreadable file."""
    scan.files[rel] = DiskFile(rel, 0, 0, sha="", error=error)


def scan_disk(
    home: Home, known: Mapping[str, FileRecord], max_file_bytes: int, only: Iterable[str] | None = None
) -> DiskScan:
    """Stat every indexable file (or just ``only``), hashing those that may have changed.

    Symbolic links are never followed, at any depth: a link (to a file or a folder) is recorded as
    an error at its own path, and a path below a linked folder does not exist for the index. A
    file name that is not valid UTF-8 is recorded as an error under its escaped name.
    """
    root = home.root
    home.require_readable()
    scan = DiskScan(files={})
    if only is None:
        candidates = list_tree(root, "", scan)
    else:
        # A folder among them is looked at too, to report it if it is a link.
        candidates = _unlinked(root, (p for p in only if is_indexable(p) or is_indexable(p + "/x.md")), scan)
    kept = 0
    top = str(root)
    for rel in candidates:
        shown = printable_path(rel)
        if shown != rel:
            _report(scan, shown, _NAME_ERROR)
            continue
        try:
            st = os.lstat(os.path.join(top, rel))  # a str join: a Path per file is a tenth of a scan
        except (FileNotFoundError, NotADirectoryError):
            continue
        except OSError as exc:
            scan.files[rel] = DiskFile(rel, 0, 0, sha="", error=f"cannot stat: {exc.strerror}")
            continue
        if stat.S_ISLNK(st.st_mode):
            _report(scan, rel, _LINK_ERROR)
            continue
        if not stat.S_ISREG(st.st_mode):
            continue  # devices, FIFOs, a folder named like a note
        record = known.get(rel)
        if record and record.size == st.st_size and record.mtime_ns == st.st_mtime_ns and not record.error:
            scan.files[rel] = DiskFile(rel, st.st_size, st.st_mtime_ns)
            continue
        data, error = read_limited(root / rel, max_file_bytes)
        if data is None:
            scan.files[rel] = DiskFile(rel, st.st_size, st.st_mtime_ns, sha="", error=error)
            continue
        scan.files[rel] = DiskFile(rel, len(data), st.st_mtime_ns, sha=blob_sha(data))
        if kept + len(data) <= _KEEP_CONTENT_BYTES:
            scan.contents[rel] = data
            kept += len(data)
    return scan


def _unlinked(root: Path, paths: Iterable[str], scan: DiskScan) -> list[str]:
    """The ``paths`` that lie below no symbolic link. The lstat of ``vault/people/x.md`` says
    "regular file" even when ``vault/people`` is a link to elsewhere, so every folder on the way
    is checked (once per folder); a linked one is recorded, and the paths below it are dropped, as
    absent (an indexed file there has left the home)."""
    linked: dict[str, bool] = {}
    kept = []
    for rel in paths:
        parts = rel.split("/")
        for depth in range(1, len(parts)):
            folder = "/".join(parts[:depth])
            if folder not in linked:
                try:
                    linked[folder] = stat.S_ISLNK(os.lstat(root / folder).st_mode)
                except OSError:
                    linked[folder] = False
                if linked[folder]:
                    _report(scan, printable_path(folder), _LINK_ERROR)
            if linked[folder]:
                break
        else:
            kept.append(rel)
    return kept


def list_tree(root: Path, under: str, scan: DiskScan) -> list[str]:
    """Home-relative paths of the indexable files in the folder ``under`` ("" for the whole home),
    without recursion (any depth) and without entering a linked folder (recorded in ``scan``).
    If ``under`` itself lies below or is a link, nothing is listed."""
    if under and not _unlinked(root, [under + "/x.md"], scan):
        return []
    found: list[str] = []

    def on_error(exc: OSError) -> None:
        rel = printable_path(os.path.relpath(exc.filename, root)) if exc.filename else "?"
        log.warning("cannot list %s: %s", rel, exc.strerror)
        scan.unreadable_dirs.append(rel)

    for folder, dirs, files in walk(root / under if under else root, onerror=on_error):
        rel_folder = os.path.relpath(folder, root)
        prefix = "" if rel_folder == "." else rel_folder.replace(os.sep, "/") + "/"
        kept = []
        for name in dirs:
            if not is_indexable(prefix + name + "/x.md"):
                continue  # .git, .syncd, .obsidian, ...
            if os.path.islink(os.path.join(folder, name)):
                _report(scan, printable_path(prefix + name), _LINK_ERROR)
                continue
            kept.append(name)
        dirs[:] = kept
        found.extend(prefix + name for name in files if is_indexable(prefix + name))
    return found


def tree_agrees(home: Home, known: Mapping[str, FileRecord]) -> bool:
    """Whether the tree on disk is, by every file's stat, what the index recorded: the same
    indexable files, each a regular file of the recorded size and mtime, none in error. Then the
    scan would hash nothing and its plan is empty, so nothing is stale: the answer of a search
    or a status almost always, found here with one listing per folder and one lstat per file,
    and none of the scan's per-file work (its records, hashes, the plan). False when anything
    differs or cannot be looked at (a new or missing file, another stat, a link, an unlistable
    folder, a file in error, a racy mtime recorded as 0): the scan and plan then say what is
    stale, exactly. The folders entered and the files taken are the scan's (sync.scan.list_tree:
    is_indexable, no linked folder entered; scan_disk: a FIFO or a device is no file), a law in
    tests/test_tree_agrees.py."""
    seen = 0
    # is_indexable(rel) for a file of a folder the walk entered: its name's rules (the same for a
    # name in any such folder, so asked once per name), or a session's file by its whole path.
    names: dict[str, bool] = {}
    folders = [(os.fspath(home.root), "")]
    try:
        while folders:
            folder, prefix = folders.pop()
            with os.scandir(folder) as entries:
                for entry in entries:
                    rel = prefix + entry.name
                    record = known.get(rel)
                    if record is not None:
                        # A recorded path this syncd would not index (an older one's rules) is
                        # one the scan drops: not agreeing.
                        indexable = names.get(entry.name)
                        if indexable is None:
                            indexable = names[entry.name] = is_indexable(entry.name)
                        if record.error is not None or not (indexable or is_indexable(rel)):
                            return False
                        st = entry.stat(follow_symlinks=False)
                        if not stat.S_ISREG(st.st_mode):
                            return False
                        if st.st_size != record.size or st.st_mtime_ns != record.mtime_ns:
                            return False
                        seen += 1
                    elif _is_folder(entry):
                        if is_indexable(rel + "/x.md"):
                            if entry.is_symlink():
                                return False  # the scan reports a linked folder
                            folders.append((entry.path, rel + "/"))
                    elif is_indexable(rel) and (entry.is_symlink() or entry.is_file(follow_symlinks=False)):
                        return False  # a file the index does not know, or a link the scan reports
    except OSError:
        return False
    return seen == len(known)


def _is_folder(entry: os.DirEntry) -> bool:
    """As the scan's walk sorts an entry (a link to a folder is a folder, a dangling one not)."""
    try:
        return entry.is_dir()
    except OSError:
        return False
