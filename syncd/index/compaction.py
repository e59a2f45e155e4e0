"""When and how the LanceDB tables are compacted: the cadence of small writes before a
compaction, how long old versions outlive it, and the id index a compaction folds rows into.
Kept apart from store.py, which decides *that* its tables are due, so the policy reads whole."""

from __future__ import annotations

import math
from datetime import timedelta
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import lancedb

__all__ = ["WRITES_BEFORE_OPTIMIZE", "compact_table", "ensure_id_index", "writes_before_optimize"]

# Compact after at least this many small writes: each is a new LanceDB version and fragment.
WRITES_BEFORE_OPTIMIZE = 40
# Versions a compaction leaves for readers still on them. Compacting rewrites the whole table
# (LanceDB compacts every fragment under a million rows), so each kept version can cost the
# table's size on disk: long enough for any read in progress, and no longer.
_KEEP_OLD_VERSIONS = timedelta(minutes=1)
# LanceDB's full-text index, which indexes made before full text moved into memory still carry.
_OLD_FULLTEXT_INDEX = "search_text_idx"


def writes_before_optimize(rows: int) -> int:
    """How many small writes to let pile up before compacting a table of ``rows`` rows (each
    table counts its own: the files table, at a twentieth of the rows, is compacted far more often).

    Compacting rewrites the whole table (LanceDB takes every fragment under a million rows):
    c of CPU a row, in proportion to the rows. Each write left uncompacted is a fragment that
    every later add and delete pays for (f each). Over a cycle of k writes that is
    c x rows + f x k^2 / 2, cheapest per write at k = sqrt(2c x rows / f); 2c / f measured about
    1 / 5 at 100,000 rows, hence k = sqrt(rows / 5): 141 writes at 100,000 rows, where every 40
    costs more by that count and wrote more bytes per add (bench_adds.py measures the CPU of an
    add). A small table keeps the old floor of 40."""
    return max(WRITES_BEFORE_OPTIMIZE, math.isqrt(max(rows, 0) // 5))


def compact_table(table: lancedb.table.Table) -> None:
    """Compact ``table``'s small writes and drop the versions no reader can still be on."""
    table.optimize(cleanup_older_than=_KEEP_OLD_VERSIONS)


def ensure_id_index(entries: lancedb.table.Table) -> None:
    """A scalar index on ``id`` (a fact looked up or deleted by id is then not a scan); the old
    full-text index dropped on the way, since it would only slow every compaction."""
    names = {getattr(ix, "name", "") for ix in entries.list_indices()}
    if _OLD_FULLTEXT_INDEX in names:
        entries.drop_index(_OLD_FULLTEXT_INDEX)
    if "id_idx" not in names:
        from lancedb.index import BTree

        entries.create_index("id", config=BTree(), replace=True, name="id_idx")
