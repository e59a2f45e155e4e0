"""Group commit: change groups that end together share one commit pass, and each keeps its own
commit with exactly its files; a group that writes a file another group's commit still waits for
waits for it, so two turns' versions never fold into one commit. Real threads, git and LanceDB."""

from __future__ import annotations

import threading
import time

import git

from syncd.changes import CommitQueue
from syncd.history.intents import Intent

from .daemon_helpers import running_daemon
from .helpers import run_concurrently


def test_groups_queued_while_a_pass_runs_share_the_next_pass():
    started, release = threading.Event(), threading.Event()
    passes: list[set[str]] = []

    def commit(paths: set[str]) -> None:
        passes.append(set(paths))
        if len(passes) == 1:
            started.set()
            release.wait(30)

    queue = CommitQueue(commit)
    first = threading.Thread(target=lambda: queue.wait(queue.add({"a.md"})))
    first.start()
    assert started.wait(30)
    tickets = [queue.add({"b.md"}), queue.add({"c.md"})]
    late = [threading.Thread(target=queue.wait, args=(t,)) for t in tickets]
    for t in late:
        t.start()
    release.set()
    for t in (first, *late):
        t.join(30)
        assert not t.is_alive()
    assert passes == [{"a.md"}, {"b.md", "c.md"}]


def test_a_path_being_committed_is_not_written_again_until_its_pass_ends():
    started, release = threading.Event(), threading.Event()
    order: list[str] = []

    def commit(paths: set[str]) -> None:
        started.set()
        release.wait(30)
        order.append("committed")

    queue = CommitQueue(commit)
    committer = threading.Thread(target=lambda: queue.wait(queue.add({"log.md"})))
    committer.start()
    assert started.wait(30)
    writer = threading.Thread(target=lambda: (queue.wait_for_path("log.md"), order.append("written")))
    writer.start()
    queue.wait_for_path("other.md")  # another path is free at once
    writer.join(0.2)
    assert writer.is_alive() and order == []
    release.set()
    for t in (committer, writer):
        t.join(30)
    assert order == ["committed", "written"]


def test_concurrent_groups_keep_one_commit_each_with_exactly_their_files(engine, home):
    """Eight threads, each a change group: six write a file of their own, two write the same file
    one after the other. Every group is one commit, with its own subject and its own files."""

    def turn(k: int) -> None:
        rel = "vault/shared.md" if k >= 6 else f"vault/note{k}.md"
        with engine.changes(Intent(author=f"agent{k}", summary=f"Turn {k}")):
            engine.write_file(rel, f"# Note\n\nWritten by turn {k}.\n".encode())

    run_concurrently(turn, 8)
    repo = git.Repo(home)
    made = {c.summary: c for c in repo.iter_commits() if c.summary.startswith("Turn ")}
    assert sorted(made) == [f"Turn {k}" for k in range(8)]
    for k in range(6):
        assert set(made[f"Turn {k}"].stats.files) == {f"vault/note{k}.md"}
        assert made[f"Turn {k}"].author.name == f"agent{k}"
    for k in (6, 7):
        commit = made[f"Turn {k}"]
        assert set(commit.stats.files) == {"vault/shared.md"}
        assert f"turn {k}" in (commit.tree / "vault/shared.md").data_stream.read().decode()
    assert not repo.is_dirty(untracked_files=True, path="vault")
    hits = engine.search("Written by turn", limit=20)
    assert {h.path for h in hits} >= {f"vault/note{k}.md" for k in range(6)}


def test_turns_through_the_daemons_own_engine_stay_one_commit_each(home, embedder):
    """Under `syncd serve` the daemon commits beside the engine's commit passes (same engine): it
    leaves the paths queued for a pass to that pass, so no turn is split across two commits."""
    with running_daemon(home, embedder, commit_quiet_ms=0) as run:

        def turn(k: int) -> None:
            with run.engine.changes(Intent(author=f"agent{k}", summary=f"Turn {k}")):
                run.engine.write_file(f"vault/a{k}.md", f"# A{k}\n".encode())
                time.sleep(0.1)  # the watcher sees the first file while the turn goes on
                run.engine.write_file(f"vault/b{k}.md", f"# B{k}\n".encode())

        run_concurrently(turn, 6)
        run.settle()
        made = {c.summary: c for c in git.Repo(home).iter_commits() if c.summary.startswith("Turn ")}
        assert sorted(made) == [f"Turn {k}" for k in range(6)]
        for k in range(6):
            assert set(made[f"Turn {k}"].stats.files) == {f"vault/a{k}.md", f"vault/b{k}.md"}
