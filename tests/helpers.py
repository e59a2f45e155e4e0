"""Helpers for tests that compare an index with a rebuild of the same tree."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def write(root: Path, rel: str, text: str | bytes) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, str):
        path.write_bytes(text.encode("utf-8"))
    else:
        path.write_bytes(text)
    return path


def snapshot(engine) -> tuple[list, list, np.ndarray]:
    """(files, entries without vectors, vectors), all sorted, for exact comparison."""
    files = sorted((r.path, r.kind, r.sha, r.size, r.error) for r in engine.index.files().values())
    table = engine.index.all_rows(with_vectors=True).to_pylist()
    table.sort(key=lambda r: (r["path"], r["kind"], r["id"], r["line"]))
    vectors = np.array([r.pop("vector") for r in table], dtype=np.float32).reshape(len(table), -1)
    return files, table, vectors


def assert_same_index(a, b) -> None:
    files_a, rows_a, vec_a = a
    files_b, rows_b, vec_b = b
    assert files_a == files_b
    assert [r["id"] for r in rows_a] == [r["id"] for r in rows_b]
    assert rows_a == rows_b
    assert vec_a.shape == vec_b.shape
    assert np.array_equal(vec_a, vec_b)


def assert_matches_rebuild(engine) -> None:
    """The incremental index equals a from-scratch rebuild of the same tree."""
    before = snapshot(engine)
    engine.reindex()
    assert_same_index(before, snapshot(engine))
