"""The index's files table answered from memory, and the LanceDB commits a write leaves out.

``Index.files()`` comes from a copy the index keeps (as it keeps the rows): it must equal the
table after every kind of write, after writes that fail before or after reaching LanceDB, after a
compaction, a rebuild and a reopen, and in a reader beside the writer. A write commits only what
it changes: no delete for a file the index never held, one commit for a file's new record.
Real LanceDB, real files, the real model.
"""

from __future__ import annotations

import json
import os
import shutil

import pytest
from lancedb.table import LanceTable

import syncd
from syncd.errors import IndexError_
from syncd.home import blob_sha

from .cli_helpers import run_main
from .helpers import assert_matches_rebuild, table_files, write

LOG = "memory/users/ana/2026-11-22.md"
PAGE = "vault/Tea.md"


def log_text(*facts: str) -> str:
    return "# 2026-11-22\n\n## 09:30 chat:c1\n" + "".join(f"- [preference] {f}\n" for f in facts)


def commits(index) -> tuple[int, int]:
    """How many commits each table has had: (entries, files)."""
    return index.table_versions()


def assert_files_are_the_table(index) -> None:
    assert index.files() == table_files(index)


def test_each_write_commits_only_what_it_changes(engine, home):
    write(home, PAGE, "# Tea\n\nGreen tea in the morning.\n")
    engine.sync()
    steps = []

    def step(change) -> None:
        before = commits(engine.index)
        change()
        engine.sync([LOG])  # as a write does: a full sync would also record the racy stats of others
        after = commits(engine.index)
        steps.append((after[0] - before[0], after[1] - before[1]))
        assert_files_are_the_table(engine.index)

    # A new file: its rows and its record are appended; there is nothing to delete first.
    step(lambda: write(home, LOG, log_text("Likes green tea.")))
    # A fact appended to the section: the neighbour whose context changed is replaced (a delete
    # and an add), and the record is updated in place, not deleted and added.
    step(lambda: write(home, LOG, log_text("Likes green tea.", "Runs on Sundays.")))
    # Only the stat changed: no rows, one commit for the record.
    step(lambda: os.utime(home / LOG, ns=(10**18, 10**18)))
    # Gone: its rows and its record are deleted.
    step(lambda: (home / LOG).unlink())
    assert steps == [(1, 1), (2, 1), (0, 1), (1, 1)]
    assert_matches_rebuild(engine)


def test_files_asked_by_path_are_those_the_index_knows(engine, home):
    write(home, LOG, log_text("Likes green tea."))
    write(home, PAGE, "# Tea\n\nGreen tea.\n")
    engine.sync()
    assert list(engine.index.files([LOG, "vault/missing.md"])) == [LOG]
    assert engine.index.files([LOG])[LOG].sha == blob_sha((home / LOG).read_bytes())
    assert engine.index.files([]) == {}
    # What is handed out is a copy: changing it changes nothing the index knows.
    engine.index.files().clear()
    assert set(engine.index.files()) >= {LOG, PAGE}


@pytest.mark.parametrize("reached_lancedb", [False, True])
@pytest.mark.parametrize("operation", ["add", "update"])
def test_a_record_write_that_fails_leaves_files_equal_to_the_table(
    engine, home, monkeypatch, operation, reached_lancedb
):
    write(home, LOG, log_text("Likes green tea."))
    engine.sync()
    # A new file's record is appended, a known file's record updated: make that write fail.
    rel = LOG if operation == "update" else "memory/users/ana/2026-11-23.md"
    real = getattr(LanceTable, operation)

    def failing(table, *args, **kwargs):
        if table.name != "files":
            return real(table, *args, **kwargs)
        if reached_lancedb:
            real(table, *args, **kwargs)  # committed; the index never hears of it
        raise OSError(f"injected: the {operation} of the file's record failed")

    monkeypatch.setattr(LanceTable, operation, failing)
    write(home, rel, log_text("Likes green tea.", "Keeps bees on the roof."))
    with pytest.raises(IndexError_):
        engine.sync([rel])
    monkeypatch.undo()
    assert_files_are_the_table(engine.index)
    record = engine.index.files().get(rel)
    written = record is not None and record.sha == blob_sha((home / rel).read_bytes())
    assert written is reached_lancedb
    stale = engine.status().stale
    assert (rel in stale["changed"] + stale["new"]) is not reached_lancedb
    # Either way the next pass leaves nothing stale, and the rows are the rebuild's.
    engine.sync()
    assert engine.status().fresh
    assert any(hit.path == rel for hit in engine.search("bees on the roof", user_id="ana"))
    assert_matches_rebuild(engine)


