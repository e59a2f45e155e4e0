"""The write path's cost in git processes, and the shortcuts it takes keep every guarantee: the
unmerged-paths check answered once per index version, HEAD read from its files, the commit's tree
written from the real index only when the user has nothing else staged. Real git repositories."""

from __future__ import annotations

import asyncio
import os
import subprocess
import threading
from collections import Counter

import pytest

import syncd
from syncd.config import Settings
from syncd.errors import GitBusyError
from syncd.history import chain as history_chain
from syncd.history import staging
from syncd.history.committer import commit_changes
from syncd.history.git import check_tree_writable, head_sha
from syncd.history.intents import Intent
from syncd.history.staging import commit_exact
from syncd.home import Home
from syncd.memory import MemoryManager

from .daemon_helpers import daily_log, git, isolate_git_identity
from .helpers import write

LOG = "memory/users/ana/2026-11-22.md"


@pytest.fixture(autouse=True)
def global_gitconfig(tmp_path, monkeypatch):
    return isolate_git_identity(tmp_path, monkeypatch)


@pytest.fixture
def git_calls(monkeypatch):
    """Every git process this process starts, by subcommand."""
    seen: Counter[str] = Counter()
    real = subprocess.Popen.__init__

    def counting(self, args, *rest, **kwargs):
        if isinstance(args, list | tuple) and args and args[0] == "git":
            words = list(args[1:])
            while words[:1] == ["-c"]:  # `git -c key=value <command>`
                words = words[2:]
            # ls-files answers two questions: unmerged paths (-u) and what the index stages (-s).
            seen[" ".join(words[:2]) if words[0] == "ls-files" else words[0]] += 1
        return real(self, args, *rest, **kwargs)

    monkeypatch.setattr(subprocess.Popen, "__init__", counting)
    return seen


def test_an_add_memory_costs_four_git_processes(engine, home, git_calls):
    manager = MemoryManager(engine, settings=Settings(llm_model="gpt-4o-mini"))
    asyncio.run(manager.add_memory("Warms up the first write.", "ana"))
    git_calls.clear()
    fact = asyncio.run(manager.add_memory("Keeps bees on the roof of the library.", "ana"))
    calls = Counter(git_calls)
    assert fact is not None and fact.id in git(home, "show", "HEAD")
    # Status, stage, the staged blobs, update-ref. No unmerged check: the last pass published an
    # index made by staging into one that held no unmerged path, so it holds none either
    # (git.carry_unmerged). No reader: HEAD's trees are in memory, and the message's blobs are
    # the log just staged (read from the file) and the one the last pass staged (kept). The tree
    # and commit are written by syncd (objects.py); no read-tree of a private index, no rev-parse.
    assert calls == Counter({"status": 1, "update-index": 1, "ls-files -s": 1, "update-ref": 1}), calls
    # Counted from the right blobs: one fact more than the log the first add left.
    assert f"+1 fact in memory/users/ana/{fact.timestamp[:10]}.md" in git(home, "log", "-1", "--format=%B")


def test_a_group_of_writes_checks_for_unmerged_paths_once(engine, home, git_calls):
    with engine.changes(Intent(author="agent", summary="Three notes")):
        for name in ("A", "B", "C"):
            engine.write_file(f"vault/{name}.md", f"# {name}\n".encode())
        assert git_calls["ls-files -u"] == 1, git_calls
    # Not after the commit: the index file it published was staged into one that held no
    # unmerged path, so the answer carries over to it (git.carry_unmerged).
    assert git_calls["ls-files -u"] == 1 and "read-tree" not in git_calls, git_calls
    assert git(home, "log", "-1", "--format=%s") == "Three notes\n"
    assert git(home, "show", "--name-only", "--format=", "HEAD").split() == ["vault/A.md", "vault/B.md", "vault/C.md"]
    git_calls.clear()
    engine.write_file("vault/D.md", b"# D\n")
    assert "ls-files -u" not in git_calls, git_calls
    # A git command of the person's rewrites the index: the next write asks git again.
    git(home, "update-index", "--refresh")
    os.utime(home / ".git" / "index")
    engine.write_file("vault/E.md", b"# E\n")
    assert git_calls["ls-files -u"] == 1, git_calls


