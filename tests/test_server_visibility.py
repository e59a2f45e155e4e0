"""A user's token never receives a byte of another user's memory through history, counts or the
past (``at=``): not a fact, a commit subject, a trailer, a file name, a row count, nor whether a
commit of theirs exists. Over a real `syncd serve` whose history holds every kind of commit: one
user's, a person's commit over both users' files (its subject quoting a secret), a shared file
committed in another user's name, and a move out of another user's folder."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import re
from urllib.parse import quote, unquote

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import syncd
from syncd.engine.visibility import log_path, readable, seen_by
from syncd.history.log import LogEntry
from syncd.memory import MemoryManager

from .daemon_helpers import git, isolate_git_identity, wait_for
from .server_helpers import call_tool, mcp_over_http, served_in_thread

TODAY = dt.date.today().isoformat()
ANA_FACTS = ["Ana likes green tea.", "Ana rows on Sundays."]
# Words of bob's memory that appear nowhere else: any of them in ana's answers is a leak.
BOB_WORDS = ["Zanzibar", "8264", "Quokka", "sess-bobhidden"]
BOB_FACTS = ["Bob secret: bank PIN is 8264 at Zanzibar bank.", "Bob keeps a pet Quokka."]


def _commit_all(home, message: str, *paths: str) -> None:
    if paths:
        git(home, "add", "--", *paths)
    git(home, "-c", "user.name=Pat Person", "-c", "user.email=pat@example.org", "commit", "-q", "-m", message)


@pytest.fixture(scope="module")
def server(tmp_path_factory, embedder):
    mp = pytest.MonkeyPatch()
    isolate_git_identity(tmp_path_factory.mktemp("git"), mp)
    home = syncd.init(tmp_path_factory.mktemp("visible") / "home").home
    with syncd.open(home, embedder=embedder) as engine:
        manager = MemoryManager(engine, author="agent")
        for text in ANA_FACTS:
            asyncio.run(manager.add_memory(text, "ana"))
        for text in BOB_FACTS:
            asyncio.run(manager.add_memory(text, "bob"))
        engine.commit()
    ana_log, bob_log = home / f"memory/users/ana/{TODAY}.md", home / f"memory/users/bob/{TODAY}.md"
    # A person's commit over both users' files, its subject quoting bob's secret.
    ana_log.write_text(ana_log.read_text() + "- [note] Ana owns a red kayak.\n")
    bob_log.write_text(bob_log.read_text() + "- [note] Bob hides the Zanzibar key under the mat.\n")
    _commit_all(home, "Notes for ana and bob: Zanzibar key, PIN 8264", str(ana_log.relative_to(home)),
                str(bob_log.relative_to(home)))  # fmt: skip
    # A shared file committed in bob's name (an agent of his wrote the vault).
    (home / "vault/quokka.md").write_text("# Pets\n\nSome people keep pets.\n")
    _commit_all(home, "Pet page from Quokka chat\n\nSyncd-User: bob\nSyncd-Session: sess-bobhidden", "vault/quokka.md")
    # A file moved out of bob's folder into the vault.
    (home / "memory/users/bob/trip.md").write_text("# Trip\n\nA walk in the hills.\n")
    _commit_all(home, "Zanzibar trip notes", "memory/users/bob/trip.md")
    git(home, "mv", "memory/users/bob/trip.md", "vault/trip.md")
    _commit_all(home, "Share the trip notes")
    # A session of bob's (its transcript and session.json are his files).
    session = home / "memory/users/bob/sessions/sess-bobhidden"
    session.mkdir(parents=True)
    (session / "transcript.jsonl").write_text(
        json.dumps({"ts": "2026-11-20T10:00:00+00:00", "role": "user", "content": "The Quokka is called Zanzibar."})
        + "\n"
    )
    _commit_all(home, "Session sess-bobhidden", str(session.relative_to(home)))
    try:
        with served_in_thread(home, embedder) as served:
            _, served.ana = served.tokens.add("ana")
            _, served.bob = served.tokens.add("bob")
            # The server indexes the files written above after it starts: a search before that
            # pass ends (the kayak of blame's test) finds nothing.
            with served.client(served.admin) as admin:
                wait_for(lambda: admin.get("/status").json()["fresh"], 60, "the first sync")
            yield served
    finally:
        mp.undo()


@pytest.fixture(scope="module")
def ana(server):
    with server.client(server.ana) as client:
        yield client


def _bob_only_shas(home) -> set[str]:
    """Commits that touched only bob's files: ana may not learn they exist."""
    out = git(home, "log", "--format=%x1d%H", "--name-only", "--no-renames")
    shas = set()
    for record in out.split("\x1d")[1:]:
        sha, *files = [line for line in record.splitlines() if line.strip()]
        if files and all(f.startswith("memory/users/bob/") for f in files):
            shas.add(sha)
    return shas


