"""Index writes behind: applied in memory at once, written to LanceDB later in folded batches.

What the tables end up holding must be what writing each change directly would have made (a
rebuild of the same tree), whatever the changes and wherever the batches fall; a process that
dies with writes pending leaves files that the next sync sees as stale and redoes; a batch that
fails to reach LanceDB is remembered as unwritten and healed by the next sync. Real LanceDB, real
files, the real model, a real child process for the crash.
"""

from __future__ import annotations

import errno
import subprocess
import sys
import textwrap

from hypothesis import given, settings
from hypothesis import strategies as st
from lancedb.table import LanceTable

import syncd

from .helpers import assert_matches_rebuild, table_files, wait_for, write
from .strategies import examples

LOGS = ["memory/users/ana/2026-11-22.md", "memory/users/bob/2026-11-23.md"]
PAGE = "vault/Tea.md"
WORDS = ["green tea", "oolong", "marathon", "Lyon", "cello", "peanuts", "the nurse", "spring"]


def log_text(facts: list[str], sections: int) -> str:
    """A log of ``facts`` spread over ``sections`` same-minute sections (neighbours change when
    one is appended: the partial writes the fold must get right)."""
    out = "# 2026-11-22\n"
    for n, fact in enumerate(facts):
        if n % max(1, len(facts) // max(sections, 1) or 1) == 0:
            out += "\n## 09:30 chat:c1\n"
        out += f"- [preference] {fact}\n"
    return out


operation = st.tuples(
    st.sampled_from([*LOGS, PAGE]),
    st.sampled_from(["write", "append", "edit", "delete"]),
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=5),
    st.integers(1, 3),
    st.booleans(),  # write the pending batch to LanceDB right after
)


# A real engine per example, each up to 8 operations with a write to LanceDB or not after each:
# 6 examples put the batches' edges in ~30 places a run (15 before; --slow runs 60).
@given(st.lists(operation, min_size=1, max_size=8))
@settings(max_examples=examples(6))
def test_law_writes_behind_equal_a_rebuild_wherever_the_batches_fall(tmp_path_factory, embedder, ops):
    root = syncd.init(tmp_path_factory.mktemp("home") / "h").home
    with syncd.open(root, embedder=embedder) as engine:
        engine.sync()  # the seed's own files
        for rel, kind, words, sections, persist in ops:
            path = root / rel
            if kind == "delete":
                path.unlink(missing_ok=True)
            elif rel == PAGE:
                body = "\n\n".join(f"## {w.title()}\n\n{w} is nice." for w in words)
                write(root, rel, f"# Tea\n\n{body}\n" if kind != "append" or not path.exists()
                      else path.read_text() + f"\nAlso {words[0]}.\n")  # fmt: skip
            elif kind == "append" and path.exists():
                write(root, rel, path.read_text() + "".join(f"- [preference] {w} again\n" for w in words))
            elif kind == "edit" and path.exists():
                text = path.read_text()
                write(root, rel, text.replace("- [preference] ", f"- [preference] {words[0]}: ", 1))
            else:
                write(root, rel, log_text(words, sections))
            engine.index_paths(lambda rel=rel: [rel])  # the write path's pass: tables written behind
            if persist:
                engine.index.persist()
        assert_matches_rebuild(engine)


def test_a_deferred_write_is_searchable_at_once_and_in_the_tables_soon_after(engine, home):
    engine.sync()
    write(home, LOGS[0], log_text(["Likes green tea."], 1))
    engine.index_paths(lambda: [LOGS[0]])
    assert [h.content for h in engine.search("green tea", user_id="ana", limit=1)] == ["Likes green tea."]
    wait_for(lambda: LOGS[0] in table_files(engine.index), 30, "the background writer's batch in the tables")
    assert engine.index.files() == table_files(engine.index)
    assert_matches_rebuild(engine)


def test_a_process_that_dies_with_writes_pending_leaves_them_to_the_next_sync(home, embedder):
    """The child writes and indexes behind, then dies at once: whatever reached LanceDB, the
    parent's sync makes the index equal a rebuild."""
    child = textwrap.dedent(f"""
        import os, syncd
        from syncd.index.store import Index
        Index.persist = lambda self: None  # nothing pending ever reaches the tables
        root = {str(home)!r}
        with syncd.open(root) as engine:
            engine.sync()
            for n in range(3):
                path = os.path.join(root, {LOGS[0]!r})
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "a") as f:
                    f.write(("# 2026-11-22\\n\\n## 09:30\\n" if n == 0 else "") + f"- [preference] fact {{n}} about tea\\n")
                engine.index_paths(lambda: [{LOGS[0]!r}])
            os._exit(0)
    """)
    done = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    with syncd.open(home, embedder=embedder) as engine:
        assert LOGS[0] not in engine.index.files()  # never written: stale, not wrong
        engine.sync()
        found = {h.content for h in engine.search("fact about tea", user_id="ana", limit=20)}
        assert found >= {f"fact {n} about tea" for n in range(3)}
        assert_matches_rebuild(engine)


def test_a_batch_that_fails_to_reach_lancedb_is_healed_by_the_next_sync(engine, home, monkeypatch):
    write(home, LOGS[0], log_text(["Likes green tea."], 1))
    engine.sync()
    # Writes go behind only with the rows in memory (a daemon that has searched); without them
    # they are written before the sync returns, and a failure fails it (test_log_row_updates.py).
    engine.search("tea", user_id="ana", limit=1)
    real_add = LanceTable.add

    def full_disk(self, *args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(LanceTable, "add", full_disk)
    write(home, LOGS[0], log_text(["Likes green tea.", "Runs marathons."], 1))
    engine.index_paths(lambda: [LOGS[0]])
    wait_for(lambda: LOGS[0] in engine.index.unwritten_paths, 30, "the failed batch to be left unwritten")
    # Memory went back to what the tables hold: the file looks stale, not indexed.
    assert engine.index.files() == table_files(engine.index)
    monkeypatch.setattr(LanceTable, "add", real_add)
    engine.sync()
    assert engine.index.unwritten_paths == frozenset()
    assert [h.content for h in engine.search("marathons", user_id="ana", limit=1)] == ["Runs marathons."]
    assert_matches_rebuild(engine)
