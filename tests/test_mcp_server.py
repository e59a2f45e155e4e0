"""MCP through the SDK's own client: over streamable HTTP at /mcp of a real `syncd serve`, and
over stdio (`syncd mcp`), both beside a running server (through the local socket) and alone
(holding the home itself). Every tool, and a user token's scope."""

from __future__ import annotations

import datetime as dt

import anyio
import pytest

import syncd
from syncd.control.protocol import socket_path
from syncd.server.service import OPERATIONS

from .daemon_helpers import git, isolate_git_identity
from .server_helpers import call_tool, mcp_over_http, mcp_over_stdio, served_in_thread


@pytest.fixture(scope="module")
def server(tmp_path_factory, embedder):
    mp = pytest.MonkeyPatch()
    isolate_git_identity(tmp_path_factory.mktemp("git"), mp)
    home = syncd.init(tmp_path_factory.mktemp("mcp") / "home").home
    try:
        with served_in_thread(home, embedder) as served:
            yield served
    finally:
        mp.undo()


async def _every_tool(client, home, user):
    """Call every tool once, checking what each did to the home."""
    names = {t.name for t in (await client.list_tools()).tools}
    assert names == set(OPERATIONS)
    added = await call_tool(
        client, "memory_add", content=f"{user} keeps bees on the roof.", category="hobby", user_id=user
    )
    fact = added["fact"]["id"]
    today = dt.date.today().isoformat()
    assert fact in git(home, "show", f"HEAD:memory/users/{user}/{today}.md")
    hits = await call_tool(client, "memory_search", query="beekeeping on a roof", user_id=user)
    assert hits["hits"][0]["id"] == fact
    await call_tool(client, "core_memory_replace", label="user", content="Keeps bees.", user_id=user)
    await call_tool(client, "core_memory_append", label="user", content="Lives in Porto.", user_id=user)
    in_porto = git(home, "rev-parse", "HEAD").strip()  # an acknowledged write is committed
    await call_tool(
        client, "core_memory_search_replace", label="user", old_content="Porto", content="Braga", user_id=user
    )
    core = await call_tool(client, "core_memory_get", user_id=user)
    assert core["blocks"]["user"]["content"] == "Keeps bees.\nLives in Braga."
    then = await call_tool(client, "core_memory_get", user_id=user, at=in_porto)  # as that commit left it
    assert then["blocks"]["user"]["content"] == "Keeps bees.\nLives in Porto."
    logs = await call_tool(client, "daily_logs_recent", days=1, user_id=user)
    assert [f["id"] for f in logs["logs"][0]["facts"]] == [fact]
    blame = await call_tool(client, "memory_blame", fact_id=fact, user_id=user)
    assert blame["histories"][0]["introduced"]["trailers"]["Syncd-User"] == user
    status = await call_tool(client, "memory_status")
    assert status["compatible"]
    assert (await call_tool(client, "vault_page_read", path="index.md"))["content"].startswith("---")
    assert "hits" in await call_tool(client, "vault_search", query="index of the vault")
    assert "findings" in await call_tool(client, "vault_lint")
    assert (await call_tool(client, "memory_delete", memory_id=fact, user_id=user))["deleted"] is True
    assert fact not in (home / f"memory/users/{user}/{today}.md").read_text()
    bad = await call_tool(client, "memory_search", query="x", user_id="../etc")
    assert "invalid user id" in bad["error"]
    bad = await call_tool(client, "vault_page_read", path="../../etc/passwd.md")
    assert "error" in bad and "root:" not in bad["error"]