def test_the_unmerged_answer_follows_the_index_file(home):
    memo = "memory/users/ana/MEMORY.md"  # daily logs merge by union (.gitattributes): never unmerged
    write(home, memo, "# Ana\n\nLikes tea.\n")
    commit_changes(Home(home), syncd.Settings())
    check_tree_writable(home)  # answered and remembered for this version of the index
    write(home, memo, "# Ana\n\nLikes green tea.\n")
    git(home, "stash", "-q")
    write(home, memo, "# Ana\n\nLikes black tea.\n")
    commit_changes(Home(home), syncd.Settings())
    check_tree_writable(home)
    subprocess.run(["git", "stash", "pop"], cwd=home, capture_output=True, check=False)
    assert git(home, "ls-files", "-u").strip()
    with pytest.raises(GitBusyError, match="unmerged"):
        check_tree_writable(home)


def _pass_staging(home, rel: str) -> None:
    """What a commit pass does to git's index: ``rel`` staged into a copy, published under the lock."""
    with staging.HeldIndex(home) as held:
        staging.stage_paths(home, [rel], [], held.env)
        with held.locked():
            held.publish()


def test_an_unmerged_answer_is_carried_to_a_published_index_only_when_there_was_none(home):
    """A pass's published index inherits "nothing unmerged" (staging makes no path unmerged); an
    index that held unmerged paths is asked about again, since the pass may have resolved them."""
    memo = "memory/users/ana/MEMORY.md"  # daily logs merge by union (.gitattributes): never unmerged
    write(home, memo, "# Ana\n\nLikes tea.\n")
    write(home, "vault/notes.md", "# Notes\n")
    commit_changes(Home(home), syncd.Settings())
    write(home, memo, "# Ana\n\nLikes green tea.\n")
    git(home, "stash", "-q")
    write(home, memo, "# Ana\n\nLikes black tea.\n")
    commit_changes(Home(home), syncd.Settings())
    subprocess.run(["git", "stash", "pop"], cwd=home, capture_output=True, check=False)
    with pytest.raises(GitBusyError, match="unmerged"):
        check_tree_writable(home)
    write(home, "vault/notes.md", "# Notes\n\nMore.\n")
    _pass_staging(home, "vault/notes.md")  # the conflict stays
    with pytest.raises(GitBusyError, match="unmerged"):
        check_tree_writable(home)
    write(home, memo, "# Ana\n\nLikes tea, green or black.\n")
    _pass_staging(home, memo)  # staged whole: resolved, and seen so
    assert not git(home, "ls-files", "-u").strip()
    check_tree_writable(home)


def _index_file(home, tmp_path, name: str, entries: list[tuple[int, str]]) -> bytes:
    """An index holding ``(stage, path)`` entries, all of one blob, built by git itself."""
    write(home, "memory/users/ana/tea.txt", "- [context] Likes tea.\n")
    blob = git(home, "hash-object", "-w", "memory/users/ana/tea.txt").strip()
    path = tmp_path / name
    info = "".join(f"100644 {blob} {stage}\t{rel}\n" for stage, rel in entries)
    subprocess.run(
        ["git", "update-index", "--index-info"],
        cwd=home,
        input=info.encode(),
        check=True,
        env={**os.environ, "GIT_INDEX_FILE": str(path)},
    )
    return path.read_bytes()


def test_an_index_rewritten_in_place_with_its_old_size_and_times_is_seen(home, tmp_path):
    """Even an index rewritten in place with its old size and modification time (git never does
    that, another tool might) is told apart from the version whose answer we remember."""
    names = ["memory/users/ana/2026-11-22.md", "memory/users/ana/2026-11-23.md", "memory/users/ana/2026-11-24.md"]
    clean = _index_file(home, tmp_path, "clean", [(0, rel) for rel in names])
    conflicted = _index_file(home, tmp_path, "conflicted", [(stage, names[0]) for stage in (1, 2, 3)])
    assert len(clean) == len(conflicted) and clean != conflicted
    index = home / ".git/index"
    index.write_bytes(clean)
    st = os.stat(index)
    check_tree_writable(home)  # answered and remembered for this version of the index
    with open(index, "r+b") as handle:  # the same inode and size, the conflicted content
        handle.write(conflicted)
    os.utime(index, ns=(st.st_atime_ns, st.st_mtime_ns))
    after = os.stat(index)
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (st.st_ino, st.st_size, st.st_mtime_ns)
    with pytest.raises(GitBusyError, match="unmerged"):
        check_tree_writable(home)