def _bob_fact_ids(home) -> set[str]:
    return set(re.findall(r"id:(m-[0-9a-f]+)", (home / f"memory/users/bob/{TODAY}.md").read_text()))


def _holds(text: str, secret: str) -> bool:
    """Whether ``text`` says ``secret``. A number counts only standing alone: the digits of bob's
    PIN inside a score's decimals (0.5182649...) are not his PIN; "PIN is 8264" is."""
    if secret.isdigit():
        return re.search(rf"(?<![0-9.]){secret}(?![0-9])", text) is not None
    return secret in text


def _assert_text_says_nothing_of_bob(server, text: str, *sent: str) -> None:
    """Nothing of bob's memory in ``text`` but what the request itself said."""
    secrets = {*BOB_WORDS, *_bob_fact_ids(server.home), *_bob_only_shas(server.home), "memory/users/bob/"}
    for secret in secrets:
        if not any(secret in s for s in sent):
            assert not _holds(text, secret), (secret, sent, text[:2000])


def _assert_nothing_of_bob(server, response, *sent: str) -> None:
    """Nothing of bob's memory in ``response`` but what the request itself said."""
    _assert_text_says_nothing_of_bob(server, response.text, *sent, unquote(str(response.request.url)))
    if response.headers.get("content-type", "").startswith("application/json"):
        body = response.json()
        for entry in _entries(body):
            assert "bob" not in entry["trailers"].values(), entry
            assert all(readable(f, "ana") for f in entry["files"]), entry


def _entries(body) -> list[dict]:
    if not isinstance(body, dict):
        return []
    found = list(body.get("entries") or [])
    for h in body.get("histories") or []:
        found += [h["introduced"], *h["edits"]] if h.get("introduced") else h["edits"]
    return [e for e in found if e]


LEAKY_PATHS = ["memory", "memory/users", "*", ":/", ":(top)memory/users/bob", ":(glob)**/bob/**", "memory/./users",
               "memory//users/bob", "./memory/users/bob", "memory/users/bob/../bob", "/", ".", "", "sessions",
               "memory/users/ana/../bob", "memory/users/bo*", "memory/users/[b]ob", "vault/../memory/users/bob",
               ":!memory/users/ana", ":(exclude)memory/users/ana", ":(icase)MEMORY/USERS/BOB"]  # fmt: skip


@pytest.mark.parametrize("path", LEAKY_PATHS)
def test_the_log_of_no_path_shows_another_users_commits(server, ana, path):
    response = ana.get("/log", params={"path": path, "limit": 50})
    assert response.status_code in (200, 403, 422), response.text
    _assert_nothing_of_bob(server, response, path)


def test_ana_sees_her_commits_whole_and_shared_ones_without_bobs_part(server, ana):
    mine = ana.get("/log", params={"limit": 50}).json()["entries"]
    subjects = [e["subject"] for e in mine]
    assert "Remember: Ana likes green tea." in subjects
    # The person's commit over both logs: ana's file only, no subject of its own, no author.
    both = [e for e in mine if e["files"] == [f"memory/users/ana/{TODAY}.md"] and not e["trailers"]]
    assert [e["subject"] for e in both] == [f"change memory/users/ana/{TODAY}.md"]
    assert both[0]["author"] == "" and both[0]["email"] == ""
    shared = ana.get("/log", params={"path": "vault", "limit": 50}).json()["entries"]
    # bob's agent's page: the file is shared, the commit is bob's: neutral. The move out of
    # bob's folder shows only its vault side.
    assert {e["subject"] for e in shared} >= {"change vault/quokka.md", "change vault/trip.md"}
    _assert_nothing_of_bob(server, ana.get("/log", params={"path": "vault", "limit": 50}))
    # The admin sees every commit as it is.
    with server.client(server.admin) as admin:
        subjects = [e["subject"] for e in admin.get("/log", params={"limit": 50}).json()["entries"]]
        assert "Notes for ana and bob: Zanzibar key, PIN 8264" in subjects


def test_blame_shows_a_shared_commit_without_bobs_part(server, ana):
    hits = ana.get("/memory/archival", params={"query": "red kayak"}).json()["hits"]
    kayak = next(r for r in hits if "kayak" in r["content"])
    response = ana.get(f"/blame/{kayak['id']}")
    introduced = response.json()["histories"][0]["introduced"]
    assert introduced["subject"] == f"change memory/users/ana/{TODAY}.md" and introduced["trailers"] == {}
    _assert_nothing_of_bob(server, response)


