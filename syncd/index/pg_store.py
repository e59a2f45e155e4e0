"""The index in PostgreSQL with pgvector: the same rows and ids as the LanceDB index (store.py).

**One schema per home.** Each home's tables (``meta``, ``files``, ``entries``, ``terms``) live in
a schema of its own, rather than one set of tables with a home key in every row and every
query. Isolation between homes is then structural (no query can forget a home filter: the
tables it names hold one home), a home is dropped or rebuilt with one statement, a rebuild is
made aside in ``<schema>__rebuild`` and swapped in with a rename inside one transaction (readers
see the old rows or the new, never half), and each home's term statistics, indexes and vacuum
are its own. What a key per row would buy (one set of tables for thousands of homes) matters
only past the point where PostgreSQL's catalog feels thousands of schemas, far past one team.

Tables: ``entries`` holds facts and chunks with their vectors (``vector(dim)``), the scope
columns a query filters on (user, chat, kind, whether under ``memory/``, whether a chunk holds
only headings) and each row's full-text lengths; ``terms`` holds each row's analysed terms with
their frequency in its passage and in its own words (fulltext.py's postings, as a table), so the
full-text part is computed from the same statistics as LanceDB's in-memory BM25 and equals it.
Ids and paths only ever travel as query parameters; the schema name is validated and quoted.

**Faults.** A connection that fails (server down, unreachable, restarted) raises
:class:`IndexUnreachable`, an IndexError_: a write then fails after its markdown is saved, which
the write path reports as ``StorageError(saved=True)``; the paths it carried are remembered
(``unwritten_paths``) so the next sync redoes them, and since the files table still holds their
old shas, the daemon's next reconcile (or ``syncd sync``) brings the index level once the server
is back. Every statement runs under a timeout (``pg_connections.STATEMENT_TIMEOUT_MS``).
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import overload

import numpy as np
import pyarrow as pa

from ..errors import ConfigError, IndexError_
from .backend import IndexUnreachable, iter_chunks
from .fulltext import passage_terms
from .pending import replaces_whole
from .pg_ann import AnnIndex
from .pg_connections import Connections
from .records import (
    SCHEMA_VERSION,
    EntryRow,
    FileRecord,
    FileUpdate,
    StaleRows,
    heading_only,
    meta_compatible,
    model_mismatch,
)
from .table_rows import entry_schema

__all__ = ["ENTRY_COLUMNS", "IndexUnreachable", "PgDatabase", "PgIndex", "decode_text", "encode_text", "payload_of_row"]

log = logging.getLogger(__name__)

# The layout of this backend's tables; another is rebuilt (the rows are derived) by a writer.
# 2: ``terms`` carries its row's user, so a query reads the postings of its scope's users only;
#    vectors stay in the row (never TOASTed: a scan of a user's rows read three pages a vector);
#    conversations are found by (path, heading, line) as queried.
# 3: ``texts`` keeps the whole text of core blocks and MEMORY.md files (rows.KEPT_TEXT_KINDS),
#    so a reader holding no copy of the home answers core-block reads and stats.
PG_LAYOUT = 3
_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,53}")
_REBUILD_SUFFIX = "__rebuild"
_META_SELECT = "SELECT value FROM {s}.meta WHERE key = 'meta'"
_TABLE_NAMES = ("meta", "files", "entries", "texts", "terms")
_ROWS_PER_STATEMENT = 2000

# Payload fields as LanceDB returns them (store._ENTRY_FIELDS), and the column holding each
# ("user" is a reserved word in SQL).
_FIELDS = (
    "id",
    "kind",
    "source",
    "path",
    "line",
    "text",
    "user",
    "chat",
    "session",
    "category",
    "tags",
    "importance",
    "created_at",
    "heading",
    "provenance",
    "label",
    "title",
)
ENTRY_COLUMNS = tuple("user_id" if f == "user" else f for f in _FIELDS)
_TEXT_FIELDS = frozenset(
    {
        "id",
        "text",
        "category",
        "heading",
        "provenance",
        "label",
        "title",
        "session",
        "created_at",
        "source",
        "chat",
        "user",
    }
)
# PostgreSQL text cannot hold NUL, which a markdown file may: it and the escape's own mark are
# escaped reversibly (private-use characters), so a row reads back exactly as it was written.
_MARK = "\ue000"


# A text column's value: a str stays a str, None stays None.
@overload
def encode_text(value: str) -> str: ...
@overload
def encode_text(value: str | None) -> str | None: ...
def encode_text(value: str | None) -> str | None:
    if value is None or ("\x00" not in value and _MARK not in value):
        return value
    return value.replace(_MARK, _MARK + "1").replace("\x00", _MARK + "0")


@overload
def decode_text(value: str) -> str: ...
@overload
def decode_text(value: str | None) -> str | None: ...
def decode_text(value: str | None) -> str | None:
    if value is None or _MARK not in value:
        return value
    return re.sub(f"{_MARK}([01])", lambda m: "\x00" if m.group(1) == "0" else _MARK, value)


_TAGS = _FIELDS.index("tags")


def payload_of_row(values: Sequence) -> dict:
    """:func:`_payload_of` of a row given as its ENTRY_COLUMNS values in order: the same dict,
    without decoding fields that hold nothing escaped (the common case, and a search reads
    hundreds of rows)."""
    tags = values[_TAGS] or ()
    if any(type(v) is str and _MARK in v for v in values) or any(_MARK in t for t in tags):
        return _payload_of(dict(zip(ENTRY_COLUMNS, values)))
    out = dict(zip(_FIELDS, values))
    out["tags"] = list(tags)
    return out


def _payload_of(record: Mapping) -> dict:
    """A row as the LanceDB index returns it (table_rows.payload): payload fields, float32 importance."""
    out = {}
    for field, column in zip(_FIELDS, ENTRY_COLUMNS):
        value = record[column]
        if field in _TEXT_FIELDS:
            value = decode_text(value)
        elif field == "tags":
            value = [decode_text(t) for t in value or ()]
        out[field] = value
    return out


class PgIndex:
    """One home's index in its own schema of a PostgreSQL database (see the module's docstring)."""

    def __init__(
        self,
        url: str,
        schema: str,
        dim: int,
        model_id: str,
        read_only: bool = False,
        connections: Connections | None = None,
        ann_min_rows: int | None = None,
        reader: bool = False,
        looks_only: bool = False,
    ):
        """``ann_min_rows``: scopes of at least so many rows find their nearest rows through the
        HNSW index, built once the table is that large (pg_ann.py); None: always exactly.
        ``reader``: an index beside the home's writer (``read_only``, or an engine whose changes
        borrow the home's lock: an agent's MemoryManager), which never makes the schema anew over
        another layout. ``looks_only`` (a command that only reads: ``syncd search``, ``status``,
        a read-only server) or ``read_only``: it never makes a schema not there yet either;
        another reader makes it, as the writer would (an agent's first use of a new home)."""
        if not _SCHEMA_NAME.fullmatch(schema):
            raise ConfigError(f"invalid index schema name {schema!r}: lowercase letters, digits and _ only")
        self.url = url
        self.schema = schema
        self.dim = dim
        self.model_id = model_id
        self.read_only = read_only
        self.reader = reader or read_only
        self.looks_only = looks_only or read_only
        self.shared = True
        self._db = connections or Connections(url)
        self._ready = False
        self._writing = threading.RLock()
        self._generation = 0
        self._diffed: dict[str, int] = {}
        self._applied = 0
        self._unwritten: set[str] = set()
        self._failures: dict[int, IndexError_] = {}
        self.ann = AnnIndex(self._db, self._sql, schema, self.where, ann_min_rows)

    def __repr__(self) -> str:
        return f"PgIndex({self._db.shown!r}, schema={self.schema!r})"

    @property
    def where(self) -> str:
        """Where the index is, for messages: the URL without its password, and the schema."""
        return f"{self._db.shown} (schema {self.schema})"

    # -- tables ----------------------------------------------------------------------------------

    def _sql(self, text: str):
        """``text`` with ``{s}`` as this home's quoted schema (a validated name, quoted anyway)."""
        from psycopg import sql

        return sql.SQL(text).format(s=sql.Identifier(self.schema))

    @contextmanager
    def _conn(self) -> Iterator:
        with self._db.get() as conn:
            if not self._ready:
                self._prepare(conn)
            yield conn

    def _prepare(self, conn) -> None:
        """Make the schema and its tables if missing (unless this index only looks); a schema
        of another layout is made anew by a writer (its rows are derived: the next sync fills
        it) and refused by a reader."""
        exists = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (self.schema,)).fetchone()
        if exists and self._whole(conn):
            row = conn.execute(self._sql("SELECT value FROM {s}.meta WHERE key = 'layout'")).fetchone()
            if row is not None and row[0] == PG_LAYOUT:
                self._ready = True
                return
            if self.reader:
                raise IndexError_(
                    f"the index at {self.where} has another layout than this syncd's (another version wrote it): "
                    "the home's writer rebuilds it (`syncd sync`, or its `syncd watch` or `serve`) with this version"
                )
            log.warning("the index at %s has another layout; making it anew", self.where)
        elif self.looks_only:
            raise IndexError_(
                f"there is no index at {self.where} yet: run its home's writer first (`syncd sync`, `watch` or `serve`)"
            )
        with conn.transaction():
            if exists:
                conn.execute(self._sql("DROP SCHEMA {s} CASCADE"))
            conn.execute(self._sql(_TABLES.replace("DIM", str(int(self.dim)))))
            conn.execute(self._sql("INSERT INTO {s}.meta VALUES ('layout', %s)"), (json.dumps(PG_LAYOUT),))
        self._ready = True

    def check_database(self) -> None:
        """ConfigError when the database cannot hold an index (no pgvector, nor the right to
        enable it); nothing when it can, or cannot be reached now (see backend.open_index)."""
        try:
            with self._db.get():
                pass
        except IndexUnreachable:
            pass

    def exists(self) -> bool:
        """Whether the schema is there with every table: one table dropped by hand is an index
        to make anew, not one to read "relation does not exist" from on every search."""
        with self._db.get() as conn:
            return self._whole(conn)

    def _whole(self, conn) -> bool:
        query = "SELECT count(*) FROM pg_tables WHERE schemaname = %s AND tablename = ANY(%s)"
        return conn.execute(query, (self.schema, list(_TABLE_NAMES))).fetchone()[0] == len(_TABLE_NAMES)

    # -- meta ------------------------------------------------------------------------------------

    def meta(self) -> dict:
        with self._conn() as conn:
            row = conn.execute(self._sql(_META_SELECT)).fetchone()
        return dict(row[0]) if row else {}

    def write_meta(self, **fields: object) -> None:
        current = self.meta()
        meta = current | {"schema": SCHEMA_VERSION, "model_id": self.model_id, "dim": self.dim}
        meta.update(fields)
        if meta == current:
            return
        with self._conn() as conn:
            conn.execute(
                self._sql(
                    "INSERT INTO {s}.meta VALUES ('meta', %s) ON CONFLICT (key) DO UPDATE SET value = excluded.value"
                ),
                (json.dumps(meta),),
            )

    def compatible(self) -> bool:
        meta = self.meta()
        empty = not meta and sum(self.counts()[k] for k in ("facts", "chunks")) == 0
        return meta_compatible(meta, self.model_id, empty=empty)

    def on_disk(self) -> bool:
        """Whether this home's schema is there (False once someone dropped it: the writer then
        rebuilds it; for a reader, which never makes it, also before its writer first did).
        An unreachable database is not a missing index: True, and reads raise."""
        try:
            return (not self._ready and not self.looks_only) or self.exists()
        except IndexUnreachable:
            return True

    # -- reading ---------------------------------------------------------------------------------

    def files(self, paths: Iterable[str] | None = None) -> dict[str, FileRecord]:
        query = "SELECT path, kind, sha, size, mtime_ns, error FROM {s}.files"
        with self._conn() as conn:
            if paths is None:
                rows = conn.execute(self._sql(query)).fetchall()
            else:
                wanted = list(paths)
                rows = [
                    r
                    for chunk in iter_chunks(wanted, _ROWS_PER_STATEMENT)
                    for r in conn.execute(self._sql(query + " WHERE path = ANY(%s)"), (list(chunk),)).fetchall()
                ]
        return {r[0]: FileRecord(r[0], r[1], r[2], r[3], r[4], decode_text(r[5])) for r in rows}

    def counts(self) -> dict[str, int]:
        with self._conn() as conn:
            files = conn.execute(self._sql("SELECT count(*) FROM {s}.files")).fetchone()[0]
            kinds = dict(conn.execute(self._sql("SELECT kind, count(*) FROM {s}.entries GROUP BY kind")).fetchall())
        return {"files": files, "facts": kinds.get("fact", 0), "chunks": kinds.get("chunk", 0)}

    def all_rows(self, with_vectors: bool = False) -> pa.Table:
        """Every row, as the LanceDB index's table holds it (same columns, same types)."""
        with self._conn() as conn:
            cur = conn.cursor(row_factory=_dict_rows, binary=True)  # vectors exact, and fast to read
            records = cur.execute(
                self._sql(f"SELECT {', '.join(ENTRY_COLUMNS)}, search_text, vector FROM {{s}}.entries ORDER BY rid")
            ).fetchall()
        rows = []
        for record in records:
            row = _payload_of(record)
            row["search_text"] = decode_text(record["search_text"])
            row["vector"] = record["vector"].tolist()
            rows.append(row)
        table = pa.Table.from_pylist(rows, schema=entry_schema(self.dim))
        return table if with_vectors else table.drop_columns(["vector"])

    def texts(self, folders: Sequence[str]) -> dict[str, str]:
        """The kept texts (core blocks, MEMORY.md: records.FileUpdate.text) of the files directly
        in each of ``folders`` (home-relative, without a trailing slash), by path."""
        with self._conn() as conn:
            found = conn.execute(
                self._sql(
                    "SELECT t.path, t.text FROM {s}.texts t JOIN unnest(%s::text[]) AS f(folder) "
                    "ON starts_with(t.path, f.folder || '/') "
                    "AND strpos(substr(t.path, length(f.folder) + 2), '/') = 0"
                ),
                (list(folders),),
            ).fetchall()
        return {path: decode_text(text) for path, text in found}

    def files_in(self, folder: str, kind: str) -> list[str]:
        """Paths of the indexed files of ``kind`` directly in ``folder`` (home-relative)."""
        with self._conn() as conn:
            found = conn.execute(
                self._sql(
                    "SELECT path FROM {s}.files WHERE kind = %s AND starts_with(path, %s) "
                    "AND strpos(substr(path, %s), '/') = 0 ORDER BY path"
                ),
                (kind, folder + "/", len(folder) + 2),
            ).fetchall()
        return [r[0] for r in found]

    def fact_categories(self, user: str) -> dict[str, int]:
        """How many facts of ``user``'s daily logs the index holds, by category."""
        with self._conn() as conn:
            found = conn.execute(
                self._sql(
                    "SELECT category, count(*) FROM {s}.entries WHERE kind = 'fact' "
                    "AND source = 'daily_log' AND user_id = %s GROUP BY category"
                ),
                (encode_text(user),),
            ).fetchall()
        return {decode_text(category): int(n) for category, n in found}

    # -- the home's token hashes, for readers that hold no copy of the home ----------------------

    def holder(self) -> str | None:
        """Which home's writer keeps this schema (engine/index_holder.py), None before any."""
        with self._conn() as conn:
            row = conn.execute(self._sql("SELECT value FROM {s}.meta WHERE key = 'holder'")).fetchone()
        return row[0] if row else None

    def set_holder(self, holder: str) -> None:
        with self._conn() as conn:
            conn.execute(
                self._sql(
                    "INSERT INTO {s}.meta VALUES ('holder', %s) ON CONFLICT (key) DO UPDATE SET value = excluded.value"
                ),
                (json.dumps(holder),),
            )

    def write_tokens(self, hashes: Mapping) -> bool:
        """Publish the home's token hashes (``{"admin": sha256 or None, "users": [{"id", "user",
        "sha256"}]}``: hashes only, never a token) unless the database holds them already; True
        when it did not."""
        with self._conn() as conn, conn.transaction():
            row = conn.execute(self._sql("SELECT value FROM {s}.meta WHERE key = 'tokens' FOR UPDATE")).fetchone()
            if row is not None and row[0] == hashes:
                return False
            conn.execute(
                self._sql(
                    "INSERT INTO {s}.meta VALUES ('tokens', %s) ON CONFLICT (key) DO UPDATE SET value = excluded.value"
                ),
                (json.dumps(hashes),),
            )
        return True

    def find_fact(self, fact_id: str) -> list[dict]:
        with self._conn() as conn:
            cur = conn.cursor(row_factory=_dict_rows)
            found = cur.execute(
                self._sql(
                    f"SELECT {', '.join(ENTRY_COLUMNS)} FROM {{s}}.entries WHERE kind = 'fact' AND id = %s ORDER BY rid"
                ),
                (encode_text(fact_id),),
            ).fetchall()
        return [_payload_of(r) for r in found]

    @contextmanager
    def reading(self, same_model: bool = False) -> Iterator:
        """The rows as of one snapshot of the database, for the length of one query.
        ``same_model``: IndexError_ unless their vectors are of this index's model, as the meta
        of the same snapshot says (a rebuild swaps rows and meta in one transaction); read in
        the round trip that sets the snapshot up, so the check costs none of its own."""
        from .pg_search import PgRows, begin_snapshot

        with self._conn() as conn:
            ann = self.ann.usable(conn)
            with conn.transaction():
                meta = begin_snapshot(conn, self._sql(_META_SELECT) if same_model else None)
                if meta is not None and (problem := model_mismatch(meta, self.model_id, self.dim)):
                    raise IndexError_(problem)
                yield PgRows(conn, self._sql, self.dim, ann_min_rows=ann)

    # -- writing ---------------------------------------------------------------------------------

    def unchanged_rows(self, path: str, rows: Sequence[EntryRow]) -> frozenset[str]:
        """Ids of ``rows`` the index holds for ``path`` exactly so (store.Index.unchanged_rows)."""
        from .table_rows import payload

        with self._conn() as conn:
            cur = conn.cursor(row_factory=_dict_rows)
            held = cur.execute(
                self._sql(f"SELECT {', '.join(ENTRY_COLUMNS)}, search_text FROM {{s}}.entries WHERE path = %s"), (path,)
            ).fetchall()
        self._diffed[path] = self._generation
        ids = [decode_text(r["id"]) for r in held]
        if not held or len(set(ids)) != len(ids) or len({r.id for r in rows}) != len(rows):
            return frozenset()
        by_id = dict(zip(ids, held))
        same = set()
        for row in rows:
            record = by_id.get(row.id)
            if (
                record is not None
                and decode_text(record["search_text"]) == row.search_text
                and _payload_of(record) == payload(row)
            ):
                same.add(row.id)
        return frozenset(same)

    def apply(self, updates: Sequence[FileUpdate], defer: bool = False) -> None:
        """Replace the rows of each updated path (but its ``unchanged``) and record the files'
        new state, in one transaction: a failure changes nothing and leaves the paths unwritten
        (the next sync redoes them). ``defer`` changes nothing here: each apply is one commit,
        and PostgreSQL's own write-ahead log, not a writer of ours, makes small writes cheap."""
        if self.read_only:
            raise IndexError_("this index was opened read-only")
        if not updates:
            return
        with self._writing:
            stale = [u.path for u in updates if u.unchanged and self._diffed.get(u.path) != self._generation]
            for u in updates:
                self._diffed.pop(u.path, None)
            if stale:
                raise StaleRows(stale)
            self._generation += 1
            self._applied += 1
            paths = {u.path for u in updates}
            try:
                with self._conn() as conn, conn.transaction():
                    if len(paths) == len(updates):
                        self._write_all(conn, updates)
                    else:  # a path written twice: in order, each on what the one before left
                        for update in updates:
                            self._write_all(conn, [update])
            except IndexError_ as exc:
                self._unwritten |= paths
                self._failures[self._applied] = exc
                raise
            self._unwritten -= paths
            if self.ann.due():
                with self._conn() as conn:
                    self.ann.after_write(conn)

    def _write_all(self, conn, updates: Sequence[FileUpdate]) -> None:
        """Write ``updates`` (each of another path) in a few statements whatever their number: a
        sync after a burst of saves re-records thousands of files whose stat alone moved, and a
        statement per file cost a round trip each, most of a sync that changed nothing else
        (bench_backends.py home measures a no-op sync)."""
        whole = sorted(u.path for u in updates if replaces_whole(u))
        if whole:
            conn.execute(self._sql("DELETE FROM {s}.entries WHERE path = ANY(%s)"), (whole,))
        for update in updates:
            if not replaces_whole(update) and update.rows is not None:
                conn.execute(
                    self._sql("DELETE FROM {s}.entries WHERE path = %s AND NOT (id = ANY(%s))"),
                    (update.path, sorted(encode_text(i) for i in update.unchanged)),
                )
        # rows None: only the file's stat changed, and its kept text with it stays.
        retexted = [u for u in updates if u.record is None or u.rows is not None]
        if retexted:
            conn.execute(self._sql("DELETE FROM {s}.texts WHERE path = ANY(%s)"), (sorted(u.path for u in retexted),))
            texts = [(u.path, encode_text(u.text)) for u in retexted if u.record is not None and u.text is not None]
            if texts:
                conn.execute(
                    self._sql("INSERT INTO {s}.texts SELECT * FROM unnest(%s::text[], %s::text[])"),
                    ([p for p, _ in texts], [x for _, x in texts]),
                )
        fresh = [u for u in updates if u.rows and u.changed_rows]
        if fresh:
            rows = [row for u in fresh for row in u.changed_rows]
            vectors = np.concatenate(
                [np.asarray(u.vectors, dtype=np.float32).reshape(len(u.changed_rows), -1) for u in fresh]
            )
            self._insert(conn, rows, vectors)
        gone = sorted(u.path for u in updates if u.record is None)
        kept = [u.record for u in updates if u.record is not None]
        if gone:
            conn.execute(self._sql("DELETE FROM {s}.files WHERE path = ANY(%s)"), (gone,))
        if kept:
            conn.execute(
                self._sql(
                    "INSERT INTO {s}.files SELECT * FROM unnest(%s::text[], %s::text[], %s::text[], "
                    "%s::bigint[], %s::bigint[], %s::text[]) ON CONFLICT (path) DO UPDATE "
                    "SET kind = excluded.kind, sha = excluded.sha, size = excluded.size, "
                    "mtime_ns = excluded.mtime_ns, error = excluded.error"
                ),
                (
                    [r.path for r in kept],
                    [r.kind for r in kept],
                    [r.sha for r in kept],
                    [r.size for r in kept],
                    [r.mtime_ns for r in kept],
                    [encode_text(r.error) for r in kept],
                ),
            )

    def _insert(self, conn, rows: Sequence[EntryRow], vectors: np.ndarray) -> None:
        """Rows and their terms by COPY (binary: vectors go over exactly as float32)."""
        rids = [
            r[0]
            for r in conn.execute(
                self._sql("SELECT nextval(pg_get_serial_sequence(%s, 'rid')) FROM generate_series(1, %s)"),
                (f'"{self.schema}".entries', len(rows)),
            ).fetchall()
        ]
        columns = (
            *ENTRY_COLUMNS,
            "rid",
            "search_text",
            "in_memory",
            "heading_only",
            "own_len",
            "passage_len",
            "vector",
        )
        types = [
            *(_COLUMN_TYPES[c] for c in ENTRY_COLUMNS),
            "bigint",
            "text",
            "boolean",
            "boolean",
            "integer",
            "integer",
            "vector",
        ]
        terms: list[tuple[int, str, str | None, float, float]] = []
        with conn.cursor() as cur:
            with cur.copy(self._sql(f"COPY {{s}}.entries ({', '.join(columns)}) FROM STDIN (FORMAT BINARY)")) as copy:
                copy.set_types(types)
                for rid, row, vector in zip(rids, rows, vectors):
                    own, around = passage_terms(row.search_text)
                    values = [getattr(row, f) for f in _FIELDS]
                    values = [encode_text(v) if f in _TEXT_FIELDS else v for f, v in zip(_FIELDS, values)]
                    values[_FIELDS.index("tags")] = [encode_text(t) for t in row.tags]
                    copy.write_row(
                        [
                            *values,
                            rid,
                            encode_text(row.search_text),
                            row.path.startswith("memory/"),
                            row.kind == "chunk" and heading_only(row.text or ""),
                            len(own),
                            len(own) + len(around),
                            vector,
                        ]
                    )
                    mine = Counter(own)
                    terms.extend(
                        (rid, term, encode_text(row.user), float(n), float(mine.get(term, 0)))
                        for term, n in sorted(Counter((*own, *around)).items())
                    )
            with cur.copy(
                self._sql("COPY {s}.terms (rid, term, user_id, freq, own) FROM STDIN (FORMAT BINARY)")
            ) as copy:
                copy.set_types(["bigint", "text", "text", "real", "real"])
                for term in terms:
                    copy.write_row(term)

    def persist(self) -> None:
        """Nothing is pending: every apply is written before it returns."""

    @property
    def applied(self) -> int:
        return self._applied

    def wait_written(self, applied: int) -> None:
        """Raise the error of apply number ``applied`` if it failed (applies are written at once)."""
        error = self._failures.pop(applied, None)
        if error is not None:
            raise error

    @property
    def unwritten_paths(self) -> frozenset[str]:
        return frozenset(self._unwritten)

    @contextmanager
    def rebuilding(self, **meta: object) -> Iterator[PgIndex]:
        """An index built aside in ``<schema>__rebuild`` that replaces this one's rows when the
        block ends without an error (store.Index.rebuilding): swapped in by renaming schemas in
        one transaction. An interrupted rebuild is gone on from by the next one of the same
        model, layout and ``meta``; any other starts anew."""
        aside = PgIndex(self.url, self.schema + _REBUILD_SUFFIX, self.dim, self.model_id, connections=self._db)
        wanted = {"schema": SCHEMA_VERSION, "model_id": self.model_id, "dim": self.dim, **meta}
        if aside.exists():
            found = aside.meta()
            if not all(found.get(k) == v for k, v in wanted.items()):
                aside.drop()
                aside = PgIndex(self.url, aside.schema, self.dim, self.model_id, connections=self._db)
        aside.write_meta(**meta)
        yield aside
        with self._writing:
            # This index's meta (the commit it was aligned with, ...) outlives its rows, as
            # meta.json does the LanceDB tables'.
            kept = (self.meta() if self.exists() else {}) | aside.meta()
            with self._db.get() as conn, conn.transaction():
                if self.exists():  # the home's published token hashes and its holder outlive its rows
                    conn.execute(
                        aside._sql("INSERT INTO {s}.meta SELECT key, value FROM ")
                        + self._sql(
                            "{s}.meta WHERE key IN ('tokens', 'holder')"
                            " ON CONFLICT (key) DO UPDATE SET value = excluded.value"
                        )
                    )
                conn.execute(self._sql("DROP SCHEMA IF EXISTS {s} CASCADE"))
                conn.execute(aside._sql("ALTER SCHEMA {s} RENAME TO ") + self._sql("{s}"))
            self._ready = False
            self._generation += 1
            self.write_meta(**(kept | meta))

    def drop(self) -> None:
        """Drop this home's schema: every row of this index."""
        with self._db.get() as conn:
            conn.execute(self._sql("DROP SCHEMA IF EXISTS {s} CASCADE"))
        self._ready = False

    def optimize(self) -> None:
        """Refresh the planner's statistics (PostgreSQL compacts on its own: autovacuum), and
        start building the HNSW index if the table has grown large enough for it (pg_ann.py)."""
        with self._conn() as conn:
            for table in ("entries", "terms", "files"):
                conn.execute(self._sql("ANALYZE {s}." + table))
            if not self.read_only:
                self.ann.after_write(conn, force=True)

    def close(self) -> None:
        self._db.close()


