"""`syncd watch` as a real process: one per home, clean stop on SIGTERM, recovery from kill -9,
and a file it is not allowed to read (the daemon runs as an unprivileged user for that one)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

import syncd
from syncd.home import Home

from .daemon_helpers import (
    daily_log,
    git,
    settled,
    start_cli_daemon,
    subjects,
    wait_for,
    warm_embed_cache,
)
from .helpers import assert_matches_rebuild, write
from .mounts import WITHOUT_ROOT_POWERS

FACTS = [
    "Likes green tea in the morning.",
    "Works as a nurse in Lyon.",
    "Is allergic to peanuts.",
    "Has a cat called Miso.",
    "Prefers short answers.",
    "Runs on Sundays.",
]
NOBODY = 65534


def _stop(proc: subprocess.Popen, home: Path) -> tuple[int, str]:
    """SIGTERM, then the exit status and the daemon's log (for the failure message)."""
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=60)
    return proc.returncode, _log_text(home)[-3000:]


def _log_text(home: Path) -> str:
    try:
        return (home / ".syncd/daemon.log").read_text(errors="replace")
    except FileNotFoundError:
        return ""


def test_two_daemons_on_one_home_cannot_both_run_and_sigterm_commits(home, embedder):
    warm_embed_cache(home, embedder)
    first = start_cli_daemon(home)
    try:
        wait_for(lambda: "watching" in _log_text(home), 60, "the first daemon to start")
        second = subprocess.run(
            [sys.executable, "-m", "syncd", "watch", "--home", str(home)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert second.returncode == 1
        assert f"pid {first.pid}" in second.stderr, second.stderr
        with syncd.open(home, read_only=True, embedder=embedder) as reader:
            # Its first reconcile done: a page it took in instead, if stopped halfway, is left
            # for the next start (as the README says), not committed on the way out.
            wait_for(lambda: reader.status().fresh, 30, "the daemon's first reconcile")
            write(home, "vault/Tea.md", "# Tea\n\nGreen tea is grassy.\n")
            wait_for(lambda: reader.status().fresh, 30, "the daemon to index the page")
        code, err = _stop(first, home)
    finally:
        if first.poll() is None:
            first.kill()
    assert code == 0, err
    assert subjects(home)[0] == "add vault/Tea.md"  # committed on the way out, quiet period or not
    assert not Home(home).lock_path.read_text().strip()  # released
    with syncd.open(home, embedder=embedder) as engine:
        assert_matches_rebuild(engine)


def _stage_bulk(home: Path, users: int, days: int) -> Path:
    """users x days daily logs outside the home, moved in folder by folder (a burst)."""
    staging = Path(tempfile.mkdtemp(dir=home.parent))
    for u in range(users):
        for d in range(days):
            write(
                staging,
                f"bulk{u}/2026-{1 + d // 28:02d}-{1 + d % 28:02d}.md",
                daily_log([FACTS[(u + d) % 6], FACTS[(u * 7 + d) % 6]]),
            )
    return staging


# Files moved in at once: more than three of the daemon's 256-file writes, so the kill -9 after
# the first is written lands with most of the batch still to come (and a restart to finish it).
BULK_USERS, BULK_DAYS = 25, 32
BULK = BULK_USERS * BULK_DAYS


def test_kill_9_during_a_large_batch_then_restart_converges(home, embedder):
    warm_embed_cache(home, embedder)
    staging = _stage_bulk(home, BULK_USERS, BULK_DAYS)
    daemon = start_cli_daemon(home)
    reader = syncd.open(home, read_only=True, embedder=embedder)
    try:
        wait_for(lambda: "watching" in _log_text(home) and settled(reader), 60, "the daemon to start")
        before = len(reader.index.files())
        for folder in sorted(staging.iterdir()):
            os.replace(folder, home / "memory/users" / folder.name)
        # More files than before, not merely another count: a reader once saw 3 fewer for a moment
        # (CI; -3 is truthy), which ended this wait before the batch had begun.
        mid = wait_for(lambda: max(len(reader.index.files()) - before, 0), 60, "the bulk apply to begin")
        daemon.kill()
        daemon.wait(timeout=30)
        assert 0 < mid < BULK, f"killed after {mid} files: not in the middle of the batch"
        daemon = start_cli_daemon(home)
        wait_for(lambda: settled(reader), 120, "the restarted daemon to converge")
        code, err = _stop(daemon, home)
        assert code == 0, err
    finally:
        reader.close()
        if daemon.poll() is None:
            daemon.kill()
    with syncd.open(home, embedder=embedder) as engine:
        rows = engine.index.all_rows().to_pylist()
        keys = [(r["path"], r["id"]) for r in rows]
        assert len(keys) == len(set(keys)), "duplicate rows after the crash"
        assert len([p for p in engine.index.files() if p.startswith("memory/users/bulk")]) == BULK
        assert_matches_rebuild(engine)
    assert "2026-01-01.md" in git(home, "log", "--name-only", "--format=")
    assert not git(home, "status", "--porcelain", "--", "memory")


# Root reads every file whatever its mode, through CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH.
# Without those (WITHOUT_ROOT_POWERS) the daemon is still uid 0 but meets file modes like anyone else.
_CHECK = textwrap.dedent("""
    import sys
    import syncd
    from tests.helpers import assert_matches_rebuild
    with syncd.open(sys.argv[1]) as engine:
        status = engine.status()
        assert status.fresh and status.uncommitted == ["vault/Secret.md"], status
        assert "Permission denied" in status.errors["vault/Secret.md"], status.errors
        assert_matches_rebuild(engine)
    print("rebuild-ok")
""")


@pytest.mark.skipif(shutil.which("setpriv") is None or os.geteuid() != 0, reason="needs root and setpriv")
def test_permission_denied_on_one_file_is_skipped_and_the_daemon_goes_on(home, embedder):
    warm_embed_cache(home, embedder)
    write(home, "vault/Tea.md", "# Tea\n\nGreen tea is grassy.\n")
    daemon = start_cli_daemon(home, prefix=WITHOUT_ROOT_POWERS)
    try:
        wait_for(lambda: "add vault/Tea.md" in subjects(home), 60, "the daemon's first commit")
        secret = write(home, "vault/Secret.md", "# Secret\n\nThe safe code is 1234.\n")
        os.chmod(secret, 0)
        with open(home / "vault/Tea.md", "a") as handle:
            handle.write("\nOolong is roasted.\n")
        wait_for(lambda: "skipped vault/Secret.md" in _log_text(home), 30, "the permission error in the log")
        wait_for(lambda: "edit vault/Tea.md" in subjects(home), 30, "the other edit to be committed")
        assert "Permission denied" in _log_text(home) and daemon.poll() is None
        assert "vault/Secret.md" not in git(home, "log", "--name-only", "--format=")
        code, err = _stop(daemon, home)
        assert code == 0, err
        # The index with the unreadable file equals a rebuild made by a process that cannot read it.
        check = subprocess.run(
            [*WITHOUT_ROOT_POWERS, sys.executable, "-c", _CHECK, str(home)],
            cwd=Path(__file__).parents[1],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert "rebuild-ok" in check.stdout, check.stderr
        daemon = start_cli_daemon(home, prefix=WITHOUT_ROOT_POWERS)
        wait_for(lambda: "watching" in _log_text(home).rsplit("stopped watching", 1)[-1], 60, "the restart")
        os.chmod(secret, 0o644)  # the fix is an attrib event: the file is read and indexed now
        wait_for(lambda: "add vault/Secret.md" in subjects(home), 30, "the fixed file to be committed")
        code, err = _stop(daemon, home)
        assert code == 0, err
    finally:
        if daemon.poll() is None:
            daemon.kill()
    with syncd.open(home, embedder=embedder) as engine:
        assert not engine.status().errors
        assert_matches_rebuild(engine)
