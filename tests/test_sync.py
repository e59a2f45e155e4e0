"""Sync: the index is a pure function of the tree, whatever sequence of edits got it there."""

from __future__ import annotations

import os
import shutil

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lancedb.table import LanceTable

import syncd
from syncd.errors import HomeError
from syncd.index.records import FileRecord
from syncd.sync.plan import plan_sync
from syncd.sync.scan import DiskFile

from .daemon_helpers import new_home
from .helpers import assert_matches_rebuild, assert_same_index, lance_table, snapshot, write
from .strategies import examples

FACTS = [
    "Likes green tea in the morning.",
    "Works as a nurse in Lyon.",
    "Is allergic to peanuts.",
    "Wants to run a half marathon in spring.",
    "Prefers short answers.",
    "Has a cat called Miso.",
]
PATHS = [
    "memory/users/ana/2026-11-21.md",
    "memory/users/ana/2026-11-22.md",
    "memory/users/bob/2026-11-22.md",
    "memory/users/ana/MEMORY.md",
    "memory/core/persona.md",
    "vault/Tea.md",
    "vault/drinks/Coffee.md",
    "vault/Green tea.MD",  # a page too (Obsidian, lint and the index agree)
]


def daily_log(facts: list[str], chat: str = "c1") -> str:
    lines = ["# 2026-11-22", "", f"## 09:30 chat:{chat} session:s1"]
    lines += [f"- [preference] {fact}" for fact in facts]
    lines += ["", "Some prose about the day."]
    return "\n".join(lines) + "\n"


def page(facts: list[str]) -> str:
    return "---\ntitle: Notes\n---\n# Notes\n\n" + "\n\n".join(f"## {f[:12]}\n{f}" for f in facts) + "\n"


def content_for(path: str, facts: list[str]) -> str:
    return daily_log(facts) if path.endswith(tuple(f"{d}.md" for d in ("21", "22"))) else page(facts)


operation = st.one_of(
    st.tuples(st.just("create"), st.sampled_from(PATHS), st.lists(st.sampled_from(FACTS), max_size=4)),
    st.tuples(st.just("edit"), st.sampled_from(PATHS), st.sampled_from(FACTS)),
    st.tuples(st.just("append"), st.sampled_from(PATHS), st.sampled_from(FACTS)),
    st.tuples(st.just("rename"), st.sampled_from(PATHS), st.sampled_from(PATHS)),
    st.tuples(st.just("move_folder"), st.sampled_from(["memory/users/ana", "vault/drinks"]), st.just("")),
    st.tuples(st.just("delete"), st.sampled_from(PATHS), st.just("")),
    st.tuples(st.just("binary"), st.sampled_from(PATHS), st.just("")),
    st.tuples(st.just("restore"), st.sampled_from(PATHS), st.sampled_from(FACTS)),
    # Edits next to other facts: each changes its neighbours' context windows too.
    st.tuples(st.just("insert"), st.sampled_from(PATHS), st.sampled_from(FACTS)),
    st.tuples(st.just("remove"), st.sampled_from(PATHS), st.just("")),
    st.tuples(st.just("section"), st.sampled_from(PATHS), st.sampled_from(FACTS)),
)


