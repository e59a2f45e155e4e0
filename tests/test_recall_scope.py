"""Scope-local statistics: nothing in another user's memory moves a user's scores.

Runs the real in-memory rows (RowCache) and the real hybrid scoring over them; vectors are fixed
pseudo-random unit vectors per text, so the same text always has the same vector.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from contextlib import contextmanager

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from syncd.index.rowcache import RowCache
from syncd.index.search import hybrid_search

from .strategies import examples

DIM = 16
WORDS = ["tea", "green", "marathon", "nurse", "lyon", "cat", "miso", "peanuts", "spring", "coffee", "the"]
NOW = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)


def _vector(text: str) -> np.ndarray:
    seed = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")
    v = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
    return v / np.linalg.norm(v)


class _Rows:
    """What hybrid_search needs of an Index: a consistent view of the rows for one query."""

    def __init__(self) -> None:
        self.cache = RowCache(DIM)

    @contextmanager
    def reading(self, same_model: bool = False):
        yield self.cache  # one model's vectors: nothing to check

    def put(self, path: str, user: str | None, facts: list[str]) -> None:
        """Replace the rows of ``path``, as a sync of that file does."""
        self.cache.remove_paths([path])
        rows = [
            {
                "path": path,
                "id": f"f{n}",
                "user": user,
                "chat": None,
                "kind": "fact",
                "text": text,
                "line": n + 3,
                "source": "daily_log",
                "session": None,
                "category": "context",
                "tags": [],
                "importance": None,
                "created_at": "2026-11-22T10:00:00",
                "heading": "10:00",
                "provenance": "",
                "label": None,
            }
            for n, text in enumerate(facts)
        ]
        if rows:
            self.cache.add(np.stack([_vector(t) for t in facts]), rows, facts)


fact = st.lists(st.sampled_from(WORDS), min_size=1, max_size=5).map(" ".join)
facts = st.lists(fact, min_size=1, max_size=4)
other_users_change = st.one_of(
    st.tuples(st.just("put"), st.sampled_from(["a", "b", "c"]), facts),
    st.tuples(st.just("delete"), st.sampled_from(["a", "b", "c"]), st.just([])),
)


def _ana_view(rows: _Rows) -> list:
    view = []
    for query in ("green tea", "marathon in spring", "the cat miso", "coffee nurse lyon peanuts"):
        hits = hybrid_search(rows, _vector(query), query, user_id="ana", limit=1000, now=NOW)
        view.append([(h.path, h.id, h.score, h.parts) for h in hits])
    return view


# Found a score moved by one ulp in 3 of 6 hash seeds at 60; at 30 a run, each run with new
# examples (and --slow 300), the law still meets such a case within a few runs.
@settings(max_examples=examples(30), deadline=None)
@given(ana=facts, shared=facts, bo=facts, changes=st.lists(other_users_change, min_size=1, max_size=6))
def test_another_users_rows_never_change_a_score(ana, shared, bo, changes) -> None:
    rows = _Rows()
    rows.put("memory/users/ana/2026-11-22.md", "ana", ana)
    rows.put("vault/shared.md", None, shared)
    rows.put("memory/users/bo/2026-11-22.md", "bo", bo)
    before = _ana_view(rows)
    for op, name, texts in changes:
        path = f"memory/users/bo/2026-11-{20 + 'abc'.index(name)}.md"
        rows.put(path, "bo", texts if op == "put" else [])
        assert _ana_view(rows) == before
