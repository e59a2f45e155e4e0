"""The session routes and MCP tools through a real uvicorn server: transcripts and agent state
read back exactly, scoped to the token's user, hostile session ids refused before any path."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import pytest

import syncd
from syncd.server.service import OPERATIONS
from syncd.session import StateMirror, TranscriptManager

from .daemon_helpers import isolate_git_identity
from .server_helpers import call_tool, mcp_over_http, served_in_thread

STATE = {
    "version": 2,
    "steps": [{"type": "task", "task": "Plan the Lyon trip"}, {"type": "final_answer", "answer": "Go in May."}],
    "tools": [],
    "serialized_at": "2026-11-23T10:00:00+00:00",
}


@pytest.fixture(scope="module")
def server(tmp_path_factory, embedder):
    mp = pytest.MonkeyPatch()
    isolate_git_identity(tmp_path_factory.mktemp("git"), mp)
    home = syncd.init(tmp_path_factory.mktemp("sessions") / "home").home
    with syncd.open(home, embedder=embedder) as engine:
        ana = TranscriptManager(engine, "ana")
        for n, (role, text) in enumerate(
            [("user", "Where should I go in May?"), ("assistant", "Lyon."), ("user", "Naïve café — ✓")]
        ):
            asyncio.run(ana.append_turn("s-1", role, text, metadata={"n": n}))
        StateMirror(engine, "ana").mirror_state("s-1", json.dumps(STATE).encode())
        asyncio.run(TranscriptManager(engine, "bob").append_turn("s-bob", "user", "Bob's secret plan."))
        engine.sync()
        engine.commit()
    try:
        with served_in_thread(home, embedder) as served:
            yield served
    finally:
        mp.undo()


def _json(response, status=200):
    assert response.status_code == status, response.text
    return response.json()


def test_transcript_state_and_list_with_the_admin_token(server):
    with server.client(server.admin) as admin:
        listed = _json(admin.get("/sessions", params={"user_id": "ana"}))
        assert [(x["session_id"], x["user_id"]) for x in listed["sessions"]] == [("s-1", "ana")]
        full = _json(admin.get("/session/s-1/transcript", params={"user_id": "ana"}))
        assert full["path"] == "memory/users/ana/sessions/s-1/transcript.jsonl"
        assert [(e["line"], e["role"], e["content"]) for e in full["entries"]] == [
            (1, "user", "Where should I go in May?"),
            (2, "assistant", "Lyon."),
            (3, "user", "Naïve café — ✓"),
        ]
        assert full["entries"][2]["meta"] == {"n": 2}
        last = _json(admin.get("/session/s-1/transcript", params={"user_id": "ana", "last_n": 1}))
        assert [e["line"] for e in last["entries"]] == [3]
        state = _json(admin.get("/session/s-1/state", params={"user_id": "ana"}))
        assert state["state"]["steps"] == STATE["steps"]
        no_state = _json(admin.get("/session/s-bob/state", params={"user_id": "bob"}))
        assert no_state["state"] is None


def test_a_users_token_reads_only_its_own_sessions(server):
    _, ana_token = server.tokens.add("ana")
    with server.client(ana_token) as ana:
        assert [e["line"] for e in _json(ana.get("/session/s-1/transcript"))["entries"]] == [1, 2, 3]
        assert _json(ana.get("/sessions"))["user_id"] == "ana"
        # Bob's session is not ana's: naming bob is refused, and under ana's own name it is not there.
        assert _json(ana.get("/session/s-bob/transcript", params={"user_id": "bob"}), 403)["error"]["type"]
        assert _json(ana.get("/session/s-bob/transcript"), 404)["error"]["type"]
        assert _json(ana.get("/session/s-bob/state"), 404)["error"]["type"]
    with server.client() as anonymous:
        assert anonymous.get("/session/s-1/transcript", params={"user_id": "ana"}).status_code == 401


@pytest.mark.parametrize("session", ["..", "a b", "-x", "s%2F..%2F..", "ü" * 3, "x" * 129])
def test_hostile_session_ids_are_refused_before_any_path(server, session):
    with server.client(server.admin) as admin:
        response = admin.get(f"/session/{session}/transcript", params={"user_id": "ana"})
        assert 400 <= response.status_code < 500 and response.status_code != 401, response.text


def test_session_operations_are_mcp_tools(server):
    assert {"session_list", "session_transcript"} <= set(OPERATIONS)
    with server.client(server.admin) as admin:
        # The schema the MCP tools are generated from is the one REST validates with.
        assert _json(admin.get("/session/s-1/transcript", params={"user_id": "ana", "last_n": -1}), 422)


def test_a_lone_surrogate_in_a_transcript_or_state_reads_as_a_replacement_character(server):
    # A transcript keeps whatever str an agent said (the Python API takes a lone surrogate, a JSON
    # file spells it \ud800); it failed the whole answer: a 500 from REST, a broken MCP reply, a
    # traceback from `syncd sessions show`.
    folder = server.home / "memory/users/ana/sessions/s-odd"
    folder.mkdir(parents=True)
    (folder / "transcript.jsonl").write_bytes(
        b'{"ts":"2026-11-23T10:00:00+00:00","role":"user","content":"half \\ud800 a pair","meta":{"k\\udfff":"v"}}\n'
    )
    (folder / "state.json").write_text(json.dumps({**STATE, "steps": [{"type": "task", "task": "plan \ud800"}]}))
    with server.client(server.admin) as admin:
        entries = _json(admin.get("/session/s-odd/transcript", params={"user_id": "ana"}))["entries"]
        assert [(e["content"], e["meta"]) for e in entries] == [("half \ufffd a pair", {"k\ufffd": "v"})]
        state = _json(admin.get("/session/s-odd/state", params={"user_id": "ana"}))["state"]
        assert state["steps"] == [{"type": "task", "task": "plan \ufffd"}]

    async def over_mcp():
        async with mcp_over_http(server, server.admin) as client:
            return await call_tool(client, "session_transcript", user_id="ana", session_id="s-odd")

    assert [e["content"] for e in asyncio.run(over_mcp())["entries"]] == ["half \ufffd a pair"]
    shown = subprocess.run(
        [sys.executable, "-m", "syncd", "sessions", "show", "s-odd", "--user", "ana", "--home", str(server.home)],
        capture_output=True,
        text=True,
        encoding="utf-8",
    )
    assert shown.returncode == 0 and "half \ufffd a pair" in shown.stdout, shown.stderr


def test_a_folder_or_a_link_where_a_session_file_belongs_is_a_404_that_says_so(server):
    # The session's folder exists, so the route read on and met an OSError: a 500 (and a dropped
    # connection) instead of an answer saying what is wrong with that session.
    sessions = server.home / "memory/users/ana/sessions"
    (sessions / "s-dirs/transcript.jsonl").mkdir(parents=True)
    (sessions / "s-dirs/state.json").mkdir()
    (sessions / "s-linked").symlink_to(server.home / "memory/users/bob/sessions/s-bob")
    with server.client(server.admin) as admin:
        for session, why in [("s-dirs", "a folder is there"), ("s-linked", "symbolic link")]:
            for what in ("transcript", "state"):
                error = _json(admin.get(f"/session/{session}/{what}", params={"user_id": "ana"}), 404)["error"]
                assert error["message"].startswith(f"session {session!r} of 'ana' cannot be read: ")
                assert why in error["message"] and "Bob's secret" not in error["message"]
        assert _json(admin.get("/session/s-1/transcript", params={"user_id": "ana"}))["entries"]
