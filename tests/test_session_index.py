"""Transcripts on disk and in the index: durable appends through the engine, the state mirror,
transcript rows (opt-in) that never cross users, and incremental indexing equal to a rebuild."""

from __future__ import annotations

import asyncio
import itertools
import os
import pickle

import git
import pytest
from hypothesis import assume, given, settings

import syncd
from syncd.config import Settings
from syncd.history.intents import Intent
from syncd.session import MarkdownIndexer, StateMirror, TranscriptIndexer, TranscriptManager, list_sessions

from .helpers import assert_same_index, run_concurrently, snapshot
from .strategies import safe_ids, unicode_text

run = asyncio.run
ON = Settings(transcript_indexing_enabled=True)


@pytest.fixture
def indexed(home, embedder):
    with syncd.open(home, settings=ON, embedder=embedder) as engine:
        yield engine


def test_appends_are_durable_numbered_and_resume_after_a_torn_line(engine, home):
    transcripts = TranscriptManager(engine, "ana")
    first = run(transcripts.append_turn("s1", "user", "I like green tea"))
    second = run(transcripts.append_turn("s1", "assistant", "Noted", actions=[{"tool": "x"}], metadata={"k": 1}))
    assert (first.line, second.line) == (1, 2)
    path = home / "memory/users/ana/sessions/s1/transcript.jsonl"
    before = path.read_bytes()
    with open(path, "ab") as handle:  # a crash mid-append
        handle.write(b'{"ts": "2026", "role": "us')
    third = run(transcripts.append_turn("s1", "user", "still here"))
    assert third.line == 4 and path.read_bytes().startswith(before)
    read = run(transcripts.read_transcript("s1"))
    assert [(r["line"], r["content"]) for r in read] == [(1, "I like green tea"), (2, "Noted"), (4, "still here")]
    assert run(transcripts.read_transcript("s1", last_n=1))[0]["content"] == "still here"
    assert transcripts.transcript_exists("s1") is True and transcripts.transcript_exists("s2") is False
    assert transcripts.transcript_exists("s1", user_id="bob") is False
    assert [i.session for i in list_sessions(engine.home, "ana")] == ["s1"]


def test_managers_of_one_engine_appending_to_one_session_from_threads_lose_nothing(engine):
    # Each manager had its own locks: four of them raced on the size guard and, after five lost
    # rounds, appends failed with ConflictError (24 of 40 lines written).
    managers = [TranscriptManager(engine, "ana") for _ in range(4)]

    def work(i: int) -> None:
        for n in range(10):
            run(managers[i].append_turn("busy", "user", f"{i}-{n}"))

    run_concurrently(work, 4)
    read = run(managers[0].read_transcript("busy"))
    assert [r["line"] for r in read] == list(range(1, 41))
    assert sorted(r["content"] for r in read) == sorted(f"{i}-{n}" for i in range(4) for n in range(10))


def test_the_state_mirror_writes_json_v2_and_a_placeholder_for_a_pickle(engine, home):
    mirror = StateMirror(engine, "ana")
    steps = [{"type": "task", "task": "tea"}, {"type": "final_answer", "answer": "sencha"}]
    assert mirror.read_state("s1") is None
    mirror.mirror_state("s1", {"version": 2, "steps": steps, "tools": [], "serialized_at": "now"})
    assert mirror.read_state("s1")["steps"] == steps
    mirror.mirror_state("s1", pickle.dumps({"steps": steps}))
    state = mirror.read_state("s1")
    assert state["steps"] == [] and state["legacy"]["format"] == "pickle"
    mirror.mirror_state("s1", pickle.dumps({"steps": steps}), allow_pickle=True)
    assert mirror.read_state("s1")["steps"] == steps
    assert engine.index.files()["memory/users/ana/sessions/s1/state.json"].error is None


def test_the_seeds_plain_methods_work_inside_a_running_loop_and_join_its_change_group(engine, home):
    """Code ported from the seed calls mirror_state, read_state and transcript_exists without
    await, from inside its coroutines: they write and answer there, and a state mirrored inside
    ``async with engine.changes()`` lands in the group's one commit, beside the awaited append."""
    repo = git.Repo(home)
    before = len(list(repo.iter_commits()))
    steps = [{"type": "task", "task": "tea"}]

    async def turn() -> tuple:
        transcripts, mirror = TranscriptManager(engine, "ana"), StateMirror(engine, "ana")
        seen = (transcripts.transcript_exists("s7"), mirror.read_state("s7"))
        async with engine.changes(Intent(author="agent", summary="One turn", user="ana", session="s7")):
            await transcripts.append_turn("s7", "user", "Sencha, please.")
            mirror.mirror_state("s7", {"version": 2, "steps": steps, "tools": [], "serialized_at": "now"})
            inside = (transcripts.transcript_exists("s7"), mirror.read_state("s7")["steps"])
        return seen, inside

    assert run(turn()) == ((False, None), (True, steps))
    head = next(repo.iter_commits())
    assert len(list(repo.iter_commits())) == before + 1 and head.summary == "One turn"
    assert set(head.stats.files) == {
        "memory/users/ana/sessions/s7/transcript.jsonl",
        "memory/users/ana/sessions/s7/state.json",
    }


