"""kill -9 or Ctrl-C of a real ``syncd pull`` / ``syncd push`` at a chosen moment, then a
restart: no merge left half-done (no MERGE_HEAD, no git lock, no journal, no copy of the merge
driver's), nothing lost (every fact of both machines once), the index equal to a rebuild.

The moments are made deterministic by the process itself announcing it got there and waiting to
be killed: git's own hooks (``pre-merge-commit``: the merge's result is in the index and the tree,
its commit not made; the remote's ``pre-receive``: the push is on the wire) and, inside the merge
driver (git holds ``index.lock`` while drivers run), a ``sitecustomize`` on PYTHONPATH that stops
the driver's Python process: nothing of syncd's code knows it is being tested.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import syncd
from syncd.engine.sharing import PULL_JOURNAL, push, share

from .daemon_helpers import wait_for
from .helpers import assert_matches_rebuild, write
from .sharing_helpers import shared_homes

LOG = "memory/users/ana/2026-11-20.md"
HEAD_OF_LOG = "# 2026-11-20\n\n## 10:00\n"
PAUSE = """import os, sys, time
mark = os.environ.get("SYNCD_TEST_DRIVER_MARK")
if mark and "merge-driver" in getattr(sys, "orig_argv", ()):
    open(mark, "w").close()
    time.sleep(600)