class PgDatabase:
    """A database holding the indexes of many homes (a schema each), as a reader that holds no
    home sees it: which homes it holds, and each one's index read-only, all over one set of
    connections."""

    def __init__(self, url: str):
        self.url = url
        self._db = Connections(url)
        self.shown = self._db.shown

    def homes(self) -> dict[str, dict]:
        """``{schema: meta}`` of every home whose index is ready to read here (this layout; not a
        rebuild under way, which replaces its home's schema when it ends)."""
        from psycopg import sql

        with self._db.get() as conn:
            names = [
                r[0]
                for r in conn.execute(
                    "SELECT n.nspname FROM pg_namespace n JOIN pg_class c ON c.relnamespace = n.oid "
                    "WHERE c.relname = 'meta' AND c.relkind = 'r' ORDER BY n.nspname"
                ).fetchall()
            ]
            found = {}
            for name in names:
                if not _SCHEMA_NAME.fullmatch(name) or name.endswith(_REBUILD_SUFFIX):
                    continue
                held = dict(
                    conn.execute(
                        sql.SQL("SELECT key, value FROM {}.meta WHERE key IN ('layout', 'meta')").format(
                            sql.Identifier(name)
                        )
                    ).fetchall()
                )
                if held.get("layout") == PG_LAYOUT and "meta" in held:
                    found[name] = dict(held["meta"])
        return found

    def tokens(self, schema: str) -> dict | None:
        """The token hashes home ``schema``'s writer published (PgIndex.write_tokens), None if none
        were; whatever model its index was made with."""
        from psycopg import sql

        with self._db.get() as conn:
            row = conn.execute(
                sql.SQL("SELECT value FROM {}.meta WHERE key = 'tokens'").format(sql.Identifier(schema))
            ).fetchone()
        return None if row is None else dict(row[0])

    def index(self, schema: str, dim: int, model_id: str, ann_min_rows: int | None = None) -> PgIndex:
        """The home ``schema``'s index, read-only, over this database's connections."""
        return PgIndex(self.url, schema, dim, model_id, read_only=True, connections=self._db, ann_min_rows=ann_min_rows)

    def close(self) -> None:
        self._db.close()


