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

One search is two statements (``prefetch``): the scope's size, the query terms' postings and the
nearest rows in one; the candidates, their conversations and the payloads and vectors within
reach in the other, sent in binary and decoded only as hybrid search reads them. Each method
below still answers a question of its own by itself (the same answers, one statement each).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np

from .fulltext import analyze, best_rows, term_signals
from .pg_ann import EF_SEARCH
from .pg_store import ENTRY_COLUMNS, decode_text, encode_text, payload_of_row
from .rowcache import ScopeMask, created_posix

__all__ = ["PgRows", "begin_snapshot", "scope_clause", "terms_clause"]

# The exact scan's order: by distance, ties by row. "+ 0" (the same numbers) keeps the planner off
# the HNSW index: with one, it would serve the distance order from the index, approximate, and
# sort only the ties (an incremental sort), making the exact path approximate.
_EXACT_ORDER = "(e.vector <#> %s) + 0, e.rid"

# The nearest rows in scope through the HNSW index (ordered by distance alone, as the index
# serves them; the exact scan's ``rid`` tie-break would keep the planner off the index). Ordered
# again by distance: ``relaxed_order`` may hand them back slightly out of order.
_ANN_NEAREST = (
    "SELECT n.rid FROM (SELECT e.rid, e.vector <#> %s AS d FROM {{s}}.entries e WHERE {where} "
    "ORDER BY e.vector <#> %s LIMIT %s) n ORDER BY n.d, n.rid"
)


