"""A commit pass never moves HEAD under a git command of the person's that already read it: the
pass keeps git's index lock until such a command, begun before HEAD moved, has ended (it then
stops at the lock having changed nothing, instead of writing an index computed from the old
HEAD). Real git processes, found in /proc. `git apply --index` stands for the person's merge: it
writes the index from what it read, and waits for its patch on stdin as long as a test needs."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from syncd.history.chain import PlannedCommit, commit_chain
from syncd.history.git import head_sha

# White-box: _subcommand and _writes, the classifier of git command lines, have unit tests of their own.
from syncd.history.processes import _subcommand, _writes, process_clock, running_git_writers

from .daemon_helpers import git, isolate_git_identity, wait_for

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


@pytest.fixture(autouse=True)
def global_gitconfig(tmp_path, monkeypatch):
    return isolate_git_identity(tmp_path, monkeypatch)


def _repo(root: Path) -> Path:
    root.mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    (root / "seed.md").write_text("# seed\n")
    git(root, "add", "seed.md")
    git(root, "-c", "user.name=t", "-c", "user.email=t@x", "commit", "-qm", "seed")
    return root


def _waiting_git(root: Path, *args: str) -> subprocess.Popen:
    """A git command in ``root`` that runs until its stdin is closed."""
    proc = subprocess.Popen(
        ["git", *args], cwd=root, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    wait_for(lambda: Path(f"/proc/{proc.pid}/comm").read_text() == "git\n", 10, "git to start")
    return proc


def _end(proc: subprocess.Popen) -> None:
    assert proc.stdin is not None
    proc.stdin.close()
    proc.wait(10)


def test_subcommand_skips_gits_own_options():
    assert _subcommand(["git", "-C", "/x", "-c", "a=b", "--no-pager", "merge", "--no-edit", "side"]) == "merge"
    assert _subcommand(["git", "--git-dir", "/x/.git", "stash", "pop"]) == "stash"
    assert _subcommand(["git", "--version"]) is None
    assert _writes(["git", "stash", "pop"]) and not _writes(["git", "stash", "push", "-u"])
    assert _writes(["git", "merge", "side"]) and not _writes(["git", "log", "-1"])


def test_finds_the_persons_writing_git_commands_in_this_home_only(tmp_path):
    home, other = _repo(tmp_path / "home"), _repo(tmp_path / "other")
    before = process_clock() - 1
    writer = _waiting_git(home, "apply", "--index")
    elsewhere = _waiting_git(other, "apply", "--index")
    reader = _waiting_git(home, "cat-file", "--batch")
    try:
        found = running_git_writers(home)
        assert writer.pid in found
        assert elsewhere.pid not in found and reader.pid not in found
        assert writer.pid not in running_git_writers(home, started_by=before)
        assert writer.pid in running_git_writers(home, started_by=process_clock())
    finally:
        for proc in (writer, elsewhere, reader):
            _end(proc)
    assert writer.pid not in running_git_writers(home)


def test_a_pass_keeps_the_index_lock_until_a_command_begun_before_it_ends(tmp_path):
    root = _repo(tmp_path / "r")
    parent = head_sha(root)
    (root / "a.md").write_text("A\n")
    person = _waiting_git(root, "apply", "--index")
    done: list = []
    worker = threading.Thread(
        target=lambda: done.append(
            commit_chain(root, [PlannedCommit(("a.md",), (), "ana-agent", "a@x")], lambda changes, _read: ["add a"])
        )
    )
    worker.start()
    try:
        wait_for(lambda: head_sha(root) != parent, 20, "the pass to move HEAD")
        time.sleep(0.3)  # the wait is the point: the lock is not let go a moment after HEAD moved
        # HEAD moved, and the lock is still held for the command that may have read the old HEAD.
        assert (root / ".git/index.lock").exists() and worker.is_alive()
    finally:
        _end(person)
        worker.join(20)
    assert done and not (root / ".git/index.lock").exists()
    assert git(root, "status", "--porcelain").strip() == ""
    assert git(root, "log", "-1", "--format=%an %s").strip() == "ana-agent add a"


def test_a_pass_waits_a_bounded_time_for_a_command_that_does_not_end(tmp_path, monkeypatch):
    from syncd.history import staging

    monkeypatch.setattr(staging, "_SETTLE_LIMIT_S", 0.3)
    root = _repo(tmp_path / "r")
    (root / "a.md").write_text("A\n")
    person = _waiting_git(root, "apply", "--index")
    try:
        started = time.monotonic()
        commit_chain(root, [PlannedCommit(("a.md",), (), "ana-agent", "a@x")], lambda changes, _read: ["add a"])
        took = time.monotonic() - started
        assert 0.3 <= took < 10 and not (root / ".git/index.lock").exists()
    finally:
        _end(person)
