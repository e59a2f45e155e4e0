"""A user's token learns nothing of another user's memory from the errors it is answered with:
not a file name of theirs, nor that they exist. Over a real `syncd serve`."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import subprocess

import pytest
from hypothesis import example, given, settings
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