def test_a_git_add_of_the_users_while_we_commit_is_kept_and_not_committed(home, monkeypatch):
    """A pass stages into a copy of git's index: a file the user stages meanwhile makes the pass
    give up before HEAD moves (GitBusyError, retried by the write path), their staging is kept, and
    the next pass commits our path only, their file still staged."""
    write(home, LOG, daily_log(["Likes tea."]))
    write(home, "vault/Theirs.md", "# Theirs\n")
    real = history_chain.run_git
    head = git(home, "rev-parse", "HEAD")

    def racing(root, *args, **kwargs):
        if args[:2] == ("ls-files", "-s"):
            subprocess.run(["git", "add", "vault/Theirs.md"], cwd=root, check=True)
        return real(root, *args, **kwargs)

    monkeypatch.setattr(history_chain, "run_git", racing)
    with pytest.raises(GitBusyError, match="index changed"):
        commit_changes(Home(home), syncd.Settings(), [LOG])
    assert git(home, "rev-parse", "HEAD") == head
    monkeypatch.setattr(history_chain, "run_git", real)
    commit_changes(Home(home), syncd.Settings(), [LOG])
    assert git(home, "show", "--name-only", "--format=", "HEAD").split() == [LOG]
    assert git(home, "status", "--porcelain").splitlines() == ["A  vault/Theirs.md"]


def test_a_git_add_of_the_users_during_one_exact_commit_is_not_committed(home, monkeypatch):
    """commit_exact (revert, the tools) checks the tree written from the real index after writing
    it: a file the user stages between our staging and our write-tree makes it build the tree
    aside, without that file."""
    write(home, LOG, daily_log(["Likes tea."]))
    write(home, "vault/Theirs.md", "# Theirs\n")
    real = staging.run_git

    def racing(root, *args, **kwargs):
        if args[:1] == ("write-tree",) and not kwargs.get("env"):
            subprocess.run(["git", "add", "vault/Theirs.md"], cwd=root, check=True)
        return real(root, *args, **kwargs)

    monkeypatch.setattr(staging, "run_git", racing)
    commit_exact(home, [LOG], [], "one exact commit\n", "a", "a@x")
    assert git(home, "show", "--name-only", "--format=", "HEAD").split() == [LOG]
    assert git(home, "status", "--porcelain").splitlines() == ["A  vault/Theirs.md"]


@pytest.mark.parametrize("state", ["loose", "packed", "detached", "worktree"])
def test_head_read_from_the_files_is_the_head_git_reads(home, tmp_path, state):
    write(home, "vault/A.md", "# A\n")
    commit_changes(Home(home), syncd.Settings())
    root = home
    if state == "packed":
        git(home, "pack-refs", "--all")
        assert not (home / ".git/refs/heads/main").exists()
    elif state == "detached":
        git(home, "checkout", "-q", "--detach")
    elif state == "worktree":
        root = tmp_path / "linked"
        git(home, "worktree", "add", "-q", "-b", "side", str(root))
    assert head_sha(root) == git(root, "rev-parse", "HEAD").strip()
    if state != "detached":
        write(root, "vault/B.md", "# B\n")
        before = head_sha(root)
        commit_changes(Home(root), syncd.Settings())
        assert git(root, "rev-parse", "HEAD^").strip() == before


def test_a_writes_folder_is_synced_by_its_commit_pass_before_head_moves(engine, home, monkeypatch):
    """Under the write turn the new file is fsynced and renamed into place; the rename is made
    durable by the pass that commits it (one fsync of the folder), before HEAD holds it: so an
    acknowledged write is on disk to stay, and the turn every writer waits for pays one fsync."""
    from syncd.home import disk

    synced: list[tuple[str, str | None]] = []
    real = disk._fsync_dir  # white-box: each folder fsync is recorded where it happens, with HEAD then

    def recording(folder):
        synced.append((os.path.relpath(folder, home), head_sha(home)))
        real(folder)

    monkeypatch.setattr(disk, "_fsync_dir", recording)
    before = head_sha(home)
    with engine.changes(Intent(author="agent", summary="Two notes")):
        engine.write_file("vault/one/A.md", b"# A\n")
        engine.write_file("vault/two/B.md", b"# B\n")
        assert not [folder for folder, _ in synced if folder.startswith("vault")], synced
    assert head_sha(home) != before
    assert sorted(f for f, head in synced if f.startswith("vault")) == ["vault/one", "vault/two"], synced
    assert all(head == before for f, head in synced if f.startswith("vault")), "synced before HEAD moved"


