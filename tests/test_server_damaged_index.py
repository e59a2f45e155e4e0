"""A damaged index under a running `syncd serve`: a data file of its LanceDB tables cut short (a
disk error, a bad copy) while the server runs. Every surface says the one line the command line
says, with its remedy (`syncd reindex`): the REST API as a 503 in its JSON
shape, the MCP tools (over HTTP, and over stdio through the daemon's socket) as a tool error, the
daemon's log without a traceback. The remedy, taken with the server still running, works."""

from __future__ import annotations

import logging
import os

import anyio

import syncd
from syncd.index.damage import REMEDY

from .cli_helpers import run_main
from .daemon_helpers import isolate_git_identity, wait_for
from .helpers import write
from .server_helpers import call_tool, mcp_over_http, mcp_over_stdio, served_in_thread

CANNOT_READ = "the index cannot be read (lance error: "


def _cut_short(index) -> None:
    for table in (index / "lance").iterdir():
        for data in (table / "data").iterdir():
            os.truncate(data, 10)


def _damage_said(message: str) -> None:
    assert CANNOT_READ in message and message.endswith(REMEDY), message
    assert "\n" not in message and ".rs:" not in message, message


def test_a_damaged_index_is_one_line_with_its_remedy_on_every_surface(tmp_path, monkeypatch, embedder, caplog):
    isolate_git_identity(tmp_path, monkeypatch)
    home = syncd.init(tmp_path / "home").home
    write(home, "memory/users/ana/2026-11-22.md", "# 2026-11-22\n\n## 10:00\n- [pref] Likes green tea.\n")
    caplog.set_level(logging.INFO)
    with served_in_thread(home, embedder) as served:
        with served.client(served.admin) as http:
            hits = http.get("/memory/archival", params={"query": "tea", "user_id": "ana"}).json()["hits"]
            assert hits[0]["content"] == "Likes green tea."
            # The search may answer while the daemon's first reconcile still writes its other
            # tables; the damage is done to all of them once they are all written.
            wait_for(lambda: http.get("/status").json()["fresh"], 60, "the first sync")
            _cut_short(home / ".syncd" / "index")
            # The status counts the tables' rows (a search may answer from the rows in memory).
            answer = http.get("/status")
            assert answer.status_code == 503, answer.text
            error = answer.json()["error"]
            assert error["type"] == "IndexDamaged"
            _damage_said(error["message"])

            async def tools() -> list[str]:
                async with mcp_over_http(served, served.admin) as client:
                    over_http = await call_tool(client, "memory_status")
                async with mcp_over_stdio(home) as client:  # through the daemon's socket
                    over_stdio = await call_tool(client, "memory_status")
                return [over_http["error"], over_stdio["error"]]

            for said in anyio.run(tools):
                assert said.startswith("Error executing tool memory_status: IndexDamaged: "), said
                _damage_said(said.split("IndexDamaged: ", 1)[1])

    # The daemon meets it starting on the damaged index (`syncd watch` as `syncd serve`): its log
    # says the same line, without a traceback.
    _cut_short(home / ".syncd" / "index")
    caplog.clear()
    with served_in_thread(home, embedder) as served:
        failed = wait_for(
            lambda: [r for r in caplog.records if r.name == "syncd.daemon.loop" and r.levelno >= logging.ERROR],
            60,
            "the daemon to log the damaged index",
        )
        assert failed[0].getMessage().startswith(f"watch step failed: {CANNOT_READ}"), failed[0].getMessage()
        for record in failed:  # a write of the damaged tables that followed, if one did, too
            assert record.exc_info is None, record.getMessage()
            assert "lance error: " in record.getMessage() and REMEDY in record.getMessage(), record.getMessage()
        # The remedy, with the server still running: it answers from the rebuilt index.
        write(home, "memory/users/ana/2026-11-23.md", "# 2026-11-23\n\n## 10:00\n- [pref] Likes oolong.\n")
        assert run_main("reindex", "-q", "--home", str(home)).returncode == 0
        with served.client(served.admin) as http:
            assert http.get("/status").status_code == 200
            answer = http.get("/memory/archival", params={"query": "oolong", "user_id": "ana"})
            assert answer.status_code == 200, answer.text
            assert answer.json()["hits"][0]["content"] == "Likes oolong."


def test_a_lance_error_of_a_process_short_of_memory_or_files_is_not_called_damage():
    """Only LanceDB's errors about the tables send a person to rebuild them: out of memory or of
    file descriptors, removing the index would not help (and the error stays what it is)."""
    from syncd.index.damage import damaged_index

    cut = RuntimeError("lance error: Invalid data: file size is too small, /src/lance-file/reader.rs:120:5")
    assert "syncd reindex" in str(damaged_index(cut))
    for code, words in (
        (24, "Too many open files"),
        (23, "Too many open files in system"),
        (12, "Cannot allocate memory"),
    ):
        short = RuntimeError(f"lance error: IO error: {words} (os error {code}), /src/lance-io/local.rs:88:9")
        assert damaged_index(short) is None, words
