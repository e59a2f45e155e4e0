"""The write path's cost in git processes, and the shortcuts it takes keep every guarantee: the
unmerged-paths check answered once per index version, HEAD read from its files, the commit's tree
written from the real index only when the user has nothing else staged. Real git repositories."""

from __future__ import annotations

import asyncio
import os
import subprocess
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


def test_an_add_memory_costs_six_git_processes(engine, home, git_calls):
    manager = MemoryManager(engine, settings=Settings(llm_model="gpt-4o-mini"))
    asyncio.run(manager.add_memory("Warms up the first write.", "ana"))
    git_calls.clear()
    fact = asyncio.run(manager.add_memory("Keeps bees on the roof of the library.", "ana"))
    calls = Counter(git_calls)
    assert fact is not None and fact.id in git(home, "show", "HEAD")
    # One unmerged check, status, stage, the staged blobs, one reader (HEAD's trees and the blobs
    # for the message), update-ref: the tree and commit are written by syncd (objects.py), and
    # there is no read-tree of a private index, no second check, no rev-parse.
    assert calls == Counter(
        {"ls-files -u": 1, "status": 1, "update-index": 1, "ls-files -s": 1, "cat-file": 1, "update-ref": 1}
    ), calls


def test_a_group_of_writes_checks_for_unmerged_paths_once(engine, home, git_calls):
    with engine.changes(Intent(author="agent", summary="Three notes")):
        for name in ("A", "B", "C"):
            engine.write_file(f"vault/{name}.md", f"# {name}\n".encode())
        assert git_calls["ls-files -u"] == 1, git_calls
    # After the commit, once more: the index file it rewrote, asked about off the writer's turn.
    assert git_calls["ls-files -u"] == 2 and "read-tree" not in git_calls, git_calls
    assert git(home, "log", "-1", "--format=%s") == "Three notes\n"
    assert git(home, "show", "--name-only", "--format=", "HEAD").split() == ["vault/A.md", "vault/B.md", "vault/C.md"]
    git_calls.clear()
    engine.write_file("vault/D.md", b"# D\n")
    # The next write's own check was answered already: its one ls-files -u is after its commit.
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