def test_every_tool_over_streamable_http_and_a_user_tokens_scope(server):
    _, carol_token = server.tokens.add("carol")

    async def main():
        async with mcp_over_http(server, server.admin) as admin:
            await _every_tool(admin, server.home, "dan")
            secret = await call_tool(admin, "memory_add", content="Dan's safe code is 1234.", user_id="dan")
        async with mcp_over_http(server, carol_token) as carol:
            denied = await call_tool(carol, "memory_search", query="safe code", user_id="dan")
            assert "AccessError" in denied["error"]
            own = await call_tool(carol, "memory_search", query="safe code")
            assert all(h["id"] != secret["fact"]["id"] for h in own["hits"])
            # Dan's fact is not in carol's memory: a missing id to her, as memory_update says it
            # (it read {"deleted": false} where memory_update said NotFoundError).
            gone = await call_tool(carol, "memory_delete", memory_id=secret["fact"]["id"])
            changed = await call_tool(carol, "memory_update", memory_id=secret["fact"]["id"], content="x")
            missing = f"NotFoundError: no fact {secret['fact']['id']!r} in the memory of carol"
            assert gone == {"error": f"Error executing tool memory_delete: {missing}"}
            assert changed == {"error": f"Error executing tool memory_update: {missing}"}
            assert secret["fact"]["id"] in git(server.home, "show", f"HEAD:memory/users/dan/{dt.date.today()}.md")
            mine = await call_tool(carol, "memory_add", content="Carol sings in a choir.")
            assert mine["fact"]["id"] in (server.home / f"memory/users/carol/{dt.date.today()}.md").read_text()

    anyio.run(main)


def test_stdio_beside_a_running_server_goes_through_its_socket(server):
    async def main():
        async with mcp_over_stdio(server.home) as client:
            await _every_tool(client, server.home, "erin")
        async with mcp_over_stdio(server.home, "--user", "fay") as client:
            assert "AccessError" in (await call_tool(client, "memory_search", query="bees", user_id="erin"))["error"]
            added = await call_tool(client, "memory_add", content="Fay restores old clocks.")
            assert added["fact"]["id"] in (server.home / f"memory/users/fay/{dt.date.today()}.md").read_text()
            # The daemon's error type, once: it read "SyncdError: NotFoundError: no fact ...".
            missing = (await call_tool(client, "memory_update", memory_id="no-such-fact", content="x"))["error"]
            assert "NotFoundError: no fact 'no-such-fact'" in missing and "SyncdError" not in missing

    anyio.run(main)
    # The server's daemon made the commits: the stdio process never held the home.
    assert "Fay restores old clocks" in git(server.home, "log", "-1", "--format=%s")


def test_stdio_alone_holds_the_home_itself(tmp_path, monkeypatch, embedder):
    isolate_git_identity(tmp_path, monkeypatch)
    home = syncd.init(tmp_path / "home").home

    async def main():
        async with mcp_over_stdio(home) as client:
            await _every_tool(client, home, "gus")

    anyio.run(main)
    assert not socket_path(home).exists()
    with syncd.open(home, embedder=embedder) as engine:  # the lock was released at exit
        assert engine.status().fresh


def test_arguments_are_checked_by_the_operation_in_one_line_and_unknown_names_refused(server):
    """The SDK's own check dropped unknown names (``userid`` wrote to the caller's memory) and
    answered pydantic's report; the operation's model answers one line per field, as REST does,
    over HTTP (in the server's process) and over stdio (through the daemon's socket) alike."""
    today = server.home / f"memory/users/gus/{dt.date.today()}.md"

    async def answers(client) -> list[str]:
        return [
            (await call_tool(client, "memory_add", **arguments))["error"]
            for arguments in (
                {},
                {"content": 5},
                {"content": "Gus flies kites.", "category": "Bad Cat!"},
                {"content": "Gus flies kites.", "userid": "gus"},
            )
        ]

    async def main():
        async with mcp_over_http(server, server.admin) as client:
            over_http = await answers(client)
        async with mcp_over_stdio(server.home) as client:
            over_stdio = await answers(client)
        return over_http, over_stdio

    for said in anyio.run(main):
        assert "content: Field required" in said[0]
        assert "content: Input should be a valid string" in said[1]
        assert "category: String should match pattern" in said[2]
        assert "userid: Extra inputs are not permitted" in said[3]
        for error in said:
            assert "\n" not in error and "errors.pydantic.dev" not in error, error
    assert not today.exists()
