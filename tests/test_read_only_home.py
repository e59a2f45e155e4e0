"""A home the user cannot write to: on a read-only mount, or with its folders' write permission
taken away. Reading it works as well as ever (search, status, blame, log, lint) and says nothing
about what it could not write; changing it says what is wrong in one line."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import anyio
import numpy as np
import pytest

import syncd
from syncd.errors import EmbeddingError
from syncd.index.embed_cache import EmbeddingCache

from .cli_helpers import run_main
from .helpers import write
from .mounts import read_only_view, without_root_powers
from .server_helpers import call_tool, mcp_over_stdio

LOG = "memory/users/ana/2026-11-22.md"


@pytest.fixture
def indexed(home: Path, embedder) -> Path:
    write(home, LOG, "# 2026-11-22\n\n## 10:00\n- [pref] Likes green tea. <!-- id:f-tea -->\n")
    with syncd.open(home, embedder=embedder) as engine:
        engine.sync()
        engine.commit()
    return home


def _reads_quietly(root: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Every reading command works on ``root`` and warns of nothing (the CLI's warnings are
    logged: under pytest they reach caplog, not stderr)."""
    caplog.set_level(logging.WARNING)
    for args in (["search", "green tea"], ["status"], ["blame", "f-tea"], ["log", "-n", "1"], ["lint"]):
        caplog.clear()
        result = run_main(*args, "--home", str(root))
        assert result.returncode == 0 and result.stderr == "", (args, result.stderr)
        assert caplog.messages == [], (args, caplog.messages)
        if args[0] == "search":
            assert "Likes green tea." in result.stdout


def test_a_home_on_a_read_only_mount_is_searched_and_read(indexed: Path, tmp_path: Path, caplog):
    with read_only_view(indexed, tmp_path / "ro") as ro:
        _reads_quietly(ro, caplog)


def test_a_read_only_home_whose_files_mirror_is_gone_is_read_quietly(indexed: Path, tmp_path: Path, caplog):
    # The mirror is what status reads instead of LanceDB; a reader that finds it gone tries to
    # make it again, which a read-only home refuses.
    (indexed / ".syncd" / "index" / "files.sqlite").unlink()
    with read_only_view(indexed, tmp_path / "ro") as ro:
        _reads_quietly(ro, caplog)


def test_the_embedding_cache_of_a_home_that_cannot_be_written_is_read(tmp_path: Path):
    folder = tmp_path / "state"
    with EmbeddingCache(folder / "embed_cache.sqlite") as cache:
        cache.put_many("m", ["tea"], np.ones((1, 4), dtype=np.float32))
    (tmp_path / "empty").mkdir()
    with read_only_view(tmp_path, tmp_path.parent / f"{tmp_path.name}-ro") as ro:
        with EmbeddingCache(ro / "state" / "embed_cache.sqlite") as cache:
            assert cache.read_only and list(cache.get_many("m", ["tea"])[0]) == [1.0] * 4
            with pytest.raises(EmbeddingError, match="cannot write the embedding cache"):
                cache.put_many("m", ["coffee"], np.ones((1, 4), dtype=np.float32))
        # No cache there yet, and no way to make one: one in memory, for this process.
        with EmbeddingCache(ro / "empty" / "embed_cache.sqlite") as cache:
            assert cache.read_only and cache.get_many("m", ["tea"]) == {}
            cache.put_many("m", ["tea"], np.ones((1, 4), dtype=np.float32))
            assert len(cache.get_many("m", ["tea"])) == 1
    assert sorted(p.name for p in (tmp_path / "empty").iterdir()) == []


def test_a_home_its_user_may_not_write_is_searched(indexed: Path):
    for folder, _, files in os.walk(indexed):
        for name in (*files, ""):
            os.chmod(os.path.join(folder, name), 0o555 if not name else 0o444)
    try:
        for args in (["search", "green tea"], ["status"]):
            done = subprocess.run(
                without_root_powers([*args, "--home", str(indexed)]), capture_output=True, text=True, timeout=120
            )
            assert done.returncode == 0 and done.stderr == "", (args, done.stderr)
    finally:
        subprocess.run(["chmod", "-R", "u+w", str(indexed)], check=True)


