"""A PostgreSQL without pgvector (a real server whose database has no extension available): `syncd
init --index URL` and the daemon's start on a home recorded with such a URL each say so in one
clear line naming the fix, show no traceback, and write nothing to the markdown."""

from __future__ import annotations

import os
import subprocess
import sys

from syncd.index.backend import record_home_index

from .daemon_helpers import new_home
from .helpers import write

_FIX = "install pgvector on the server"


def _syncd(*args: str, cwd=None, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("SYNCD_HOME", "SYNCD_INDEX_URL")}
    return subprocess.run(
        [sys.executable, "-m", "syncd", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _git(cwd, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def test_init_says_what_to_install_and_makes_nothing(pg_server, tmp_path):
    url = pg_server.new_database_without_pgvector()
    target = tmp_path / "home"
    done = _syncd("init", str(target), "--index", url)
    assert done.returncode != 0, done.stdout
    assert "no pgvector extension" in done.stderr and _FIX in done.stderr, done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    assert not target.exists()


def test_the_daemon_refuses_to_start_and_leaves_the_markdown_as_it_was(pg_server, tmp_path, embedder):
    # A home whose recorded database lost pgvector (or never had it: a URL recorded by hand).
    url = pg_server.new_database_without_pgvector()
    root = new_home(tmp_path / "home", embedder)
    write(root, "memory/users/ana/2026-11-28.md", "# 2026-11-28\n\n## 10:00\n\n- [fact] Green tea.\n")
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "a fact")
    record_home_index(root, url)
    head = _git(root, "rev-parse", "HEAD")
    for command in (["watch"], ["sync"]):
        done = _syncd(*command, "--home", str(root))
        assert done.returncode != 0, (command, done.stdout, done.stderr)
        assert "no pgvector extension" in done.stderr and _FIX in done.stderr, (command, done.stderr)
        assert "Traceback" not in done.stderr + done.stdout, (command, done.stderr)
    assert _git(root, "rev-parse", "HEAD") == head
    assert _git(root, "status", "--porcelain") == ""
