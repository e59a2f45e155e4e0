"""MarkdownMemoryStore: a user's daily logs and MEMORY.md, written with compare-and-swap."""

from __future__ import annotations

import datetime as dt

import git
import pytest

from syncd.errors import InvalidIdError, NotFoundError
from syncd.formats import Fact, parse_daily_log
from syncd.memory import MarkdownMemoryStore
from syncd.memory.writer import MarkdownWriter

NOW = dt.datetime(2026, 3, 10, 9, 30, tzinfo=dt.UTC)


@pytest.fixture
def store(engine):
    return MarkdownMemoryStore(engine, "alice", clock=lambda: NOW)


def test_append_writes_one_section_per_call_and_one_commit(store, home):
    written = store.append_daily_log(
        "c1",
        [
            Fact("Likes tea.", "preference", importance=0.4),
            "Has a dog.",
            {"content": "Runs.", "category": "goal", "tags": ["sport"]},
        ],
    )
    assert all(f.id and f.id.startswith("m-") and f.timestamp == "2026-03-10T09:30:00+00:00" for f in written)
    store.append_daily_log(None, ["Lives in Oslo."], session_id="s9")
    text = (home / "memory/users/alice/2026-03-10.md").read_text()
    log = parse_daily_log(text)
    assert text.startswith("# 2026-03-10\n\n## 09:30 chat:c1\n- [preference] Likes tea.")
    assert [(s.chat, s.session) for s in log.sections] == [("c1", None), (None, "s9")]
    assert [lf.fact for lf in log.facts()][:3] == written
    repo = git.Repo(home)
    assert [c.summary for c in list(repo.iter_commits())[:2]] == [
        "Remember 1 fact for alice",
        "Remember 3 facts for alice",
    ]
    assert store.append_daily_log("c1", []) == []


def test_recent_and_listed_logs(store):
    store.append_daily_log("c1", ["Old news."], date="2026-03-01")
    store.append_daily_log("c1", ["Yesterday's news."], date=dt.date(2026, 3, 9))
    store.append_daily_log("c1", ["Today's news."])
    assert store.list_daily_logs() == ["2026-03-01", "2026-03-09", "2026-03-10"]
    recent = store.get_recent_logs(days=2)
    assert [f.date for f in recent] == ["2026-03-09", "2026-03-10"]
    assert "Today's news." in recent[1].text and recent[1].log.facts()[0].fact.content == "Today's news."
    assert [s.content for s in store.iter_facts()] == ["Old news.", "Yesterday's news.", "Today's news."]


def test_memory_file_round_trip(store, home):
    assert store.read_memory_file() == ""
    store.write_memory_file("# Alice\n\nLikes tea.\n")
    assert store.read_memory_file() == "# Alice\n\nLikes tea.\n"
    assert store.write_memory_file("# Alice\n\nLikes tea.\n") is None  # unchanged: no write, no commit


def test_an_edit_between_read_and_write_is_kept_not_clobbered(engine, home):
    rel = "memory/users/alice/MEMORY.md"
    engine.write_file(rel, b"# Alice\n")
    writer = MarkdownWriter(engine)
    calls = []

    def change(current: bytes | None) -> bytes:
        calls.append(current)
        if len(calls) == 1:  # a person saves the file while we are preparing our write
            (home / rel).write_bytes(b"# Alice\nEdited by hand.\n")
        return current + b"Added by the agent.\n"

    from syncd.history.intents import Intent

    writer.update(rel, change, Intent(author="test"))
    assert len(calls) == 2
    assert (home / rel).read_bytes() == b"# Alice\nEdited by hand.\nAdded by the agent.\n"


def test_delete_and_ids(store, home):
    [a, b] = store.append_daily_log("c1", ["Likes tea.", "Likes tea."])
    assert a.id != b.id
    store.delete_fact(b.id)
    assert [s.id for s in store.iter_facts()] == [a.id]
    with pytest.raises(NotFoundError):
        store.delete_fact(b.id)


def test_hostile_ids(engine, home):
    for bad in ("../x", "a/b", "", "a..b"):
        with pytest.raises(InvalidIdError):
            MarkdownMemoryStore(engine, bad)
    store = MarkdownMemoryStore(engine, "alice")
    with pytest.raises(InvalidIdError):
        store.append_daily_log("../c", ["x"])
    with pytest.raises(InvalidIdError):
        store.append_daily_log("c1", ["x"], session_id="a/b")
    with pytest.raises(InvalidIdError):
        store.append_daily_log("c1", ["x"], date="../../etc")
    assert not (home / "memory/users/alice").exists()