def test_the_daemon_log_of_a_read_only_home_is_one_warning(indexed: Path, tmp_path: Path, capsys, caplog):
    """A server reading a read-only home (`syncd serve --read-only`) opened its log before
    anything else, and stopped there: 'Read-only file system: .../.syncd/daemon.log'."""
    from syncd.daemon.logfile import daemon_log
    from syncd.home import Home

    caplog.set_level(logging.INFO, logger="syncd")  # what daemon_log sets, put back after the test
    with read_only_view(indexed, tmp_path / "ro") as ro:
        handler = daemon_log(Home(ro))
        try:
            for i in range(3):
                logging.getLogger("syncd.test").info("line %d", i)
        finally:
            logging.getLogger("syncd").removeHandler(handler)
            handler.close()
    assert capsys.readouterr().err == (
        f"syncd: warning: cannot write the daemon's log {ro}/.syncd/daemon.log: the file system is read-only; "
        "syncd goes on without it until it can be written\n"
    )


def _refusal(root: Path, why: str) -> str:
    return (
        f"syncd: error: cannot change the home {root}: its lock {root}/.git/syncd/lock cannot be written ({why}); "
        "sync, reindex, watch, serve, revert, pull, push and agents' writes need write access to the home and its "
        ".git folder (search, status and log do not)\n"
    )


def test_changing_a_home_that_cannot_be_written_says_what_needs_write_access(indexed: Path, tmp_path: Path):
    """Was 'syncd: error: Read-only file system: HOME/.git/syncd/lock': neither what was refused
    nor what to do."""
    with read_only_view(indexed, tmp_path / "ro") as ro:
        for args in (["sync", "-q"], ["reindex", "-q"], ["watch"], ["revert", "HEAD"], ["pull"]):
            result = run_main(*args, "--home", str(ro))
            assert (result.returncode, result.stderr) == (1, _refusal(ro, "the file system is read-only")), args
    lock = indexed / ".git" / "syncd" / "lock"
    lock.chmod(0o444)
    try:
        done = subprocess.run(
            without_root_powers(["sync", "-q", "--home", str(indexed)]), capture_output=True, text=True, timeout=120
        )
    finally:
        lock.chmod(0o644)
    assert (done.returncode, done.stderr) == (1, _refusal(indexed, "permission denied"))


