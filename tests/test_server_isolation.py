"""A user's token learns nothing of another user's memory from the errors it is answered with:
not a file name of theirs, nor that they exist. Over a real `syncd serve`."""

from __future__ import annotations

import asyncio
import datetime as dt
import itertools
import json
import subprocess

import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

import syncd
from syncd.engine.visibility import told, withholds
from syncd.memory import MemoryManager

from .daemon_helpers import git, isolate_git_identity
from .server_helpers import call_tool, mcp_over_http, served_in_thread
from .strategies import odd_segments, safe_ids, user_folder_paths

TODAY = dt.date.today().isoformat()
BOBS_NOTE = "memory/users/bob/trip-zanzibar.md"


def _assert_says_nothing_of_bob(text: str) -> None:
    for secret in ("memory/users/bob", "trip-zanzibar", "Zanzibar", "Quokka"):
        assert secret not in text, (secret, text)


def _person(home, *args: str) -> str:
    return git(home, "-c", "user.name=Pat Person", "-c", "user.email=pat@example.org", *args)


def _unmerged(home, rel: str) -> None:
    """Leave ``rel`` unmerged as a conflicted `git stash pop` does (no merge under way: only the
    unmerged paths say git is busy)."""
    path = home / rel
    path.write_text("# Trip\n\nTo Zanzibar in May.\n")
    _person(home, "add", rel)
    _person(home, "commit", "-q", "-m", "Bob's trip")
    path.write_text("# Trip\n\nTo Zanzibar in June.\n")
    _person(home, "stash")
    path.write_text("# Trip\n\nTo Zanzibar in July.\n")
    _person(home, "commit", "-q", "-am", "Bob's edit")
    with pytest.raises(subprocess.CalledProcessError):  # the pop conflicts: that is the point
        _person(home, "stash", "pop")
    assert rel in git(home, "ls-files", "-u")


def test_a_write_refused_while_another_users_file_is_unmerged_does_not_name_it(tmp_path, embedder, monkeypatch):
    """A conflicted `git stash pop` left a file of bob's unmerged: every write waits (503, retry),
    and git's reason names that file. Ana's token is told to retry, not which file of whose is
    in the way (REST and MCP); bob's and the admin's are told the file."""
    isolate_git_identity(tmp_path, monkeypatch)
    home = syncd.init(tmp_path / "home").home
    with syncd.open(home, embedder=embedder) as engine:
        manager = MemoryManager(engine, author="agent")
        asyncio.run(manager.add_memory("Ana likes green tea.", "ana"))
        asyncio.run(manager.add_memory("Bob keeps a pet Quokka.", "bob"))
        engine.commit()
    _unmerged(home, BOBS_NOTE)
    with served_in_thread(home, embedder) as served:
        _, ana_token = served.tokens.add("ana")
        _, bob_token = served.tokens.add("bob")
        fact = {"content": "Ana rows on Sundays."}
        with served.client(ana_token) as ana, served.client(bob_token) as bob, served.client(served.admin) as admin:
            refused = ana.post("/memory/archival", json=fact)
            assert refused.status_code == 503 and refused.headers["retry-after"] == "1", refused.text
            assert refused.json()["error"]["type"] == "GitBusyError"
            _assert_says_nothing_of_bob(refused.text)
            assert "outside the memory of 'ana'" in refused.json()["error"]["message"]
            for client, extra in ((bob, {}), (admin, {"user_id": "ana"})):
                told = client.post("/memory/archival", json={**fact, **extra})
                assert told.status_code == 503 and BOBS_NOTE in told.json()["error"]["message"], told.text

        async def tool(token: str):
            async with mcp_over_http(served, token) as client:
                return await call_tool(client, "memory_add", **fact)

        answer = asyncio.run(tool(ana_token))
        assert answer["error"].endswith(
            "GitBusyError: the reason concerns files outside the memory of 'ana', which this token may not be "
            "told of; the home's admin sees it (`syncd status`)"
        ), answer
        _assert_says_nothing_of_bob(json.dumps(answer))
        assert BOBS_NOTE in asyncio.run(tool(bob_token))["error"]


