"""The index's files table answered from memory.

``Index.files()`` comes from a copy the index keeps (as it keeps the rows): it must equal the
table after every kind of write, after writes that fail before or after reaching LanceDB, after a
compaction, a rebuild and a reopen, and in a reader beside the writer. Real LanceDB, real files,
the real model.
"""

from __future__ import annotations

import os

import pytest
from lancedb.table import LanceTable

import syncd
from syncd.errors import IndexError_
from syncd.home import blob_sha

from .helpers import assert_matches_rebuild, table_files, write

LOG = "memory/users/ana/2026-11-22.md"
PAGE = "vault/Tea.md"


def log_text(*facts: str) -> str:
    return "# 2026-11-22\n\n## 09:30 chat:c1\n" + "".join(f"- [preference] {f}\n" for f in facts)


def assert_files_are_the_table(index) -> None:
    assert index.files() == table_files(index)


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
def test_a_record_write_that_fails_leaves_files_equal_to_the_table(engine, home, monkeypatch, reached_lancedb):
    write(home, LOG, log_text("Likes green tea."))
    engine.sync()
    real_add = LanceTable.add

    def failing(table, *args, **kwargs):
        if table.name != "files":
            return real_add(table, *args, **kwargs)
        if reached_lancedb:
            real_add(table, *args, **kwargs)  # committed; the index never hears of it
        raise OSError("injected: the write of the file's record failed")

    monkeypatch.setattr(LanceTable, "add", failing)
    write(home, LOG, log_text("Likes green tea.", "Keeps bees on the roof."))
    with pytest.raises(IndexError_):
        engine.sync([LOG])
    monkeypatch.undo()
    assert_files_are_the_table(engine.index)
    record = engine.index.files().get(LOG)
    written = record is not None and record.sha == blob_sha((home / LOG).read_bytes())
    assert written is reached_lancedb
    stale = engine.status().stale
    assert (LOG in stale["changed"] + stale["new"]) is not reached_lancedb
    # Either way the next pass leaves nothing stale, and the rows are the rebuild's.
    engine.sync()
    assert engine.status().fresh
    assert engine.search("bees on the roof", user_id="ana")[0].content == "Keeps bees on the roof."
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