def test_a_state_mirrored_on_a_home_from_inside_a_loop_is_written_and_committed(home, embedder):
    """A mirror opened on a home (no engine held, nothing running beside it) called from inside a
    coroutine writes and commits its snapshot, like the engine-backed one."""

    async def mirror() -> dict | None:
        with StateMirror(home, "ana", embedder=embedder) as states:
            states.mirror_state("s8", {"version": 2, "steps": [], "tools": [], "serialized_at": "now"})
            return states.read_state("s8")

    assert run(mirror())["steps"] == []
    assert "memory/users/ana/sessions/s8/state.json" in git.Repo(home).head.commit.stats.files


def test_transcript_rows_are_off_by_default_and_searchable_when_on(engine, home, embedder):
    run(TranscriptManager(engine, "ana").append_turn("s1", "user", "my cat is called Pistachio"))
    path = "memory/users/ana/sessions/s1/transcript.jsonl"
    assert path in engine.index.files()
    assert not [r for r in engine.index.all_rows().to_pylist() if r["path"] == path]
    engine.close()
    with syncd.open(home, settings=ON, embedder=embedder) as on:
        on.sync()  # the setting changed: transcripts get their rows
        (hit,) = TranscriptIndexer(on).search_transcripts("what is the cat called", "ana", limit=1)
        assert "Pistachio" in hit.content and hit.kind == "transcript" and hit.line == 1
        # Memory recall does not wade through raw transcripts.
        assert all(h.kind != "transcript" for h in on.search("cat Pistachio", user_id="ana"))
        stats = MarkdownIndexer(on).reindex_from_markdown()
        assert stats["transcripts"] == 1 and stats["files_processed"] >= 1


_MARK = itertools.count()


@settings(max_examples=12)
@given(owner=safe_ids, other=safe_ids, words=unicode_text(max_size=30))
def test_transcript_search_never_crosses_users(indexed, owner, other, words):
    if owner == other:
        return
    # The examples share one home: an owner a case apart from an earlier one (`A` beside `a`) is
    # refused its folder there, as every write path refuses it (tests/test_home.py).
    users = indexed.home.memory_dir / "users"
    assume(not any(n.lower() == owner.lower() and n != owner for n in os.listdir(users)))
    marker = f"qzx{next(_MARK)}marker"
    transcripts = TranscriptManager(indexed, owner)
    run(transcripts.append_turn("s1", "user", f"{marker} {words}"))
    rows = [r for r in indexed.index.all_rows().to_pylist() if r["kind"] == "transcript" and marker in r["text"]]
    assert rows and all(r["user"] == owner for r in rows)
    indexer = TranscriptIndexer(indexed)
    assert any(marker in h.content for h in indexer.search_transcripts(marker, owner, limit=50))
    assert not any(marker in h.content for h in indexer.search_transcripts(marker, other, limit=50))
    assert not any(marker in h.content for h in indexed.search(marker, user_id=other, kind="transcript", limit=50))


def test_incremental_transcript_indexing_equals_a_rebuild_and_reembeds_only_the_tail(indexed):
    indexed.sync()
    transcripts = TranscriptManager(indexed, "ana")
    words = "the quick brown fox visits the tea house and talks about the weather in Lisbon"
    embedded = []
    for n in range(14):  # well past several 400-token windows
        before = indexed.embedder.embedded_texts
        run(transcripts.append_turn("s1", "user" if n % 2 == 0 else "assistant", f"turn {n}: " + words * 8))
        embedded.append(indexed.embedder.embedded_texts - before)
    rows = [r for r in indexed.index.all_rows().to_pylist() if r["kind"] == "transcript"]
    assert len(rows) >= 4
    assert max(embedded) <= 2  # an append re-embeds the last chunk or two, never the earlier ones
    incremental = snapshot(indexed)
    indexed.reindex()
    assert_same_index(incremental, snapshot(indexed))


def test_a_session_search_finds_its_hits_below_the_users_other_sessions(indexed):
    # The session's hits were filtered from the user's best max(limit*8, 40): a session whose
    # chunks all ranked below 40 of the user's other sessions' was answered with nothing.
    transcripts = TranscriptManager(indexed, "ana")
    for n in range(45):
        run(transcripts.append_turn(f"loud{n}", "user", "we talked about green tea and the tea house again"))
    run(transcripts.append_turn("quiet", "user", "the weather was grey; a little tea later"))
    indexer = TranscriptIndexer(indexed)
    assert all(h.session_id != "quiet" for h in indexer.search_transcripts("green tea house", "ana", limit=40))
    (hit,) = indexer.search_transcripts("green tea house", "ana", limit=1, session_id="quiet")
    assert hit.session_id == "quiet" and "grey" in hit.content