def begin_snapshot(conn, meta_select=None) -> dict | None:
    """Make the transaction just begun on ``conn`` one read-only snapshot for a query's reads;
    with ``meta_select`` (the home's meta, composed), also that snapshot's meta, read in the same
    round trip: two statements with no parameters go as one simple query."""
    from psycopg import sql

    begin = sql.SQL("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
    if meta_select is None:
        conn.execute(begin)
        return None
    cur = conn.execute(sql.SQL("; ").join([begin, meta_select]))
    cur.nextset()  # the second statement's rows
    row = cur.fetchone()
    return dict(row[0]) if row else {}


def terms_clause(scope: ScopeMask) -> tuple[str, list]:
    """The SQL condition on ``t`` (a terms row) that keeps the postings of the scope's user and
    the shared rows: a query reads its own user's postings, not every user's (the rest of the
    scope is checked on the row, ``scope_clause``)."""
    if scope.user is None:
        return "TRUE", []
    return "(t.user_id = %s OR t.user_id IS NULL)", [scope.user]


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

    def __init__(self, conn, sql: Callable, dim: int, ann_min_rows: int | None = None):
        self._conn = conn
        self._sql = sql
        self.dim = dim
        # Scopes of at least so many rows find their nearest rows through the HNSW index
        # (pg_ann.py: approximate); None: every scope is scanned exactly.
        self._ann_min_rows = ann_min_rows
        self._ann_set = False
        # Whether a query of this view took its vector candidates from the HNSW index.
        self.approximate = False
        self._rids: list[int] = []
        self._number: dict[int, int] = {}
        self._payloads: dict[int, dict] = {}
        self._vectors: dict[int, np.ndarray] = {}
        # Rows as prefetch() received them (ENTRY_COLUMNS, then the vector), decoded on first use.
        self._raw: dict[int, list] = {}
        self._counts: dict[ScopeMask, tuple[int, int]] = {}
        # What prefetch() gathered for the query under way: its text signals and its nearest rows.
        self._signals: dict[tuple[str, ScopeMask], tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        self._nearest: dict[tuple[bytes, ScopeMask, int], np.ndarray] = {}
        # Each fact's conversation (file, heading) and its place in it; each conversation's facts
        # by place, and whether the scope reaches them (for one scope: the query's).
        self._section_of: dict[int, tuple[tuple[str, str], int]] = {}
        self._sections: dict[tuple[str, str], dict[int, tuple[int, bool]]] = {}
        self._sections_scope: ScopeMask | None = None

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
        for rid in [rid for rid in missing if rid in self._raw]:
            self._payloads[rid] = payload_of_row(self._raw[rid])
        missing = [rid for rid in missing if rid not in self._payloads]
        if not missing:
            return
        found = self._conn.execute(
            self._sql(f"SELECT rid, {', '.join(ENTRY_COLUMNS)} FROM {{s}}.entries WHERE rid = ANY(%s)"), (missing,)
        ).fetchall()
        for rid, *values in found:
            self._payloads[rid] = payload_of_row(values)

    def _fetch_vectors(self, rows: Iterable[int]) -> None:
        """Load the vector of each numbered row not loaded yet, in binary: exact float32, and
        parsing a vector's text costs a hundred times more."""
        missing = sorted({self._rids[int(r)] for r in rows} - self._vectors.keys())
        for rid in [rid for rid in missing if rid in self._raw]:
            self._vectors[rid] = self._raw[rid][-1]
        missing = [rid for rid in missing if rid not in self._vectors]
        if not missing:
            return
        found = (
            self._conn.cursor(binary=True)
            .execute(self._sql("SELECT rid, vector FROM {s}.entries WHERE rid = ANY(%s)"), (missing,))
            .fetchall()
        )
        for rid, vector in found:
            self._vectors[rid] = vector

    def _stats(self, scope: ScopeMask) -> tuple[int, int]:
        """(rows in scope, sum of their passage lengths)."""
        if scope not in self._counts:
            where, params = scope_clause(scope)
            row = self._conn.execute(
                self._sql(f"SELECT count(*), coalesce(sum(e.passage_len), 0) FROM {{s}}.entries e WHERE {where}"),
                params,
            ).fetchone()
            self._counts[scope] = (int(row[0]), int(row[1]))
        return self._counts[scope]

    # -- one query's rows in two statements --------------------------------------------------

    def prefetch(self, query: np.ndarray, text: str, scope: ScopeMask, pool: int, reach: int) -> None:
        """Gather what hybrid search will ask of this view for one query, in two statements
        (each a round trip): first the scope's size, the query terms' postings and the ``pool``
        nearest rows; then the candidates (those rows and the ``pool`` best by words) and their
        conversations: every fact's place, and the payload and vector of each within two steps
        of ``reach`` of a candidate (hybrid search scores the neighbours of the candidates'
        neighbours). The methods below answer from what is held; anything beyond it (another
        scope, rows further away) is asked of the database."""
        asked = sorted(set(analyze(text)))
        where, params = scope_clause(scope)
        held, held_params = terms_clause(scope)
        vector = np.asarray(query, dtype=np.float32)
        limit = max(min(pool, 2**62), 0)
        nearest_sql = f"SELECT e.rid FROM {{s}}.entries e WHERE {where} ORDER BY {_EXACT_ORDER} LIMIT %s"
        nearest_params = [*params, vector, limit]
        if self._ann_min_rows is not None:
            # The scope's size, known inside this statement only, picks one of two branches (a
            # one-time filter each: the other is never run): the exact scan, or the HNSW index.
            self._use_ann(limit)
            nearest_sql = (
                f"(SELECT e.rid FROM {{s}}.entries e WHERE (SELECT n FROM s) < %s AND {where} "
                f"ORDER BY {_EXACT_ORDER} LIMIT %s) UNION ALL "
                f"(SELECT a.rid FROM ({_ANN_NEAREST.format(where=where)}) a WHERE (SELECT n FROM s) >= %s)"
            )
            nearest_params = [
                self._ann_min_rows,
                *params,
                vector,
                limit,
                vector,
                *params,
                vector,
                limit,
                self._ann_min_rows,
            ]
        found = self._conn.execute(
            self._sql(
                f"WITH s AS (SELECT count(*) AS n, coalesce(sum(e.passage_len), 0) AS total FROM {{s}}.entries e "
                f"WHERE {where}), "
                "p AS (SELECT t.term, t.rid, t.freq, t.own, e.passage_len FROM {s}.terms t "
                f"JOIN {{s}}.entries e ON e.rid = t.rid WHERE t.term = ANY(%s) AND {held} AND {where}), "
                f"v AS ({nearest_sql}) "
                "SELECT 0, NULL::text, n, total, 0::real, 0::real FROM s "
                "UNION ALL SELECT 1, term, rid, passage_len, freq, own FROM p "
                "UNION ALL SELECT 2, NULL, rid, 0, 0, 0 FROM v"
            ),
            [*params, asked, *held_params, *params, *nearest_params],
        ).fetchall()
        postings = sorted((r[1], r[2], r[4], r[5], r[3]) for r in found if r[0] == 1)
        stats = next(r for r in found if r[0] == 0)
        self._counts[scope] = (int(stats[2]), int(stats[3]))
        if self._ann_min_rows is not None and int(stats[2]) >= self._ann_min_rows:
            self.approximate = True
        self._signals[(text, scope)] = signals = self._signals_of(asked, postings, scope)
        nearest = self._numbers(r[2] for r in found if r[0] == 2)
        self._nearest[(vector.tobytes(), scope, pool)] = nearest
        candidates = np.union1d(nearest, best_rows(signals[0], pool))
        self._gather([self._rids[int(r)] for r in candidates], scope, 2 * reach)

    def _gather(self, rids: list[int], scope: ScopeMask, steps: int) -> None:
        """The rows of ``rids`` and, when ``steps`` > 0, their conversations: every fact's place
        (and whether ``scope`` reaches it), with the payload and vector of those at most
        ``steps`` places from one of ``rids``, in one statement. Held as the database sent
        them: hybrid search reads the payloads of only some, decoded on first use."""
        where, params = scope_clause(scope)
        columns = ", ".join("e." + c for c in ENTRY_COLUMNS)
        found = (
            self._conn.cursor(binary=True)
            .execute(
                self._sql(
                    "WITH f AS (SELECT DISTINCT unnest(%s::bigint[]) AS rid), "
                    "sec AS (SELECT DISTINCT e.path, coalesce(e.heading, '') AS h FROM {s}.entries e JOIN f ON f.rid = e.rid "
                    "        WHERE e.kind = 'fact' AND %s > 0), "
                    # A fact's payload is sent when a row of ``rids`` is at most ``steps`` places from it:
                    # a window over its conversation counts them (the planner misjudges a self-join here).
                    f"m AS (SELECT e.rid, sec.path, sec.h, ({where}) AS vis, row_number() OVER w AS pos, "
                    f"count(f.rid) OVER (w ROWS BETWEEN {int(steps)} PRECEDING AND {int(steps)} FOLLOWING) AS near "
                    "       FROM sec JOIN {s}.entries e ON e.path = sec.path AND coalesce(e.heading, '') = sec.h "
                    "       LEFT JOIN f ON f.rid = e.rid WHERE e.kind = 'fact' "
                    "       WINDOW w AS (PARTITION BY sec.path, sec.h ORDER BY e.line, e.rid)) "
                    f"SELECT m.rid, m.path, m.h, m.vis, m.pos, {columns}, e.vector FROM m "
                    "LEFT JOIN {s}.entries e ON e.rid = m.rid AND m.near > 0 "
                    f"UNION ALL SELECT e.rid, NULL, NULL, NULL, NULL, {columns}, e.vector FROM {{s}}.entries e "
                    "JOIN f ON f.rid = e.rid WHERE e.kind <> 'fact' OR %s = 0"
                ),
                [rids, steps, *params, steps],
            )
            .fetchall()
        )
        if self._sections_scope != scope:
            self._section_of.clear()
            self._sections.clear()
            self._sections_scope = scope
        for rid, path, heading, visible, place, *raw in found:
            if raw[-1] is not None and rid not in self._payloads:
                self._raw[rid] = raw
            if path is not None:
                self._place(rid, (path, heading), int(place), bool(visible))

    def _place(self, rid: int, section: tuple[str, str], place: int, visible: bool) -> None:
        self._section_of[rid] = (section, place)
        self._sections.setdefault(section, {})[place] = (rid, visible)

    def _signals_of(self, asked: list[str], found: list, scope: ScopeMask) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """fulltext.term_signals over ``found``, the postings ``(term, rid, freq, own, passage
        length)`` of the ``asked`` terms in ``scope``, sorted by term and row."""
        docs, total = self._stats(scope)
        if not asked or not docs:
            n = len(self._rids)
            return term_signals(n, len(asked), [], 0, np.zeros(n, dtype=np.float32), 1.0)
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
                postings.append(
                    (
                        np.asarray(rows, dtype=np.int64),
                        np.asarray(freqs, dtype=np.float32),
                        np.asarray(own, dtype=np.float32),
                    )
                )
        # numpy's mean of float32 lengths: their sum (exact: whole numbers under 2**24) over the count.
        avgdl = float(np.float32(total) / docs) or 1.0
        return term_signals(n, len(asked), postings, docs, lengths, avgdl)

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
        vector = np.asarray(query, dtype=np.float32)
        held = self._nearest.get((vector.tobytes(), scope, k))
        if held is not None:
            return held
        where, params = scope_clause(scope)
        if self._ann_min_rows is not None and self._stats(scope)[0] >= self._ann_min_rows:
            self._use_ann(min(k, 2**62))
            self.approximate = True
            found = self._conn.execute(
                self._sql(_ANN_NEAREST.format(where=where)), [vector, *params, vector, min(k, 2**62)]
            ).fetchall()
        else:
            found = self._conn.execute(
                self._sql(f"SELECT e.rid FROM {{s}}.entries e WHERE {where} ORDER BY {_EXACT_ORDER} LIMIT %s"),
                [*params, vector, min(k, 2**62)],
            ).fetchall()
        return self._numbers(r[0] for r in found)

    def _use_ann(self, limit: int) -> None:
        """Set this query's HNSW walk (for the transaction only): the scope filtered as the
        graph is walked, until ``limit`` rows in scope are found."""
        if not self._ann_set:
            self._conn.execute(
                "SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true), "
                "set_config('hnsw.ef_search', %s, true)",
                (str(max(EF_SEARCH, min(limit, 1000))),),
            )
            self._ann_set = True

    def text_signals(self, query: str, scope: ScopeMask) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """BM25 of every numbered row's passage, its coverage and its rare words' part, from the
        term tables (fulltext.TextIndex.signals over the same statistics). Rows numbered later
        match no query term: 0 for all three."""
        held = self._signals.get((query, scope))
        if held is not None:
            return held
        asked = sorted(set(analyze(query)))
        found: list = []
        if asked and self._stats(scope)[0]:
            where, params = scope_clause(scope)
            term_where, term_params = terms_clause(scope)
            found = self._conn.execute(
                self._sql(
                    "SELECT t.term, t.rid, t.freq, t.own, e.passage_len FROM {s}.terms t JOIN {s}.entries e "
                    f"ON e.rid = t.rid WHERE t.term = ANY(%s) AND {term_where} AND {where} ORDER BY t.term, t.rid"
                ),
                [asked, *term_params, *params],
            ).fetchall()
        return self._signals_of(asked, found, scope)

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
        if self._sections_scope != scope:
            self._section_of.clear()
            self._sections.clear()
            self._sections_scope = scope
        missing = sorted(
            {
                (p["path"], p["heading"] or "")
                for r, p in zip(rows, payloads)
                if p["kind"] == "fact" and self._rids[r] not in self._section_of
            }
        )
        if missing:
            self._load_sections(missing, scope)
        steps = [-d for d in range(1, reach + 1)] + list(range(1, reach + 1))
        for at, (row, payload) in enumerate(zip(rows, payloads)):
            held = self._section_of.get(self._rids[row]) if payload["kind"] == "fact" else None
            if held is None:
                continue
            section, place = held
            members = self._sections[section]
            for column, step in enumerate(steps):
                member = members.get(place + step)
                if member is not None and member[1]:
                    near[at, column] = self._one(member[0])
        return near, distances

    def _load_sections(self, sections: list[tuple[str, str]], scope: ScopeMask) -> None:
        """Every fact of these conversations (file, heading), in line order, and whether
        ``scope`` reaches it."""
        where, params = scope_clause(scope)
        found = self._conn.execute(
            self._sql(
                f"SELECT e.path, coalesce(e.heading, ''), e.rid, ({where}) FROM {{s}}.entries e "
                "JOIN unnest(%s::text[], %s::text[]) AS w(path, heading) "
                "ON e.path = w.path AND coalesce(e.heading, '') = w.heading "
                "WHERE e.kind = 'fact' ORDER BY e.path, coalesce(e.heading, ''), e.line, e.rid"
            ),
            [*params, [s[0] for s in sections], [s[1] for s in sections]],
        ).fetchall()
        places: dict[tuple[str, str], int] = {}
        for path, heading, rid, visible in found:
            # Places count from 1, as row_number() does in _gather.
            place = places[(path, heading)] = places.get((path, heading), 0) + 1
            self._place(rid, (path, heading), place, bool(visible))

    def row_cosines(self, query: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """Exact cosine of each row in float64, as RowCache.row_cosines computes it."""
        rows = np.asarray(rows, dtype=np.int64)
        self._fetch_vectors(rows)
        if not len(rows):
            return np.zeros(0, dtype=np.float64)
        vectors = np.stack([self._vectors[self._rids[r]] for r in rows]).astype(np.float64)
        return (vectors * np.asarray(query, dtype=np.float64)).sum(axis=1)

    def pair_cosines(self, rows: np.ndarray, others: np.ndarray) -> np.ndarray:
        """Exact cosine between each row and the row at the same place in ``others``, as
        RowCache.pair_cosines computes it."""
        rows, others = np.asarray(rows, dtype=np.int64), np.asarray(others, dtype=np.int64)
        if not len(rows):
            return np.zeros(0, dtype=np.float64)
        self._fetch_vectors(np.concatenate([rows, others]))
        left = np.stack([self._vectors[self._rids[r]] for r in rows])
        right = np.stack([self._vectors[self._rids[r]] for r in others])
        return np.einsum("ij,ij->i", left, right, dtype=np.float64, casting="safe")

    def row_created(self, rows: np.ndarray) -> np.ndarray:
        payloads = self.row_payloads(rows)
        return np.fromiter((created_posix(p.get("created_at")) for p in payloads), np.float64, len(payloads))

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
            self._sql(
                "SELECT e.rid, e.path, e.id FROM {s}.entries e JOIN unnest(%s::text[], %s::text[]) AS w(path, id) "
                "ON e.path = w.path AND e.id = w.id ORDER BY e.rid"
            ),
            [[k[0] for k in keys], [encode_text(k[1]) for k in keys]],
        ).fetchall()
        first: dict[tuple[str, str], int] = {}
        for rid, path, fid in found:
            first.setdefault((path, decode_text(fid)), rid)
        numbers = dict(zip(first, self._numbers(first.values())))
        payloads = self.row_payloads(numbers.values())
        return dict(zip(numbers, payloads))
