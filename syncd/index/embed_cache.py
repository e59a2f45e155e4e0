"""The persistent embedding cache: (model id, sha256 of text) -> vector, in sqlite.

A rebuild, a moved file or a reverted edit never pays the model for text it has already embedded;
``CachedEmbedder`` wraps any Embedder with this cache and counts what really reached the model, so
tests can prove that an unchanged tree embeds nothing.

The cache is derived, so it never breaks a search or a sync: a file SQLite finds corrupt (at open,
or on a lookup or a write later) is set aside, renamed beside it for diagnosis rather than
deleted, with one warning, and a new cache is started; texts are embedded afresh meanwhile.
Only SQLite's own verdict counts (SQLITE_CORRUPT, SQLITE_NOTADB), confirmed by a second look
under a lock file, so a cache another process is merely writing (busy, locked) is never taken for
corrupt, and of several processes finding the same corrupt file only one renames it. A cache a
newer syncd wrote (a newer schema version) is left byte for byte as it is, for that syncd, and this
one goes on without it, saying so once (upgrade syncd, or move the file aside); never "delete it".
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ..embedding.fastembed_backend import Embedder, check_texts
from ..errors import EmbeddingError
from ..home import disk_failure, write_refused

if TYPE_CHECKING:
    # Imported where vectors are made: an engine that embeds nothing (a no-op sync) opens the
    # cache without numpy.
    import numpy as np

__all__ = ["CachedEmbedder", "EmbeddingCache", "text_key"]

log = logging.getLogger(__name__)


def text_key(text: str) -> bytes:
    """The cache key of a text: the sha256 digest of its UTF-8 bytes."""
    # surrogatepass: a lone surrogate from a badly decoded file must hash, not raise.
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


_SCHEMA_VERSION = 1
# SQLite's historical limit is 999 bound parameters; stay well under it.
_MAX_PARAMS = 900
_KEYS_PER_QUERY = _MAX_PARAMS - 1
# SQLite's primary result codes for a file that is damaged or no database at all (the extended
# codes carry them in their low byte). Busy and locked, what a writer elsewhere causes, are not.
_SQLITE_CORRUPT, _SQLITE_NOTADB = 11, 26


class _NewerCache(Exception):
    """The cache's schema version is newer than this syncd's: a newer syncd wrote it (and may
    use it again), so it is neither changed nor set aside, only not used here."""

    def __init__(self, version: int):
        self.version = version
        super().__init__(f"schema version {version}; this syncd knows {_SCHEMA_VERSION}")


def _is_corrupt(exc: BaseException) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    return isinstance(code, int) and code & 0xFF in (_SQLITE_CORRUPT, _SQLITE_NOTADB)


def _vectors(blobs: list[bytes]) -> list[np.ndarray]:
    """Writable float32 vectors from raw blobs; one copy in all when they share a length."""
    import numpy as np

    if len({len(b) for b in blobs}) == 1:
        matrix = np.frombuffer(bytearray().join(blobs), dtype=np.float32)
        return list(matrix.reshape(len(blobs), -1))
    return [np.frombuffer(bytearray(b), dtype=np.float32) for b in blobs]


class EmbeddingCache:
    """Vectors by (model_id, sha256 of text) in one sqlite file (WAL).

    One writer process and any number of reader processes may use the same file at once. Within a
    process one instance may be shared by threads: a lock serialises use of its one connection.
    The file is derived data: deleting it only costs re-embedding, and a corrupt one is set aside
    (see the module doc).
    """

    def __init__(self, path: Path):
        self.path = Path(path)
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._file: tuple[int, int] | None = None
        # True when this process may not write the cache (see _open_for_reading).
        self.read_only = False
        self._open()

    def _open(self, retried: bool = False) -> None:
        found: tuple[int, int] | None = None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            found = self._identity()
            if found is None:
                self._drop_orphaned_journal()
            conn = sqlite3.connect(self.path, timeout=30.0, isolation_level=None, check_same_thread=False)
            try:
                self._init_schema(conn)
            except BaseException:
                conn.close()
                raise
            self._conn, self._file = conn, self._identity()
        except _NewerCache as exc:
            self._bypass(exc, f"it was written by a newer syncd ({exc})")
        except (OSError, sqlite3.Error) as exc:
            if _is_corrupt(exc) and found is not None and not retried:
                if self._set_aside(found, exc):
                    self._open(retried=True)
                else:
                    self._bypass(exc)
                return
            reason = disk_failure(exc, self.path.parent)
            # A disk that is full, read-only or not ours still lets a search or a status read
            # (and a sync fails where the index cannot be written, naming the disk).
            if (reason is not None or write_refused(exc)) and self._open_for_reading(exc):
                return
            if reason is not None:
                raise EmbeddingError(
                    f"cannot open the embedding cache {self.path}: {reason} (SQLite said: {exc}); "
                    f"free space on the disk holding {self.path.parent}"
                ) from exc
            raise EmbeddingError(
                f"cannot open the embedding cache {self.path}: {exc} (it is only a cache: deleting it is safe)"
            ) from exc

    def _open_for_reading(self, refusal: BaseException) -> bool:
        """Open the cache for reading only, when this process may not write it: a home on a
        read-only mount, or owned by someone else, or a full disk. A search there needs no cache at all (a
        query's vector is never cached) and must not fail for want of one. The file as it is
        (``mode=ro``; ``immutable`` on a read-only file system, where SQLite cannot make the
        shared-memory file WAL readers need), or an empty cache in memory when there is no file
        to read. False when even that fails: the caller reports the refusal."""
        uris = (f"{self.path.as_uri()}?mode=ro", f"{self.path.as_uri()}?immutable=1") if self.path.exists() else ()
        for uri in (*uris, ":memory:"):
            try:
                conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
            except sqlite3.Error:
                continue
            try:
                if uri == ":memory:":
                    self._init_schema(conn)
                elif conn.execute("PRAGMA user_version").fetchone()[0] != _SCHEMA_VERSION:
                    raise sqlite3.DatabaseError("another schema version")
            except (sqlite3.Error, EmbeddingError):
                conn.close()
                continue
            log.info("the embedding cache %s cannot be written (%s); reading it only", self.path, refusal)
            self._conn, self._file, self.read_only = conn, self._identity(), True
            return True
        return False

    def _set_aside(self, found: tuple[int, int], exc: BaseException) -> bool:
        """Rename the corrupt cache file ``found`` (with its -wal and -shm) beside it, kept for
        diagnosis, so a new cache can start at the path. True when the path no longer holds that
        file (renamed now, or by another process first); False when it is not confirmed corrupt
        or cannot be renamed (a read-only folder): the caller bypasses it instead.

        A lock file serialises the processes that find the same file corrupt: under it, the path
        is renamed only while it still is ``found`` (never a new cache another process has just
        started) and a fresh connection still finds it corrupt (``quick_check``), so a failure
        that was not the file's, or a file another process is writing, is left alone."""
        try:
            with open(f"{self.path}.lock", "a") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                if self._identity() != found:
                    log.info("the embedding cache %s was replaced meanwhile; using the new one", self.path)
                    return True
                if not self._still_corrupt():
                    return False
                aside = self.path.with_name(f"{self.path.name}.corrupt-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}")
                # Its journals first: a process opening the path between the renames then finds
                # no file, never the corrupt one beside a journal it would take for an orphan.
                for suffix in ("-wal", "-shm", ""):
                    try:
                        os.rename(f"{self.path}{suffix}", f"{aside}{suffix}")
                    except FileNotFoundError:
                        pass
        except OSError as refusal:
            log.warning(
                "the embedding cache %s is corrupt (SQLite said: %s) and cannot be set aside (%s); "
                "texts are embedded without it until it is moved or deleted (it is only a cache)",
                self.path,
                exc,
                refusal,
            )
            return False
        log.warning(
            "the embedding cache %s is corrupt (SQLite said: %s); it is set aside as %s (kept for "
            "diagnosis; deleting it is safe) and a new cache is started: texts are embedded afresh",
            self.path,
            exc,
            aside.name,
        )
        return True

    def _still_corrupt(self) -> bool:
        """A second look, on a connection of its own: whether SQLite still finds the file corrupt."""
        try:
            conn = sqlite3.connect(f"{self.path.as_uri()}?mode=ro", uri=True, timeout=30.0)
        except sqlite3.Error as exc:
            return _is_corrupt(exc)
        try:
            verdict = conn.execute("PRAGMA quick_check(1)").fetchone()[0]
        except sqlite3.Error as exc:
            return _is_corrupt(exc)
        finally:
            conn.close()
        return verdict != "ok"

    def _bypass(self, exc: BaseException, why: str | None = None) -> None:
        """Go on with an empty cache in memory: a corrupt file that stays where it is (it cannot
        be set aside, or a second look found it sound), or the cache of a newer syncd (``why``
        says so; it is left as it is for that syncd), never fails a search or a sync."""
        if self._conn is not None:
            self._conn.close()
        conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        self._init_schema(conn)
        # The file's identity, so reopen_if_gone starts a real cache once the file is replaced.
        self._conn, self._file = conn, self._identity()
        if why is not None:
            log.warning(
                "the embedding cache %s cannot be used here: %s; it is left as it is, and texts are "
                "embedded without it. Upgrade syncd to use it, or move it aside to start a cache for this version",
                self.path,
                why,
            )
            return
        log.warning("the embedding cache %s cannot be used (SQLite said: %s); going on without it", self.path, exc)

    def _recover(self, exc: sqlite3.Error) -> bool:
        """After a lookup or a write found the open file corrupt (lock held): set it aside and
        open a new cache, or bypass it. True when there is a fresh cache to retry on."""
        if not _is_corrupt(exc) or self._file is None:
            return False
        found = self._file
        if self._set_aside(found, exc):
            if self._conn is not None:
                self._conn.close()
                self._conn = None
            self._open(retried=True)
            return True
        self._bypass(exc)
        return True

    def _drop_orphaned_journal(self) -> None:
        """Remove the -wal and -shm files of a cache file that was deleted (by hand, while a
        process had it open): SQLite would take them for the new file's own and fail every open
        with "disk I/O error". Only what the deleted file had not checkpointed is in them, which
        is only ever re-embedding; a process still writing the deleted file keeps its open ones
        and starts a new cache once it notices (reopen_if_gone)."""
        for suffix in ("-wal", "-shm"):
            Path(f"{self.path}{suffix}").unlink(missing_ok=True)

    def _init_schema(self, conn: sqlite3.Connection) -> None:
        conn.execute("PRAGMA busy_timeout = 30000")
        # Looked at before any setting that may write the file (journal_mode rewrites its
        # header): the cache of a newer syncd is left byte for byte as it is.
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version > _SCHEMA_VERSION:
            raise _NewerCache(version)
        # Only takes effect on a new file, before WAL is on: rows are ~1.6 KB of vector, and
        # 8 KiB pages hold five of them where 4 KiB pages waste a third of each page.
        conn.execute("PRAGMA page_size = 8192")
        conn.execute("PRAGMA journal_mode = WAL")
        # A lost last transaction after a power cut only means re-embedding; WAL never corrupts.
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA cache_size = -32768")
        # A rowid table with a unique index, not WITHOUT ROWID: SQLite stores WITHOUT ROWID rows
        # this large in overflow pages, which made lookups slower (bench_embed.py measures the
        # cache).
        if version == _SCHEMA_VERSION:
            return
        if version != 0:  # older than any syncd wrote: no one uses it any more
            raise EmbeddingError(
                f"embedding cache {self.path} has schema version {version}, this syncd knows "
                f"{_SCHEMA_VERSION}; delete the file (it is only a cache)"
            )
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS vectors ("
                " model_id TEXT NOT NULL,"
                " text_sha256 BLOB NOT NULL,"
                " dim INTEGER NOT NULL,"
                " vector BLOB NOT NULL,"
                " UNIQUE (model_id, text_sha256)"
                ")"
            )
            conn.execute(f"PRAGMA user_version = {_SCHEMA_VERSION}")
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    def _identity(self) -> tuple[int, int] | None:
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return st.st_dev, st.st_ino

    def reopen_if_gone(self) -> bool:
        """Open the file again when it was deleted or replaced under us (``rm -rf .syncd``, which
        may happen at any moment): SQLite would go on writing into the deleted file, and every
        vector put there would be lost. Returns whether it did."""
        with self._lock:
            if self._conn is None or self._identity() == self._file:
                return False
            log.info("the embedding cache %s was removed; starting a new one", self.path)
            self._conn.close()
            self._conn = None
            self._open()
            return True

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            raise EmbeddingError(f"embedding cache {self.path} is closed")
        return self._conn

    def get_many(self, model_id: str, texts: Sequence[str]) -> dict[int, np.ndarray]:
        """{index in texts: vector} for the texts cached under ``model_id``."""
        items = check_texts(texts)
        keys = [text_key(t) for t in items]
        blobs = self.fetch_blobs(model_id, keys)
        hits = [i for i, k in enumerate(keys) if k in blobs]
        return dict(zip(hits, _vectors([blobs[keys[i]] for i in hits])))

    def fetch_blobs(self, model_id: str, keys: Sequence[bytes]) -> dict[bytes, bytes]:
        """{key: raw float32 bytes} for the ``text_key`` digests cached under ``model_id``.

        The fastest way in: a caller that fills a matrix converts all hits with one copy.
        """
        return dict(self._select("text_sha256, vector", model_id, keys))

    def held_keys(self, model_id: str, keys: Sequence[bytes]) -> set[bytes]:
        """Which of ``keys`` the cache holds a vector of under ``model_id`` (without reading the
        vectors: what freezing a past revision's index checks, index/frozen.py)."""
        return {key for (key,) in self._select("text_sha256", model_id, keys)}

    def _select(self, columns: str, model_id: str, keys: Sequence[bytes]) -> list[tuple]:
        """``columns`` of the rows of ``keys`` under ``model_id``, a bounded IN list at a time."""
        unique = list(dict.fromkeys(keys))
        found: list[tuple] = []
        with self._lock:
            conn = self._connection()
            try:
                for start in range(0, len(unique), _KEYS_PER_QUERY):
                    chunk = unique[start : start + _KEYS_PER_QUERY]
                    marks = ",".join("?" * len(chunk))
                    found.extend(
                        conn.execute(
                            f"SELECT {columns} FROM vectors WHERE model_id = ? AND text_sha256 IN ({marks})",
                            (model_id, *chunk),
                        )
                    )
            except sqlite3.Error as exc:
                if self._recover(exc):
                    return []  # a new cache holds nothing yet: every text is a miss
                raise EmbeddingError(f"cannot read the embedding cache {self.path}: {exc}") from exc
        return found

    def put_many(self, model_id: str, texts: Sequence[str], vectors: np.ndarray) -> None:
        """Store one vector per text under ``model_id`` (replacing what was there)."""
        items = check_texts(texts)
        self.put_by_keys(model_id, [text_key(t) for t in items], vectors)

    def put_by_keys(self, model_id: str, keys: Sequence[bytes], vectors: np.ndarray) -> None:
        """Store ``vectors[i]`` under (``model_id``, ``keys[i]``) in one transaction."""
        import numpy as np

        matrix = np.ascontiguousarray(vectors, dtype=np.float32)
        if matrix.ndim != 2 or matrix.shape[0] != len(keys):
            raise ValueError(f"expected {len(keys)} vectors, got an array of shape {matrix.shape}")
        if not keys:
            return
        dim = matrix.shape[1]
        rows = [(model_id, key, dim, row.tobytes()) for key, row in zip(keys, matrix)]
        with self._lock:
            try:
                self._insert(rows)
            except sqlite3.Error as exc:
                if not self._recover(exc):
                    raise EmbeddingError(f"cannot write the embedding cache {self.path}: {exc}") from exc
                try:
                    self._insert(rows)  # once, into the new cache
                except sqlite3.Error as again:
                    raise EmbeddingError(f"cannot write the embedding cache {self.path}: {again}") from again

    def _insert(self, rows: list[tuple]) -> None:
        """One transaction of rows (lock held)."""
        conn = self._connection()
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.executemany(
                "INSERT OR REPLACE INTO vectors (model_id, text_sha256, dim, vector) VALUES (?, ?, ?, ?)", rows
            )
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    def count(self, model_id: str | None = None) -> int:
        """How many vectors are stored (for ``model_id``, or for all models)."""
        with self._lock:
            conn = self._connection()
            if model_id is None:
                return conn.execute("SELECT count(*) FROM vectors").fetchone()[0]
            return conn.execute("SELECT count(*) FROM vectors WHERE model_id = ?", (model_id,)).fetchone()[0]

    def delete_model(self, model_id: str) -> int:
        """Forget every vector of ``model_id`` (after switching models); returns how many."""
        with self._lock:
            conn = self._connection()
            try:
                cur = conn.execute("DELETE FROM vectors WHERE model_id = ?", (model_id,))
            except sqlite3.Error as exc:
                raise EmbeddingError(f"cannot write the embedding cache {self.path}: {exc}") from exc
            return cur.rowcount

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __enter__(self) -> EmbeddingCache:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


# Told (texts from the cache, texts embedded by the model so far) during one ``embed`` call.
EmbedProgress = Callable[[int, int], None]

# The texts of one ``embed`` call reach the model in slices of at most this many texts and
# characters: each slice's vectors are stored before the next starts (what a kill can lose) and
# progress is told per slice. A slice of short facts takes a second or two on two cores; the
# character bound keeps a slice of long page chunks about as long.
_SLICE_TEXTS = 256
_SLICE_CHARS = 64 * 1024


def _slices(keys: list[bytes], lengths: list[int]) -> Iterator[list[bytes]]:
    """``keys`` in slices (see ``_SLICE_TEXTS``), shortest texts first: the model pads a batch to
    its longest text, so each slice holds texts of like length, as one sorted call would."""
    order = sorted(range(len(keys)), key=lengths.__getitem__)
    part: list[bytes] = []
    chars = 0
    for i in order:
        if part and (len(part) >= _SLICE_TEXTS or chars + lengths[i] > _SLICE_CHARS):
            yield part
            part, chars = [], 0
        part.append(keys[i])
        chars += lengths[i]
    if part:
        yield part


class CachedEmbedder:
    """An Embedder that asks ``embedder`` only for texts ``cache`` does not hold yet.

    ``calls`` counts the calls that reached the inner embedder (one per slice of a long call) and
    ``embedded_texts`` the texts it embedded (``embed_query`` counts as one call of one text), so a
    caller can assert that an unchanged tree embeds nothing. Identical texts within one call are
    embedded once. Thread-safe when the inner embedder is.
    """

    def __init__(self, embedder: Embedder, cache: EmbeddingCache):
        self.embedder = embedder
        self.cache = cache
        self.calls = 0
        self.embedded_texts = 0
        self._counter_lock = threading.Lock()
        # While the cache cannot be written, warn once, not on every batch of a long sync.
        self._cache_failing = False

    @property
    def model_id(self) -> str:
        return self.embedder.model_id

    @property
    def dim(self) -> int:
        return self.embedder.dim

    def reset_counters(self) -> None:
        with self._counter_lock:
            self.calls = 0
            self.embedded_texts = 0

    def embed(self, texts: Sequence[str], progress: EmbedProgress | None = None) -> np.ndarray:
        """Vectors of ``texts``, from the cache where it has them. The model embeds the rest in
        slices (``_slices``), each stored before the next begins, so a sync killed halfway loses
        at most one slice of work; ``progress(cached, embedded)`` is told after the lookup and
        after each slice (texts of this call, counted once each)."""
        import numpy as np

        items = check_texts(texts)
        dim = self.dim
        if not items:
            return np.zeros((0, dim), dtype=np.float32)
        keys = [text_key(t) for t in items]
        # One row per distinct text; duplicates are filled from it at the end.
        row_of: dict[bytes, int] = {}
        first_text: list[str] = []
        for key, text in zip(keys, items):
            if key not in row_of:
                row_of[key] = len(first_text)
                first_text.append(text)
        model_id = self.model_id
        blobs = self.cache.fetch_blobs(model_id, list(row_of))
        width = dim * 4
        hits = [k for k in row_of if len(blobs.get(k, b"")) == width]
        # bytearray: the joined buffer is writable, so the all-hit case needs no further copy.
        hit_matrix = np.frombuffer(bytearray().join(blobs[k] for k in hits), dtype=np.float32)
        hit_matrix = hit_matrix.reshape(len(hits), dim)
        if progress is not None:
            progress(len(hits), 0)
        if len(hits) == len(row_of):
            unique = hit_matrix
        else:
            unique = np.empty((len(row_of), dim), dtype=np.float32)
            unique[[row_of[k] for k in hits]] = hit_matrix
            hit_set = set(hits)
            missing = [k for k in row_of if k not in hit_set]
            embedded = 0
            for part in _slices(missing, [len(first_text[row_of[k]]) for k in missing]):
                fresh = self.embedder.embed([first_text[row_of[k]] for k in part])
                if fresh.shape != (len(part), dim):
                    raise EmbeddingError(f"embedder {model_id} returned shape {fresh.shape} for {len(part)} texts")
                with self._counter_lock:
                    self.calls += 1
                    self.embedded_texts += len(part)
                unique[[row_of[k] for k in part]] = fresh
                self._remember(model_id, part, fresh)
                log.debug("embedded %d texts and kept them in the cache", len(part))
                embedded += len(part)
                if progress is not None:
                    progress(len(hits), embedded)
        if len(row_of) == len(keys):
            return unique
        return unique[[row_of[k] for k in keys]]

    def _remember(self, model_id: str, keys: list[bytes], vectors: np.ndarray) -> None:
        """Store fresh vectors; a cache that cannot be written never fails the embedding (the
        vectors are right, only a later run loses the saving)."""
        try:
            self.cache.put_by_keys(model_id, keys, vectors)
        except EmbeddingError as exc:
            with self._counter_lock:
                first, self._cache_failing = not self._cache_failing, True
            if not first:
                log.debug("embedding cache still not written: %s", exc)
                return
            folder = self.cache.path.parent
            reason = disk_failure(exc, folder)
            if reason is not None:
                log.warning(
                    "the embedding cache %s cannot be written: %s (free space on the disk holding "
                    "%s). Indexing goes on; new vectors are not kept until the cache can be written "
                    "again",
                    self.cache.path,
                    reason,
                    folder,
                )
            else:
                log.warning("the embedding cache cannot be written, indexing goes on without it: %s", exc)
            return
        if self._cache_failing:
            with self._counter_lock:
                self._cache_failing = False
            log.info("the embedding cache %s is written again", self.cache.path)

    def embed_query(self, text: str) -> np.ndarray:
        """One query's vector, shape (dim,). Not cached: queries rarely repeat a stored text, and
        a model may embed queries differently from documents."""
        if not isinstance(text, str):
            raise TypeError(f"embed_query() takes a str, not {type(text).__name__}")
        query = getattr(self.embedder, "embed_query", None)
        vector = query(text) if query is not None else self.embedder.embed([text])[0]
        with self._counter_lock:
            self.calls += 1
            self.embedded_texts += 1
        return vector