def _sync_without_root_powers(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run(without_root_powers(["sync", "-q", "--home", str(root)]), capture_output=True, text=True,
                          timeout=120)  # fmt: skip


def test_a_sync_into_an_index_folder_the_user_may_not_write_says_so_first(indexed: Path):
    """A `sudo syncd sync` leaves .syncd/ root's: the user's next sync parsed and embedded,
    warned that the embedding cache could not be written, then failed in LanceDB's words
    ('lance error: LanceError(IO): Permission denied (os error 13) at path .../data/.tmpXXXX')."""
    write(indexed, "memory/users/ana/2026-11-23.md", "# 2026-11-23\n\n## 10:00\n- [pref] Likes coffee.\n")
    subprocess.run(["chmod", "-R", "a-w", str(indexed / ".syncd")], check=True)
    try:
        done = _sync_without_root_powers(indexed)
    finally:
        subprocess.run(["chmod", "-R", "u+w", str(indexed / ".syncd")], check=True)
    assert done.returncode == 1
    assert done.stderr == (
        f"syncd: error: {indexed}/.syncd cannot be written (permission denied): syncd keeps the home's index there. "
        f"It is derived and safe to delete: make {indexed}/.syncd yours again (chown -R) or remove it, then run "
        "`syncd reindex`\n"
    )


def test_a_sync_of_a_home_whose_folder_the_user_may_not_write_says_so(indexed: Path):
    subprocess.run(["rm", "-rf", str(indexed / ".syncd")], check=True)
    indexed.chmod(0o555)
    try:
        done = _sync_without_root_powers(indexed)
    finally:
        indexed.chmod(0o755)
    assert done.returncode == 1
    assert done.stderr == (
        f"syncd: error: cannot make {indexed}/.syncd, where syncd keeps the home's index (permission denied): "
        f"changing the home needs write access to {indexed}\n"
    )


def test_tokens_of_a_read_only_home_are_listed_and_a_change_is_refused_in_one_line(indexed: Path, tmp_path: Path):
    """Was 'syncd: error: Read-only file system: HOME/.git/syncd/tokens.lock'."""
    with read_only_view(indexed, tmp_path / "ro") as ro:
        assert run_main("token", "list", "--home", str(ro)).returncode == 0
        for args in (["token", "add", "--user", "ana"], ["token", "revoke", "--user", "ana"]):
            result = run_main(*args, "--home", str(ro))
            assert result.returncode == 1, args
            assert result.stderr == (
                f"syncd: error: cannot change the tokens kept in {ro}/.git/syncd (the file system is read-only): "
                "issuing or revoking a token, and a server's first start, need write access to the home's .git "
                "folder\n"
            ), args


def test_a_read_only_home_is_searched_as_a_kept_revision_left_it(indexed: Path, tmp_path: Path):
    """`search --at` failed with 'Read-only file system' (no file named) even for a revision its
    writer had built, from marking it as the most recently asked; a revision not built yet said
    'Read-only file system: .../.syncd/asof/.SHA-XXXX'."""
    from syncd.engine.asof import close_past_engines

    assert run_main("search", "green tea", "--at", "HEAD", "--home", str(indexed)).returncode == 0
    with read_only_view(indexed, tmp_path / "ro") as ro:
        try:
            kept = run_main("search", "green tea", "--at", "HEAD", "--home", str(ro))
            assert kept.returncode == 0 and "Likes green tea." in kept.stdout, kept.stderr
            first = subprocess.run(["git", "-C", str(ro), "rev-parse", "HEAD~1"], capture_output=True, text=True)
            new = run_main("search", "green tea", "--at", "HEAD~1", "--home", str(ro))
            assert new.returncode == 1
            assert new.stderr == (
                f"syncd: error: cannot search the memory as {first.stdout[:10]} left it: its index is built in "
                f"{ro}/.syncd/asof, which cannot be written (the file system is read-only); the revisions built "
                "there before are searched as ever\n"
            )
        finally:
            close_past_engines()


def _mcp_reads_and_refuses_writes(root: Path, command: list[str]) -> None:
    """`syncd mcp` over stdio on ``root``: searches and reads answer, every write is refused
    saying why, and nothing of the home changes."""
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file() and ".git" not in p.parts}

    async def main() -> tuple[list[dict], list[str]]:
        async with mcp_over_stdio(root, command=command) as client:
            reads = [
                await call_tool(client, "memory_search", query="green tea", user_id="ana"),
                await call_tool(client, "core_memory_get", user_id="ana"),
                await call_tool(client, "memory_blame", fact_id="f-tea", user_id="ana"),
            ]
            writes = [
                await call_tool(client, "memory_add", content="Likes coffee.", user_id="ana"),
                await call_tool(client, "core_memory_replace", label="user", content="Ana.", user_id="ana"),
                await call_tool(client, "memory_delete", memory_id="f-tea", user_id="ana"),
            ]
        return reads, [w["error"] for w in writes]

    reads, refused = anyio.run(main)
    assert reads[0]["hits"][0]["content"] == "Likes green tea."
    assert "user" in reads[1]["blocks"] and reads[2]["histories"]
    for error in refused:
        assert "AccessError: this home is read-only to `syncd mcp`: cannot change the home" in error, error
        assert "need write access to the home and its .git folder" in error and "\n" not in error, error
    assert {p: p.read_bytes() for p in root.rglob("*") if p.is_file() and ".git" not in p.parts} == before


def test_mcp_over_stdio_serves_a_read_only_home_read_only(indexed: Path, tmp_path: Path):
    """`syncd mcp` refused to start on a home it may not write (its lock refused), where
    `syncd search` and `syncd serve --read-only` read it: an agent lost its memory's reads."""
    with read_only_view(indexed, tmp_path / "ro") as ro:
        _mcp_reads_and_refuses_writes(ro, [sys.executable, "-m", "syncd"])


def test_mcp_over_stdio_serves_a_home_its_user_may_not_write_read_only(indexed: Path):
    subprocess.run(["chmod", "-R", "a-w", str(indexed)], check=True)
    try:
        _mcp_reads_and_refuses_writes(indexed, without_root_powers([]))
    finally:
        subprocess.run(["chmod", "-R", "u+w", str(indexed)], check=True)