def test_status_counts_only_what_the_caller_can_reach(server, ana):
    before = ana.get("/status").json()
    hits = ana.get("/memory/daily", params={"days": 1}).json()["logs"][0]["facts"]
    assert before["facts"] == len(hits) == len(ANA_FACTS) + 1
    assert before["aligned_commit"] is None
    with server.client(server.bob) as bob:
        assert (
            bob.post("/memory/archival", json={"content": "Bob learns the Quokka's favourite leaf."}).status_code == 200
        )
    wait_for(lambda: "favourite leaf" in git(server.home, "log", "-1", "--format=%s"), 60, "bob's commit")
    after = ana.get("/status").json()
    assert {k: after[k] for k in ("files", "facts", "chunks")} == {k: before[k] for k in ("files", "facts", "chunks")}
    with server.client(server.admin) as admin:
        assert admin.get("/status").json()["facts"] > after["facts"]


# Path-like strings built from the pieces a hostile caller would combine.
_PIECES = st.sampled_from(["memory", "users", "bob", "ana", "vault", "sessions", "..", ".", "", "*", "**", ":/",
                           ":(glob)", ":(top)", ":(icase)", ":!", "%2F", "%2e%2e", "BOB", "sess-bobhidden",
                           f"{TODAY}.md", "trip.md", "core", "\\", " "])  # fmt: skip
_STRINGS = st.one_of(
    st.sampled_from(LEAKY_PATHS),
    st.lists(_PIECES, min_size=1, max_size=6).map("/".join),
    st.text(max_size=30),
)


@settings(max_examples=30, deadline=None, database=None)
@given(value=_STRINGS, limit=st.integers(1, 200))
def test_no_parameter_of_any_endpoint_reaches_bobs_memory(server, ana, value, limit):
    """Every endpoint that takes a path, a pattern, an id or a query, given what a hostile
    caller could send: ana's answers hold nothing of bob's (content, subjects, trailers, counts)."""
    quoted = quote(value, safe="") or "x"
    requests = [
        ("/log", {"path": value, "limit": limit}),
        ("/vault/page", {"path": value}),
        ("/memory/archival", {"query": value or "x", "limit": 20}),
        ("/vault/search", {"query": value or "x"}),
        ("/memory/core", {"chat_id": value}),
        ("/memory/daily", {"days": 7}),
        ("/status", {"user_id": value}),
        ("/sessions", {"user_id": value}),
        (f"/blame/{quoted}", {}),
        (f"/memory/daily/{quoted}", {}),
        (f"/session/{quoted}/transcript", {"last_n": 5}),
        (f"/session/{quoted}/state", {}),
    ]
    for path, params in requests:
        response = ana.get(path, params=params)
        assert response.status_code < 500, (path, params, response.text)
        _assert_nothing_of_bob(server, response, value, quoted)
        if path == "/status" and response.status_code == 200:
            assert response.json()["aligned_commit"] is None


@settings(max_examples=15, deadline=None, database=None)
@given(value=st.one_of(st.sampled_from(["bob", "BOB", "bob.", "sess-bobhidden", "memory/users/bob"]), _STRINGS))
@example(value="bob")
def test_no_argument_of_any_mcp_tool_reaches_bobs_memory(server, value):
    """The MCP tools as ana's token calls them, each string argument in turn what a hostile
    caller could send: no answer (nor error) holds anything of bob's."""
    query = value if value.strip() else "x"
    calls = [("memory_search", {"query": query}), ("memory_search", {"query": "pets", "chat_id": value}),
             ("memory_search", {"query": "pets", "at": value}), ("memory_search", {"query": "x", "user_id": value}),
             ("memory_search", {"query": query, "kind": "transcript"}), ("core_memory_get", {"chat_id": value}),
             ("core_memory_get", {"at": value}), ("memory_blame", {"fact_id": value}),
             ("session_transcript", {"session_id": value}), ("session_list", {"user_id": value}),
             ("memory_status", {"user_id": value}), ("daily_logs_recent", {"user_id": value}),
             ("vault_search", {"query": query}), ("vault_page_read", {"path": value}),
             ("vault_lint", {"user_id": value})]  # fmt: skip

    async def answers():
        async with mcp_over_http(server, server.ana) as client:
            return [(name, await call_tool(client, name, **arguments)) for name, arguments in calls]

    for name, answer in asyncio.run(answers()):
        _assert_text_says_nothing_of_bob(server, json.dumps(answer, ensure_ascii=False), value, name)


