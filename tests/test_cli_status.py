"""`syncd status` without LanceDB: the files mirror says exactly what the index says, and when it
cannot vouch for itself (a lost update, a write by another program) status reads the index."""

from __future__ import annotations

import json
import os
import subprocess

import lancedb
from hypothesis import example, given, settings
from hypothesis import strategies as st

import syncd
from syncd.config import Settings
from syncd.engine.status_read import read_status
from syncd.index.files_mirror import FilesMirror, read_mirror

from .helpers import write
from .strategies import daily_log_texts, examples, page_texts

PATHS = [
    "memory/users/ana/2026-11-20.md",
    "memory/users/ana/2026-11-21.md",
    "memory/users/bob/MEMORY.md",
    "vault/Tea.md",
    "vault/notes/Coffee.md",
]


def _on_a_path(kind: str) -> st.SearchStrategy[tuple]:
    return st.tuples(st.just(kind), st.sampled_from(PATHS), st.just(""))


_WRITE = st.tuples(
    st.just("write"), st.sampled_from(PATHS), st.one_of(daily_log_texts().map(lambda t: t[0]), page_texts())
)
_SYNC = st.tuples(st.just("sync"), st.just(""), st.just(""))

operations = st.lists(
    st.one_of(
        _WRITE,
        _on_a_path("bad bytes"),
        _on_a_path("delete"),
        st.tuples(st.just("move"), st.sampled_from(PATHS), st.sampled_from(PATHS)),
        _on_a_path("touch"),
        _SYNC,
        st.tuples(st.just("reindex"), st.just(""), st.just("")),
    ),
    max_size=8,
)


def _apply(home, engine, op) -> None:
    kind, path, arg = op
    target = home / path
    if kind == "write":
        write(home, path, arg)
    elif kind == "bad bytes":
        write(home, path, b"# 2026-11-20\n\n- [note] caf\xe9\n")
    elif kind == "delete":
        target.unlink(missing_ok=True)
    elif kind == "move" and target.exists() and path != arg:
        (home / arg).parent.mkdir(parents=True, exist_ok=True)
        os.replace(target, home / arg)
    elif kind == "touch" and target.exists():
        os.utime(target, ns=(target.stat().st_mtime_ns + 10**9,) * 2)
    elif kind == "sync":
        engine.sync()
    elif kind == "reindex":
        engine.reindex()


def _same(home, engine) -> None:
    light = read_status(home, Settings()).to_dict()
    assert light == engine.status().to_dict()


# A real engine per example and a comparison after every operation: 5 examples, up to a few dozen
# comparisons a run (12 before; --slow runs 50).
@settings(max_examples=examples(5))
@given(ops=operations)
def test_status_from_the_mirror_is_the_status_of_the_index(tmp_path_factory, embedder, ops):
    home = syncd.init(tmp_path_factory.mktemp("home") / "h").home
    with syncd.open(home, embedder=embedder) as engine:
        engine.sync()
        for op in ops:
            _apply(home, engine, op)
            # The light path is taken (the mirror vouches for the index) and agrees exactly.
            snapshot = read_mirror(home / ".syncd/index")
            assert snapshot is not None
            assert snapshot.files == engine.index.files()
            counts = engine.index.counts()
            assert (len(snapshot.files), snapshot.facts, snapshot.chunks) == (
                counts["files"],
                counts["facts"],
                counts["chunks"],
            )
            _same(home, engine)


def test_a_lost_mirror_update_is_noticed_and_never_reads_fresh(home, embedder, monkeypatch):
    with syncd.open(home, embedder=embedder) as engine:
        engine.sync()
        assert read_status(home, Settings()).fresh
        # The next update of the mirror is lost (a crash between LanceDB's commit and ours).
        monkeypatch.setattr(FilesMirror, "update", lambda self, before, changes: True)
        write(home, "vault/Tea.md", "# Tea\n\nGreen tea.\n")
        engine.sync()
        monkeypatch.undo()
        assert read_mirror(home / ".syncd/index") is None
        status = read_status(home, Settings())
        assert status.fresh and status.files == 4  # read from the index itself, so still exact
        _same(home, engine)
    # The next writer finds the mirror behind and rebuilds it.
    with syncd.open(home, embedder=embedder) as engine:
        assert read_mirror(home / ".syncd/index") is not None
        _same(home, engine)


def test_a_write_by_another_program_is_noticed(home, embedder):
    with syncd.open(home, embedder=embedder) as engine:
        engine.sync()
    # An older syncd, or any LanceDB client, changes the files table behind the mirror's back.
    table = lancedb.connect(str(home / ".syncd/index/lance")).open_table("files")
    table.delete("path = 'vault/log.md'")
    assert read_mirror(home / ".syncd/index") is None
    status = read_status(home, Settings())
    assert not status.fresh and status.stale["new"] == ["vault/log.md"]


