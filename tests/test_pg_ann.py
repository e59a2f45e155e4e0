"""The HNSW index of a PostgreSQL index (syncd/index/pg_ann.py), on a real server: a scope below
``min_rows`` is scanned exactly even once the index exists (the equality law with LanceDB lives on
that path), and so is one holding less than MIN_SHARE of the table (a walk filtered that hard
loses recall); a scope of ``min_rows`` rows and that share takes its vector candidates from the
index, and no path ever returns a row out of the query's scope."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from syncd.index.pg_ann import ANN_INDEX, MIN_SHARE

# White-box: the planner's choice for the index's own query (_ANN_NEAREST) on its own session is the claim.
from syncd.index.pg_search import _ANN_NEAREST, scope_clause
from syncd.index.pg_store import PgIndex
from syncd.index.records import EntryRow, FileRecord, FileUpdate
from syncd.index.rowcache import ScopeMask
from syncd.index.search import hybrid_search

from .strategies import examples

DIM = 16
MIN_ROWS = 1000
# "big" holds more rows than MIN_ROWS and MIN_SHARE of the table (through the index); "middle"
# more than MIN_ROWS but less than that share, "small" fewer than MIN_ROWS (both always exact).
USERS = {"big": 3000, "middle": 1200, "small": 120}
NOW = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)


def _updates(rng: np.random.Generator) -> list[FileUpdate]:
    updates = []
    for user, n in USERS.items():
        path = f"memory/users/{user}/2026-11-28.md"
        rows = [
            EntryRow(
                id=f"{user}-{i}",
                kind="fact",
                source="daily_log",
                path=path,
                line=4 + i,
                text=f"fact {i} of {user}",
                user=user,
                category="context",
                importance=0.5,
                created_at="2026-11-28T10:00:00+00:00",
                heading="10:00",
            )
            for i in range(n)
        ]
        vectors = rng.standard_normal((n, DIM)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        updates.append(FileUpdate(path, FileRecord(path, "daily_log", f"{n:040x}", 1, 0), rows, vectors))
    return updates


@pytest.fixture(scope="module")
def indexes(pg_server):
    """The same rows read exactly (``exact``: no min_rows) and through the HNSW index
    (``ann``), its index built by the writer's optimize once the table is large enough."""
    url = pg_server.new_database()
    ann = PgIndex(url, "ann_law", DIM, "random", ann_min_rows=MIN_ROWS)
    exact = PgIndex(url, "ann_law", DIM, "random", read_only=True)
    try:
        ann.apply(_updates(np.random.default_rng(7)))
        with ann.reading() as rows:
            assert not _uses_index(rows, "big")  # no index yet: exact
        ann.optimize()
        ann.ann.wait()
        yield exact, ann
    finally:
        exact.close()
        ann.drop()
        ann.close()


def _walked(user: str) -> bool:
    """Whether the user's scope is one the index serves (pg_ann.AnnIndex.usable)."""
    held = USERS.get(user, 0)
    return held >= MIN_ROWS and held >= MIN_SHARE * sum(USERS.values())


def _uses_index(rows, user: str) -> bool:
    rows.search_rows(np.ones(DIM, dtype=np.float32) / np.sqrt(DIM), ScopeMask(user=user), 10)
    return rows.approximate


def _plan(index: PgIndex, sql: str, params: list) -> str:
    """The plan PostgreSQL makes for ``sql`` (its ``{s}``, the index's schema). White-box: on the
    index's own session, whose settings decide the plan."""
    with index.reading() as rows:
        found = rows._conn.execute(index._sql("EXPLAIN " + sql), params).fetchall()
    return "\n".join(r[0] for r in found)


def test_the_index_is_built_and_only_large_scopes_use_it(indexes):
    _, ann = indexes
    with ann.reading() as rows:
        assert _uses_index(rows, "big")
    with ann.reading() as rows:
        assert not _uses_index(rows, "small")
    with ann.reading() as rows:
        assert not _uses_index(rows, "middle")  # rows enough, but too small a share of the table
    assert [u for u in USERS if _walked(u)] == ["big"]  # the law below sees every path
    # The plans: the index serves the approximate statement; the exact one never touches it.
    where, params = scope_clause(ScopeMask(user="big"))
    q = np.ones(DIM, dtype=np.float32)
    assert ANN_INDEX in _plan(ann, _ANN_NEAREST.format(where=where), [q, *params, q, 10])
    exact_sql = f"SELECT e.rid FROM {{s}}.entries e WHERE {where} ORDER BY (e.vector <#> %s) + 0, e.rid LIMIT %s"
    assert ANN_INDEX not in _plan(ann, exact_sql, [*params, q, 10])


@settings(max_examples=examples(30), deadline=None, suppress_health_check=list(HealthCheck))
@given(seed=st.integers(0, 2**32 - 1), user=st.sampled_from([*USERS, "nobody"]), k=st.integers(1, 60))
def test_small_scopes_stay_exact_and_no_path_leaves_its_scope(indexes, seed, user, k):
    exact, ann = indexes
    query = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
    query /= np.linalg.norm(query)
    scope = ScopeMask(user=user)
    with exact.reading() as truth, ann.reading() as rows:
        want = [p["id"] for p in truth.row_payloads(truth.search_rows(query, scope, k))]
        got = [p["id"] for p in rows.row_payloads(rows.search_rows(query, scope, k))]
        assert all(fid.startswith(f"{user}-") for fid in got)
        if not _walked(user):
            assert got == want  # exact, the HNSW index notwithstanding
        else:
            # Approximate: as many rows, all in scope; at this size the walk finds nearly all.
            assert len(got) == len(want) and len(set(got) & set(want)) >= 0.8 * len(want)
    # Whole searches too (one statement picks the path inside the database): in scope always,
    # and a small scope's hits equal the exact ones, part for part.
    mine = hybrid_search(ann, query, "fact", user_id=user, limit=min(k, 10), now=NOW)
    assert all(h.id.startswith(f"{user}-") for h in mine)
    if not _walked(user):
        theirs = hybrid_search(exact, query, "fact", user_id=user, limit=min(k, 10), now=NOW)
        assert [(h.id, h.parts) for h in mine] == [(h.id, h.parts) for h in theirs]