def test_log_paths_a_user_may_name():
    assert log_path(None, "ana") == "memory/users/ana"
    assert log_path("memory//users/./ana/", "ana") == "memory/users/ana"
    assert log_path("vault/x.md", "ana") == "vault/x.md"
    assert log_path(None, None) is None and log_path("memory", None) == "memory"
    for path in ("memory", "memory/users", "memory/users/bob", "", "/", "sessions", "sessions/x", "memory/users/x y"):
        with pytest.raises(PermissionError):
            log_path(path, "ana")
    for path in ("../x", "a/../b", ":(glob)*", ".git", ".syncd/index", "a\x00b"):
        with pytest.raises(ValueError):
            log_path(path, "ana")


def test_what_a_reader_is_shown_of_a_commit():
    entry = LogEntry("s", "Pat", "p@x", "d", "Notes: PIN 8264", {"Syncd-Facts-Added": "2"},
                     ("memory/users/ana/a.md", "memory/users/bob/b.md"))  # fmt: skip
    shown = seen_by(entry, "ana")
    assert (shown.subject, shown.author, shown.trailers, shown.files) == (
        "change memory/users/ana/a.md",
        "",
        {},
        ("memory/users/ana/a.md",),
    )
    assert seen_by(entry, "cy") is None
    own = LogEntry("s", "a", "e", "d", "Remember: tea", {"Syncd-User": "ana"}, ("memory/users/ana/a.md",))
    assert seen_by(own, "ana") == own
    theirs = LogEntry("s", "a", "e", "d", "Page", {"Syncd-User": "bob"}, ("vault/p.md",))
    assert seen_by(theirs, "ana").subject == "change vault/p.md" and seen_by(theirs, "bob") == theirs
    assert (
        seen_by(LogEntry("s", "a", "e", "d", "init", {}, ("memory/users/.gitkeep", "vault/i.md")), "ana").subject
        == "init"
    )


def _visible_shas(home, user: str) -> list[str]:
    """The first-parent line of HEAD, newest first, without the commits ``user`` is never shown."""
    out = git(home, "log", "--first-parent", "--format=%x1d%H", "--name-only", "--no-renames")
    records = [[line for line in r.splitlines() if line.strip()] for r in out.split("\x1d")[1:]]
    return [sha for sha, *files in records if any(readable(f, user) for f in files)]


def _past_answer(client, at: str, path: str = "/memory/core", **params) -> tuple[int, str]:
    """What ``client`` is told of the past ``at``: the status and the error's message, or the
    blocks (the hits' ids for a search)."""
    response = client.get(path, params={"at": at, **params})
    body = response.json()
    if response.status_code != 200:
        return response.status_code, body["error"]["message"]
    if "hits" in body:
        return 200, json.dumps([h["id"] for h in body["hits"]])
    return 200, json.dumps(body["blocks"], sort_keys=True)


# bob's words and shas against look-alikes that name nothing, in every form a revision takes.
_FRESH_WORDS = ["Kangaroo", "4417", "Wombat", "sess-nobody"]
_REVISION_FORMS = ["HEAD^{{/{w}}}", ":/{w}", "HEAD~{n}^{{/{w}}}", "{s}", "{s}~{n}", "{s}^", "HEAD~{n}", "{s}^{{/{w}}}",
                   "@{{{n}}}", "HEAD@{{{n}}}", "{w}", "HEAD^{{/PIN is {w}}}", "{s}^{{commit}}", "HEAD~{n}^"]  # fmt: skip


@settings(max_examples=30, deadline=None, database=None)
@given(
    form=st.sampled_from(_REVISION_FORMS),
    word=st.integers(0, len(BOB_WORDS) - 1),
    sha=st.integers(0, 100),
    length=st.integers(8, 40),
    n=st.integers(0, 12),
)
def test_no_revision_tells_ana_of_bobs_commits(server, ana, form, word, sha, length, n):
    """The answer to any ``at=`` is the same whether the words and shas in it are bob's (his
    commit messages, his commits) or name nothing: ana cannot learn that a commit of bob's
    exists, what its message says, or how many there are."""
    shas = sorted(_bob_only_shas(server.home))
    secrets, looks = (BOB_WORDS[word], shas[sha % len(shas)][:length]), (_FRESH_WORDS[word], f"f00d{sha:04x}" * 5)
    status, said = _past_answer(ana, form.format(w=secrets[0], s=secrets[1], n=n))
    assert status < 500, said
    fresh_status, fresh_said = _past_answer(ana, form.format(w=looks[0], s=looks[1][:length], n=n))
    for look, secret in zip(looks, secrets, strict=True):
        fresh_said = fresh_said.replace(look[: len(secret)], secret)
    assert (status, said) == (fresh_status, fresh_said), (form, secrets)