"""


def _facts(side: str, n: int) -> str:
    return "".join(f"- [context] Fact {i} of machine {side}. <!-- id:f-{side}{i} imp:0.5 -->\n" for i in range(n))


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True).stdout


@pytest.fixture
def diverged(tmp_path, embedder):
    """Home a and its clone b, each with facts the other lacks in one daily log; a pushed."""
    remote, (a_root, b_root) = shared_homes(tmp_path, embedder, files={LOG: HEAD_OF_LOG})
    with syncd.open(a_root, embedder=embedder) as a, syncd.open(b_root, embedder=embedder) as b:
        share(b, "origin", None)
        for engine, side in ((a, "a"), (b, "b")):
            write(engine.home.root, LOG, HEAD_OF_LOG + _facts(side, 3))
            engine.sync()
            engine.commit()
        push(a, "origin")
    return remote, a_root, b_root


def _syncd(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "syncd", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **(env or {})},
        check=False,
    )


def _kill_when(
    marker: Path,
    *args: str,
    env: dict[str, str] | None = None,
    sig: signal.Signals = signal.SIGKILL,
    git_only: bool = False,
) -> None:
    """Run ``syncd ARGS`` in a process group of its own; once ``marker`` appears, send ``sig`` to
    the whole group (syncd, the git it runs, git's hooks and drivers): kill -9, or SIGINT as a
    terminal's Ctrl-C does. ``git_only``: to git and what it runs alone, as when they act on a
    Ctrl-C before syncd does."""
    process = subprocess.Popen(
        [sys.executable, "-m", "syncd", *args],
        env={**os.environ, **(env or {})},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        wait_for(lambda: marker.exists() or process.poll() is not None, 180, f"{marker.name}")
        assert process.poll() is None, process.stderr.read().decode()[-2000:]
        if git_only:
            for pid in _group_but_its_leader(process.pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, sig)
        else:
            os.killpg(process.pid, sig)
    finally:
        process.wait(60)
        process.stderr.close()


def _group_but_its_leader(group: int) -> list[int]:
    """The processes of process group ``group`` but its leader (syncd): the git it runs, and
    git's hooks and drivers (from /proc: each process's pgrp)."""
    found = []
    for stat_file in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat_file.read_text()
        except OSError:
            continue
        pid, fields = int(stat_file.parent.name), text[text.rindex(")") + 2 :].split()
        if int(fields[2]) == group and pid != group:
            found.append(pid)
    return found


def _left_under_way(b_root: Path, before: str) -> bool:
    """What a Ctrl-C leaves is one of two: syncd and the git it runs get it together, and either
    may act on it first. Either the merge is left under way with its journal, for the next pull
    to finish (True), as a kill leaves it; or git died first and syncd, seeing its merge fail,
    undid it as any failed merge, leaving nothing of it behind (False, checked here)."""
    folder = b_root / ".git"
    if (folder / "syncd" / PULL_JOURNAL).exists():
        return True
    assert not (folder / "MERGE_HEAD").exists() and not (folder / "index.lock").exists()
    assert _git(b_root, "rev-parse", "HEAD").strip() == before
    assert _git(b_root, "status", "--porcelain").strip() == ""  # no copy a driver was given
    return False


def _hook(folder: Path, name: str, marker: Path) -> Path:
    hook = folder / "hooks" / name
    hook.write_text(f"#!/bin/sh\ntouch '{marker}'\nsleep 600\n")
    hook.chmod(0o755)
    return hook


def _assert_whole(b_root: Path, embedder, merged_onto: str) -> None:
    """No merge left half-done, and the one merge commit onto what b had when it was killed."""
    git_dir = b_root / ".git"
    assert not (git_dir / "MERGE_HEAD").exists() and not (git_dir / "index.lock").exists()
    assert not (git_dir / "syncd" / PULL_JOURNAL).exists()
    assert _git(b_root, "status", "--porcelain").strip() == ""
    text = (b_root / LOG).read_text()
    for side in ("a", "b"):
        for i in range(3):
            assert text.count(f"Fact {i} of machine {side}.") == 1, text
    assert "Syncd-Source: merge" in _git(b_root, "log", "-1", "--format=%B")
    parents = _git(b_root, "log", "-1", "--format=%P").split()
    assert len(parents) == 2 and parents[0] == merged_onto  # the merge itself, not a commit of its pieces
    with syncd.open(b_root, embedder=embedder) as b:
        assert b.status().aligned_commit == _git(b_root, "rev-parse", "HEAD").strip()
        hits = b.search("Fact 2 of machine a", user_id="ana", limit=3)
        assert hits and "machine a" in hits[0].content
        assert_matches_rebuild(b)


@pytest.mark.parametrize(
    ("sig", "git_only"),
    [(signal.SIGKILL, False), (signal.SIGINT, False), (signal.SIGINT, True)],
    ids=["kill-9", "ctrl-c", "ctrl-c-to-git-first"],
)
def test_a_pull_killed_while_the_merge_driver_runs_is_undone_then_redone(diverged, tmp_path, embedder, sig, git_only):
    _remote, _a, b_root = diverged
    pause = tmp_path / "pause"
    pause.mkdir()
    (pause / "sitecustomize.py").write_text(PAUSE)
    marker = tmp_path / "in-driver"
    before = _git(b_root, "rev-parse", "HEAD").strip()
    path = os.pathsep.join(p for p in (str(pause), os.environ.get("PYTHONPATH", "")) if p)
    env = {"PYTHONPATH": path, "SYNCD_TEST_DRIVER_MARK": str(marker)}
    _kill_when(marker, "pull", "--home", str(b_root), env=env, sig=sig, git_only=git_only)
    # Killed mid-merge: the journal says whose merge it was, the tree is untouched; git's lock is
    # left by a kill (an interrupted git removes it, but not the copies it gave the driver).
    if sig == signal.SIGKILL or _left_under_way(b_root, before):
        assert (b_root / ".git" / "syncd" / PULL_JOURNAL).exists()
        assert (b_root / ".git" / "index.lock").exists() == (sig == signal.SIGKILL)
    assert "machine a" not in (b_root / LOG).read_text()
    again = _syncd("pull", "--home", str(b_root))
    assert again.returncode == 0 and "merged" in again.stdout, again.stderr[-2000:]
    _assert_whole(b_root, embedder, before)


@pytest.mark.parametrize(
    ("sig", "git_only"),
    [(signal.SIGKILL, False), (signal.SIGINT, False), (signal.SIGINT, True)],
    ids=["kill-9", "ctrl-c", "ctrl-c-to-git-first"],
)
def test_a_pull_killed_before_the_merge_commit_is_committed_by_the_next(diverged, tmp_path, embedder, sig, git_only):
    _remote, _a, b_root = diverged
    marker = tmp_path / "before-commit"
    hook = _hook(b_root / ".git", "pre-merge-commit", marker)
    before = _git(b_root, "rev-parse", "HEAD").strip()
    _kill_when(marker, "pull", "--home", str(b_root), sig=sig, git_only=git_only)
    hook.unlink()
    # The merge's result is in the tree and the index; HEAD has not moved.
    if sig == signal.SIGKILL or _left_under_way(b_root, before):
        assert "Fact 2 of machine a." in (b_root / LOG).read_text()
    assert "Syncd-Source: merge" not in _git(b_root, "log", "-1", "--format=%B")
    again = _syncd("pull", "--home", str(b_root))
    assert again.returncode == 0, again.stderr[-2000:]
    _assert_whole(b_root, embedder, before)


def test_a_push_killed_on_the_wire_is_pushed_by_the_next(diverged, tmp_path, embedder):
    remote, a_root, b_root = diverged
    marker = tmp_path / "receiving"
    hook = _hook(remote, "pre-receive", marker)
    before, ours = _git(remote, "rev-parse", "main").strip(), _git(b_root, "rev-parse", "HEAD").strip()
    _kill_when(marker, "push", "--home", str(b_root))
    hook.unlink()
    assert _git(remote, "rev-parse", "main").strip() == before  # the remote took nothing
    again = _syncd("push", "--home", str(b_root))
    assert again.returncode == 0 and "pushed" in again.stdout, again.stderr[-2000:]
    assert _git(remote, "rev-parse", "main").strip() == _git(b_root, "rev-parse", "HEAD").strip()
    _assert_whole(b_root, embedder, ours)
    pulled = _syncd("pull", "--home", str(a_root))
    assert pulled.returncode == 0 and "fast-forward" in pulled.stdout, pulled.stderr[-2000:]
    assert (a_root / LOG).read_text() == (b_root / LOG).read_text()
