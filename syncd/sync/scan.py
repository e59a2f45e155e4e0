"""Scan the tree: stat every markdown file and hash only those whose size or mtime differ from
what the index recorded (and those that failed last time, since a permission fix changes neither).
"""

from __future__ import annotations

import logging
import os
import stat
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import HomeError
from ..home import Home, blob_sha, read_at_most
from ..index.records import FileRecord
from ..layout import is_indexable

log = logging.getLogger(__name__)

__all__ = ["DiskFile", "DiskScan", "scan_disk"]


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
    try:
        with open(path, "rb") as handle:
            data = read_at_most(handle, max_bytes + 1)
    except OSError as exc:
        return None, f"cannot read: {exc.strerror or exc}"
    if len(data) > max_bytes:
        return None, f"larger than the {max_bytes} byte limit (max_file_bytes)"
    return data, None


def scan_disk(
    home: Home, known: Mapping[str, FileRecord], max_file_bytes: int, only: Iterable[str] | None = None
) -> DiskScan:
    """Stat every indexable file (or just ``only``), hashing those that may have changed."""
    root = home.root
    if not root.is_dir() or not os.access(root, os.R_OK | os.X_OK):
        raise HomeError(f"cannot read the home {root}; refusing to touch the index")
    scan = DiskScan(files={})
    if only is None:
        candidates = _walk(root, scan)
    else:
        candidates = [p for p in only if is_indexable(p)]
    kept = 0
    for rel in candidates:
        try:
            st = os.lstat(root / rel)
        except FileNotFoundError:
            continue
        except OSError as exc:
            scan.files[rel] = DiskFile(rel, 0, 0, sha="", error=f"cannot stat: {exc.strerror}")
            continue
        if not stat.S_ISREG(st.st_mode):
            continue  # symlinks and devices are never followed: they could lead out of the home
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


def _walk(root: Path, scan: DiskScan) -> list[str]:
    found: list[str] = []

    def on_error(exc: OSError) -> None:
        rel = Path(exc.filename).resolve().relative_to(root).as_posix() if exc.filename else "?"
        log.warning("cannot list %s: %s", rel, exc.strerror)
        scan.unreadable_dirs.append(rel)

    for folder, dirs, files in os.walk(root, onerror=on_error):
        rel_folder = Path(folder).relative_to(root).as_posix()
        prefix = "" if rel_folder == "." else rel_folder + "/"
        dirs[:] = [d for d in dirs if is_indexable(prefix + d + "/x.md")]
        found.extend(prefix + name for name in files if is_indexable(prefix + name))
    return found

