"""One search (issue 25, item 5): the same query, scope and kind give the same hits, with the same
fields, through ``syncd search --json`` (answered by the running server's daemon), the REST API,
MCP over streamable HTTP, the Python API (MemoryManager), the workbench and the agent tool, all on
one home served by a real ``syncd serve``."""

from __future__ import annotations

import asyncio
import json
import re

import pytest

import syncd
from syncd.api.schemas import MemoryHit
from syncd.cli import main
from syncd.engine.search import DEFAULT_LIMIT, hit_record
from syncd.memory import MemoryManager, MemorySearchTool

from .daemon_helpers import isolate_git_identity, wait_for
from .helpers import write
from .server_helpers import mcp_over_http, served_in_thread
from .workbench_helpers import import_workbench

FILES = {
    "memory/users/ana/2026-11-20.md": (
        "# 2026-11-20\n\n"
        "## 09:30 chat:c1 session:s1\n"
        "- [preference] Likes green tea in the morning.\n"
        "- [goal] Is training for the Lyon half marathon in April.\n"
        "- [personal] Is allergic to peanuts.\n\n"
        "## 18:10 chat:c2 session:s2\n"
        "- [personal] Has a cat called Miso.\n"
        "- [preference] Drinks oat milk flat whites at work.\n"
    ),
    "memory/users/ana/MEMORY.md": "# Ana\n\n## Food\n\nAvoids peanuts; loves matcha and sencha.\n",
    "memory/users/bob/2026-11-21.md": "# 2026-11-21\n\n## 10:00 chat:c9\n- [preference] Brews black tea with milk.\n",
    "memory/core/persona.md": "I am the household's assistant; I keep track of tea and errands.\n",
    "vault/drinks/tea.md": (
        "---\ntitle: Green tea\n---\n# Green tea\n\n## Brewing\n\nSteep sencha at 70 degrees for a minute.\n"
    ),
}

# (query, user, chat, kind, include_wiki, limit): None for limit means each front end's default.
QUERIES = [
    ("green tea", "ana", None, None, False, None),
    ("green tea", "ana", None, None, True, 10),
    ("what does she drink", "ana", None, "fact", False, 3),
    ("running a race", "ana", "c1", None, False, None),
    ("peanuts", "ana", None, "chunk", False, 4),
    ("tea", "bob", None, None, False, None),
    ("sencha temperature", "ana", None, "chunk", True, 2),
    ("zorblat quimfex vorpish", "ana", None, None, False, None),
]


@pytest.fixture(scope="module")
def server(tmp_path_factory, embedder):
    mp = pytest.MonkeyPatch()
    isolate_git_identity(tmp_path_factory.mktemp("git"), mp)
    home = syncd.init(tmp_path_factory.mktemp("one-search") / "home").home
    for rel, text in FILES.items():
        write(home, rel, text)
    try:
        with served_in_thread(home, embedder) as served:
            # The server answers while its daemon's first reconcile indexes FILES: every front end
            # is asked once that is done, so they all see the same index.
            with served.client(served.admin) as client:
                wait_for(lambda: client.get("/status").json()["fresh"], 120, "the first reconcile")
            yield served
    finally:
        mp.undo()


def _cli(capsys, home, query, user, chat, kind, wiki, limit) -> list[dict]:
    args = ["search", query, "--user", user, "--json", "--home", str(home)]
    args += ["--chat", chat] if chat else []
    args += ["--kind", kind] if kind else []
    args += ["--wiki"] if wiki else []
    args += ["--limit", str(limit)] if limit else []
    capsys.readouterr()
    assert main(args) == 0
    captured = capsys.readouterr()
    assert "changed since" not in captured.err  # the daemon answered from a fresh index
    return json.loads(captured.out)


def _rest(client, query, user, chat, kind, wiki, limit) -> list[dict]:
    params = {"query": query, "user_id": user, "include_wiki": str(wiki).lower()}
    params |= {"chat_id": chat} if chat else {}
    params |= {"kind": kind} if kind else {}
    params |= {"limit": limit} if limit else {}
    response = client.get("/memory/archival", params=params)
    assert response.status_code == 200, response.text
    return response.json()["hits"]


