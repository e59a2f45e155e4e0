"""`syncd serve` when things are not as they should be: a damaged token file, an idle MCP event
stream at shutdown, hand-edited session files, every error in the one documented JSON shape
without the server's own folders in it, and reverts made in the person's name."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import shutil
import signal
import socket
import time
from urllib.parse import urlsplit

import anyio
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

import syncd
from syncd.cli import cli
from syncd.home import Home
from syncd.server.tokens import TokenStore
from syncd.session import TranscriptManager
from syncd.session.transcripts import read_transcript_file

from .daemon_helpers import git, isolate_git_identity, wait_for, warm_embed_cache
from .server_helpers import call_tool, mcp_over_http, served_in_thread, server_url, start_serve_process

# Sessions of ana with 1..6 transcript entries ("t1" has one, ...).
COUNTS = range(1, 7)


@pytest.fixture(scope="module")
def server(tmp_path_factory, embedder):
    mp = pytest.MonkeyPatch()
    isolate_git_identity(tmp_path_factory.mktemp("git"), mp)
    home = syncd.init(tmp_path_factory.mktemp("faults") / "home").home
    with syncd.open(home, embedder=embedder) as engine:
        transcripts = TranscriptManager(engine, "ana")
        for count in COUNTS:
            for n in range(count):
                asyncio.run(transcripts.append_turn(f"t{count}", "user" if n % 2 == 0 else "assistant", f"entry {n}"))
        engine.commit()
    # session.json files as a person might leave them.
    for session, fields in {
        "naive": {"created_at": "2026-01-01T10:00:00", "last_active_at": "2026-01-01T11:00:00"},
        "flushed5": {"created_at": "2026-01-01T10:00:00+00:00", "last_active_at": "2026-01-02T10:00:00+00:00",
                     "flushed": 5, "turn_count": "three", "resets": -1, "chat": ["x"]},
        "notime": {"created_at": 12, "last_active_at": None},
    }.items():  # fmt: skip
        folder = home / "memory/users/ana/sessions" / session
        folder.mkdir(parents=True)
        (folder / "session.json").write_text(json.dumps(fields))
    try:
        with served_in_thread(home, embedder) as served:
            yield served
    finally:
        mp.undo()


def _error(response, status):
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"type", "message"}, body
    return body["error"]


# -- the token file ------------------------------------------------------------------------------


def test_a_damaged_token_file_leaves_the_admin_working_and_tells_users_why(server, caplog):
    _, ana_token = server.tokens.add("ana")
    users_file = server.tokens.users_path
    kept = users_file.read_bytes()
    try:
        users_file.write_text("{not json")
        with server.client(server.admin) as admin:
            assert admin.get("/status").status_code == 200
        with server.client(ana_token) as ana:
            error = _error(ana.get("/status"), 503)
            assert "token file" in error["message"] and str(server.home) not in error["message"]
        assert any("token file is repaired" in r.getMessage() for r in caplog.records)
    finally:
        users_file.write_bytes(kept)
    with server.client(ana_token) as ana:
        assert ana.get("/status").status_code == 200


# -- error shapes --------------------------------------------------------------------------------


def test_every_error_has_the_documented_shape(server):
    with server.client(server.admin) as admin:
        assert "no route" in _error(admin.get("/no/such/route"), 404)["message"]
        _error(admin.delete("/status"), 405)
        json_type = {"content-type": "application/json"}
        not_utf8 = _error(admin.post("/memory/archival", content=b"\xff\xfe{", headers=json_type), 400)
        assert not_utf8["message"] == "the request body could not be read (JSON in UTF-8 expected)"
        # Valid JSON in UTF-8, deeper than the parser goes: it read "JSON in UTF-8 expected".
        deep = b'{"steps": ' + b"[" * 1000 + b"]" * 1000 + b"}"
        too_deep = _error(admin.post("/memory/turns", content=deep, headers=json_type), 400)
        assert too_deep["message"].startswith("the request body is JSON nested too deeply")
        assert _error(admin.get("/mcp", headers={"accept": "text/event-stream"}), 405)
    parts = urlsplit(server.url)
    with socket.create_connection((parts.hostname, parts.port), timeout=10) as sock:
        sock.sendall(b"GET /health?" + b"q" * 200_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n")
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    assert b" 414 " in head.split(b"\r\n")[0] and json.loads(body)["error"]["type"] == "URITooLong"


def test_conflicts_name_paths_inside_the_home_only(server):
    today = dt.date.today().isoformat()
    log = server.home / f"memory/users/cid/{today}.md"
    block = server.home / "memory/users/cid/core/user.md"
    log.parent.mkdir(parents=True, exist_ok=True)
    block.parent.mkdir(parents=True, exist_ok=True)
    log.write_bytes(f"# {today}\n\n- [note] Fine.\n\xff broken\n".encode("latin-1"))
    block.write_bytes(b"Likes \xff tea.\n")
    try:
        with server.client(server.admin) as admin:
            answers = [
                admin.post("/memory/archival", json={"content": "Cid bikes to work.", "user_id": "cid"}),
                admin.put(
                    "/memory/core", json={"label": "user", "content": "x", "operation": "append", "user_id": "cid"}
                ),
            ]
        (server.home / ".git/index.lock").touch()
        try:
            with server.client(server.admin) as admin:
                answers.append(admin.post("/revert", json={"commit": git(server.home, "rev-parse", "HEAD").strip()}))
        finally:
            (server.home / ".git/index.lock").unlink()
    finally:
        log.unlink()
        block.unlink()
    for answer in answers:
        message = _error(answer, 409)["message"]
        for place in {str(server.home), str(server.home.resolve())}:
            assert place not in message, message
    assert "memory/users/cid/" in answers[0].json()["error"]["message"]


def test_a_folder_where_a_memory_file_belongs_is_a_409_and_nothing_is_lost(server):
    """A folder named like a user's MEMORY.md, core block or today's log: every request that
    reads or writes that file answers 409 naming it, and the folder and its files stay."""
    folder = server.home / "memory/users/dee"
    today = dt.date.today().isoformat()
    for name in ("MEMORY.md", "core/user.md", f"{today}.md"):
        (folder / name).mkdir(parents=True)
        (folder / name / "kept.md").write_text("Kept.\n")
    try:
        with server.client(server.admin) as admin:
            answers = {
                "MEMORY.md": [admin.get("/memory/file", params={"user_id": "dee"}),
                              admin.get("/memory/stats", params={"user_id": "dee"})],
                "core/user.md": [admin.put("/memory/core", json={"label": "user", "content": "Dee.", "user_id": "dee"})],
                f"{today}.md": [admin.post("/memory/archival", json={"content": "Dee rows.", "user_id": "dee"})],
            }  # fmt: skip
        for name, found in answers.items():
            for answer in found:
                message = _error(answer, 409)["message"]
                assert f"memory/users/dee/{name}: " in message and "a folder is there, not a file" in message
            assert (folder / name / "kept.md").read_text() == "Kept.\n"
    finally:
        shutil.rmtree(folder)


def test_a_revert_is_made_in_the_persons_git_name(server):
    with server.client(server.admin) as admin:
        added = admin.post("/memory/archival", json={"content": "Dee paints murals.", "user_id": "dee"}).json()
        wait_for(lambda: "Dee paints murals" in git(server.home, "log", "-1", "--format=%s"), 60, "the add's commit")
        sha = git(server.home, "log", "-1", "--format=%H").strip()
        git(server.home, "config", "user.name", "Dee Person")
        git(server.home, "config", "user.email", "dee@example.org")
        try:
            reverted = admin.post("/revert", json={"commit": sha})
            assert reverted.status_code == 200, reverted.text
        finally:
            git(server.home, "config", "--unset", "user.name")
            git(server.home, "config", "--unset", "user.email")
    assert git(server.home, "log", "-1", "--format=%an <%ae>").strip() == "Dee Person <dee@example.org>"
    log = server.home / f"memory/users/dee/{dt.date.today()}.md"
    assert not log.exists() or added["fact"]["id"] not in log.read_text()


# -- sessions ------------------------------------------------------------------------------------


def test_hand_edited_session_files_are_listed_with_what_is_readable(server):
    with server.client(server.admin) as admin:
        response = admin.get("/sessions", params={"user_id": "ana"})
    assert response.status_code == 200, response.text
    listed = {s["session_id"]: s for s in response.json()["sessions"]}
    assert {"naive", "flushed5"} <= set(listed) and "notime" not in listed
    assert listed["naive"]["last_active_at"].endswith("+00:00")
    assert listed["flushed5"]["turn_count"] == 0 and listed["flushed5"]["resets"] == 0
    # The broken ones are named, file and why, on every surface (a turn refuses to write over
    # them); a naive timestamp is no damage (it reads as UTC).
    base = "memory/users/ana/sessions"
    warnings = response.json()["warnings"]
    assert [w.split(":")[0] for w in warnings] == [f"{base}/flushed5/session.json", f"{base}/notime/session.json"]
    assert "turn_count is not a whole number" in warnings[0] and "created_at is not an ISO timestamp" in warnings[1]

    async def listed_over_mcp():
        async with mcp_over_http(server, server.admin) as client:
            return await call_tool(client, "session_list", user_id="ana")

    assert asyncio.run(listed_over_mcp())["warnings"] == warnings
    result = CliRunner().invoke(cli, ["sessions", "--home", str(server.home)])
    assert result.exit_code == 0 and result.exception is None, result.output
    assert "naive" in result.output and "flushed5" in result.output and "Traceback" not in result.output
    assert f"syncd: warning: {warnings[0]}" in result.stderr and f"syncd: warning: {warnings[1]}" in result.stderr


def _expected(count: int, n: int | None) -> list[str]:
    texts = [f"entry {i}" for i in range(count)]
    return texts if n is None else texts[len(texts) - min(n, len(texts)) :]


@pytest.fixture(scope="module")
def manager(server, embedder):
    with TranscriptManager(server.home, "ana", embedder=embedder) as opened:
        yield opened


@settings(max_examples=25, deadline=None, database=None)
@given(count=st.sampled_from(COUNTS), n=st.integers(0, 12))
def test_last_n_is_the_last_n_entries_everywhere(server, manager, count, n):
    """The last n entries, or all of them when there are fewer: the function, TranscriptManager,
    REST, MCP and `syncd sessions show --last` (4 of 3 entries gave 1, 5 gave 2)."""
    session, want = f"t{count}", _expected(count, n)
    assert [e["content"] for e in read_transcript_file(Home(server.home), "ana", session, n)] == want
    assert [e["content"] for e in asyncio.run(manager.read_transcript(session, n))] == want
    with server.client(server.admin) as admin:
        rest = admin.get(f"/session/{session}/transcript", params={"user_id": "ana", "last_n": n}).json()
    assert [e["content"] for e in rest["entries"]] == want

    async def over_mcp():
        async with mcp_over_http(server, server.admin) as client:
            return await call_tool(client, "session_transcript", session_id=session, user_id="ana", last_n=n)

    assert [e["content"] for e in anyio.run(over_mcp)["entries"]] == want
    shown = CliRunner().invoke(cli, ["sessions", "show", session, "--last", str(n), "--user", "ana", "--json",
                                     "--home", str(server.home)])  # fmt: skip
    assert shown.exit_code == 0, shown.output
    assert [e["content"] for e in json.loads(shown.output)] == want


# -- shutdown ------------------------------------------------------------------------------------


def test_an_idle_mcp_event_stream_does_not_hold_a_shutdown(tmp_path, monkeypatch, embedder):
    isolate_git_identity(tmp_path, monkeypatch)
    home = syncd.init(tmp_path / "home").home
    warm_embed_cache(home, embedder)
    proc = start_serve_process(home)
    try:
        url = urlsplit(server_url(home, proc))
        token = TokenStore.of(Home(home)).admin_token()
        with socket.create_connection((url.hostname, url.port), timeout=10) as stream:
            stream.sendall(f"GET /mcp HTTP/1.1\r\nHost: {url.netloc}\r\nAccept: text/event-stream\r\n"
                           f"Authorization: Bearer {token}\r\n\r\n".encode())  # fmt: skip
            stream.recv(4096)
            started = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(25) == 0
            assert time.monotonic() - started < 10  # it took the whole 30 s grace period
    finally:
        if proc.poll() is None:
            proc.kill()
