"""The approximate (HNSW) vector index of a PostgreSQL index, and when a query uses it.

A query's nearest rows are found by an exact scan of its scope (pg_search.py) until the scope
holds ``min_rows`` rows (``Settings.vector_index_min_rows``) *and* at least :data:`MIN_SHARE` of
the table's rows; from there on by pgvector's HNSW index over every row, filtered to the scope as
the index is walked (``hnsw.iterative_scan``), so the time of a search stops growing with the
rows in scope (benchmarks/bench_backends.py ``scale --ann`` measured where the exact scan stops
being the faster one; see the README).

**Recall, measured** on real embeddings (``scale --ann --vectors``: the bundled model's vectors
of a 100,000-fact benchmark home, 98,000 rows in the table, 100 held-out facts and 100 LoCoMo dev
questions as queries, recall@40 against the exact scan). Facts like the home's are found at
0.997-0.998 from ``ef_search`` 400 on, whatever the build. The hard case is a question about
nothing the home holds (every distance alike): with pgvector's default graph (m 16,
ef_construction 64) it stays at 0.93-0.95 even at ``ef_search`` 1000 (pgvector's maximum; asking
the walk for up to 1,000 rows, or ``hnsw.max_scan_tuples`` 50,000, found nothing more), and at
0.55-0.60 at the default 40 or our earlier 100. Built denser (:data:`_BUILD_GRAPH`), a scope of
60,000 rows (61% of the table) keeps 0.963 and the whole table 0.967 at ``ef_search`` 1000, in
a fraction of the exact scan's time (the benchmark's run with this build: 0.973, and 1.000 for
facts); the build takes longer than the default graph's (the benchmark prints both). A scope
filtered harder keeps less (default graph: 31% of the table 0.930, 8% 0.90: the walk meets more
rows of other scopes), hence the share rule: such a scope is scanned exactly. ``strict_order``
found nothing more than ``relaxed_order`` and cost more at p95; without an iterative scan a
filtered walk returns fewer than k rows.

**Which answers are approximate.** Only the vector candidates of a query whose scope holds at
least ``min_rows`` rows and :data:`MIN_SHARE` of the table, once the index is built and valid: such a query may miss some of the
truly nearest rows (recall measured in the benchmark). Everything else stays exact: every
candidate's cosine is still recomputed in float64 from its stored vector, the words, the
conversation context and the rest of the score parts are computed as before, and every scope
below ``min_rows`` (every test that holds PostgreSQL's answers equal to LanceDB's) is scanned
exactly.

**Building.** The index is built once the table holds ``min_rows`` rows, by the home's writer,
on a thread of its own and ``CONCURRENTLY`` (writes and searches go on meanwhile; until it is
valid, searches scan exactly). A build cut short (the writer stopped) leaves an invalid index,
dropped and built again by the next writer.
"""

from __future__ import annotations

import logging
import math
import threading
import time

from ..errors import SyncdError

__all__ = ["ANN_INDEX", "AnnIndex", "EF_SEARCH", "MIN_SHARE"]

log = logging.getLogger(__name__)

ANN_INDEX = "entries_vector_hnsw"
# Candidates pgvector keeps while walking the graph: its maximum, the only value that held
# recall@40 at 0.95 for the hard queries in the measurement (the module's docstring).
EF_SEARCH = 1000
# The least share of the table's rows a scope must hold to be walked through the index: 61% held
# recall@40 at 0.95 in that measurement, 31% did not (with the default graph).
MIN_SHARE = 0.6
# How long a writer or a reader trusts what it last saw of the index (built? valid?).
_RECHECK_S = 30.0
_BUILD_MEMORY = "256MB"
# A denser graph than pgvector's default (m 16, ef_construction 64): the hard queries' recall@40
# rose from 0.93 to 0.96-0.97 at ef_search 1000 (module's docstring), for 3x the build time.
_BUILD_GRAPH = "m = 24, ef_construction = 128"


