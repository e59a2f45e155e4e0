"""A remote that fails for a while is retried, not refused for good: a bare repository on a drive
that is not mounted (here: moved away, then back), and an ssh remote while the person's ssh agent
is locked. git's words are the same as for a refusal for good (no repository there; the server
refusing the key), which stopped a daemon's sharing until `syncd remote retry`, a change of the
remote's settings or a restart (tests/test_sharing_refusals.py has the refusals that stay)."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

import syncd
from syncd.daemon.sharing import read_remote_state
from syncd.engine.sharing import pull, push
from syncd.errors import HistoryError, RemoteRefused
from syncd.home import Home

from .cli_helpers import run_main
from .daemon_helpers import start_cli_daemon
from .helpers import wait_for, write
from .sharing_helpers import shared_homes


def _state(root: Path) -> dict:
    return read_remote_state(Home(root).private_dir) or {}


def _daemon_log(root: Path) -> str:
    return (root / ".syncd" / "daemon.log").read_text(errors="replace")


def test_a_remote_on_a_drive_not_mounted_is_retried_and_shared_again_once_back(tmp_path, embedder):
    remote, (a_root, _b) = shared_homes(tmp_path, embedder)
    away = remote.with_name("remote.git.unmounted")
    remote.rename(away)  # the drive holding it is unplugged
    with syncd.open(a_root, embedder=embedder) as engine:
        with pytest.raises(HistoryError, match="is not there now") as raised:
            pull(engine, "origin")
        assert not isinstance(raised.value, RemoteRefused)
    daemon = start_cli_daemon(a_root, "--remote", "origin", "--pull-every", "1")
    try:
        write(a_root, "vault/Trip.md", "# Trip\n\nWritten while the drive was out.\n")
        state = wait_for(lambda: _state(a_root).get("error") and _state(a_root), 120, "a failed pull")
        assert state["stopped"] is False and state["retry_at"] is not None, state
        assert "is not there now" in state["error"], state
        shown = run_main("status", "--home", str(a_root)).stdout
        assert "remote   failing for now, retried:" in shown and "is not there now" in shown, shown
        assert "stopped" not in shown and "syncd remote retry" not in shown, shown
        away.rename(remote)  # plugged in again: shared again with no one asking
        wait_for(
            lambda: (
                subprocess.run(
                    ["git", "cat-file", "-e", "main:vault/Trip.md"], cwd=remote, capture_output=True
                ).returncode
                == 0
            ),
            120,
            lambda: f"the push once the remote is back; the daemon's log:\n{_daemon_log(a_root)}",
        )
        wait_for(lambda: _state(a_root).get("error") is None, 120, "the daemon to say sharing works again")
        assert "stopped" not in _daemon_log(a_root)
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(60)


def test_a_push_url_on_a_drive_not_mounted_is_retried_though_the_fetch_url_is_there(tmp_path, embedder):
    """A remote fetched from one place and pushed to another (``remote.origin.pushurl``, a backup
    drive): the push to the unplugged drive was judged by the fetch URL, which is there and is
    a repository, so it read as a refusal for good and a daemon stopped sharing."""
    remote, (a_root, _b) = shared_homes(tmp_path, embedder)
    drive = tmp_path / "backup-drive" / "mem.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(remote), str(drive)], check=True)
    subprocess.run(["git", "-C", str(a_root), "config", "remote.origin.pushurl", str(drive)], check=True)
    drive.parent.rename(tmp_path / "backup-drive.unmounted")  # the drive is unplugged
    write(a_root, "vault/Trip.md", "# Trip\n\nWritten while the drive was out.\n")
    with syncd.open(a_root, embedder=embedder) as engine:
        engine.sync()
        engine.commit()
        with pytest.raises(HistoryError, match="is not there now") as raised:
            push(engine, "origin")
        assert not isinstance(raised.value, RemoteRefused)


# What git prints when an ssh server does not take the key offered (the suite has no ssh server to
# say it for real; the agent below is real).
_SSH_REFUSED = (
    "cannot reach remote 'origin': git@mem.example.org: Permission denied (publickey).\n"
    "fatal: Could not read from remote repository.\n\n"
    "Please make sure you have the correct access rights\nand the repository exists."
)


def test_ssh_refusing_the_key_is_retried_while_the_agent_is_locked(tmp_path, monkeypatch):
    """White-box: the classification itself (remote_failures.failed), with git's words for an
    ssh server refusing the key and a real ssh-agent, holding a key, locked and unlocked."""
    from syncd.history.remote_failures import failed

    root, url = tmp_path, "git@mem.example.org:mem.git"
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    assert isinstance(failed("fetch", _SSH_REFUSED, root, url), RemoteRefused)  # no agent: the key files
    sock = tmp_path / "agent.sock"
    agent = subprocess.Popen(["ssh-agent", "-D", "-a", str(sock)], stdout=subprocess.DEVNULL)
    try:
        wait_for(sock.exists, 30, "the ssh agent's socket")
        monkeypatch.setenv("SSH_AUTH_SOCK", str(sock))
        key = tmp_path / "id_ed25519"
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
        subprocess.run(["ssh-add", "-q", str(key)], check=True, capture_output=True)
        # The agent offered a key and the server refused it: for good, until someone acts.
        assert isinstance(failed("fetch", _SSH_REFUSED, root, url), RemoteRefused)
        askpass = tmp_path / "askpass"
        askpass.write_text("#!/bin/sh\necho lock-words\n")
        askpass.chmod(0o755)
        words = {"SSH_ASKPASS": str(askpass), "SSH_ASKPASS_REQUIRE": "force", "DISPLAY": ":0"}
        subprocess.run(["ssh-add", "-x"], check=True, capture_output=True, env=os.environ | words)
        locked = failed("fetch", _SSH_REFUSED, root, url)
        assert type(locked) is HistoryError and "ssh agent holds no key now (locked" in str(locked), locked
        # ssh's own words when the agent cannot sign: the same, whatever it lists.
        cannot = failed(
            "push", "sign_and_send_pubkey: signing failed: agent refused operation\n" + _SSH_REFUSED, root, url
        )
        assert type(cannot) is HistoryError and "cannot sign now" in str(cannot), cannot
        subprocess.run(["ssh-add", "-X"], check=True, capture_output=True, env=os.environ | words)
        assert isinstance(failed("fetch", _SSH_REFUSED, root, url), RemoteRefused)
    finally:
        agent.terminate()
        agent.wait(30)