def _apply(root, op) -> None:
    kind, rel, arg = op
    path = root / rel
    if kind in ("create", "restore"):
        write(root, rel, content_for(rel, arg if isinstance(arg, list) else [arg]))
    elif kind == "edit" and path.is_file():
        lines = path.read_bytes().split(b"\n")
        target = next((i for i, line in enumerate(lines) if line.startswith(b"- [")), len(lines) - 1)
        lines[target] = f"- [goal] {arg}".encode()
        path.write_bytes(b"\n".join(lines))
    elif kind in ("insert", "remove", "section") and path.is_file():
        lines = path.read_bytes().split(b"\n")
        facts = [i for i, line in enumerate(lines) if line.startswith(b"- [")]
        at = facts[len(facts) // 2] if facts else len(lines) - 1
        if kind == "insert":
            lines.insert(at, f"- [context] {arg}".encode())
        elif kind == "remove" and facts:
            del lines[at]
        elif kind == "section":
            # A new section heading in the middle of one: a conversation splits in two.
            lines[at:at] = [b"", b"## 18:00 chat:c1 session:s2", f"- [context] {arg}".encode()]
        path.write_bytes(b"\n".join(lines))
    elif kind == "append" and path.is_file():
        with open(path, "ab") as handle:
            handle.write(f"- [context] {arg}\n".encode())
    elif kind == "rename" and path.is_file() and rel != arg:
        (root / arg).parent.mkdir(parents=True, exist_ok=True)
        os.replace(path, root / arg)
    elif kind == "move_folder" and path.is_dir():
        target = root / (rel + "-moved")
        if target.exists():
            shutil.rmtree(target)
        os.replace(path, target)
    elif kind == "delete" and path.is_file():
        path.unlink()
    elif kind == "binary" and path.exists():
        path.write_bytes(b"# broken\n\xff\xfe\x00 not utf-8 \xc3\x28\n")


# A real engine per example, up to 7 operations of 8 kinds each (12 before; --slow runs 60).
@settings(max_examples=examples(6))
@given(ops=st.lists(operation, min_size=1, max_size=7))
def test_incremental_sync_equals_rebuild(tmp_path_factory, embedder, ops):
    root = new_home(tmp_path_factory.mktemp("home"), embedder)
    with syncd.open(root, embedder=embedder) as engine:
        engine.sync()
        for op in ops:
            _apply(root, op)
            engine.sync()
        assert_matches_rebuild(engine)
        assert engine.status().fresh


def test_rebuild_twice_gives_the_same_index(engine, home):
    for i, rel in enumerate(PATHS):
        write(home, rel, content_for(rel, FACTS[i % 3 : i % 3 + 3]))
    engine.reindex()
    first = snapshot(engine)
    engine.reindex()
    assert_same_index(first, snapshot(engine))


def test_unchanged_tree_syncs_with_zero_embedding_calls(engine, home):
    for rel in PATHS:
        write(home, rel, content_for(rel, FACTS))
    engine.sync()
    calls = engine.embedder.calls
    report = engine.sync()
    assert engine.embedder.calls == calls
    assert report.embedded_texts == 0 and report.facts == 0


# Big enough that each step of the sync works in several pieces: the model's batches (64 texts),
# the embedding cache's slices (256) and its lookups (900 keys a query), so a re-sync that
# re-embedded, lost a cached vector or misplaced a line at a piece's edge shows here. 10,000
# facts (4 minutes in CI) proved nothing 1,200 do not; test_scale edits a log in place at 300.
BIG_LOG_FACTS = 1_200


def test_editing_one_line_of_a_big_log_embeds_exactly_the_changed_text(engine, home):
    facts = [f"Fact number {i} about topic {i % 97} and detail {i * 7919 % 10007}." for i in range(BIG_LOG_FACTS)]
    rel = "memory/users/ana/2026-11-22.md"
    write(home, rel, daily_log(facts))
    engine.sync()
    assert engine.index.counts()["facts"] == BIG_LOG_FACTS
    lines = (home / rel).read_text().split("\n")
    middle = BIG_LOG_FACTS // 2
    lines[3 + middle] = "- [preference] Now prefers oolong over green tea."
    (home / rel).write_text("\n".join(lines))
    before = engine.embedder.embedded_texts
    report = engine.sync()
    assert engine.embedder.embedded_texts - before == 1
    assert report.embedded_texts == 1
    hits = engine.search("oolong tea", user_id="ana", limit=3)
    assert hits[0].content == "Now prefers oolong over green tea."
    assert hits[0].line == middle + 4  # 1-based, after the title, a blank line and the heading


def test_invalid_utf8_is_recorded_and_other_rows_survive(engine, home):
    write(home, "memory/users/ana/2026-11-22.md", daily_log(FACTS[:2]))
    write(home, "vault/Tea.md", page(FACTS[2:4]))
    engine.sync()
    write(home, "vault/Tea.md", b"\xff\xfe broken")
    report = engine.sync()
    assert "vault/Tea.md" in report.errors and "UTF-8" in report.errors["vault/Tea.md"]
    status = engine.status()
    assert status.errors.keys() == {"vault/Tea.md"}
    assert status.fresh and not status.healthy
    paths = {h.path for h in engine.search("tea", limit=50)}
    assert "memory/users/ana/2026-11-22.md" in paths
    # What can be read of it is still found (the bad bytes read as U+FFFD); the file is untouched.
    assert [h.content for h in engine.search("broken", limit=50) if h.path == "vault/Tea.md"] == ["\ufffd\ufffd broken"]
    assert (home / "vault/Tea.md").read_bytes() == b"\xff\xfe broken"


def test_oversized_file_is_recorded_as_an_error(home, embedder):
    settings_small = syncd.Settings(max_file_bytes=2048)
    write(home, "vault/big.md", "word " * 1000)
    write(home, "vault/small.md", "# Small\n\nA small page.\n")
    with syncd.open(home, settings=settings_small, embedder=embedder) as engine:
        report = engine.sync()
        assert "max_file_bytes" in report.errors["vault/big.md"]
        assert engine.index.counts()["chunks"] >= 1


def test_unreadable_home_aborts_without_touching_the_index(engine, home):
    write(home, "vault/Tea.md", page(FACTS[:2]))
    engine.sync()
    before = snapshot(engine)
    moved = home.parent / "elsewhere"
    os.replace(home, moved)
    try:
        with pytest.raises(HomeError):
            engine.sync()
    finally:
        os.replace(moved, home)
    assert_same_index(before, snapshot(engine))


def test_status_names_exactly_the_stale_files(engine, home):
    write(home, "vault/Tea.md", page(FACTS[:2]))
    write(home, "vault/Old.md", page(FACTS[2:3]))
    engine.sync()
    write(home, "vault/Tea.md", page(FACTS[:3]))
    write(home, "vault/New.md", page(FACTS[3:4]))
    (home / "vault/Old.md").unlink()
    status = engine.status()
    assert status.stale == {
        "new": ["vault/New.md"],
        "changed": ["vault/Tea.md"],
        "moved": [],
        "deleted": ["vault/Old.md"],
    }
    assert not status.fresh
    engine.sync()
    assert engine.status().fresh


def _rec(path, sha, size=10, mtime=1):
    return FileRecord(path, "note", sha, size, mtime)


def test_plan_detects_moves_by_content_hash():
    index = {"a.md": _rec("a.md", "s1"), "b.md": _rec("b.md", "s2"), "c.md": _rec("c.md", "s3")}
    disk = {
        "a2.md": DiskFile("a2.md", 10, 5, sha="s1"),  # a.md moved
        "b.md": DiskFile("b.md", 11, 5, sha="s2b"),  # edited
        "c.md": DiskFile("c.md", 10, 1),  # stat unchanged: not even hashed
        "d.md": DiskFile("d.md", 10, 5, sha="s4"),
    }
    plan = plan_sync(disk, index)
    assert plan.moved == (("a.md", "a2.md"),)
    assert plan.changed == ("b.md",) and plan.new == ("d.md",) and plan.deleted == ()
    assert plan.unchanged == 1


def test_plan_keeps_files_in_unreadable_folders():
    index = {"vault/x/a.md": _rec("vault/x/a.md", "s1"), "vault/b.md": _rec("vault/b.md", "s2")}
    plan = plan_sync({}, index, unreadable_dirs=["vault/x"])
    assert plan.deleted == ("vault/b.md",)


def test_touch_only_updates_the_stat(engine, home):
    path = write(home, "vault/Tea.md", page(FACTS[:2]))
    engine.sync()
    os.utime(path, ns=(10**18, 10**18))
    calls = engine.embedder.calls
    report = engine.sync()
    assert "vault/Tea.md" in report.plan.touched and engine.embedder.calls == calls
    assert report.facts == report.chunks == 0


def test_an_index_from_before_in_memory_full_text_loses_its_lancedb_fts_index(home, embedder):
    from lancedb.index import FTS

    write(home, PATHS[0], daily_log(FACTS[:3]))
    with syncd.open(home, embedder=embedder) as engine:
        engine.sync()
        lance_table(engine.index, "entries").create_index("search_text", config=FTS(), name="search_text_idx")
    with syncd.open(home, embedder=embedder) as engine:
        engine.index.optimize()
        names = {ix.name for ix in lance_table(engine.index, "entries").list_indices()}
        assert "search_text_idx" not in names and "id_idx" in names
        assert engine.search("green tea")[0].content == FACTS[0]


def test_a_write_interrupted_halfway_leaves_no_stale_rows_in_memory(engine, home, monkeypatch):
    write(home, PATHS[0], daily_log(FACTS[:2]))
    engine.sync()
    assert engine.search("green tea")[0].content == FACTS[0]
    real_add = LanceTable.add

    def add_then_interrupt(table, *args, **kwargs):
        real_add(table, *args, **kwargs)  # the rows reach LanceDB; the in-memory copy never hears of them
        if table.name == "entries":
            raise KeyboardInterrupt

    monkeypatch.setattr(LanceTable, "add", add_then_interrupt)
    write(home, PATHS[1], daily_log(["Collects vintage fountain pens."]))
    with pytest.raises(KeyboardInterrupt):
        engine.sync()
    monkeypatch.undo()
    assert engine.search("fountain pens")[0].content == "Collects vintage fountain pens."
    engine.sync()
    assert_matches_rebuild(engine)
