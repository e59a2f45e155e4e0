"""A finished index frozen into a few megabytes: its rows without their vectors, read back with the
vectors from the home's embedding cache (engine/asof.py keeps past revisions so).

The vectors are most of a LanceDB index (1.5 KB a row for the bundled model's 384 float32s); the
rest compresses to a few megabytes of Parquet (zstd) at 100,000 facts (bench_asof.py measures
both). The vector of a row is the embedding of its ``embed_text``, which is made of payload
fields (records.EntryRow), and the home's embedding cache (embed_cache.py) holds
each text's vector once, under the sha256 of that text, for the home's index and for every past
revision alike: so a frozen index keeps only ``rows.parquet`` (every column but ``vector``) and
``files.parquet`` (the file records), and a reader takes the vectors from the cache by key.
Rows are shared between revisions (and with the index of now) through that one content-addressed
store; what a revision keeps of its own is what makes its rows its own, the payloads.

Exact: freezing puts into the cache every vector of the rows it froze that the cache lacks (taken
from the index's own table, so the vectors read back are the very ones the rows had), and the
cache is never pruned: it only grows, by text, until its file is deleted (it is derived data). A
reader that finds vectors missing (the cache file was deleted since) embeds those texts again
through the model and puts them back, as a rebuild of that revision would.

A frozen index is written once, aside, and never changed: any number of threads and processes
read it without a lock; ``FrozenIndex._lock`` only makes the first load happen once.
"""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..errors import IndexError_
from .embed_cache import EmbeddingCache, text_key
from .records import EntryRow, FileRecord, meta_compatible
from .rowcache import RowCache
from .table_rows import ENTRY_FIELDS, FILE_SCHEMA, entry_schema, load_into

if TYPE_CHECKING:
    from ..embedding.fastembed_backend import Embedder
    from .backend import IndexBackend
    from .store import Index

__all__ = ["FrozenIndex", "freeze", "frozen_meta", "rows_with_vectors"]

ROWS = "rows.parquet"
FILES = "files.parquet"
META = "meta.json"
# Rows read, keyed and checked against the cache at a time while freezing (bounded memory).
_BATCH = 8192


def _keys(rows: pa.Table | pa.RecordBatch) -> list[bytes]:
    """The embedding cache key of each row: the sha256 of what the embedder saw of it. A row is
    made of the four fields its embedded text is made of (the others do not change it): making
    it of every field hashed more text, for the same cache hits."""
    columns = (rows.column(name).to_pylist() for name in ("kind", "text", "title", "heading"))
    return [text_key(EntryRow("", kind, "", "", 0, text, title=title, heading=heading or "").embed_text)
            for kind, text, title, heading in zip(*columns)]  # fmt: skip


def freeze(index: IndexBackend, folder: Path, cache: EmbeddingCache) -> pa.Table:
    """Write ``index``'s rows (without vectors), file records and meta into ``folder`` and make
    sure the cache holds every one of their vectors (see the module docstring). ``index`` is a
    finished index nobody writes any more (a past revision just synced), ``folder`` the
    builder's own until it publishes it (engine/asof.py): neither needs a lock; the vectors put
    into the cache take SQLite's write lock in turn with the home's writer. Returns the rows with
    their vectors: a reader opened at once takes them (``FrozenIndex(rows=)``) rather than
    reading them back."""
    index.persist()
    folder.mkdir(parents=True, exist_ok=True)
    model_id = index.model_id
    entries = index.all_rows(with_vectors=True)
    writer = pq.ParquetWriter(folder / ROWS, entries.schema.remove(entries.schema.get_field_index("vector")),
                              compression="zstd")  # fmt: skip
    with writer:
        for batch in entries.to_batches(max_chunksize=_BATCH):
            keys = _keys(batch)
            held = cache.held_keys(model_id, keys)
            missing = [n for n, key in enumerate(keys) if key not in held]
            if missing:
                vectors = batch.column("vector").values.to_numpy().reshape(len(keys), -1)
                cache.put_by_keys(model_id, [keys[n] for n in missing], vectors[missing])
            writer.write_batch(batch.drop_columns(["vector"]))
    pq.write_table(pa.Table.from_pylist([dataclasses.asdict(r) for r in index.files().values()], schema=FILE_SCHEMA),
                   folder / FILES, compression="zstd")  # fmt: skip
    meta = index.meta() | {"model_id": model_id, "dim": index.dim}
    (folder / META).write_text(json.dumps(meta, indent=2, sort_keys=True), encoding="utf-8")
    return entries


