"""The in-memory rows: int8 first pass with exact rerank, scopes, and compaction equal to a fresh load."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from syncd.index.rowcache import RowCache, ScopeMask

DIM = 384


def _clustered(rng: np.random.Generator, n: int, clusters: int = 40, spread: float = 0.35) -> np.ndarray:
    """Unit vectors bunched around a few centres, as sentence embeddings are, so that many rows
    score close to one another and quantisation has near ties to get wrong."""
    centres = rng.standard_normal((clusters, DIM)).astype(np.float32)
    rows = centres[rng.integers(0, clusters, n)] + spread * rng.standard_normal((n, DIM)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def _rows(n: int, start: int = 0, per_file: int = 10) -> list[dict]:
    return [
        {
            "path": f"memory/users/u{i % 7}/f{i // per_file}.md",
            "id": f"r{i}",
            "user": f"u{i % 7}",
            "chat": f"c{i % 3}" if i % 2 else None,
            "kind": "fact" if i % 5 else "chunk",
            "text": f"row {i}",
        }
        for i in range(start, start + n)
    ]


def _texts(rows: list[dict]) -> list[str]:
    return [f"note {r['id']} tea" if int(r["id"][1:]) % 4 == 0 else f"note {r['id']}" for r in rows]


def _matrix(vectors: np.ndarray, rows: list[dict]) -> RowCache:
    matrix = RowCache(DIM)
    matrix.add(vectors, rows, _texts(rows))
    return matrix


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_int8_first_pass_returns_the_exact_top_k(seed: int) -> None:
    rng = np.random.default_rng(seed)
    vectors = _clustered(rng, 12_000)
    rows = _rows(12_000)
    matrix = _matrix(vectors, rows)
    scopes = [ScopeMask(), ScopeMask(kind="fact"), ScopeMask(user="u3"), ScopeMask(user="u3", chat="c1", kind="chunk")]
    for q in range(25):
        query = vectors[rng.integers(0, len(vectors))] + 0.2 * rng.standard_normal(DIM).astype(np.float32)
        query /= np.linalg.norm(query)
        scope = scopes[q % len(scopes)]
        allowed = np.array([_visible(r, scope) for r in rows])
        exact = np.where(allowed, vectors @ query, -np.inf)
        for k in (10, 40):
            truth = np.argsort(-exact)[:k]
            ours = matrix.search(query, scope, k)
            assert [i for _, i, _ in ours] == [rows[t]["id"] for t in truth]
            assert np.allclose([s for _, _, s in ours], exact[truth], atol=1e-5)


def _visible(row: dict, scope: ScopeMask) -> bool:
    if scope.user is not None and row["user"] not in (None, scope.user):
        return False
    if scope.chat is not None and row["chat"] not in (None, scope.chat):
        return False
    return scope.kind is None or row["kind"] == scope.kind


def test_a_zero_vector_and_a_tiny_index_are_searched_exactly() -> None:
    vectors = np.zeros((3, DIM), dtype=np.float32)
    vectors[1, 0] = 1.0
    vectors[2, 1] = 1.0
    matrix = _matrix(vectors, _rows(3))
    query = np.zeros(DIM, dtype=np.float32)
    query[0] = 1.0
    hits = matrix.search(query, ScopeMask(), 5)
    assert hits[0][1:] == ("r1", 1.0)
    assert {i for _, i, _ in hits[1:]} == {"r0", "r2"} and all(s == 0.0 for *_, s in hits[1:])


def test_removed_rows_vanish_and_compaction_equals_a_fresh_load() -> None:
    rng = np.random.default_rng(7)
    vectors = _clustered(rng, 3_000)
    rows = _rows(3_000)
    matrix = _matrix(vectors, rows)
    gone = {f"memory/users/u{i % 7}/f{i // 10}.md" for i in range(0, 2_400, 2)}
    matrix.remove_paths(gone)
    extra_vectors, extra_rows = _clustered(rng, 50), _rows(50, start=3_000)
    matrix.add(extra_vectors, extra_rows, _texts(extra_rows))
    live = len(matrix)  # flushes the addition, which compacts: most rows are dead
    assert matrix._dead == 0 and len(matrix._paths) == live  # white-box: compaction is the claim

    keep = [i for i, r in enumerate(rows) if r["path"] not in gone]
    fresh = _matrix(np.concatenate([vectors[keep], extra_vectors]), [rows[i] for i in keep] + extra_rows)
    assert len(fresh) == len(matrix)
    for _ in range(10):
        query = vectors[rng.integers(0, len(vectors))]
        for scope in (ScopeMask(), ScopeMask(user="u2", kind="fact")):
            ours, theirs = matrix.search(query, scope, 20), fresh.search(query, scope, 20)
            assert [(p, i) for p, i, _ in ours] == [(p, i) for p, i, _ in theirs]
            assert np.allclose([s for *_, s in ours], [s for *_, s in theirs], atol=1e-6)
            assert matrix.text_search("tea note", scope, 50) == fresh.text_search("tea note", scope, 50)
    keys = [(r["path"], r["id"]) for r in rows[:200]]
    assert matrix.payloads(keys) == fresh.payloads(keys)
    assert all(r["path"] not in gone for r in matrix.payloads(keys).values())


def test_search_texts_must_match_rows() -> None:
    with pytest.raises(ValueError, match="search texts"):
        RowCache(DIM).add(np.zeros((2, DIM), dtype=np.float32), _rows(2), ["only one"])


def test_rows_added_in_small_writes_equal_one_load_and_earlier_views_never_change() -> None:
    """Small writes go into room kept past the end of the arrays (no copy of the whole matrix):
    the result equals one load of the same rows, and a view a reader took before a write still
    shows exactly what it showed."""
    rng = np.random.default_rng(7)
    vectors = _clustered(rng, 9_000)
    rows = _rows(9_000)
    grown = _matrix(vectors[:5_000], rows[:5_000])
    grown.search(vectors[0], ScopeMask(), 5)
    views = []
    for start in range(5_000, 9_000, 37):  # some writes fit the room, some make new room
        end = min(start + 37, 9_000)
        # White-box: the arrays a query holds must never change under it, nor differ from a load's.
        views.append((grown._vectors, grown._vectors.copy(), grown._codes8, grown._codes8.copy()))
        grown.add(vectors[start:end], rows[start:end], _texts(rows[start:end]))
        grown.search(vectors[start], ScopeMask(), 5)
    for view, vectors_then, codes, codes_then in views[::10]:
        assert np.array_equal(view, vectors_then) and np.array_equal(codes, codes_then)
    loaded = _matrix(vectors, rows)
    assert len(loaded) == len(grown) == 9_000  # both flushed
    assert np.array_equal(grown._vectors, loaded._vectors)
    assert np.array_equal(grown._codes8, loaded._codes8)
    assert np.array_equal(grown._scales, loaded._scales)
    for q in range(20):
        query = vectors[q * 400]
        for scope in (ScopeMask(), ScopeMask(user="u3")):
            assert grown.search(query, scope, 10) == loaded.search(query, scope, 10)


_SCOPES = (
    ScopeMask(),
    ScopeMask(user="u0"),
    ScopeMask(user="u1", chat="c1"),
    ScopeMask(user="u2", kind="fact"),
    ScopeMask(kind="chunk", memory_only=True),
    ScopeMask(user="u9"),  # a user who may never have a row, or get one later
)
_write = st.tuples(
    st.sampled_from(["add", "add", "remove_path", "remove_rows", "search"]),
    st.integers(0, 5),  # which file
    st.integers(1, 4),  # how many rows (add) / which rows (remove_rows)
    st.sampled_from(["u0", "u1", "u2", "u9", None]),
    st.sampled_from(["c1", "c2", None]),
    st.integers(0, len(_SCOPES) - 1),
)


def _law_rows(path: str, count: int, user: str | None, chat: str | None, serial: int) -> list[dict]:
    return [
        {
            "path": path,
            "id": f"r{serial}-{n}",
            "user": user,
            "chat": chat,
            "kind": "fact" if (serial + n) % 3 else "chunk",
            "heading": "10:00",
            "line": n + 1,
            "text": f"row {serial} {n}",
            "created_at": f"2026-01-{1 + (serial + n) % 28:02d}",
        }
        for n in range(count)
    ]


@settings(max_examples=60, deadline=None)
@given(st.lists(_write, min_size=1, max_size=30))
def test_law_rows_written_one_by_one_equal_a_fresh_load(ops) -> None:
    """Incremental equals rebuild: rows added, replaced and removed a few at a time, with searches
    in between (which make the scope masks that later writes extend), answer every scope as a
    fresh load of the rows left does: counts, nearest rows, full text, conversation links."""
    rng = np.random.default_rng(3)
    grown = RowCache(DIM)
    held: dict[tuple[str, str], tuple[dict, np.ndarray, str]] = {}
    for serial, (op, file, count, user, chat, scope) in enumerate(ops):
        path = f"memory/users/{user or 'shared'}/f{file}.md" if op == "add" else None
        if op == "add":
            assert path is not None
            grown.remove_paths([path])
            held = {key: value for key, value in held.items() if key[0] != path}
            rows = _law_rows(path, count, user, chat, serial)
            vectors = _clustered(rng, len(rows))
            texts = [f"{r['text']} tea" if n % 2 else r["text"] for n, r in enumerate(rows)]
            grown.add(vectors, rows, texts)
            held.update({(r["path"], r["id"]): (r, v, t) for r, v, t in zip(rows, vectors, texts)})
        elif op in ("remove_path", "remove_rows"):
            paths = sorted({key[0] for key in held})
            if not paths:
                continue
            target = paths[file % len(paths)]
            ids = [key[1] for key in held if key[0] == target]
            gone = ids if op == "remove_path" else ids[count % len(ids) :: 2]
            grown.remove_rows(target, gone)
            for row_id in gone:
                del held[(target, row_id)]
        else:
            grown.search(rng.standard_normal(DIM).astype(np.float32), _SCOPES[scope], 3)
            grown.text_search("tea", _SCOPES[scope], 3)
    fresh = RowCache(DIM)
    if held:
        rows, vectors, texts = zip(*held.values())
        fresh.add(np.stack(vectors), list(rows), list(texts))
    query = rng.standard_normal(DIM).astype(np.float32)
    for scope in _SCOPES:
        assert grown.count(scope) == fresh.count(scope)
        assert grown.search(query, scope, 5) == fresh.search(query, scope, 5)
        assert grown.text_search("tea row", scope, 10) == fresh.text_search("tea row", scope, 10)
        keys = list(held)
        # White-box: neighbours by row number, named through the caches' own key and row maps.
        for cache in (grown, fresh):
            cache._flush()
        ours = grown.around(np.array([grown._row_of_key[k] for k in keys], dtype=np.int64), scope, 2)[0]
        theirs = fresh.around(np.array([fresh._row_of_key[k] for k in keys], dtype=np.int64), scope, 2)[0]
        named = [[(grown._paths[r], grown._ids[r]) if r >= 0 else None for r in line] for line in ours.tolist()]
        assert named == [
            [(fresh._paths[r], fresh._ids[r]) if r >= 0 else None for r in line] for line in theirs.tolist()
        ]
