"""The stale count's quick look (sync.scan.tree_agrees) says "nothing is stale" only where the
scan and its plan find nothing either, and says it for a tree just as the index recorded it."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from syncd.engine.status import count_stale
from syncd.home import Home
from syncd.index.records import FileRecord
from syncd.sync.plan import plan_sync
from syncd.sync.scan import scan_disk, tree_agrees

MAX_BYTES = 1 << 20
# Indexable or not, in folders entered or not: the scan's rules all meet here.
FOLDERS = ["", "memory/users/ana", "memory/users/ana/core", "vault", "vault/.obsidian", ".git", ".syncd", "notes.md"]
NAMES = ["a.md", "b.md", ".hidden.md", "c.md~", "d.md.swp", "e.txt", "MEMORY.md"]
PATHS = st.tuples(st.sampled_from(FOLDERS), st.sampled_from(NAMES)).map(lambda p: f"{p[0]}/{p[1]}".lstrip("/"))
# Long past: a recorded mtime that is not "racy" (the scan records a just-written file as 0).
PAST_NS = 1_600_000_000 * 10**9


def changes(paths: st.SearchStrategy[str] = PATHS) -> st.SearchStrategy[tuple]:
    return st.one_of(
        st.tuples(st.just("write"), paths, st.sampled_from(["x\n", "other\n", "- [note] Tea.\n"])),
        st.tuples(st.just("same size, other bytes"), paths),
        st.tuples(st.just("touch"), paths),
        st.tuples(st.just("delete"), paths),
        st.tuples(st.just("move"), paths, PATHS),
        st.tuples(st.just("link to a file"), paths),
        st.tuples(st.just("link to a folder"), st.sampled_from(["memory/users/bob", "vault/people", "elsewhere"])),
        st.tuples(st.just("fifo"), paths),
        st.tuples(st.just("folder named like a note"), paths),
    )


def apply(root: Path, change: tuple) -> None:
    what, rel, *rest = change
    path = root / rel
    if what not in ("delete", "touch", "same size, other bytes", "move"):
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_dir() and not path.is_symlink():
            return
        path.unlink(missing_ok=True)
    if not path.parent.is_dir():
        return
    if what == "write":
        path.write_text(rest[0])
        os.utime(path, ns=(PAST_NS, PAST_NS + 7))
    elif what == "same size, other bytes" and path.is_file():
        data = path.read_bytes()
        path.write_bytes(bytes(reversed(data)) if data != bytes(reversed(data)) else data.upper())
        os.utime(path, ns=(PAST_NS, PAST_NS))
    elif what == "touch" and path.is_file():
        os.utime(path, ns=(PAST_NS, PAST_NS + 99))
    elif what == "delete" and path.is_file():
        path.unlink()
    elif what == "move" and path.is_file() and not path.is_symlink():
        target = root / rest[0]
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.is_dir():
            os.replace(path, target)
    elif what == "link to a file":
        path.symlink_to(root / "outside.txt")
    elif what == "link to a folder":
        path.symlink_to(root / "memory", target_is_directory=True)
    elif what == "fifo":
        os.mkfifo(path)
    elif what == "folder named like a note":
        path.mkdir()


def recorded(home: Home) -> dict[str, FileRecord]:
    """What an index would know of the tree now: the scan's record of each file."""
    scan = scan_disk(home, {}, MAX_BYTES)
    return {p: FileRecord(p, "note", f.sha or "", f.size, f.mtime_ns, f.error) for p, f in scan.files.items()}


def scanned_stale(home: Home, known: dict[str, FileRecord]) -> int:
    scan = scan_disk(home, known, MAX_BYTES)
    plan = plan_sync(scan.files, known, scan.unreadable_dirs)
    return len(plan.new) + len(plan.changed) + len(plan.moved) + len(plan.deleted)


@settings(max_examples=150, deadline=None)
@given(before=st.lists(changes(), max_size=6), data=st.data())
def test_agreeing_means_nothing_stale(before, data):
    root = Path(tempfile.mkdtemp(prefix="agrees-"))
    try:
        (root / "outside.txt").write_text("not in the home's files\n")
        (root / ".syncd").mkdir()
        for change in before:
            apply(root, change)
        home = Home(root)
        known = recorded(home)
        if not any(r.error for r in known.values()):
            assert tree_agrees(home, known), known  # the quick look serves the usual case
        # Most changes then fall on the files the index knows.
        paths = st.one_of(st.sampled_from(sorted(known)), PATHS) if known else PATHS
        for change in data.draw(st.lists(changes(paths), max_size=4), label="after"):
            apply(root, change)
        if tree_agrees(home, known):
            assert scanned_stale(home, known) == 0
        assert count_stale(home, known, MAX_BYTES) == scanned_stale(home, known)
    finally:
        shutil.rmtree(root)