def frozen_meta(folder: Path) -> dict:
    """The meta of the index frozen in ``folder`` ({} when there is none)."""
    try:
        found = json.loads((folder / META).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return {}
    return found if isinstance(found, dict) else {}


def rows_with_vectors(folder: Path, dim: int, model_id: str, cache: EmbeddingCache,
                      embedder: Embedder | None = None) -> pa.Table:  # fmt: skip
    """The frozen rows as the entries table holds them (``entry_schema(dim)``), their vectors
    from ``cache``; vectors the cache lacks are embedded again with ``embedder`` and put back
    (IndexError_ without one)."""
    rows = pq.read_table(folder / ROWS)
    keys = _keys(rows)
    blobs = cache.fetch_blobs(model_id, keys)
    lost = sorted({n for n, key in enumerate(keys) if key not in blobs})
    if lost:
        if embedder is None:
            raise IndexError_(f"the embedding cache lacks {len(lost)} vector(s) of the index frozen in {folder}")
        fields = [f for f in ENTRY_FIELDS if f != "tags"]
        again = rows.take(lost).select(fields).to_pylist()
        vectors = np.asarray(embedder.embed([EntryRow(**v).embed_text for v in again]), dtype=np.float32)
        cache.put_by_keys(model_id, [keys[n] for n in lost], vectors)
        blobs |= {keys[n]: vector.tobytes() for n, vector in zip(lost, vectors)}
    flat = np.frombuffer(b"".join(blobs[key] for key in keys), dtype=np.float32)
    vector = pa.FixedSizeListArray.from_arrays(pa.array(flat), dim)
    return rows.append_column("vector", vector).select(entry_schema(dim).names).cast(entry_schema(dim))


def _read_only(*_: object, **__: object) -> NoReturn:
    raise IndexError_("a past revision's index is read-only")


class FrozenIndex:
    """A frozen index opened for reading (syncd.index.backend.IndexBackend, read-only): its rows
    and vectors are loaded into memory on first use, and queries run there as on any index."""

    read_only = True

    def __init__(self, folder: Path, dim: int, model_id: str, cache_path: Path, embedder: Embedder | None = None,
                 rows: pa.Table | None = None):  # fmt: skip
        """``rows``: the frozen rows with their vectors, when the caller has them (just frozen)."""
        self.folder = folder
        self.dim = dim
        self.model_id = model_id
        self._cache_path = cache_path
        self._embedder = embedder
        # The rows never change once loaded; a query holds them (as Index.reading does) because
        # RowCache keeps caches of its own that a query fills.
        self._lock = threading.RLock()
        self._matrix: RowCache | None = None
        self._rows = rows
        self._records: dict[str, FileRecord] | None = None

    # -- what the index reflects
    def meta(self) -> dict:
        return frozen_meta(self.folder)

    def compatible(self) -> bool:
        return meta_compatible(self.meta(), self.model_id, empty=False)

    def on_disk(self) -> bool:
        return (self.folder / ROWS).is_file()

    def files(self, paths: Iterable[str] | None = None) -> dict[str, FileRecord]:
        with self._lock:
            if self._records is None:
                self._records = {r["path"]: FileRecord(**r) for r in pq.read_table(self.folder / FILES).to_pylist()}
            records = self._records
        return dict(records) if paths is None else {p: records[p] for p in paths if p in records}

    def counts(self) -> dict[str, int]:
        kinds = pq.read_table(self.folder / ROWS, columns=["kind"])["kind"]
        return {"files": len(self.files()), "facts": pc.sum(pc.equal(kinds, "fact")).as_py() or 0,
                "chunks": pc.sum(pc.equal(kinds, "chunk")).as_py() or 0}  # fmt: skip

    def all_rows(self, with_vectors: bool = False) -> pa.Table:
        if with_vectors:
            with EmbeddingCache(self._cache_path) as cache:
                return rows_with_vectors(self.folder, self.dim, self.model_id, cache, self._embedder)
        return pq.read_table(self.folder / ROWS)

    def copy_into(self, target: Index) -> None:
        """Fill the new index ``target`` with these file records and rows, vectors included (a
        past revision's index made from this one, engine/asof.py)."""
        target.fill_rows(pq.read_table(self.folder / FILES).cast(FILE_SCHEMA), self.all_rows(with_vectors=True))

    def find_fact(self, fact_id: str) -> list[dict]:
        rows = pq.read_table(self.folder / ROWS, filters=[("kind", "=", "fact"), ("id", "=", fact_id)])
        return rows.select(ENTRY_FIELDS).to_pylist()

    # -- searching
    @contextmanager
    def reading(self, same_model: bool = False) -> Iterator[RowCache]:
        """The rows, loaded on first use (vectors from the embedding cache), for one query: of
        this index's model always (``same_model`` holds), since the cache is keyed by model."""
        with self._lock:
            if self._matrix is None:
                matrix = RowCache(self.dim)
                if self._rows is None:
                    with EmbeddingCache(self._cache_path) as cache:
                        self._rows = rows_with_vectors(self.folder, self.dim, self.model_id, cache, self._embedder)
                load_into(matrix, self._rows)
                self._matrix, self._rows = matrix, None
            yield self._matrix

    # -- writing: none
    write_meta = unchanged_rows = apply = rebuilding = _read_only

    def persist(self) -> None:
        return None

    def optimize(self) -> None:
        return None

    def close(self) -> None:
        return None

    @property
    def applied(self) -> int:
        return 0

    def wait_written(self, applied: int) -> None:
        return None

    @property
    def unwritten_paths(self) -> frozenset[str]:
        return frozenset()