def test_ana_steps_back_over_her_own_commits_only(server, ana):
    """HEAD~N counts the commits ana is shown: the Nth back is her Nth, named by its sha the same."""
    mine = _visible_shas(server.home, "ana")
    assert len(mine) < len(git(server.home, "rev-list", "--first-parent", "HEAD").split())
    for n, sha in enumerate(mine):
        assert _past_answer(ana, f"HEAD~{n}") == _past_answer(ana, sha)
    assert _past_answer(ana, f"HEAD~{len(mine)}")[0] == 404
    assert _past_answer(ana, "HEAD^^") == _past_answer(ana, "HEAD~2") == _past_answer(ana, mine[2])
    # The admin naming ana sees her view; naming nobody, git's own HEAD~N.
    with server.client(server.admin) as admin:
        every = git(server.home, "rev-list", "--first-parent", "HEAD").split()
        last = len(mine) - 1
        assert _past_answer(admin, f"HEAD~{last}", user_id="ana") == _past_answer(admin, mine[-1], user_id="ana")
        assert (
            _past_answer(admin, f"HEAD~{len(mine)}")[0] == 200 and _past_answer(admin, f"HEAD~{len(every)}")[0] == 404
        )


def test_searches_and_tools_of_the_past_say_nothing_of_bobs_commit_messages(server, ana):
    """Every read of the past (search, vault search, core blocks; REST and MCP) names it alike."""

    def answers(look: str) -> list:
        at = f"HEAD^{{/{look}}}"
        said = [_past_answer(ana, at, path, query="pets") for path in ("/memory/archival", "/vault/search")]

        async def tools():
            async with mcp_over_http(server, server.ana) as client:
                return [await call_tool(client, "core_memory_get", at=at),
                        await call_tool(client, "memory_search", query="tea", at=at)]  # fmt: skip

        return json.loads(json.dumps([*said, *asyncio.run(tools())]).replace(look, "<word>"))

    assert answers("Quokka") == answers("Wombat")


def test_lint_tells_ana_nothing_of_bobs_files_a_shared_page_cites(tmp_path, embedder, monkeypatch):
    """A shared synthesis page citing bob's daily log (and a log of his that does not exist):
    ana's lint neither says whether his files exist nor which commit of his changed them last,
    while her own cited log is still checked; bob and the admin are told everything."""
    isolate_git_identity(tmp_path, monkeypatch)
    home = syncd.init(tmp_path / "home").home
    sources = "".join(f"  - memory/users/{name}.md\n" for name in ("bob/{0}", "bob/2001-01-01", "ana/{0}"))
    page = f"---\ntype: synthesis\nsources:\n{sources}---\n# Pets\n\nWho keeps which pets.\n"
    with served_in_thread(home, embedder) as served:
        _, ana_token = served.tokens.add("ana")
        _, bob_token = served.tokens.add("bob")
        with served.client(ana_token) as ana, served.client(bob_token) as bob, served.client(served.admin) as admin:
            for client, text in [(ana, "Ana likes green tea."), (bob, "Bob keeps a pet Quokka.")]:
                assert client.post("/memory/archival", json={"content": text}).status_code == 200
            (home / "vault/pets.md").write_text(page.format(TODAY))
            _commit_all(home, "Pets page", "vault/pets.md")
            for client, text in [(ana, "Ana rows on Sundays."), (bob, "Bob feeds the Quokka at dawn.")]:
                assert client.post("/memory/archival", json={"content": text}).status_code == 200
            wait_for(lambda: "Quokka at dawn" in git(home, "log", "-3", "--format=%s"), 60, "bob's commit")
            bobs = git(home, "log", "-1", "--format=%H", "--", "memory/users/bob")[:8]

            def said(client, **params) -> str:
                response = client.get("/vault/lint", params=params)
                assert response.status_code == 200, response.text
                return " ".join(f["message"] for f in response.json()["findings"])

            for told in (said(ana), said(admin, user_id="ana")):
                assert "memory/users/bob" not in told and bobs not in told, told
                assert f"source 'memory/users/ana/{TODAY}.md' changed in commit" in told
            for told in (said(bob), said(admin)):
                assert f"source 'memory/users/bob/{TODAY}.md' changed in commit {bobs}" in told
                assert "source 'memory/users/bob/2001-01-01.md' does not exist" in told

            async def tool():
                async with mcp_over_http(served, ana_token) as client:
                    return await call_tool(client, "vault_lint")

            assert "memory/users/bob" not in json.dumps(asyncio.run(tool()))
