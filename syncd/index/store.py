"""The LanceDB index under ``HOME/.syncd/index``: files and entries (facts and chunks).

Two tables: ``files`` (one row per markdown file: its blob sha, stat and last error) and
``entries`` (facts and chunks in one table, told apart by ``kind``, so one vector search and one
full-text search answer a query over both). Rows change only file by file: delete the file's rows,
add its new ones, then record its new sha, in that order, so a crash in between leaves the file
looking stale and the next sync redoes it.

Queries run on an in-memory copy of the entries (rowcache.py: exact vectors, BM25 postings, the
rows themselves), loaded from the table and patched by our own writes; LanceDB is the durable
store every process shares.

Filters are built from validated ids and from paths escaped as SQL literals; nothing a query or a
user typed is ever pasted into a filter.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path

import lancedb
import numpy as np
import pyarrow as pa
from lancedb.index import BTree

from ..errors import IndexError_
from ..home import atomic_write
from .records import EntryRow, FileRecord, FileUpdate
from .rowcache import RowCache

__all__ = ["Index", "SCHEMA_VERSION", "sql_literal"]

log = logging.getLogger(__name__)

# 2: daily-log facts carry their section heading and a context window in their search text.
SCHEMA_VERSION = 2
_FILES = "files"
_ENTRIES = "entries"
# Delete/add in slices so one SQL filter never grows without bound on a huge batch.
_PATHS_PER_FILTER = 500
# Compact after this many small writes: each write is a new LanceDB version and fragment.
_WRITES_BEFORE_OPTIMIZE = 40
# LanceDB's full-text index, which indexes made before full text moved into memory still carry.
_OLD_FULLTEXT_INDEX = "search_text_idx"

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
            ("vector", pa.list_(pa.float32(), dim)),
        ]
    )


_ENTRY_FIELDS = [f for f in entry_schema(1).names if f not in ("vector", "search_text")]


def sql_literal(value: str) -> str:
    """A SQL string literal for ``value``. Only used for paths read from our own tree walk and for
    already validated ids, but escaped anyway so a quote in a file name cannot change a filter."""
    if "\x00" in value:
        raise IndexError_(f"NUL in a filter value: {value!r}")
    return "'" + value.replace("'", "''") + "'"


def _in_filter(column: str, values: Sequence[str]) -> str:
    return f"{column} IN ({', '.join(sql_literal(v) for v in values)})"


class Index:
    """One home's index. Writers are serialised by the home lock; readers may run beside them."""

    def __init__(self, folder: Path, dim: int, model_id: str, read_only: bool = False):
        self.folder = folder
        self.dim = dim
        self.model_id = model_id
        self.read_only = read_only
        self._meta_path = folder / "meta.json"
        self._lock = threading.RLock()
        self._matrix = RowCache(dim)
        self._matrix_version: int | None = None
        self._writes = 0
        folder.mkdir(parents=True, exist_ok=True)
        # Readers re-check the latest version on every read so they see the daemon's writes.
        self._db = lancedb.connect(
            str(folder / "lance"), read_consistency_interval=timedelta(0) if read_only else None
        )
        self._files = self._open_or_create(_FILES, FILE_SCHEMA)
        self._entries = self._open_or_create(_ENTRIES, entry_schema(dim))
        self._has_id_index = False

    # -- lifecycle -------------------------------------------------------------------------------

    def _open_or_create(self, name: str, schema: pa.Schema) -> lancedb.table.Table:
        try:
            table = self._db.open_table(name)
        except (ValueError, FileNotFoundError):
            return self._db.create_table(name, schema=schema, exist_ok=True)
        if table.schema != schema:
            if self.read_only:
                raise IndexError_(f"the index at {self.folder} has an older layout; run `syncd reindex`")
            log.warning("index table %s has an outdated schema; recreating it", name)
            self._db.drop_table(name)
            table = self._db.create_table(name, schema=schema)
        return table

    def meta(self) -> dict:
        try:
            return json.loads(self._meta_path.read_text(encoding="utf-8"))
        except (FileNotFoundError, json.JSONDecodeError):
            return {}

    def write_meta(self, **fields: object) -> None:
        meta = self.meta() | {"schema": SCHEMA_VERSION, "model_id": self.model_id, "dim": self.dim}
        meta.update(fields)
        atomic_write(self._meta_path, json.dumps(meta, indent=2, sort_keys=True).encode())

    def compatible(self) -> bool:
        """False when the stored vectors come from another model (or another layout)."""
        meta = self.meta()
        if not meta:
            return self._entries.count_rows() == 0
        return meta.get("model_id") == self.model_id and meta.get("schema") == SCHEMA_VERSION

    def drop_all(self) -> None:
        """Empty both tables (``syncd reindex``); the embedding cache lives elsewhere and survives."""
        with self._lock:
            for name, schema in ((_FILES, FILE_SCHEMA), (_ENTRIES, entry_schema(self.dim))):
                self._db.drop_table(name)
                table = self._db.create_table(name, schema=schema)
                if name == _FILES:
                    self._files = table
                else:
                    self._entries = table
            self._matrix.clear()
            self._matrix_version = None
            self._has_id_index = False
            self._meta_path.unlink(missing_ok=True)

    # -- reading ---------------------------------------------------------------------------------

    def files(self) -> dict[str, FileRecord]:
        table = self._files.to_arrow().to_pylist()
        return {row["path"]: FileRecord(**row) for row in table}

    def counts(self) -> dict[str, int]:
        return {
            "files": self._files.count_rows(),
            "facts": self._entries.count_rows("kind = 'fact'"),
            "chunks": self._entries.count_rows("kind = 'chunk'"),
        }

    def all_rows(self, with_vectors: bool = False) -> pa.Table:
        table = self._entries.to_arrow()
        return table if with_vectors else table.drop_columns(["vector"])

    def find_fact(self, fact_id: str) -> list[dict]:
        return (
            self._entries.search()
            .where(f"kind = 'fact' AND id = {sql_literal(fact_id)}")
            .select(_ENTRY_FIELDS)
            .limit(None)
            .to_list()
        )

    # -- writing ---------------------------------------------------------------------------------

    def apply(self, updates: Sequence[FileUpdate]) -> None:
        """Replace the rows of each updated path, then record the files' new state."""
        if self.read_only:
            raise IndexError_("this index was opened read-only")
        if not updates:
            return
        with self._lock:
            self._ensure_matrix()
            try:
                self._write(updates)
            except BaseException:
                # The table and the in-memory copy may now disagree: reload it on the next query.
                self._matrix_version = None
                raise
            self._writes += 1
            if self._writes >= _WRITES_BEFORE_OPTIMIZE:
                self.optimize()

    def _write(self, updates: Sequence[FileUpdate]) -> None:
        replaced = [u.path for u in updates if u.rows is not None or u.record is None]
        for start in range(0, len(replaced), _PATHS_PER_FILTER):
            self._entries.delete(_in_filter("path", replaced[start : start + _PATHS_PER_FILTER]))
        self._matrix.remove_paths(replaced)
        new_rows = [row for u in updates if u.rows for row in u.rows]
        if new_rows:
            vectors = np.concatenate([np.asarray(u.vectors, dtype=np.float32) for u in updates if u.rows])
            self._entries.add(self._entries_table(new_rows, vectors))
            self._matrix.add(vectors, [_payload(r) for r in new_rows], [r.search_text for r in new_rows])
        paths = [u.path for u in updates]
        for start in range(0, len(paths), _PATHS_PER_FILTER):
            self._files.delete(_in_filter("path", paths[start : start + _PATHS_PER_FILTER]))
        records = [u.record for u in updates if u.record is not None]
        if records:
            self._files.add(pa.Table.from_pylist([r.__dict__ for r in records], schema=FILE_SCHEMA))
        self._matrix_version = self._entries.version

    def _entries_table(self, rows: Sequence[EntryRow], vectors: np.ndarray) -> pa.Table:
        columns: dict[str, list] = {name: [] for name in _ENTRY_FIELDS}
        search_text = []
        for row in rows:
            for name in _ENTRY_FIELDS:
                value = getattr(row, name)
                columns[name].append(list(value) if name == "tags" else value)
            search_text.append(row.search_text)
        columns["search_text"] = search_text
        flat = pa.array(np.ascontiguousarray(vectors, dtype=np.float32).ravel())
        columns["vector"] = pa.FixedSizeListArray.from_arrays(flat, self.dim)
        return pa.Table.from_pydict(columns, schema=entry_schema(self.dim))

    def optimize(self) -> None:
        """Compact small writes, fold new rows into the id index, drop old versions."""
        with self._lock:
            self.ensure_id_index()
            for table in (self._files, self._entries):
                table.optimize(cleanup_older_than=timedelta(minutes=5))
            if self._matrix_version is not None:
                # Compaction moves rows between files but changes none: the loaded copy stays
                # valid. An index never loaded stays unloaded, to load on its first query.
                self._matrix_version = self._entries.version
            self._writes = 0

    def ensure_id_index(self) -> None:
        """A scalar index on ``id``, so looking a fact up by id (find_fact) is not a scan."""
        if self._has_id_index or self.read_only:
            return
        names = {getattr(ix, "name", "") for ix in self._entries.list_indices()}
        if _OLD_FULLTEXT_INDEX in names:
            # Full text is searched in memory now; the old index would only slow every optimize.
            self._entries.drop_index(_OLD_FULLTEXT_INDEX)
        if "id_idx" not in names:
            self._entries.create_index("id", config=BTree(), replace=True, name="id_idx")
        self._has_id_index = True

    # -- searching -------------------------------------------------------------------------------

    def _ensure_matrix(self) -> None:
        """Load the rows on first use, and in a reader whenever another process has written.

        A writable index belongs to the process holding the home lock, so its table changes only
        through our own writes, which patch the rows as they go: it never has to ask LanceDB for
        the version, a call that costs ~1.5 ms through LanceDB's async runtime.
        """
        if self._matrix_version is not None and not self.read_only:
            return
        version = self._entries.version
        if self._matrix_version == version:
            return
        table = self._entries.to_arrow().select([*_ENTRY_FIELDS, "search_text", "vector"])
        self._matrix.clear()
        if table.num_rows:
            vectors = table["vector"].combine_chunks().values.to_numpy().reshape(-1, self.dim)
            texts = [text or "" for text in table["search_text"].to_pylist()]
            self._matrix.add(vectors, table.select(_ENTRY_FIELDS).to_pylist(), texts)
        self._matrix_version = version

    @contextmanager
    def reading(self) -> Iterator[RowCache]:
        """The rows as of now, held still (no write, no reload) for the length of one query."""
        with self._lock:
            self._ensure_matrix()
            yield self._matrix


def _payload(row: EntryRow) -> dict:
    """A row as LanceDB returns it (float32 importance included), so a hit reads the same
    whether it came from our own write or from a reload."""
    out = {name: getattr(row, name) for name in _ENTRY_FIELDS}
    out["tags"] = list(row.tags)
    if row.importance is not None:
        out["importance"] = float(np.float32(row.importance))
    return out