def test_files_equal_the_table_after_compaction_rebuild_and_reopen(home, embedder):
    with syncd.open(home, embedder=embedder) as engine:
        for i in range(3):
            write(home, f"vault/notes/n{i}.md", f"# Note {i}\n\nAbout kites {i}.\n")
            engine.sync()
        engine.index.optimize()
        assert_files_are_the_table(engine.index)
        write(home, "vault/notes/n1.md", "# Note 1\n\nAbout wind.\n")
        engine.sync()
        assert_files_are_the_table(engine.index)
        engine.reindex()
        assert_files_are_the_table(engine.index)
        expected = engine.index.files()
    with syncd.open(home, embedder=embedder) as engine:
        assert engine.index.files() == expected
        assert_files_are_the_table(engine.index)


def test_a_reader_beside_the_writer_sees_each_of_its_writes(home, embedder):
    with syncd.open(home, embedder=embedder) as writer, syncd.open(home, read_only=True, embedder=embedder) as reader:
        writer.sync()
        assert reader.index.files() == writer.index.files()
        write(home, LOG, log_text("Likes green tea."))
        writer.sync()
        assert reader.index.files()[LOG].sha == blob_sha((home / LOG).read_bytes())
        write(home, LOG, log_text("Likes green tea.", "Runs on Sundays."))
        writer.sync()
        assert reader.index.files()[LOG].sha == blob_sha((home / LOG).read_bytes())
        writer.index.optimize()
        (home / LOG).unlink()
        writer.sync()
        assert LOG not in reader.index.files()
        assert reader.index.files() == writer.index.files() == table_files(writer.index)


def test_an_unchanged_meta_is_not_written_again(engine, home):
    write(home, LOG, log_text("Likes green tea."))
    engine.sync()
    meta = engine.index.folder / "meta.json"
    before = meta.stat()
    write(home, LOG, log_text("Likes green tea.", "Runs on Sundays."))
    engine.sync()
    after = meta.stat()
    # An atomic write replaces the file: a new inode. The same one means it was left alone.
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    # A changed field is written, and kept by the syncs after it.
    engine.index.write_meta(aligned_commit="c0ffee")
    assert meta.stat().st_ino != before.st_ino
    engine.sync()
    assert engine.index.meta()["aligned_commit"] == "c0ffee" and engine.index.compatible()


def test_records_with_quotes_errors_and_several_files_at_once_equal_the_table(engine, home):
    odd = "vault/it's \"odd\"; x = 'y'.md"
    steps = [
        (odd, b"# Odd\n\nFine.\n"),
        (odd, b"# Odd\n\nNot \xff UTF-8 here.\n"),  # a record with an error
        (odd, b"# Odd\n\nFine again.\n"),  # and without one again
    ]
    for rel, data in steps:
        write(home, rel, data)
        engine.sync()
        assert_files_are_the_table(engine.index)
        assert engine.index.files()[odd].sha == blob_sha(data)
    assert engine.index.files()[odd].error is None
    # Several known files change in one pass, one moves away and one is deleted.
    for i in range(4):
        write(home, f"vault/notes/n{i}.md", f"# Note {i}\n\nAbout kites {i}.\n")
    engine.sync()
    for i in range(2):
        write(home, f"vault/notes/n{i}.md", f"# Note {i}\n\nAbout wind {i}.\n")
    os.replace(home / "vault/notes/n2.md", home / "vault/n2-moved.md")
    (home / "vault/notes/n3.md").unlink()
    engine.sync()
    assert_files_are_the_table(engine.index)
    assert "vault/notes/n3.md" not in engine.index.files() and "vault/n2-moved.md" in engine.index.files()
    assert_matches_rebuild(engine)


