"""Issue 30 item 5: lines edited, inserted and deleted in a big daily log rewrite only the rows
they change, whether the engine has the rows in memory (a daemon) or not (a fresh process, a
one-shot ``syncd sync``, which compares with the table's rows of that file alone); the index
then equals a rebuild, and every line left alone keeps its id."""

from __future__ import annotations

import errno
import shutil
import string

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lancedb.table import LanceTable

import syncd
from syncd.errors import StorageError
from syncd.index import rows
from syncd.index.rowcache import ScopeMask

from .helpers import assert_matches_rebuild, write
from .strategies import examples

REL = "memory/users/ana/2026-05-01.md"
FACTS = 240
PER_SECTION = 20
TOPICS = "garden river piano kite chess yoga bread violin harbour lantern orchard tea".split()


def log_lines() -> list[str]:
    lines = ["# 2026-05-01", ""]
    for i in range(FACTS):
        if i % PER_SECTION == 0:
            lines += ["", f"## {9 + i // PER_SECTION:02d}:00 chat:c1 session:s{i // PER_SECTION}"]
        lines.append(f"- [note] Ana talked about the {TOPICS[i % len(TOPICS)]} (fact {i}).")
    return lines


class ChangedRows:
    """Counts the rows each apply writes (its updates' changed rows), through the engine's own
    hook for what follows the index."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, updates) -> None:
        self.count += sum(len(u.changed_rows) for u in updates if u.rows)

    def reset(self) -> None:
        pass


@pytest.fixture(scope="module")
def indexed(tmp_path_factory, embedder):
    """A home whose big log is indexed and committed, copied afresh for each example."""
    root = syncd.init(tmp_path_factory.mktemp("base") / "home").home
    write(root, REL, "\n".join(log_lines()) + "\n")
    with syncd.open(root, embedder=embedder) as engine:
        engine.sync()
        engine.commit()
    return root


_words = st.text(string.ascii_lowercase + " ", min_size=3, max_size=30).map(str.strip).filter(bool)
# (what, where among the lines, the new fact's words): a fact line rewritten in place, a fact
# inserted before a line, or a line deleted.
_ops = st.lists(
    st.tuples(st.sampled_from(["edit", "insert", "delete"]), st.integers(0, 10_000), _words), min_size=1, max_size=4
)


def apply_ops(lines: list[tuple[int | None, str]], ops) -> tuple[list[tuple[int | None, str]], int]:
    """``lines`` (origin, text) after ``ops``; origin is the line's index in the first text, None
    for a new line. Also the first position any op touched."""
    lines = list(lines)
    first = len(lines)
    for what, where, words in ops:
        facts = [n for n, (_, text) in enumerate(lines) if text.startswith("- [")]
        at = facts[where % len(facts)] if facts else len(lines)
        first = min(first, at)
        new = f"- [hobby] {words}"
        if what == "edit" and facts:
            lines[at] = (None, new)
        elif what == "insert":
            lines.insert(at, (None, new))
        elif facts:
            del lines[at]
    return lines, first


def ids_by_origin(engine, lines) -> dict[int, str]:
    """The id of each fact row, by the origin of the line it is on."""
    table = engine.index.all_rows().to_pylist()
    by_line = {row["line"]: row["id"] for row in table if row["kind"] == "fact" and row["path"] == REL}
    return {
        origin: by_line[n + 1]
        for n, (origin, text) in enumerate(lines)
        if origin is not None and text.startswith("- [") and n + 1 in by_line
    }


@settings(max_examples=examples(6), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(warm_ops=_ops, fresh_ops=_ops)
def test_law_line_edits_in_a_big_log_rewrite_only_their_rows(indexed, embedder, tmp_path_factory, warm_ops, fresh_ops):
    root = tmp_path_factory.mktemp("home") / "home"
    shutil.copytree(indexed, root, symlinks=True)
    rows.forget_last_reads()  # as in a new process: no earlier read of the log to re-read from
    start = [(n, text) for n, text in enumerate(log_lines())]
    with syncd.open(root, embedder=embedder) as engine:
        before = ids_by_origin(engine, start)
        assert len(before) == FACTS
    lines = start
    # Once with the rows in memory (a daemon that has searched), once with a fresh engine that
    # never loads them (what a one-shot `syncd sync` is).
    for ops, warm in ((warm_ops, True), (fresh_ops, False)):
        rows.forget_last_reads()
        lines, first = apply_ops(lines, ops)
        write(root, REL, "\n".join(text for _, text in lines) + "\n")
        with syncd.open(root, embedder=embedder) as engine:
            changed = ChangedRows()
            engine.follow_index(changed)
            if warm:
                engine.search("garden", user_id="ana", limit=1)
            engine.sync([REL])
            # An op rewrites its own row and its neighbours' (their context holds its words);
            # an insert or a delete also moves every line after it, and a row carries its line.
            moved = sum(1 for n, (_, text) in enumerate(lines) if n >= first and text.startswith("- ["))
            shifts = any(what != "edit" for what, _, _ in ops)
            assert changed.count <= 3 * len(ops) + (moved if shifts else 0), (ops, changed.count)
            assert changed.count < FACTS // 2 or shifts
            after = ids_by_origin(engine, lines)
            assert {o: before[o] for o in after} == after  # every line left alone keeps its id
            if not warm:
                assert_matches_rebuild(engine)


def test_a_fresh_engine_compares_with_the_table_and_leaves_memory_unloaded(indexed, embedder, tmp_path):
    """A one-line edit through a fresh engine writes that row alone and loads no other rows; the
    next search loads them, the edit among them."""
    root = tmp_path / "home"
    shutil.copytree(indexed, root, symlinks=True)
    rows.forget_last_reads()
    lines = log_lines()
    at = lines.index(f"- [note] Ana talked about the {TOPICS[105 % len(TOPICS)]} (fact 105).")
    lines[at] = "- [hobby] Ana started glassblowing lessons."
    write(root, REL, "\n".join(lines) + "\n")
    with syncd.open(root, embedder=embedder) as engine:
        changed = ChangedRows()
        engine.follow_index(changed)
        report = engine.sync([REL])
        # The edited row, and its two neighbours, whose context windows hold its words.
        assert changed.count == 3 and report.facts == FACTS
        assert not engine.index.rows_loaded  # nothing was loaded to compare or to write
        hits = engine.search("glassblowing lessons", user_id="ana", limit=1)
        assert hits and "glassblowing" in hits[0].content
        counts = engine.counts()
        with engine.index.reading() as loaded:  # the search loaded every row
            assert engine.index.rows_loaded and loaded.count(ScopeMask()) == counts["facts"] + counts["chunks"]
        assert_matches_rebuild(engine)


def test_a_failed_write_with_no_rows_in_memory_fails_the_sync_and_the_next_one_heals(
    indexed, embedder, tmp_path, monkeypatch
):
    """With no rows in memory the tables are written before the sync returns: a full disk fails
    that sync (nothing is acknowledged that is not written), and the next one redoes the file."""
    root = tmp_path / "home"
    shutil.copytree(indexed, root, symlinks=True)
    rows.forget_last_reads()
    lines = log_lines()
    lines[-1] = "- [hobby] Ana started fencing lessons."
    write(root, REL, "\n".join(lines) + "\n")
    real_add = LanceTable.add

    def full_disk(self, *args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    with syncd.open(root, embedder=embedder) as engine:
        monkeypatch.setattr(LanceTable, "add", full_disk)
        with pytest.raises(StorageError):
            engine.sync([REL])
        assert REL in engine.index.unwritten_paths
        monkeypatch.setattr(LanceTable, "add", real_add)
        engine.sync([REL])
        assert engine.index.unwritten_paths == frozenset()
        hits = engine.search("fencing lessons", user_id="ana", limit=1)
        assert hits and "fencing" in hits[0].content
        assert_matches_rebuild(engine)
