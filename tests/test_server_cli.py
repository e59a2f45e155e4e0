"""`syncd token add|list|revoke`: a user's token is shown once and kept only as a hash, files
are the owner's alone, and bad input is one line, never a traceback."""

from __future__ import annotations

import json
import stat
import subprocess

from syncd.home import Home
from syncd.server.tokens import TokenStore

from .cli_helpers import run_main


def syncd_cli(*args: str) -> subprocess.CompletedProcess:
    """The token commands through ``main()`` in this process (tests/cli_helpers.py): the files
    they write, their modes (the same umask) and their one-line errors are what a process's are."""
    return run_main(*args)


def test_token_commands(home):
    added = syncd_cli("token", "add", "--user", "ana", "--json", "--home", str(home))
    assert added.returncode == 0, added.stderr
    record = json.loads(added.stdout)
    assert record["user"] == "ana" and record["token"].startswith("sdu_")
    store = TokenStore.of(Home(home))
    assert store.dir == Home(home).private_dir
    assert store.check(record["token"]).user == "ana"
    assert store.check(record["token"] + "x") is None
    assert record["token"] not in store.users_path.read_text()
    assert stat.S_IMODE(store.users_path.stat().st_mode) == 0o600

    listed = syncd_cli("token", "list", "--json", "--home", str(home))
    assert [t["user"] for t in json.loads(listed.stdout)] == ["ana"]
    bad = syncd_cli("token", "add", "--user", "../ana", "--home", str(home))
    assert (
        bad.returncode == 1 and bad.stderr.startswith("syncd: error: invalid user id") and "Traceback" not in bad.stderr
    )
    revoked = syncd_cli("token", "revoke", record["id"], "--home", str(home))
    assert revoked.returncode == 0 and "ana" in revoked.stdout
    assert store.check(record["token"]) is None
    missing = syncd_cli("token", "revoke", "nobody", "--home", str(home))
    assert missing.returncode == 1 and "no token" in missing.stderr
    assert store.check(store.admin_token(create=True)).admin
    assert stat.S_IMODE(store.admin_path.stat().st_mode) == 0o600