def test_rows_handed_in_again_as_the_same_objects_are_kept_only_while_memory_holds_them(engine, home):
    """The rows module hands back the very row objects of what an edit did not touch, and the
    index takes those as unchanged without comparing them. A file deleted and written back with
    the same bytes (so the same row objects again) gets its rows again, and an edit after memory
    was reloaded from the table (where no applied row object is remembered) ends as a rebuild."""
    text = log_text("Likes green tea.", "Runs on Sundays.")
    write(home, LOG, text)
    engine.sync()
    (home / LOG).unlink()
    engine.sync([LOG])
    assert engine.search("green tea", user_id="ana", limit=3, kind="fact") == []
    write(home, LOG, text)
    engine.sync([LOG])
    assert [h.content for h in engine.search("green tea", user_id="ana", limit=1, kind="fact")] == ["Likes green tea."]
    write(home, LOG, text + "- [preference] Reads at night.\n")
    # White-box (fault injection): the state a failed write leaves, memory reloaded from the table.
    engine.index._matrix_version = None
    engine.sync([LOG])
    assert {h.content for h in engine.search("green tea sundays night", user_id="ana", limit=5, kind="fact")} == {
        "Likes green tea.",
        "Runs on Sundays.",
        "Reads at night.",
    }
    assert_matches_rebuild(engine)


def test_a_bigger_table_lets_more_writes_pile_up_before_compacting():
    """Compacting rewrites the whole table, so its cadence grows with the rows (as the square
    root: the cheapest cycle per write), never below the small table's 40 writes."""
    from syncd.index.compaction import writes_before_optimize

    assert writes_before_optimize(0) == writes_before_optimize(5_000) == 40
    assert writes_before_optimize(100_000) == 141
    sizes = [0, 10_000, 100_000, 1_000_000, 10_000_000]
    cadence = [writes_before_optimize(n) for n in sizes]
    assert cadence == sorted(cadence) and cadence[-1] < 2_000


def test_each_table_is_compacted_on_its_own_count_of_writes(engine, home, monkeypatch):
    """Writes that only change files' records (a touch) count for the files table alone: it is
    compacted after its own 40 writes, the entries table (not written meanwhile) is left be."""
    for i in range(2):
        write(home, f"vault/notes/n{i}.md", f"# Note {i}\n\nAbout kites {i}.\n")
        engine.sync()
    compacted: list[tuple[int, str]] = []
    real = LanceTable.optimize

    def spy(self, *args, **kwargs):
        compacted.append((len(touches), self.name))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(LanceTable, "optimize", spy)
    path = home / "vault/notes/n0.md"
    stamp = path.stat().st_mtime_ns
    touches: list[int] = []
    for n in range(1, 81):
        touches.append(n)
        os.utime(path, ns=(stamp + n * 10**9, stamp + n * 10**9))
        engine.sync()
    # Two writes of the files table before the touches (the notes' records), then one a touch.
    assert compacted == [(38, "files"), (78, "files")]
    assert_files_are_the_table(engine.index)
    assert engine.status().fresh


def test_a_changed_row_is_replaced_only_in_its_own_file_when_another_holds_its_id(engine, home):
    """Row deletes name (path, id) pairs, looked up through the id index: a fact copied by hand
    into another log keeps its id there, and replacing it in one file leaves the other's row."""
    other = "memory/users/ana/2026-11-23.md"
    fact = "- [preference] Likes green tea. <!-- id:m-0123456789abcdef -->\n"
    earlier = "# 2026-11-22\n\n## 08:00 chat:c0\n- [preference] Reads in the morning.\n\n## 09:30 chat:c1\n"
    write(home, LOG, earlier + fact)
    write(home, other, log_text("Walks to work.") + fact)
    engine.sync()
    engine.index.persist()
    engine.index.ensure_id_index()
    before = commits(engine.index)
    # Appended right after it, the fact's neighbour changes: its row in LOG alone is deleted
    # (by path and id) and added again; the earlier section's row stays.
    write(home, LOG, earlier + fact + "- [preference] Runs on Sundays.\n")
    engine.sync([LOG])
    assert commits(engine.index)[0] - before[0] == 2
    assert sorted(row["path"] for row in engine.find_fact("m-0123456789abcdef")) == sorted([LOG, other])
    assert_matches_rebuild(engine)