def test_a_new_file_a_git_clean_takes_while_its_commit_lands_is_put_back(engine, home, monkeypatch):
    """`git stash --include-untracked` runs `git clean` on the files git's index does not track:
    one that read the index before our pass published it sees the agent's new daily log as
    untracked and deletes it, while the pass commits it (it staged the bytes first). The write
    is acknowledged (HEAD holds it); the tree must hold it too, else the next write to that log
    starts it anew and its commit, in the agent's name, deletes the facts acknowledged before
    (test_write_path_stateful: "turn fact 14" lost that way under a `stash -u`)."""
    manager = MemoryManager(engine, settings=Settings(llm_model="gpt-4o-mini"))
    asyncio.run(manager.add_memory("Warms up the first write.", "ana"))
    real = history_chain.run_git
    cleaned: list[str] = []

    def clean_racing(root, *args, **kwargs):
        if args[:1] == ("update-ref",) and not cleaned:
            done = subprocess.run(["git", "clean", "-f", "-d", "--", "memory/users/bob"], cwd=root, capture_output=True)
            cleaned.append(done.stdout.decode())
        return real(root, *args, **kwargs)

    monkeypatch.setattr(history_chain, "run_git", clean_racing)
    first = asyncio.run(manager.add_memory("Keeps bees on the roof of the library.", "bob"))
    assert first is not None and "Removing memory/users/bob/" in cleaned[0], cleaned
    rel = f"memory/users/bob/{first.timestamp[:10]}.md"
    assert first.content in git(home, "show", f"HEAD:{rel}")
    assert (home / rel).exists() and first.content in (home / rel).read_text()
    second = asyncio.run(manager.add_memory("Sings in the harbour choir.", "bob"))
    assert second is not None
    kept = git(home, "show", f"HEAD:{rel}")
    assert first.content in kept and second.content in kept, kept
    assert not git(home, "status", "--porcelain", "--", "memory").strip()


def test_a_git_failure_while_the_persons_git_command_runs_is_waited_out_not_answered_as_an_error(
    engine, home, monkeypatch
):
    """git checks a file out by removing it and writing it anew: a pass staging that file in the
    middle (its update-index between lstat and read) fails "Unable to process path" while the
    person's command holds index.lock. Seen in the race loop as a 400 HistoryError answered to an
    agent's add during `git merge --abort` (test_acknowledged_writes). The pass waits the command
    out and commits: the add is acknowledged, never failed as if it were wrong."""
    from syncd.errors import HistoryError

    manager = MemoryManager(engine, settings=Settings(llm_model="gpt-4o-mini"))
    asyncio.run(manager.add_memory("Warms up the first write.", "ana"))
    real = staging.run_git
    lock = home / ".git/index.lock"
    failed: list[str] = []

    def checkout_racing(root, *args, **kwargs):
        if args[:1] == ("update-index",) and not failed:
            # The person's command holds the lock while it rewrites the file (let go 0.3 s later);
            # git fails our read of the file as it does then.
            lock.write_bytes(b"")
            threading.Timer(0.3, lock.unlink).start()
            failed.append(args[0])
            raise HistoryError("update-index", f"fatal: Unable to process path {LOG}")
        return real(root, *args, **kwargs)

    monkeypatch.setattr(staging, "run_git", checkout_racing)
    fact = asyncio.run(manager.add_memory("Keeps bees on the roof of the library.", "ana"))
    assert failed and fact is not None
    assert fact.content in git(home, "show", f"HEAD:memory/users/ana/{fact.timestamp[:10]}.md")


def test_a_write_that_lost_its_compare_and_swap_leaves_no_intent_for_its_bytes(engine, home):
    """The intent (the agent's name, its turn) is recorded before the bytes are written, so that
    a commit right after the write finds it. A write that then lost its compare-and-swap wrote
    nothing, yet left its intent: whenever the file came to hold those bytes later (the person's
    save, a stash popped back), its commit named the agent, for bytes the agent never wrote."""
    from syncd.errors import ConflictError

    rel = "vault/Plans.md"
    write(home, rel, "# Plans\n")
    engine.sync()
    engine.commit()
    lost = b"# Plans\n\n- Sail to Corsica.\n"
    intent = Intent(author="agent-007", summary="Plan a trip")
    with pytest.raises(ConflictError):
        engine.write_file(rel, lost, expected_sha="0" * 40, intent=intent)
    (home / rel).write_bytes(lost)  # the person saves exactly those bytes
    engine.sync()
    engine.commit()
    author, source = git(home, "log", "-1", "--format=%an%n%(trailers:key=Syncd-Source,valueonly)").split("\n")[:2]
    assert (author, source) != ("agent-007", "api") and source == "editor", (author, source)
