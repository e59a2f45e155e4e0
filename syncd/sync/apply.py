"""Apply a sync plan: parse only what changed, embed through the cache, write the index file by
file, so a move or a rebuild never pays for text it has already embedded.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace

import numpy as np

from ..errors import ParseError
from ..home import Home, blob_sha
from ..index.embed import Embedder
from ..index.records import FileRecord, FileUpdate
from ..index.rows import TranscriptChunking, parse_file_checked
from ..index.store import Index, StaleRows
from ..layout import classify_path
from .plan import SyncPlan, plan_sync
from .scan import DiskFile, DiskScan, printable_path, read_limited, scan_disk

log = logging.getLogger(__name__)

__all__ = ["Progress", "SyncReport", "apply_plan", "sync"]


Progress = Callable[[int, int], None]
# Told of each batch once the index holds it (the wiki's link graph follows the same updates).
Applied = Callable[[list[FileUpdate]], None]


# Files parsed and embedded per write: bounds memory on a big rebuild and gives progress steps.
_APPLY_BATCH_FILES = 256


@dataclass
class SyncReport:
    plan: SyncPlan
    errors: dict[str, str] = field(default_factory=dict)
    facts: int = 0
    chunks: int = 0
    embedded_texts: int = 0


def apply_plan(
    home: Home,
    index: Index,
    embedder: Embedder,
    plan: SyncPlan,
    scan: DiskScan,
    known: Mapping[str, FileRecord],
    max_file_bytes: int,
    progress: Progress | None = None,
    on_applied: Applied | None = None,
    transcripts: TranscriptChunking | None = None,
    defer: bool = False,
) -> SyncReport:
    report = SyncReport(plan=plan)
    updates: list[FileUpdate] = [FileUpdate(p, None) for p in plan.deleted]
    updates += [FileUpdate(old, None) for old, _ in plan.moved]
    for path in plan.touched:
        f = scan.files[path]
        # Same bytes, so the same rows and the same parse error (if any): only the stat is new.
        updates.append(FileUpdate(path, replace(known[path], size=f.size, mtime_ns=scan.recorded_mtime(f.mtime_ns))))
    to_parse = [*plan.new, *plan.changed, *(new for _, new in plan.moved)]
    changed = set(plan.changed)
    total = len(to_parse)
    done = 0
    # Deletes, moves away and touches go with the first batch (alone when nothing is parsed).
    for start in range(0, max(total, 1), _APPLY_BATCH_FILES):
        batch = to_parse[start : start + _APPLY_BATCH_FILES]
        if not batch and not updates:
            break
        parsed = [_parse_one(home, scan, path, max_file_bytes, report, transcripts) for path in batch]
        for update in parsed:
            if update.rows and update.path in changed:
                # Rows the edit did not touch stay in the index as they are: neither embedded
                # nor rewritten (a one-line edit of a big log costs its few rows, not the file).
                update.unchanged = index.unchanged_rows(update.path, update.rows)
            for row in update.rows or ():
                if row.kind == "fact":
                    report.facts += 1
                else:
                    report.chunks += 1
        _embed(embedder, index.dim, parsed, report)
        try:
            index.apply(updates + parsed, defer=defer)
        except StaleRows:
            # The index changed between the comparison and the write: redo these files whole.
            for update in parsed:
                update.unchanged = frozenset()
            _embed(embedder, index.dim, parsed, report)
            index.apply(updates + parsed, defer=defer)
        if on_applied:
            on_applied(updates + parsed)
        updates = []
        done += len(batch)
        if progress:
            progress(done, total)
    return report


def _embed(embedder: Embedder, dim: int, parsed: list[FileUpdate], report: SyncReport) -> None:
    """Vectors for each update's changed rows (all its rows unless some are unchanged)."""
    texts = [row.embed_text for u in parsed for row in u.changed_rows]
    before = getattr(embedder, "embedded_texts", 0)
    vectors = embedder.embed(texts) if texts else np.zeros((0, dim), dtype=np.float32)
    report.embedded_texts += getattr(embedder, "embedded_texts", 0) - before
    offset = 0
    for update in parsed:
        n = len(update.changed_rows)
        update.vectors = vectors[offset : offset + n]
        offset += n


def _parse_one(
    home: Home,
    scan: DiskScan,
    path: str,
    max_file_bytes: int,
    report: SyncReport,
    transcripts: TranscriptChunking | None = None,
) -> FileUpdate:
    f = scan.files[path]
    kind = classify_path(path).kind
    data = scan.contents.pop(path, None)
    error = f.error
    if data is None and error is None:
        data, error = read_limited(home.root / path, max_file_bytes)
    if data is not None and blob_sha(data) != f.sha:
        # Changed again since the scan: index what we actually read, and record its real sha.
        f = DiskFile(path, len(data), f.mtime_ns, sha=blob_sha(data))
    rows, page = [], None
    if error is None and data is not None:
        try:
            parsed = parse_file_checked(path, data, transcripts)
        except ParseError as exc:
            error = str(exc)
        else:
            rows, error, page = parsed.rows, parsed.warning, parsed.page
    if error:
        # Every caller gets it in the report and shows it once (the CLI prints it, the daemon
        # logs it); a warning here as well would say everything twice.
        report.errors[path] = error
        log.info("%s: %s", path, error)
    record = FileRecord(path, kind, f.sha or "", f.size, scan.recorded_mtime(f.mtime_ns), error)
    return FileUpdate(path, record, rows, page=page)


def sync(
    home: Home,
    index: Index,
    embedder: Embedder,
    max_file_bytes: int,
    only: Iterable[str] | None = None,
    progress: Progress | None = None,
    on_applied: Applied | None = None,
    transcripts: TranscriptChunking | None = None,
    defer: bool = False,
) -> SyncReport:
    """Bring the index in line with the tree (or with just the ``only`` paths, and any whose
    index write failed earlier in this process: a failed write heals on the next pass). With
    ``defer``, the index writes its tables behind (Index.apply).
    ``transcripts``: how to chunk transcripts (None: they are tracked, not searchable)."""
    if only is None:
        known = index.files()
    else:
        only = set(only) | index.unwritten_paths
        known = index.files(only)
    scan = scan_disk(home, known, max_file_bytes, only=only)
    if only is not None:
        # The scan may have found more than it was asked about (a linked folder above a path), and
        # records a name that is not UTF-8 under its escaped form.
        only = {printable_path(p) for p in only} | scan.files.keys()
        known = index.files(only)
    plan = plan_sync(scan.files, known, scan.unreadable_dirs)
    if plan.empty:
        return SyncReport(plan=plan)
    log.info("sync: %s", plan.summary())
    return apply_plan(home, index, embedder, plan, scan, known, max_file_bytes, progress,
                      on_applied=on_applied, transcripts=transcripts, defer=defer)