# Around a path in a message: what git, the write path and the index say before and after one.
_AROUND = st.sampled_from(["", " ", "(", ")", ": ", "'", '"', ", ", " and 3 more", "git has unmerged paths (",
                           "./", "\n", "not written: "])  # fmt: skip
_READER = "ana"


@settings(max_examples=300, deadline=None)
@given(
    owned=user_folder_paths(odd_segments().filter(lambda u: u != _READER)),
    mine=user_folder_paths(st.just(_READER)),
    before=_AROUND,
    after=_AROUND,
    text=st.text(max_size=20),
)
@example(owned=("ana b", "memory/users/ana b/x.md"), mine=(_READER, "memory/users/ana/x.md"), before="(",
         after=")", text="")  # fmt: skip
@example(owned=("bob", "memory/users/bob/x.md"), mine=(_READER, "memory/users/ana/x.md"), before="",
         after="", text=" and ")  # fmt: skip
def test_a_message_naming_anothers_file_is_told_without_it(owned, mine, before, after, text):
    """Whatever surrounds it, a message naming a file of another folder under memory/users/ (a
    user's, or one whose name is no valid id) beside the reader's own files is told the reader
    without a byte of that folder's name or the file's; one naming only their own is told whole."""
    owner, theirs = owned
    for message in (f"{before}{theirs}{after}{text}", f"{before}{mine[1]}{text}{theirs}{after}"):
        shown = told(message, _READER)
        assert withholds(message, _READER) and theirs not in shown
        assert f"memory/users/{owner}" not in shown and (owner in _READER or owner not in shown.split("'")[1:2])
    own = f"{before}{mine[1]}{after}{text}"
    if "memory/users/" not in text and "sessions/" not in text:
        assert told(own, _READER) == own


@given(reader=safe_ids, other=safe_ids)
def test_the_old_sessions_folder_and_lookalike_users_are_withheld(reader, other):
    """sessions/ at the top is nobody's to be named; a user whose id begins with the reader's is another user."""
    assert withholds("cannot read sessions/transcripts/s1.jsonl", reader)
    assert not withholds(f"cannot read memory/users/{reader}/sessions/s1/transcript.jsonl", reader)
    if other != reader:
        assert withholds(f"memory/users/{other}/x.md is damaged", reader)
        assert withholds(f"memory/users/{reader}{other}/x.md is damaged", reader)


@pytest.fixture(scope="module")
def shared_server(tmp_path_factory, embedder):
    """One `syncd serve` whose users are made by the examples below, each with a token."""
    mp = pytest.MonkeyPatch()
    isolate_git_identity(tmp_path_factory.mktemp("git"), mp)
    home = syncd.init(tmp_path_factory.mktemp("pairs") / "home").home
    try:
        with served_in_thread(home, embedder) as served:
            served.users = {}
            yield served
    finally:
        mp.undo()


def _token(served, user: str) -> str:
    if user not in served.users:
        served.users[user] = served.tokens.add(user)[1]
    return served.users[user]


# Two different users (ids as a person would pick them, look-alikes included), and a secret word.
_PAIRS = st.tuples(
    st.one_of(st.sampled_from(["ana", "Ana", "ana.b", "ana-b", "bob", "Bob", "bob_", "b0b"]), safe_ids),
    st.one_of(st.sampled_from(["ana", "Ana", "ana.b", "bob", "Bob", "bob.", "b0b"]), safe_ids),
).filter(lambda pair: pair[0] != pair[1])
_SECRETS = st.from_regex(r"[A-Z][a-z]{5,9}", fullmatch=True).map(lambda w: f"Qx{w}")
# The server is shared by the examples, and hypothesis draws one secret many times (shrinking):
# each example's secret gets a mark of its own, or A would find the fact A wrote as B before.
_EXAMPLE = itertools.count()


