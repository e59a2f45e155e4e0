"""Search in the PostgreSQL index: what hybrid search asks of the rows (rowcache.RowCache's query
methods), answered by SQL within one snapshot of the database.

Rows are numbered as a query meets them (0, 1, ... in this view only), so hybrid search runs
unchanged on both backends. Each part is computed as the LanceDB backend computes it:

- vectors: the top k in scope by an exact scan in the database (``ORDER BY vector <#> q``,
  filtered by the scope's columns), and each candidate's cosine recomputed here in float64 from
  its stored float32 vector, as RowCache.row_cosines does. Exact within a user's scope is what a
  user's memory needs up to some 100,000 rows (one sequential pass of their rows); an HNSW index
  pays once a scope holds far more than that, at the price of approximate candidates;
- words: the query's analysed terms (fulltext.analyze) looked up in the ``terms`` table joined
  with the rows in scope, and scored by fulltext.term_signals from the same statistics (rows in
  scope, their mean passage length, each term's rows and holders), so the full-text part, the
  coverage and the rare words equal the in-memory BM25's;
- a fact's conversation neighbours: the facts of its section (same file, same heading) in line
  order, masked by the scope.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np

from .fulltext import analyze, best_rows, term_signals
from .pg_store import ENTRY_COLUMNS, _payload_of, decode_text, encode_text
from .rowcache import ScopeMask, _posix

__all__ = ["PgRows", "scope_clause"]


def scope_clause(scope: ScopeMask) -> tuple[str, list]:
    """The SQL condition on ``e`` (an entries row) for the rows ``scope`` reaches, as
    RowCache._mask draws them, and its parameters (ids never become SQL text)."""
    parts: list[str] = []
    params: list = []
    if scope.user is not None:
        parts.append("(e.user_id = %s OR e.user_id IS NULL)")
        params.append(scope.user)
        if scope.chat is not None:
            parts.append("(e.chat = %s OR e.chat IS NULL)")
            params.append(scope.chat)
    if scope.kind == "transcript":
        parts.append("e.kind = 'transcript'")
    else:
        parts.append("e.kind <> 'transcript'")
        if scope.kind is not None:
            parts.append("e.kind = 'fact'" if scope.kind == "fact" else "e.kind <> 'fact'")
    if scope.memory_only:
        parts.append("e.in_memory")
    if scope.content_only:
        parts.append("NOT e.heading_only")
    return " AND ".join(parts), params


class PgRows:
    """One query's view of the rows (see the module's docstring); valid inside Index.reading()."""

    def __init__(self, conn, sql: Callable, dim: int):
        self._conn = conn
        self._sql = sql
        self.dim = dim
        self._rids: list[int] = []
        self._number: dict[int, int] = {}
        self._payloads: dict[int, dict] = {}
        self._vectors: dict[int, np.ndarray] = {}
        self._counts: dict[ScopeMask, tuple[int, int]] = {}

    def _numbers(self, rids: Iterable[int]) -> np.ndarray:
        return np.fromiter((self._one(rid) for rid in rids), np.int64)

    def _one(self, rid: int) -> int:
        """The row number of ``rid`` in this view, given on first sight."""
        number = self._number.get(rid)
        if number is None:
            number = self._number[rid] = len(self._rids)
            self._rids.append(rid)
        return number

    def _fetch(self, rows: Iterable[int]) -> None:
        """Load the payload of each numbered row not loaded yet."""
        missing = sorted({self._rids[int(r)] for r in rows} - self._payloads.keys())
        if not missing:
            return
        from psycopg.rows import dict_row

        cur = self._conn.cursor(row_factory=dict_row)
        found = cur.execute(self._sql(f"SELECT rid, {', '.join(ENTRY_COLUMNS)} FROM {{s}}.entries "
                                      "WHERE rid = ANY(%s)"), (missing,)).fetchall()
        for record in found:
            self._payloads[record["rid"]] = _payload_of(record)

    def _fetch_vectors(self, rows: Iterable[int]) -> None:
        """Load the vector of each numbered row not loaded yet, in binary: exact float32, and
        parsing a vector's text costs a hundred times more."""
        missing = sorted({self._rids[int(r)] for r in rows} - self._vectors.keys())
        if not missing:
            return
        found = self._conn.cursor(binary=True).execute(
            self._sql("SELECT rid, vector FROM {s}.entries WHERE rid = ANY(%s)"), (missing,)).fetchall()
        for rid, vector in found:
            self._vectors[rid] = vector.to_numpy().astype(np.float32)

    def _stats(self, scope: ScopeMask) -> tuple[int, int]:
        """(rows in scope, sum of their passage lengths)."""
        if scope not in self._counts:
            where, params = scope_clause(scope)
            row = self._conn.execute(self._sql("SELECT count(*), coalesce(sum(e.passage_len), 0) FROM {s}.entries e "
                                               f"WHERE {where}"), params).fetchone()
            self._counts[scope] = (int(row[0]), int(row[1]))
        return self._counts[scope]

    # -- what hybrid search asks ---------------------------------------------------------------

    def count(self, scope: ScopeMask) -> int:
        return self._stats(scope)[0]

    def search(self, query: np.ndarray, scope: ScopeMask, k: int) -> list[tuple[str, str, float]]:
        """Top ``k`` (path, id, cosine) in scope, best first, by an exact scan."""
        rows = self.search_rows(query, scope, k)
        cosines = self.row_cosines(query, rows)
        return [(p["path"], p["id"], float(c)) for p, c in zip(self.row_payloads(rows), cosines)]

    def search_rows(self, query: np.ndarray, scope: ScopeMask, k: int) -> np.ndarray:
        if k <= 0:
            return np.zeros(0, dtype=np.int64)
        where, params = scope_clause(scope)
        vector = np.asarray(query, dtype=np.float32)
        found = self._conn.execute(self._sql(f"SELECT e.rid FROM {{s}}.entries e WHERE {where} "
                                             "ORDER BY e.vector <#> %s, e.rid LIMIT %s"),
                                   [*params, vector, min(k, 2**62)]).fetchall()
        return self._numbers(r[0] for r in found)

    def text_signals(self, query: str, scope: ScopeMask) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """BM25 of every numbered row's passage, its coverage and its rare words' part, from the
        term tables (fulltext.TextIndex.signals over the same statistics). Rows numbered later
        match no query term: 0 for all three."""
        asked = sorted(set(analyze(query)))
        docs, total = self._stats(scope)
        if not asked or not docs:
            n = len(self._rids)
            return term_signals(n, len(asked), [], 0, np.zeros(n, dtype=np.float32), 1.0)
        where, params = scope_clause(scope)
        found = self._conn.execute(
            self._sql("SELECT t.term, t.rid, t.freq, t.own, e.passage_len FROM {s}.terms t "
                      f"JOIN {{s}}.entries e ON e.rid = t.rid WHERE t.term = ANY(%s) AND {where} ORDER BY t.term, t.rid"),
            [asked, *params]).fetchall()
        for rid in sorted({r[1] for r in found}):
            self._one(rid)
        n = len(self._rids)
        lengths = np.zeros(n, dtype=np.float32)
        by_term: dict[str, list] = {}
        for term, rid, freq, own, passage in found:
            row = self._number[rid]
            lengths[row] = passage
            by_term.setdefault(term, []).append((row, freq, own))
        postings = []
        for term in asked:
            held = by_term.get(term)
            if held:
                rows, freqs, own = zip(*held)
                postings.append((np.asarray(rows, dtype=np.int64), np.asarray(freqs, dtype=np.float32),
                                 np.asarray(own, dtype=np.float32)))
        # numpy's mean of float32 lengths: their sum (exact: whole numbers under 2**24) over the count.
        avgdl = float(np.float32(total) / docs) or 1.0
        return term_signals(n, len(asked), postings, docs, lengths, avgdl)

    def text_search(self, query: str, scope: ScopeMask, k: int) -> list[tuple[str, str, float]]:
        scores = self.text_signals(query, scope)[0]
        rows = best_rows(scores, k)
        return [(p["path"], p["id"], float(scores[r])) for r, p in zip(rows, self.row_payloads(rows))]

    def around(self, rows: np.ndarray, scope: ScopeMask, reach: int) -> tuple[np.ndarray, np.ndarray]:
        """The facts at most ``reach`` places before and after each row in its conversation
        (RowCache.around): row numbers, -1 where there is none or it is out of ``scope``."""
        rows = np.asarray(rows, dtype=np.int64)
        distances = np.array([*range(1, reach + 1), *range(1, reach + 1)], dtype=np.int64)
        near = np.full((len(rows), 2 * reach), -1, dtype=np.int64)
        if not reach or not len(rows):
            return near, distances
        payloads = self.row_payloads(rows)
        sections = sorted({(p["path"], p["heading"] or "") for p in payloads if p["kind"] == "fact"})
        if not sections:
            return near, distances
        where, params = scope_clause(scope)
        found = self._conn.execute(
            self._sql("SELECT e.path, coalesce(e.heading, ''), e.rid, " f"({where}) FROM {{s}}.entries e "
                      "JOIN unnest(%s::text[], %s::text[]) AS w(path, heading) "
                      "ON e.path = w.path AND coalesce(e.heading, '') = w.heading "
                      "WHERE e.kind = 'fact' ORDER BY e.path, coalesce(e.heading, ''), e.line, e.rid"),
            [*params, [s[0] for s in sections], [s[1] for s in sections]]).fetchall()
        members: dict[tuple[str, str], list[tuple[int, bool]]] = {}
        for path, heading, rid, visible in found:
            members.setdefault((path, heading), []).append((rid, bool(visible)))
        place = {rid: (key, i) for key, chain in members.items() for i, (rid, _) in enumerate(chain)}
        for at, (row, payload) in enumerate(zip(rows, payloads)):
            if payload["kind"] != "fact" or self._rids[row] not in place:
                continue
            key, i = place[self._rids[row]]
            chain = members[key]
            for column, step in enumerate([-d for d in range(1, reach + 1)] + list(range(1, reach + 1))):
                j = i + step
                if 0 <= j < len(chain) and chain[j][1]:
                    near[at, column] = self._one(chain[j][0])
        return near, distances

    def row_cosines(self, query: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """Exact cosine of each row in float64, as RowCache.row_cosines computes it."""
        rows = np.asarray(rows, dtype=np.int64)
        self._fetch_vectors(rows)
        if not len(rows):
            return np.zeros(0, dtype=np.float64)
        vectors = np.stack([self._vectors[self._rids[r]] for r in rows]).astype(np.float64)
        return (vectors * np.asarray(query, dtype=np.float64)).sum(axis=1)

    def row_created(self, rows: np.ndarray) -> np.ndarray:
        payloads = self.row_payloads(rows)
        return np.fromiter((_posix(p.get("created_at")) for p in payloads), np.float64, len(payloads))

    def row_payloads(self, rows: Iterable[int]) -> list[dict]:
        rows = [int(r) for r in rows]
        self._fetch(rows)
        return [self._payloads[self._rids[r]] for r in rows]

    def payloads(self, keys: Iterable[tuple[str, str]]) -> dict[tuple[str, str], dict]:
        """The stored rows for (path, id) keys (the first of a repeated id, as RowCache keeps)."""
        keys = list(keys)
        if not keys:
            return {}
        found = self._conn.execute(
            self._sql("SELECT e.rid, e.path, e.id FROM {s}.entries e JOIN unnest(%s::text[], %s::text[]) AS w(path, id) "
                      "ON e.path = w.path AND e.id = w.id ORDER BY e.rid"),
            [[k[0] for k in keys], [encode_text(k[1]) for k in keys]]).fetchall()
        first: dict[tuple[str, str], int] = {}
        for rid, path, fid in found:
            first.setdefault((path, decode_text(fid)), rid)
        numbers = dict(zip(first, self._numbers(first.values())))
        payloads = self.row_payloads(numbers.values())
        return dict(zip(numbers, payloads))
