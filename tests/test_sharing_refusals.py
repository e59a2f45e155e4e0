"""What a shared home says when the remote or the person gets in the way (real git, real homes):
a remote that declines a push says why at once instead of being pulled from in a loop; a secret
in a remote's URL is never printed; a remote of another history is refused in one line; a merge
the home's own hook declines is not committed anyway."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import syncd
from syncd.engine.sharing import pull, push
from syncd.errors import GitBusyError, HistoryError

from .helpers import assert_matches_rebuild
from .sharing_helpers import shared_homes


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True).stdout


def test_a_push_the_remote_declines_says_why_without_pulling(tmp_path, embedder):
    remote, (a_root, _b) = shared_homes(tmp_path, embedder)
    hook = remote / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'no pushes on Sunday' >&2\nexit 1\n")
    hook.chmod(0o755)
    before = git(remote, "rev-parse", "main")
    (a_root / "vault" / "Sunday.md").write_text("# Sunday\n\nWritten on a Sunday.\n")
    with syncd.open(a_root, embedder=embedder) as a:
        with pytest.raises(HistoryError, match=r"refused the push: \[remote rejected\] \(pre-receive hook declined\)"):
            push(a, "origin")
    assert git(remote, "rev-parse", "main") == before
    assert "Syncd-Source: merge" not in git(a_root, "log", "--format=%B")


def syncd_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "syncd", *args], capture_output=True, text=True, check=False)


def test_a_secret_in_a_remote_s_url_is_never_printed(tmp_path):
    root = str(syncd.init(tmp_path / "a").home)
    urls = {
        "lab": "https://ana:hunter2@git.example.org/mem.git",
        "hub": "https://ghp_SECRETTOKEN@github.com/ana/mem.git",
    }
    for name, url in urls.items():
        assert syncd_cli("remote", "add", name, url, "--home", root).returncode == 0
    again = syncd_cli("remote", "add", "lab", "https://ana:other@git.example.org/x.git", "--home", root)
    listed = syncd_cli("remote", "list", "--home", root)
    assert again.returncode == 1 and "already points at https://ana:***@git.example.org/mem.git" in again.stderr
    assert listed.stdout.splitlines() == [
        "hub https://***@github.com/ana/mem.git",
        "lab https://ana:***@git.example.org/mem.git",
    ]
    for shown in (again.stdout + again.stderr, listed.stdout + listed.stderr):
        assert "hunter2" not in shown and "SECRETTOKEN" not in shown
    assert "hunter2" in git(Path(root), "config", "remote.lab.url")  # git keeps it to authenticate with


def test_a_remote_of_another_history_is_refused_in_one_line(tmp_path, embedder):
    remote, _homes = shared_homes(tmp_path, embedder)
    # A folder with a history of its own, adopted (two homes made by syncd init in the same second
    # would share their first commit).
    (tmp_path / "other" / "vault").mkdir(parents=True)
    (tmp_path / "other" / "vault" / "Mine.md").write_text("# Mine\n\nOnly here.\n")
    git(tmp_path, "init", "-q", "-b", "main", "other")
    git(tmp_path / "other", "add", "-A")
    git(tmp_path / "other", "-c", "user.name=Ana", "-c", "user.email=ana@example.org", "commit", "-qm", "mine")
    other = syncd.init(tmp_path / "other").home
    assert syncd_cli("remote", "add", "origin", str(remote), "--home", str(other)).returncode == 0
    for command in ("pull", "push"):
        done = syncd_cli(command, "--home", str(other))
        assert done.returncode == 1 and done.stdout == "", done.stderr
        assert done.stderr.startswith("syncd: error: git pull failed: origin/main shares no history with this home")
        assert len(done.stderr.strip().splitlines()) == 1
    assert not (other / ".git" / "MERGE_HEAD").exists() and not (other / ".git" / "syncd" / "pull.json").exists()
    assert git(other, "log", "--merges", "--oneline") == "" and git(other, "ls-files", "vault/Mine.md")
    assert git(other, "status", "--porcelain") == ""


def test_a_merge_the_home_s_own_hook_declines_is_not_committed_anyway(tmp_path, embedder):
    log = "memory/users/ana/2026-11-20.md"
    _remote, (a_root, b_root) = shared_homes(tmp_path, embedder, files={log: "# 2026-11-20\n\n## 10:00\n"})
    with syncd.open(a_root, embedder=embedder) as a, syncd.open(b_root, embedder=embedder) as b:
        for engine, side in ((a, "laptop"), (b, "server")):
            with open(engine.home.root / log, "a", encoding="utf-8") as handle:
                handle.write(f"- [context] Learned on the {side}.\n")
        push(a, "origin")
        hook = b_root / ".git" / "hooks" / "pre-merge-commit"
        hook.write_text("#!/bin/sh\necho 'no merges on Friday' >&2\nexit 1\n")
        hook.chmod(0o755)
        with pytest.raises(GitBusyError, match="pre-merge-commit hook declined it"):
            pull(b, "origin")
        assert not (b_root / ".git" / "MERGE_HEAD").exists() and git(b_root, "log", "--merges") == ""
        assert "laptop" not in (b_root / log).read_text() and "Learned on the server." in (b_root / log).read_text()
        assert git(b_root, "status", "--porcelain") == ""
        hook.unlink()
        assert pull(b, "origin").head is not None
        assert "Learned on the laptop." in (b_root / log).read_text()
        assert_matches_rebuild(b)
