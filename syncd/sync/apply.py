"""Apply a sync plan: parse only what changed, embed through the cache, write the index file by
file, so a move or a rebuild never pays for text it has already embedded.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace

from ..embedding.fastembed_backend import Embedder, loading_beside
from ..errors import ParseError
from ..home import Home, blob_sha, classify_path
from ..index.backend import IndexBackend as Index
from ..index.embed_cache import CachedEmbedder
from ..index.records import FileRecord, FileUpdate, StaleRows
from ..index.rows import TranscriptChunking, parse_file_checked
from .plan import SyncPlan, plan_sync
from .progress import Progress, ProgressTracker, SyncProgress
from .progress_file import ProgressFile
from .scan import DiskFile, DiskScan, printable_path, read_limited, scan_disk, tree_agrees

log = logging.getLogger(__name__)

__all__ = ["Progress", "SyncProgress", "SyncReport", "apply_plan", "sync"]


# Told of each batch once the index holds it (the wiki's link graph follows the same updates).
Applied = Callable[[list[FileUpdate]], None]


# Files parsed and embedded per write: bounds memory on a big rebuild. A batch also ends once
# its files hold _APPLY_BATCH_TEXTS texts to embed, so a sync killed halfway finds the files it
# got through written (their rows and records), not only their vectors in the embedding cache.
_APPLY_BATCH_FILES = 256
_APPLY_BATCH_TEXTS = 1024


@dataclass
class SyncReport:
    plan: SyncPlan
    errors: dict[str, str] = field(default_factory=dict)
    # Facts and chunks of the files this sync parsed (new or changed), not rows rewritten: a
    # one-line edit of a big log counts all its facts, of which only the changed rows are written.
    facts: int = 0
    chunks: int = 0
    embedded_texts: int = 0  # texts this sync had the model embed (the cache answered the rest)


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
    what: str = "sync",
) -> SyncReport:
    """Write ``plan`` to ``index``, batch by batch. ``progress`` hears how far it got (``what``:
    "sync" or "reindex", as it tells a person)."""
    report = SyncReport(plan=plan)
    updates: list[FileUpdate] = [FileUpdate(p, None) for p in plan.deleted]
    updates += [FileUpdate(old, None) for old, _ in plan.moved]
    for path in plan.touched:
        f = scan.files[path]
        # Same bytes, so the same rows and the same parse error (if any): only the stat is new.
        updates.append(FileUpdate(path, replace(known[path], size=f.size, mtime_ns=scan.recorded_mtime(f.mtime_ns))))
    to_parse = [*plan.new, *plan.changed, *(new for _, new in plan.moved)]
    changed = set(plan.changed)
    tracker = ProgressTracker(progress or _ignore, what, len(to_parse), sum(scan.files[p].size for p in to_parse))
    tracker.start()
    # New or changed text is almost always text to embed: the model loads while the files parse.
    with loading_beside(embedder, wanted=bool(plan.new or plan.changed)):
        parsed: list[FileUpdate] = []
        texts = 0
        for path in to_parse:
            update = _parse_one(home, scan, path, max_file_bytes, report, transcripts)
            if update.rows and update.path in changed:
                # Rows the edit did not touch stay in the index as they are: neither embedded
                # nor rewritten (a one-line edit of a big log costs its few rows, not the file).
                update.unchanged = index.unchanged_rows(update.path, update.rows)
            for row in update.rows or ():
                if row.kind == "fact":
                    report.facts += 1
                else:
                    report.chunks += 1
            parsed.append(update)
            texts += len(update.changed_rows)
            if len(parsed) >= _APPLY_BATCH_FILES or texts >= _APPLY_BATCH_TEXTS:
                # Deletes, moves away and touches go with the first batch.
                _write_batch(index, embedder, updates, parsed, scan, report, tracker, on_applied, defer)
                updates, parsed, texts = [], [], 0
        if parsed or updates:
            _write_batch(index, embedder, updates, parsed, scan, report, tracker, on_applied, defer)
    return report


def _ignore(event: SyncProgress) -> None:
    pass


def _write_batch(
    index: Index,
    embedder: Embedder,
    updates: list[FileUpdate],
    parsed: list[FileUpdate],
    scan: DiskScan,
    report: SyncReport,
    tracker: ProgressTracker,
    on_applied: Applied | None,
    defer: bool,
) -> None:
    """Embed the ``parsed`` files' changed rows, then write them with ``updates`` in one apply."""
    nbytes = sum(scan.files[u.path].size for u in parsed)
    _embed(embedder, index.dim, parsed, report, tracker, nbytes)
    try:
        index.apply(updates + parsed, defer=defer)
    except StaleRows:
        # The index changed between the comparison and the write: redo these files whole.
        for update in parsed:
            update.unchanged = frozenset()
        _embed(embedder, index.dim, parsed, report, tracker, nbytes)
        index.apply(updates + parsed, defer=defer)
    if on_applied:
        on_applied(updates + parsed)
    tracker.batch_written()
    log.debug("wrote a batch of %d files to the index", len(parsed))