async def _mcp(server, cases) -> list[list[dict]]:
    answers = []
    async with mcp_over_http(server, server.admin) as client:
        for query, user, chat, kind, wiki, limit in cases:
            arguments = {"query": query, "user_id": user, "include_wiki": wiki}
            arguments |= {"chat_id": chat} if chat else {}
            arguments |= {"kind": kind} if kind else {}
            arguments |= {"limit": limit} if limit else {}
            result = await client.call_tool("memory_search", arguments)
            assert not result.is_error, result.content[0].text
            answers.append(json.loads(result.content[0].text)["hits"])
    return answers


def _api(manager, query, user, chat, kind, wiki, limit) -> list[dict]:
    limit = {} if limit is None else {"limit": limit}
    found = asyncio.run(
        manager.search_memories(query, chat_id=chat, user_id=user, kind=kind, include_wiki=wiki, **limit)
    )
    return [hit_record(h) for h in found]


def _workbench(data, query, user, chat, kind, wiki, limit) -> list[dict]:
    # The workbench's own default limit is the search tab's, which starts at DEFAULT_LIMIT.
    return [hit_record(h) for h in data.search(query, user, chat, kind, limit or DEFAULT_LIMIT, wiki)]


def _same(got: list[dict], want: list[dict], where: str) -> None:
    assert [(h["id"], h["path"], h["line"]) for h in got] == [(h["id"], h["path"], h["line"]) for h in want], where
    for g, w in zip(got, want):
        assert set(g) == set(w) == set(MemoryHit.model_fields), where
        # Recency is computed at the moment of each query: the scores agree to a few millionths.
        assert g["score"] == pytest.approx(w["score"], abs=1e-5), where
        assert g["parts"] == pytest.approx(w["parts"], abs=1e-5), where
        assert {k: v for k, v in g.items() if k not in ("score", "parts")} == {
            k: v for k, v in w.items() if k not in ("score", "parts")
        }, where


def test_every_front_end_gives_the_same_hits_with_the_same_fields(server, embedder, capsys):
    mcp = asyncio.run(_mcp(server, QUERIES))
    wb = import_workbench()
    data = wb.HomeData(server.home, embedder=embedder)
    manager = MemoryManager(server.home, embedder=embedder)
    tool = MemorySearchTool(manager)
    try:
        with server.client(server.admin) as client:
            for case, over_mcp in zip(QUERIES, mcp):
                query, user, chat, kind, wiki, limit = case
                want = _api(manager, *case)
                _same(_cli(capsys, server.home, *case), want, f"cli {case}")
                _same(_rest(client, *case), want, f"rest {case}")
                _same(over_mcp, want, f"mcp {case}")
                _same(_workbench(data, *case), want, f"workbench {case}")
                if kind is None and not wiki:
                    tool.set_context(chat, user)
                    lines = tool.forward(query, limit)
                    shown = re.findall(r"\(id (\S+), (\S+):(\d+), score", lines)
                    assert shown == [(h["id"], h["path"], str(h["line"])) for h in want], f"tool {case}"
                assert len(want) <= (limit or DEFAULT_LIMIT)
    finally:
        manager.close()
        data.close()

    # What the cases show about the one set of defaults.
    results = {case: _api(MemoryManager(server.home, embedder=embedder), *case) for case in QUERIES}
    assert results[QUERIES[-1]] == []  # nothing relevant: nothing found, anywhere
    assert not any(h["path"].startswith("vault/") for h in results[QUERIES[0]])  # the wiki only when asked
    assert any(h["path"] == "vault/drinks/tea.md" for h in results[QUERIES[1]])
    wiki_hit = next(h for h in results[QUERIES[6]] if h["path"] == "vault/drinks/tea.md")
    assert wiki_hit["title"] == "Green tea" and wiki_hit["breadcrumb"] == "Green tea > Brewing"
    assert all(h["user_id"] in ("bob", None) for h in results[QUERIES[5]])
    assert all(h["kind"] == "fact" for h in results[QUERIES[2]])
    fact = next(h for h in results[QUERIES[0]] if h["kind"] == "fact")
    assert fact["provenance"] == "" and fact["session_id"] == "s1" and fact["breadcrumb"]
