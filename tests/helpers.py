"""Helpers for tests: compare an index with a rebuild of the same tree, run threads, wait on a condition."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable
from pathlib import Path

import lancedb
import numpy as np

import syncd
from syncd.index.records import FileRecord
from syncd.index.rowcache import ScopeMask

PROBE_TEXTS = ["tea", "green tea morning", "marathon spring nurse Lyon", "notes cat peanuts"]


def write(root: Path, rel: str, text: str | bytes) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, str):
        path.write_bytes(text.encode("utf-8"))
    else:
        path.write_bytes(text)
    return path


def lance_table(index, name: str) -> lancedb.table.Table:
    """An index's LanceDB table ("files" or "entries") through a connection of its own, as
    another process would open it."""
    return lancedb.connect(str(index.folder / "lance")).open_table(name)


def table_files(index) -> dict[str, FileRecord]:
    """The files table as LanceDB holds it, read through a connection of its own (not the copy
    the index keeps in memory and answers ``files()`` from)."""
    rows = lance_table(index, "files").to_arrow().to_pylist()
    assert len({row["path"] for row in rows}) == len(rows), "a path recorded twice"
    return {row["path"]: FileRecord(**row) for row in rows}


def snapshot(engine) -> tuple[list, list, np.ndarray]:
    """(files, entries without vectors, vectors), all sorted, for exact comparison. The files
    the index answers from memory are checked against its table on the way, once the writes it
    left pending are written (Index.apply)."""
    engine.index.persist()
    held, table_held = engine.index.files(), table_files(engine.index)
    assert held.keys() == table_held.keys()
    for path, record in held.items():
        # A restat made with no table open is in the files mirror alone (store.py's apply): the
        # same bytes, kind and error under a newer stat; anything else is the table's exactly.
        kept = table_held[path]
        assert dataclasses.replace(record, size=kept.size, mtime_ns=kept.mtime_ns) == kept, (record, kept)
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


def search_view(engine) -> list:
    """Every row's full-text and vector score for a few probes, from the in-memory rows that
    queries run on (sorted by key, so ties in rank cannot differ)."""
    probe = np.random.default_rng(0).standard_normal(engine.index.dim).astype(np.float32)
    probe /= np.linalg.norm(probe)
    view = []
    with engine.index.reading() as rows:
        for text in PROBE_TEXTS:
            view.append(sorted(rows.text_search(text, ScopeMask(), 1_000_000)))
        view.append(sorted((p, i, round(s, 5)) for p, i, s in rows.search(probe, ScopeMask(), 1_000_000)))
        # Each fact's conversation neighbours (context windows are derived from them too).
        every = rows.search_rows(probe, ScopeMask(), 1_000_000)
        near, _ = rows.around(every, ScopeMask(), 2)
        key = {int(r): (p["path"], p["id"]) for r, p in zip(every, rows.row_payloads(every))}
        view.append(sorted((key[int(r)], [key.get(int(n)) for n in ns]) for r, ns in zip(every, near)))
    return view


def assert_matches_rebuild(engine) -> None:
    """The incremental index equals a from-scratch rebuild of the same tree: the tables, and the
    in-memory rows searches run on (patched by every write) equal a fresh load of them."""
    before, view = snapshot(engine), search_view(engine)
    with syncd.open(engine.home.root, read_only=True, embedder=engine.embedder.embedder) as reader:
        assert search_view(reader) == view
    engine.reindex()
    assert_same_index(before, snapshot(engine))
    assert search_view(engine) == view


def run_concurrently(work: Callable[[int], object], count: int) -> None:
    """Call ``work(0)`` .. ``work(count - 1)`` on as many threads at once; re-raise the first error
    any of them hit, so a failure in a thread fails the test instead of vanishing with it."""
    errors: list[BaseException] = []

    def guarded(n: int) -> None:
        try:
            work(n)
        except BaseException as exc:  # noqa: BLE001 - re-raised below
            errors.append(exc)

    threads = [threading.Thread(target=guarded, args=(n,)) for n in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]


def poll(predicate: Callable[[], object], timeout: float, every: float = 0.05) -> object:
    """Call ``predicate`` until it returns something truthy, and return that; after ``timeout``
    seconds return its last (falsy) answer. The one polling loop of the tests: a test waits on a
    condition through this (or :func:`wait_for`), never with a loop and a sleep of its own."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(every)


def wait_for(
    predicate: Callable[[], object],
    timeout: float = 60.0,
    what: str | Callable[[], str] = "condition",
    every: float = 0.05,
) -> object:
    """Poll ``predicate`` until it is truthy and return its value; fail saying ``what`` never
    happened after ``timeout`` seconds (a callable ``what`` is asked then, so it can describe the
    state the wait gave up on)."""
    value = poll(predicate, timeout, every)
    if not value:
        told = what() if callable(what) else what
        raise AssertionError(f"timed out after {timeout:g} s waiting for {told}")
    return value