def test_a_racy_record_is_looked_at_by_the_scan(tmp_path):
    """A file written just before its scan is recorded with mtime 0 (sync.scan's racy rule):
    never taken as agreeing, and the scan hashes it to find it unchanged."""
    (tmp_path / ".syncd").mkdir()
    (tmp_path / "a.md").write_text("- [note] Tea.\n")
    home = Home(tmp_path)
    known = {p: dataclasses.replace(r, mtime_ns=0) for p, r in recorded(home).items()}
    assert not tree_agrees(home, known) and count_stale(home, known, MAX_BYTES) == 0


def test_a_sync_of_a_tree_as_recorded_scans_nothing_and_one_touched_file_is_recorded(home, embedder):
    """A full sync takes the quick look first (sync.apply): of a tree as the index recorded it, the
    report is the scan's own (every file unchanged); a file touched since (same bytes, new mtime)
    makes the look disagree, and the scan then records it."""
    import syncd

    (home / "vault/Tea.md").write_text("# Tea\n\nGreen tea is grassy.\n")
    for path in [*home.glob("vault/**/*.md"), *home.glob("memory/**/*.md")]:
        os.utime(path, ns=(PAST_NS, PAST_NS))  # not just written: recorded with their mtimes
    with syncd.open(home, embedder=embedder) as engine:
        engine.sync()
        files = len(engine.index.files())
        assert tree_agrees(engine.home, engine.index.files())
        again = engine.sync().plan
        assert again.empty and again.unchanged == files
        os.utime(home / "vault/Tea.md", ns=(PAST_NS + 10**9, PAST_NS + 10**9))
        assert not tree_agrees(engine.home, engine.index.files())
        touched = engine.sync().plan
        assert touched.touched == ("vault/Tea.md",) and touched.unchanged == files - 1
        assert engine.sync().plan.empty


def test_a_one_shot_sync_that_only_restats_a_file_records_it_without_lancedb(home, embedder):
    """A one-shot sync seconds after the edit it indexed records the file's mtime as 0 (too recent
    to trust); the next one-shot sync hashes it, finds the same bytes, and records its stat in the
    files mirror alone (store.py's apply): no LanceDB imported for it, and the sync after that
    trusts the stat. The table keeps the older stat of the same bytes, which costs a reader of
    the table a hash and nothing else; new bytes of the same size are still a change."""
    import lancedb

    import syncd

    rel = "memory/users/ana/2026-05-01.md"
    (home / rel).parent.mkdir(parents=True, exist_ok=True)
    (home / rel).write_text("# 2026-05-01\n\n- [note] Likes green tea.\n")
    with syncd.open(home, embedder=embedder) as engine:
        engine.sync()
        racy = [path for path, record in engine.index.files().items() if record.mtime_ns == 0]
        assert rel in racy  # just written
    for path in racy:
        os.utime(home / path, ns=(PAST_NS, PAST_NS))
    script = (
        "import json, sys, syncd\n"
        f"with syncd.open({str(home)!r}) as engine:\n"
        "    plan = engine.sync().plan\n"
        "print(json.dumps([plan.touched, plan.changed, plan.unchanged, 'lancedb' in sys.modules]))\n"
    )

    def one_shot() -> list:
        run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
        return json.loads(run.stdout)

    files = len(recorded_files(home))
    assert one_shot() == [sorted(racy), [], files - len(racy), False]  # hashed: the same bytes, restated
    assert one_shot() == [[], [], files, False]  # trusted by its stat: nothing hashed
    assert recorded_files(home)[rel].mtime_ns == PAST_NS
    table = lancedb.connect(str(home / ".syncd/index/lance")).open_table("files").to_arrow().to_pylist()
    assert [r["mtime_ns"] for r in table if r["path"] == rel] == [0]
    (home / rel).write_text("# 2026-05-01\n\n- [note] Likes green teb.\n")  # same size, other bytes
    os.utime(home / rel, ns=(PAST_NS, PAST_NS))  # and the very stat trusted: only the sha tells
    with syncd.open(home, embedder=embedder) as engine:
        assert engine.sync().plan.changed == ()  # a stat the mirror vouches for is trusted, as git's index is
        assert "Likes green teb." not in [h.content for h in engine.search("teb", user_id="ana")]
    os.utime(home / rel, ns=(PAST_NS + 10**9, PAST_NS + 10**9))
    with syncd.open(home, embedder=embedder) as engine:
        assert engine.sync().plan.changed == (rel,)
        assert [h.content for h in engine.search("teb", user_id="ana", limit=1)] == ["Likes green teb."]


def recorded_files(home: Path) -> dict[str, FileRecord]:
    from syncd.index.files_mirror import read_mirror

    snapshot = read_mirror(home / ".syncd/index")
    assert snapshot is not None
    return snapshot.files
