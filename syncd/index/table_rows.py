"""The index's rows as LanceDB tables hold them: the two schemas, a row's payload as a read
returns it, the Arrow table a write adds, and a file's new rows compared with its rows in the
table (what an edit of one line in a big log leaves as it is). No LanceDB here: pyarrow only.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from .records import EntryRow, FileRecord

if TYPE_CHECKING:
    from .rowcache import RowCache

__all__ = [
    "ENTRY_FIELDS",
    "FILE_SCHEMA",
    "entries_table",
    "entry_schema",
    "files_and_counts",
    "load_into",
    "payload",
    "unchanged_in_table",
]

FILE_SCHEMA = pa.schema(
    [
        ("path", pa.string()),
        ("kind", pa.string()),
        ("sha", pa.string()),
        ("size", pa.int64()),
        ("mtime_ns", pa.int64()),
        ("error", pa.string()),
    ]
)


def entry_schema(dim: int) -> pa.Schema:
    return pa.schema(
        [
            ("id", pa.string()),
            ("kind", pa.string()),
            ("source", pa.string()),
            ("path", pa.string()),
            ("line", pa.int32()),
            ("text", pa.string()),
            ("search_text", pa.string()),
            ("user", pa.string()),
            ("chat", pa.string()),
            ("session", pa.string()),
            ("category", pa.string()),
            ("tags", pa.list_(pa.string())),
            ("importance", pa.float32()),
            ("created_at", pa.string()),
            ("heading", pa.string()),
            ("provenance", pa.string()),
            ("label", pa.string()),
            ("title", pa.string()),
            ("vector", pa.list_(pa.float32(), dim)),
        ]
    )


# Held rows turned into Python values at a time by unchanged_in_table().
_ROWS_PER_SLICE = 2048

# The payload of a row: every column but its vector and its full-text string.
ENTRY_FIELDS = [f for f in entry_schema(1).names if f not in ("vector", "search_text")]


def payload(row: EntryRow) -> dict:
    """A row as LanceDB returns it (float32 importance included), so a hit reads the same
    whether it came from our own write or from a reload."""
    return dict(zip(ENTRY_FIELDS, payload_values(row), strict=True))


_ID_AT, _TAGS_AT, _IMPORTANCE_AT = (ENTRY_FIELDS.index(name) for name in ("id", "tags", "importance"))
_payload_fields = operator.attrgetter(*ENTRY_FIELDS)


def payload_values(row: EntryRow) -> tuple:
    """``payload(row)``'s values in ENTRY_FIELDS order, as a read's columns zipped row by row."""
    values = list(_payload_fields(row))
    values[_TAGS_AT] = list(row.tags)
    if row.importance is not None:
        values[_IMPORTANCE_AT] = float(np.float32(row.importance))
    return tuple(values)


def load_into(matrix: RowCache, table: pa.Table) -> None:
    """Add the rows of ``table`` (the entries table's columns, vectors included) to ``matrix``:
    how an index's rows come into memory, from LanceDB (store.py) or a frozen index (frozen.py)."""
    if table.num_rows:
        vectors = table["vector"].combine_chunks().values.to_numpy().reshape(table.num_rows, -1)
        texts = [text or "" for text in table["search_text"].to_pylist()]
        matrix.add(vectors, table.select(ENTRY_FIELDS).to_pylist(), texts)


def entries_table(rows: Sequence[EntryRow], vectors: np.ndarray, dim: int) -> pa.Table:
    """The Arrow table that adds ``rows`` with their ``vectors`` to the entries table."""
    columns: dict[str, list] = {name: [] for name in ENTRY_FIELDS}
    search_text = []
    for row in rows:
        for name in ENTRY_FIELDS:
            value = getattr(row, name)
            columns[name].append(list(value) if name == "tags" else value)
        search_text.append(row.search_text)
    columns["search_text"] = search_text
    flat = pa.array(np.ascontiguousarray(vectors, dtype=np.float32).ravel())
    columns["vector"] = pa.FixedSizeListArray.from_arrays(flat, dim)
    return pa.Table.from_pydict(columns, schema=entry_schema(dim))


def unchanged_in_table(held: pa.Table, rows: Sequence[EntryRow]) -> tuple[frozenset[str], frozenset[str]] | None:
    """For ``held``, a file's rows as the table holds them (the payload columns and
    ``search_text``), and ``rows``, its new rows: (the ids held, the ids of ``rows`` held exactly
    so: same payload and full-text string, hence the same vector, since what is embedded is made
    of payload fields). None when the table repeats an id: then the file is replaced whole."""
    ids = held["id"].to_pylist()
    if len(set(ids)) != len(ids):
        return None
    wanted = {row.id: row for row in rows}
    same = []
    # A slice at a time, a column at a time: a dict per held row for the whole of a 100,000-fact
    # log would be hundreds of megabytes at once, and building one per row was most of the time.
    for part in held.to_batches(max_chunksize=_ROWS_PER_SLICE):
        texts = part.column("search_text").to_pylist()
        columns = [part.column(name).to_pylist() for name in ENTRY_FIELDS]
        for at, found in enumerate(zip(*columns)):
            row = wanted.get(found[_ID_AT])
            if row is not None and (texts[at] or "") == row.search_text and found == payload_values(row):
                same.append(row.id)
    return frozenset(ids), frozenset(same)


def files_and_counts(files: pa.Table, entries: pa.Table) -> tuple[list[FileRecord], dict[str, tuple[int, int]]]:
    """The file records of a files table, and each path's (facts, chunks) in an entries table:
    what the files mirror copies (files_mirror.py)."""
    records = [FileRecord(**row) for row in files.to_pylist()]
    per_kind = entries.select(["path", "kind"]).group_by(["path", "kind"]).aggregate([("kind", "count")])
    counts: dict[str, list[int]] = {}
    for path, kind, n in zip(*(per_kind[c].to_pylist() for c in ("path", "kind", "kind_count"))):
        counts.setdefault(path, [0, 0])[0 if kind == "fact" else 1] += n
    return records, {p: (f, c) for p, (f, c) in counts.items()}