def test_the_mirror_survives_compaction_and_rebuilds(home, embedder):
    with syncd.open(home, embedder=embedder) as engine:
        engine.sync()
        engine.index.optimize()
        assert read_mirror(home / ".syncd/index") is not None
        engine.reindex()
        snapshot = read_mirror(home / ".syncd/index")
        assert snapshot is not None and snapshot.files == engine.index.files()
        _same(home, engine)


def test_status_names_the_commit_a_one_shot_sync_made_and_a_merge_under_way(home, embedder, capsys):
    """`syncd sync` commits what it indexed, so `syncd status` names that commit (it named the
    last one a daemon had made); while the person's merge is under way, status says so and that
    syncd commits nothing until it ends."""
    from syncd.cli import main

    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(home), *args], capture_output=True, text=True, check=False).stdout

    page = "vault/Tea.md"
    write(home, page, "# Tea\n\nSteep for two minutes.\n")
    assert main(["sync", "-q", "--home", str(home)]) == 0
    capsys.readouterr()
    assert main(["status", "--json", "--home", str(home)]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["aligned_commit"] == git("rev-parse", "HEAD").strip() and shown["git_busy"] is None
    branch = git("rev-parse", "--abbrev-ref", "HEAD").strip()
    git("checkout", "-q", "-b", "side")
    write(home, page, "# Tea\n\nSteep for three minutes.\n")
    git("commit", "-qam", "side")
    git("checkout", "-q", branch)
    write(home, page, "# Tea\n\nSteep for four minutes.\n")
    git("commit", "-qam", "mine")
    git("merge", "side")  # a conflict: the merge stays under way
    assert main(["status", "--home", str(home)]) == 0
    lines = capsys.readouterr().out.splitlines()
    busy = [line for line in lines if line.startswith("git ")]
    assert len(busy) == 1 and "a git merge is under way" in busy[0] and "commits nothing" in busy[0], lines


one_shot_operations = st.lists(
    st.one_of(_WRITE, _on_a_path("touch"), _on_a_path("age"), _on_a_path("delete"), _SYNC),
    max_size=10,
)


@settings(max_examples=examples(5))
@given(ops=one_shot_operations)
# A restat (write, sync: recorded as too recent; aged; the last sync restats), then a change of it.
@example(ops=[("write", PATHS[3], "# Tea\n\nGreen.\n"), ("sync", "", ""), ("age", PATHS[3], "")])
@example(
    ops=[
        ("write", PATHS[3], "# Tea\n\nGreen.\n"),
        ("sync", "", ""),
        ("age", PATHS[3], ""),
        ("sync", "", ""),
        ("write", PATHS[3], "# Tea\n\nBlack.\n"),  # the same size, a new mtime
    ]
)
def test_law_one_shot_syncs_keep_the_mirror_true_to_the_tables(tmp_path_factory, embedder, ops):
    """Each sync by a new engine that opens no table unless it must (a one-shot `syncd sync`):
    restats go to the files mirror alone (store.py), so the mirror may hold a newer stat than the
    files table, and only that: the same files, bytes and errors, a stat that is the file's own.
    A sync after the last leaves nothing new, changed, moved or deleted, and status from the
    mirror is status from the index."""
    home = syncd.init(tmp_path_factory.mktemp("home") / "h").home
    past = 1_600_000_000 * 10**9
    for kind, path, arg in [*ops, ("sync", "", "")]:
        target = home / path
        if kind == "age" and target.exists():
            os.utime(target, ns=(past, past))  # an mtime no longer too recent to trust
        elif kind == "sync":
            with syncd.open(home, embedder=embedder) as engine:
                engine.sync()
        else:
            _apply(home, None, (kind, path, arg))
    snapshot = read_mirror(home / ".syncd/index")
    assert snapshot is not None
    table = {
        r["path"]: r
        for r in lancedb.connect(str(home / ".syncd/index/lance")).open_table("files").to_arrow().to_pylist()
    }
    assert set(table) == set(snapshot.files)
    for path, record in snapshot.files.items():
        held = table[path]
        assert (record.kind, record.sha, record.error) == (held["kind"], held["sha"], held["error"])
        if (record.size, record.mtime_ns) != (held["size"], held["mtime_ns"]):
            st_ = os.stat(home / path)
            assert (record.size, record.mtime_ns) == (st_.st_size, st_.st_mtime_ns)  # restated: the file's own
    with syncd.open(home, embedder=embedder) as engine:
        plan = engine.sync().plan
        assert not (plan.new or plan.changed or plan.moved or plan.deleted), plan
        _same(home, engine)
