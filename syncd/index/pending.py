"""Index writes applied in memory and not yet written to LanceDB, folded together per file.

Queries run on the in-memory rows (rowcache.py), so a write is searchable as soon as those are
patched; LanceDB is the durable copy every process shares and the one a restart loads. A write
to LanceDB has a fixed cost that grows with the table (each delete scans what its index does not
cover, each commit is a version and a fragment), so a daemon taking a stream of small writes
writes them behind: each write patches memory at once and leaves its table operations here, and
whoever writes next (a background thread, or any caller needing the table current) writes
everything pending in one delete, one add and one record update.

Folding is exact because, for a path with nothing pending, the in-memory rows and records are
the table's: what the table holds of a path is known at its first pending write, and each later
write of it only changes what that one will do. A write that replaces a file's rows whole makes
the fold delete every row of the path (if the table held any) and add the file's latest rows; a
write that changes some rows adds their ids to the ids to delete and replaces them among the rows
to add. A file's record is its latest one. Records are written after rows, so a crash in between
leaves the file looking stale and the next sync redoes it, as with a direct write.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .records import EntryRow, FileRecord, FileUpdate

if TYPE_CHECKING:
    # Imported where vectors are held: the store, which imports this module, opens without numpy
    # (see store.py's imports).
    import numpy as np

__all__ = ["PathWrite", "PendingWrites", "replaces_whole", "row_delete_filters"]


def replaces_whole(update: FileUpdate) -> bool:
    """Whether ``update`` replaces every row of its path (a gone file, or rows not diffed)."""
    return (update.rows is not None and not update.unchanged) or update.record is None


@dataclass
class PathWrite:
    """What the table must do for one path to match memory."""

    rows_in_table: bool  # the table held rows of the path before its first pending write
    record_in_table: bool  # ... and a record of it
    whole: bool = False  # delete every row the table holds of the path
    gone: set[str] = field(default_factory=set)  # else: ids of the rows to delete
    rows: list[EntryRow] = field(default_factory=list)  # rows to add, each with its vector
    vectors: list[np.ndarray] = field(default_factory=list)
    record: FileRecord | None = None  # None: delete the path's record


@dataclass
class PendingWrites:
    """Pending writes by path, plus each write's change for the files mirror, in order."""

    paths: dict[str, PathWrite] = field(default_factory=dict)
    mirror: list[tuple[str, FileRecord | None, tuple[int, int] | None]] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.paths)

    def add(self, update: FileUpdate, rows_held: bool, gone: Iterable[str], record_held: bool) -> None:
        """Fold in ``update``. ``rows_held``, ``gone`` (ids of its rows it replaces, when it does
        not replace them whole) and ``record_held`` describe memory just before it is applied."""
        pending = self.paths.get(update.path)
        if pending is None:
            pending = self.paths[update.path] = PathWrite(rows_in_table=rows_held, record_in_table=record_held)
        if replaces_whole(update):
            pending.whole = True
            pending.gone.clear()
            pending.rows.clear()
            pending.vectors.clear()
        elif gone:
            gone = set(gone)
            pending.gone |= gone
            kept = [i for i, row in enumerate(pending.rows) if row.id not in gone]
            pending.rows = [pending.rows[i] for i in kept]
            pending.vectors = [pending.vectors[i] for i in kept]
        changed = update.changed_rows if update.rows else []
        if changed:
            import numpy as np

            vectors = np.asarray(update.vectors, dtype=np.float32).reshape(len(changed), -1)
            pending.rows.extend(changed)
            pending.vectors.extend(vectors)
        pending.record = update.record
        self.mirror.append((update.path, update.record, _counts(update)))

    def whole_deletes(self) -> list[str]:
        """Paths whose rows the table holds and must all go."""
        return [path for path, w in self.paths.items() if w.whole and w.rows_in_table]

    def row_deletes(self) -> dict[str, list[str]]:
        """Ids to delete by path, for paths whose other rows stay."""
        return {path: sorted(w.gone) for path, w in self.paths.items() if not w.whole and w.gone and w.rows_in_table}

    def new_rows(self) -> tuple[list[EntryRow], np.ndarray | None]:
        rows = [row for w in self.paths.values() for row in w.rows]
        if not rows:
            return [], None
        import numpy as np

        return rows, np.stack([vector for w in self.paths.values() for vector in w.vectors])


def _counts(update: FileUpdate) -> tuple[int, int] | None:
    """(facts, chunks) of an update's rows, None when its rows stay as they are."""
    if update.rows is None:
        return None
    facts = sum(1 for row in update.rows if row.kind == "fact")
    return facts, len(update.rows) - facts


def row_delete_filters(deletes: dict[str, list[str]], chunk: int, literal) -> Sequence[str]:
    """SQL filters deleting ``(path, id)`` pairs, each naming at most about ``chunk`` ids: one
    LanceDB delete (one commit) for many files' changed rows. Each filter also says, first, that
    the id is one of its ids: the same rows, but a condition LanceDB answers from the id index
    (Index.ensure_id_index), checking the pairs only on the rows it finds, where the pairs alone
    made it read the path and id of every row."""
    filters: list[str] = []
    terms: list[str] = []
    named: list[str] = []

    def close() -> None:
        filters.append(f"id IN ({', '.join(named)}) AND ({' OR '.join(terms)})")
        terms.clear()
        named.clear()

    for path, ids in deletes.items():
        for start in range(0, len(ids), chunk):
            part = [literal(i) for i in ids[start : start + chunk]]
            terms.append(f"(path = {literal(path)} AND id IN ({', '.join(part)}))")
            named.extend(part)
            if len(named) >= chunk:
                close()
    if terms:
        close()
    return filters