class AnnIndex:
    """The HNSW index of one home's schema: whether queries may use it, and its build.
    ``connections``: the index's (pg_connections.Connections); ``sql``: its ``{s}`` formatter;
    ``min_share``: :data:`MIN_SHARE` (a benchmark sets 0 to walk every scope)."""

    def __init__(self, connections, sql, schema: str, where: str, min_rows: int | None, min_share: float = MIN_SHARE):
        self._db = connections
        self._sql = sql
        self.schema = schema
        self.where = where
        self.min_rows = min_rows
        self.min_share = min_share
        self._table_rows = 0.0
        self._valid = False
        self._checked = float("-inf")
        self._building: threading.Thread | None = None
        self._lock = threading.Lock()

    def usable(self, conn) -> int | None:
        """The fewest rows a scope must hold for its queries to use the index (``min_rows``, or
        ``min_share`` of the table's rows if more), None while the index is not built and valid.
        Checked on ``conn`` once every _RECHECK_S, the table's rows from the planner's estimate
        (kept by ANALYZE: the writer's optimize, autovacuum)."""
        if self.min_rows is None:
            return None
        if time.monotonic() - self._checked > _RECHECK_S:
            self._look(conn)
        return max(self.min_rows, math.ceil(self.min_share * self._table_rows)) if self._valid else None

    def _look(self, conn) -> str | None:
        """See whether the index is valid and how many rows the table holds now; its state."""
        state = self._state(conn)
        self._valid = state == "valid"
        self._table_rows = self._estimated_rows(conn) if self._valid else 0.0
        self._checked = time.monotonic()
        return state

    def _estimated_rows(self, conn) -> float:
        row = conn.execute(
            "SELECT greatest(reltuples, 0) FROM pg_class WHERE oid = to_regclass(%s)", (f'"{self.schema}".entries',)
        ).fetchone()
        return 0.0 if row is None else float(row[0])

    def _state(self, conn) -> str | None:
        row = conn.execute(
            "SELECT i.indisvalid FROM pg_index i WHERE i.indexrelid = to_regclass(%s)",
            (f'"{self.schema}".{ANN_INDEX}',),
        ).fetchone()
        return None if row is None else ("valid" if row[0] else "invalid")

    def due(self) -> bool:
        """Whether a writer's apply should look at the index now (after_write)."""
        return self.min_rows is not None and not self._valid and time.monotonic() - self._checked > _RECHECK_S

    def after_write(self, conn, force: bool = False) -> None:
        """After a writer's apply (``force``: after it refreshed the planner's statistics): start
        the build once the table is large enough (checked once every _RECHECK_S, from the
        planner's estimate of the table's rows)."""
        if not (self.due() or (force and self.min_rows is not None and not self._valid)):
            return
        with self._lock:
            if self._building is not None and self._building.is_alive():
                return
            if self._look(conn) == "valid":
                return
            if self.min_rows is None or self._estimated_rows(conn) < self.min_rows:
                return
            self._building = threading.Thread(target=self._build_quietly, name="syncd-hnsw-build", daemon=True)
            self._building.start()

    def _build_quietly(self) -> None:
        try:
            self.build()
        except SyncdError as exc:  # the exact scan goes on answering; the next check tries again
            log.warning("the vector index of %s could not be built: %s", self.where, exc)

    def build(self) -> None:
        """Build the HNSW index now (an invalid one left by a cut-short build is dropped first)."""
        started = time.monotonic()
        with self._db.get() as conn:
            if self._state(conn) == "invalid":
                conn.execute(self._sql(f"DROP INDEX CONCURRENTLY IF EXISTS {{s}}.{ANN_INDEX}"))
            # No statement timeout for a build that takes minutes; memory enough for the graph.
            conn.execute("SET statement_timeout = 0")
            conn.execute(f"SET maintenance_work_mem = '{_BUILD_MEMORY}'")
            try:
                conn.execute(
                    self._sql(
                        f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {ANN_INDEX} ON {{s}}.entries "
                        f"USING hnsw (vector vector_ip_ops) WITH ({_BUILD_GRAPH})"
                    )
                )
            finally:
                conn.execute("RESET statement_timeout")
                conn.execute("RESET maintenance_work_mem")
            self._look(conn)
        log.info("built the vector index of %s in %.1f s", self.where, time.monotonic() - started)

    def wait(self) -> None:
        """Wait for a build under way (tests, benchmarks)."""
        building = self._building
        if building is not None:
            building.join()