def _embed(
    embedder: Embedder, dim: int, parsed: list[FileUpdate], report: SyncReport, tracker: ProgressTracker, nbytes: int
) -> None:
    """Vectors for each update's changed rows (all its rows unless some are unchanged)."""
    # Here, not at the top: a sync that finds nothing changed never embeds, nor needs numpy.
    import numpy as np

    texts = [row.embed_text for u in parsed for row in u.changed_rows]
    tracker.start_batch(len(parsed), nbytes, len(set(texts)))
    told = [0, 0]  # (cached, embedded) as the embedding cache last said

    def embedding(cached: int, embedded: int) -> None:
        told[:] = cached, embedded
        tracker.embedding(cached, embedded)

    if not texts:
        vectors = np.zeros((0, dim), dtype=np.float32)
    elif isinstance(embedder, CachedEmbedder):
        vectors = embedder.embed(texts, progress=embedding)
    else:  # no cache: every distinct text reaches the model, in one call
        vectors = embedder.embed(texts)
        embedding(0, len(set(texts)))
    tracker.end_embedding()
    report.embedded_texts += told[1]
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
    rows, page, text = [], None, None
    if error is None and data is not None:
        try:
            parsed = parse_file_checked(path, data, transcripts)
        except ParseError as exc:
            error = str(exc)
        else:
            rows, error, page, text = parsed.rows, parsed.warning, parsed.page, parsed.text
    if error:
        # Every caller gets it in the report and shows it once (the CLI prints it, the daemon
        # logs it); a warning here as well would say everything twice.
        report.errors[path] = error
        log.info("%s: %s", path, error)
    record = FileRecord(path, kind, f.sha or "", f.size, scan.recorded_mtime(f.mtime_ns), error)
    return FileUpdate(path, record, rows, page=page, text=text)


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
    what: str = "sync",
) -> SyncReport:
    """Bring the index in line with the tree (or with just the ``only`` paths, and any whose
    index write failed earlier in this process: a failed write heals on the next pass). With
    ``defer``, the index writes its tables behind (Index.apply).
    ``transcripts``: how to chunk transcripts (None: they are tracked, not searchable).
    ``progress`` hears how far it got, and so does ``syncd status`` (progress_file.py) when it
    runs long; ``what`` ("sync" or "reindex") says what to call it."""
    if only is None:
        known = index.files()
        agree = not index.unwritten_paths and all(r.size <= max_file_bytes for r in known.values())
        if agree and tree_agrees(home, known):
            # Every file as recorded, by its stat (the usual no-op sync): the scan would hash
            # nothing and plan nothing; one listing per folder and one lstat per file say so.
            ProgressFile(home).finish()
            return SyncReport(plan=SyncPlan(unchanged=len(known)))
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
    notes = ProgressFile(home)
    if plan.empty:
        notes.finish()
        return SyncReport(plan=plan)
    log.info("sync: %s", plan.summary())
    try:
        report = apply_plan(
            home,
            index,
            embedder,
            plan,
            scan,
            known,
            max_file_bytes,
            notes.listener(progress),
            on_applied=on_applied,
            transcripts=transcripts,
            defer=defer,
            what=what,
        )
    except BaseException:
        notes.stopped()
        raise
    notes.finish()
    return report