def test_a_closed_engine_leaves_no_database_journal_behind(home, embedder):
    # SQLite keeps a -wal file for as long as a connection is open: one left to the garbage
    # collector outlives the engine (and, with the program's exit freeze, the process's end).
    write(home, "memory/MEMORY.md", "# Memory\n\n- Likes green tea.\n")
    engine = syncd.open(home, embedder=embedder)
    engine.sync()
    engine.close()
    assert sorted(p.name for p in (home / ".syncd").rglob("*-wal")) == []


# -- a reader never makes the index ------------------------------------------------------------


def _index_tables(home) -> list[str]:
    lance = home / ".syncd" / "index" / "lance"
    return sorted(p.name for p in lance.iterdir()) if lance.is_dir() else []


def test_a_reader_of_a_deleted_index_makes_no_tables_and_status_says_missing(home, embedder):
    write(home, PAGE, "# Tea\n\nGreen tea in the morning.\n")
    with syncd.open(home, embedder=embedder) as writer:
        writer.sync()
    # One reader opened before .syncd/ goes, one after: neither makes empty tables that would
    # pass for a built index.
    early = syncd.open(home, read_only=True, embedder=embedder)
    try:
        shutil.rmtree(home / ".syncd")
        with syncd.open(home, read_only=True, embedder=embedder) as late:
            for reader in (early, late):
                assert reader.search("green tea") == []
                assert reader.index.files() == {} and reader.index.counts()["files"] == 0
                assert reader.status().index == "missing"
        assert _index_tables(home) == []
        listed = run_main("status", "--home", str(home), "--json")
        assert listed.returncode == 0 and json.loads(listed.stdout)["index"] == "missing"
        shown = run_main("search", "green tea", "--wiki", "--home", str(home))
        assert shown.returncode == 0 and "Traceback" not in shown.stderr
        assert _index_tables(home) == []
        # Rebuilt by a writer, the same reader reads the new tables.
        with syncd.open(home, embedder=embedder) as writer:
            writer.reindex()
        assert _index_tables(home) == ["entries.lance", "files.lance"]
        assert any(h.path == PAGE for h in early.search("green tea"))
        assert early.status().index == "ok"
    finally:
        early.close()


def test_a_write_through_a_shared_index_makes_the_missing_tables(home, embedder):
    with syncd.open(home, embedder=embedder) as writer:
        writer.sync()
    shutil.rmtree(home / ".syncd")
    # A read-only engine writes by borrowing the home lock a change at a time: that write, and
    # only it, makes the index again.
    with syncd.open(home, read_only=True, embedder=embedder) as shared:
        assert shared.search("green tea") == [] and _index_tables(home) == []
        shared.write_file(PAGE, b"# Tea\n\nGreen tea in the morning.\n")
        assert _index_tables(home) == ["entries.lance", "files.lance"]
        assert any(h.path == PAGE for h in shared.search("green tea"))


def test_a_reader_meeting_tables_half_made_makes_none_of_them(home, embedder):
    """A writer making the tables (or one killed while it did) leaves their folders before their
    first version: a reader meeting them then reads stand-ins, never makes a table itself."""
    write(home, PAGE, "# Tea\n\nGreen tea in the morning.\n")
    with syncd.open(home, embedder=embedder) as writer:
        writer.sync()
    shutil.rmtree(home / ".syncd" / "index")
    lance = home / ".syncd" / "index" / "lance"
    for table in ("entries.lance", "files.lance"):
        (lance / table).mkdir(parents=True)
    with syncd.open(home, read_only=True, embedder=embedder) as reader:
        assert reader.search("green tea") == []
        assert reader.index.counts()["files"] == 0
    assert sorted(p.name for p in lance.rglob("*")) == ["entries.lance", "files.lance"]
    # The writer's own open makes them, and the reader's next open reads them.
    with syncd.open(home, embedder=embedder) as writer:
        writer.reindex()
    with syncd.open(home, read_only=True, embedder=embedder) as reader:
        assert any(h.path == PAGE for h in reader.search("green tea"))
