"""The two tables of a LanceDB index as one consistent pair, read beside its writer: what a past
revision's index starts from (engine/asof.py).

A writer stores a change in two LanceDB commits, the rows and then the file records (store.py's
persist). A reader taking one table and then the other can get rows newer than their records,
and such a record is not harmless: it may name the very content a past revision has (the file
as it was before the write), and a sync starting from that pair would keep the rows of another
content. So the pair is taken at a point the writer vouched for: its files mirror
(files_mirror.py), written after both commits, holds the records and names the newest version of
each table; the rows are then read at the entries version it names, whatever the writer does
next (LanceDB keeps a version a minute after a compaction replaces it: a copy takes seconds).

No lock is taken, so the writer (a daemon in another process, or this one's) never waits.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa

from ..compat.patches import import_lancedb
from .files_mirror import lance_stamp, read_mirror
from .table_rows import FILE_SCHEMA, entry_schema

__all__ = ["consistent_tables"]

# Looks for a vouched-for point before giving up: a writer is between its commits for a few
# milliseconds, and a busy one writes again after a pause of its own.
_ATTEMPTS = 40
_PAUSE_S = 0.05


def consistent_tables(folder: Path, dim: int) -> tuple[pa.Table, pa.RecordBatchReader] | None:
    """``(file records, rows with vectors)`` of the index at ``folder`` as of one point its
    writer vouched for, the rows streamed; None when none is found within ~2 s (no mirror: an
    index written by an older syncd, or a writer busy throughout)."""
    lance = folder / "lance"
    for attempt in range(_ATTEMPTS):
        if attempt:
            time.sleep(_PAUSE_S)
        stamp = lance_stamp(lance)
        snapshot = read_mirror(folder)
        # The mirror matched the tables at some moment between the two stamps; both the same
        # means no commit in between, so it matched this stamp.
        if stamp is None or snapshot is None or lance_stamp(lance) != stamp:
            continue
        records = pa.Table.from_pylist([dataclasses.asdict(r) for r in snapshot.files.values()], schema=FILE_SCHEMA)
        return records, _rows_at(lance, _version(stamp, "entries"), dim)
    return None


def _version(stamp: str, table: str) -> int:
    """The version of ``table`` a stamp names (``entries=<version>:<inode>:<mtime> files=...``)."""
    for part in stamp.split():
        name, _, newest = part.partition("=")
        if name == table:
            return int(newest.split(":", 1)[0])
    raise ValueError(f"no {table} in the stamp {stamp!r}")


def _rows_at(lance: Path, version: int, dim: int) -> pa.RecordBatchReader:
    lancedb = import_lancedb()

    table = lancedb.connect(str(lance)).open_table("entries", version=version)

    def batches() -> Iterator[pa.RecordBatch]:  # the table stays open while they are read
        yield from table.search().limit(None).to_batches()

    return pa.RecordBatchReader.from_batches(entry_schema(dim), batches())