@settings(max_examples=8, deadline=None, database=None)
@given(pair=_PAIRS, secret=_SECRETS, session=st.sampled_from(["s1", "chat-1", "sess-x"]))
def test_nothing_of_one_users_memory_reaches_another_users_token(shared_server, pair, secret, session):
    """For any two users: what B remembers (a fact, a block, a turn's transcript, a session) never
    appears in an answer to A's token, whatever A asks for (B's secret word, B's fact id, B's
    session, B's id as user_id; REST and MCP), and A can neither change nor delete B's fact: the
    answer to B's fact id is the answer to an id that names nothing."""
    served = shared_server
    a, b = pair
    # Ids a case apart (`Bob` beside `bob`) are one folder where case is ignored, and refused as
    # such (tests/test_home.py): each pair is of users the home can hold apart.
    folders = {p.name for p in (served.home / "memory" / "users").iterdir()}
    assume(a.lower() != b.lower() and not any(f.lower() in (a.lower(), b.lower()) and f not in (a, b) for f in folders))
    secret = f"{secret}x{next(_EXAMPLE)}"
    a_token, b_token = _token(served, a), _token(served, b)
    with served.client(b_token) as bob:
        added = bob.post("/memory/archival", json={"content": f"My locker code is {secret}.", "dedup": False})
        assert added.status_code == 200, added.text
        fact = added.json()["fact"]["id"]
        put = bob.put("/memory/core", json={"label": "user", "content": f"Keeps {secret} in mind."})
        assert put.status_code == 200, put.text
        turn = bob.post("/memory/turns", json={"user_message": f"Remember {secret}.", "session_id": session})
        assert turn.status_code == 200, turn.text
    nothing = "m-" + "0" * 12
    with served.client(a_token) as ana:
        answers = [
            ana.get("/memory/archival", params={"query": secret, "limit": 50}),
            ana.get("/memory/archival", params={"query": secret, "kind": "transcript"}),
            ana.get("/memory/archival", params={"query": secret, "include_wiki": True, "at": "HEAD"}),
            ana.get("/vault/search", params={"query": secret}),
            ana.get("/memory/core"),
            ana.get("/memory/core", params={"user_id": b}),
            ana.get("/memory/daily", params={"days": 3}),
            ana.get("/memory/file"),
            ana.get("/memory/stats"),
            ana.get("/status"),
            ana.get("/sessions"),
            ana.get(f"/session/{session}/transcript"),
            ana.get(f"/session/{session}/state"),
            ana.get("/log", params={"limit": 200}),
            ana.get("/log", params={"path": f"memory/users/{b}"}),
            ana.get("/vault/lint"),
        ]
        for response in answers:
            assert response.status_code < 500, response.text
            for said in (secret, fact, f"memory/users/{b}/"):
                assert said not in response.text, (said, response.request.url, response.text[:1000])
        for same in ("/blame/{}", "/memory/archival/{}"):
            method = ana.get if same.startswith("/blame") else ana.delete
            theirs, none = method(same.format(fact)), method(same.format(nothing))
            assert theirs.status_code == none.status_code == 404
            assert theirs.json()["error"]["message"].replace(fact, nothing) == none.json()["error"]["message"]
        changed = ana.patch(f"/memory/archival/{fact}", json={"content": "Overwritten."})
        assert changed.status_code == 404 and secret not in changed.text

    async def tools():
        async with mcp_over_http(served, a_token) as client:
            return [await call_tool(client, "memory_search", query=secret, limit=50),
                    await call_tool(client, "memory_blame", fact_id=fact),
                    await call_tool(client, "memory_update", memory_id=fact, content="Overwritten."),
                    await call_tool(client, "session_transcript", session_id=session),
                    await call_tool(client, "daily_logs_recent", days=3)]  # fmt: skip

    for answer in asyncio.run(tools()):
        text = json.dumps(answer, ensure_ascii=False)
        assert secret not in text and f"memory/users/{b}/" not in text, text
    with served.client(b_token) as bob:
        hits = bob.get("/memory/archival", params={"query": f"locker code {secret}", "limit": 50}).json()["hits"]
        assert any(h["id"] == fact and secret in h["content"] for h in hits), hits
