"""Keep the index a pure function of the tree: scan, plan (pure), apply.

Scanning stats every markdown file and hashes only those whose size or mtime differ from what the
index recorded (and those that failed last time, since a permission fix changes neither).
Planning compares content hashes: new, changed, moved (a deleted path's sha reappearing elsewhere),
deleted, touched. Applying parses only what changed and embeds through the cache, so a move or a
rebuild never pays for text it has already embedded.
"""

from __future__ import annotations

import logging
import os
import stat
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from .documents import parse_file
from .embed import Embedder
from .errors import HomeError, ParseError
from .home import Home, blob_sha, classify_path, is_indexable
from .index import Index
from .records import FileRecord, FileUpdate

__all__ = ["DiskFile", "DiskScan", "SyncPlan", "SyncReport", "scan_disk", "plan_sync", "apply_plan", "sync"]

log = logging.getLogger(__name__)

Progress = Callable[[int, int], None]
# Files parsed and embedded per write: bounds memory on a big rebuild and gives progress steps.
_APPLY_BATCH_FILES = 256
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


@dataclass(frozen=True)
class SyncPlan:
    new: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    moved: tuple[tuple[str, str], ...] = ()  # (old path, new path)
    deleted: tuple[str, ...] = ()
    touched: tuple[str, ...] = ()  # same content, new stat: record it, parse nothing
    unchanged: int = 0

    @property
    def empty(self) -> bool:
        return not (self.new or self.changed or self.moved or self.deleted or self.touched)

    def summary(self) -> str:
        return (
            f"{len(self.new)} new, {len(self.changed)} changed, {len(self.moved)} moved, "
            f"{len(self.deleted)} deleted, {self.unchanged} unchanged"
        )


@dataclass
class SyncReport:
    plan: SyncPlan
    errors: dict[str, str] = field(default_factory=dict)
    facts: int = 0
    chunks: int = 0
    embedded_texts: int = 0


def _read(path: Path, max_bytes: int) -> tuple[bytes | None, str | None]:
    try:
        with open(path, "rb") as handle:
            data = handle.read(max_bytes + 1)
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
        data, error = _read(root / rel, max_file_bytes)
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


def plan_sync(disk: Mapping[str, DiskFile], index: Mapping[str, FileRecord], unreadable_dirs=()) -> SyncPlan:
    """Pure: what to do so that the index reflects ``disk``."""
    new, changed, touched = [], [], []
    unchanged = 0
    for path, f in disk.items():
        record = index.get(path)
        if f.sha is None:
            unchanged += 1
        elif record is None:
            new.append(path)
        elif f.error:
            # Unreadable now: a change unless it was already recorded as this same failure.
            if record.sha or record.error != f.error:
                changed.append(path)
            else:
                unchanged += 1
        elif f.sha != record.sha:
            changed.append(path)
        elif record.size != f.size or record.mtime_ns != f.mtime_ns:
            touched.append(path)
        else:
            unchanged += 1
    hidden = tuple(d.rstrip("/") + "/" for d in unreadable_dirs)
    deleted = [p for p in index if p not in disk and not (hidden and p.startswith(hidden))]
    # A new path with the sha of a deleted one is that file moved: pair them once each.
    by_sha: dict[str, list[str]] = {}
    for path in sorted(deleted):
        if index[path].sha and not index[path].error:
            by_sha.setdefault(index[path].sha, []).append(path)
    moved = []
    for path in sorted(new):
        olds = by_sha.get(disk[path].sha or "")
        if olds:
            moved.append((olds.pop(0), path))
    moved_old = {o for o, _ in moved}
    moved_new = {n for _, n in moved}
    return SyncPlan(
        new=tuple(sorted(p for p in new if p not in moved_new)),
        changed=tuple(sorted(changed)),
        moved=tuple(moved),
        deleted=tuple(sorted(p for p in deleted if p not in moved_old)),
        touched=tuple(sorted(touched)),
        unchanged=unchanged,
    )


def apply_plan(
    home: Home,
    index: Index,
    embedder: Embedder,
    plan: SyncPlan,
    scan: DiskScan,
    known: Mapping[str, FileRecord],
    max_file_bytes: int,
    progress: Progress | None = None,
) -> SyncReport:
    report = SyncReport(plan=plan)
    updates: list[FileUpdate] = [FileUpdate(p, None) for p in plan.deleted]
    updates += [FileUpdate(old, None) for old, _ in plan.moved]
    for path in plan.touched:
        f = scan.files[path]
        # Same bytes, so the same rows and the same parse error (if any): only the stat is new.
        updates.append(FileUpdate(path, replace(known[path], size=f.size, mtime_ns=scan.recorded_mtime(f.mtime_ns))))
    to_parse = [*plan.new, *plan.changed, *(new for _, new in plan.moved)]
    total = len(to_parse)
    if updates and not to_parse:
        index.apply(updates)
    done = 0
    for start in range(0, max(total, 1), _APPLY_BATCH_FILES):
        batch = to_parse[start : start + _APPLY_BATCH_FILES]
        if not batch and not updates:
            break
        parsed = [_parse_one(home, scan, path, max_file_bytes, report) for path in batch]
        texts = [row.embed_text for u in parsed if u.rows for row in u.rows]
        before = getattr(embedder, "embedded_texts", 0)
        vectors = embedder.embed(texts) if texts else np.zeros((0, index.dim), dtype=np.float32)
        report.embedded_texts += getattr(embedder, "embedded_texts", 0) - before
        offset = 0
        for update in parsed:
            n = len(update.rows or ())
            update.vectors = vectors[offset : offset + n]
            offset += n
            for row in update.rows or ():
                if row.kind == "fact":
                    report.facts += 1
                else:
                    report.chunks += 1
        index.apply(updates + parsed)
        updates = []
        done += len(batch)
        if progress:
            progress(done, total)
    return report


def _parse_one(home: Home, scan: DiskScan, path: str, max_file_bytes: int, report: SyncReport) -> FileUpdate:
    f = scan.files[path]
    kind = classify_path(path).kind
    data = scan.contents.pop(path, None)
    error = f.error
    if data is None and error is None:
        data, error = _read(home.root / path, max_file_bytes)
    if data is not None and blob_sha(data) != f.sha:
        # Changed again since the scan: index what we actually read, and record its real sha.
        f = DiskFile(path, len(data), f.mtime_ns, sha=blob_sha(data))
    rows = []
    if error is None and data is not None:
        try:
            rows = parse_file(path, data)
        except ParseError as exc:
            error = str(exc)
    if error:
        report.errors[path] = error
        log.warning("%s: %s", path, error)
    record = FileRecord(path, kind, f.sha or "", f.size, scan.recorded_mtime(f.mtime_ns), error)
    return FileUpdate(path, record, rows)


def sync(
    home: Home,
    index: Index,
    embedder: Embedder,
    max_file_bytes: int,
    only: Iterable[str] | None = None,
    progress: Progress | None = None,
) -> SyncReport:
    """Bring the index in line with the tree (or with just the ``only`` paths)."""
    known = index.files()
    scan = scan_disk(home, known, max_file_bytes, only=only)
    if only is not None:
        only = set(only)
        known = {p: r for p, r in known.items() if p in only}
    plan = plan_sync(scan.files, known, scan.unreadable_dirs)
    if plan.empty:
        return SyncReport(plan=plan)
    log.info("sync: %s", plan.summary())
    return apply_plan(home, index, embedder, plan, scan, known, max_file_bytes, progress)