def _dict_rows(cursor):
    from psycopg.rows import dict_row

    return dict_row(cursor)


_COLUMN_TYPES = {
    "id": "text",
    "kind": "text",
    "source": "text",
    "path": "text",
    "line": "integer",
    "text": "text",
    "user_id": "text",
    "chat": "text",
    "session": "text",
    "category": "text",
    "tags": "text[]",
    "importance": "real",
    "created_at": "text",
    "heading": "text",
    "provenance": "text",
    "label": "text",
    "title": "text",
}

# One home's tables ({s}: its schema; DIM: the model's dimension). ``terms`` is fulltext.py's
# postings as a table; the lengths on ``entries`` are its row lengths (own words, and passage).
_TABLES = """
CREATE SCHEMA {s};
CREATE TABLE {s}.meta (key text PRIMARY KEY, value jsonb NOT NULL);
CREATE TABLE {s}.files (path text PRIMARY KEY, kind text NOT NULL, sha text NOT NULL, size bigint NOT NULL,
                        mtime_ns bigint NOT NULL, error text);
CREATE TABLE {s}.entries (
    rid bigserial PRIMARY KEY, id text NOT NULL, kind text NOT NULL, source text, path text NOT NULL,
    line integer, text text, search_text text, user_id text, chat text, session text, category text,
    tags text[], importance real, created_at text, heading text, provenance text, label text, title text,
    in_memory boolean NOT NULL, heading_only boolean NOT NULL, own_len integer NOT NULL,
    passage_len integer NOT NULL, vector vector(DIM) NOT NULL);
ALTER TABLE {s}.entries ALTER COLUMN vector SET STORAGE PLAIN;
CREATE INDEX ON {s}.entries (path, id);
CREATE INDEX ON {s}.entries (user_id, kind);
CREATE INDEX ON {s}.entries (path, (coalesce(heading, '')), line) WHERE kind = 'fact';
CREATE TABLE {s}.texts (path text PRIMARY KEY, text text NOT NULL);
CREATE TABLE {s}.terms (rid bigint NOT NULL REFERENCES {s}.entries ON DELETE CASCADE, term text NOT NULL,
                        user_id text, freq real NOT NULL, own real NOT NULL);
CREATE INDEX ON {s}.terms (rid);
CREATE INDEX ON {s}.terms (term, user_id) INCLUDE (rid, freq, own);
"""
