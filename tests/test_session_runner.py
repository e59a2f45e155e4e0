"""The session runner: one turn is one commit (transcript lines, facts, state, lifecycle fields),
``git revert`` of it removes them all and the index follows; facts point at their transcript line."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import subprocess
import sys

import git

from syncd.config import Settings
from syncd.memory import MemoryManager
from syncd.session import (
    ContextCompressor,
    SessionPolicy,
    SessionRunner,
    list_sessions,
    read_state_file,
    read_transcript_file,
)

run = asyncio.run
UTC = dt.UTC


def reply(*facts: tuple[str, float]) -> str:
    return json.dumps({"facts": [{"content": c, "category": "personal", "importance": i} for c, i in facts]})


def manager_for(engine, extract_reply: str) -> MemoryManager:
    return MemoryManager(
        engine,
        settings=Settings(llm_model="gpt-4o-mini", core_refresh_importance=0.99),
        job_llm_options={"extract": {"mock_response": extract_reply}},
    )


class Clock:
    def __init__(self, start: dt.datetime):
        self.now = start

    def __call__(self) -> dt.datetime:
        return self.now


def test_one_turn_is_one_commit_and_its_revert_removes_it_all(engine, home):
    manager = manager_for(engine, reply(("Keeps bees on the roof.", 0.7)))
    runner = SessionRunner(manager)
    repo = git.Repo(home)
    before = repo.head.commit
    steps = [
        {
            "type": "action",
            "step_number": 1,
            "tool_calls": [{"id": "c1", "name": "search", "arguments": {"q": "bees"}}],
            "observations": "3 hives",
            "model_output": None,
            "error": None,
        }
    ]
    result = run(
        runner.process_turn(
            "s-1",
            "I keep bees on my roof.",
            "Lovely!",
            user_id="ana",
            steps=steps,
            state={"version": 2, "steps": steps, "tools": ["search"], "serialized_at": "x"},
        )
    )
    head = repo.head.commit
    assert list(head.parents) == [before]  # exactly one new commit
    base = "memory/users/ana/sessions/s-1/"
    changed = set(head.stats.files)
    assert {base + "transcript.jsonl", base + "state.json", base + "session.json"} <= changed
    day = [p for p in changed if p.endswith(".md")]
    assert len(day) == 1 and day[0].startswith("memory/users/ana/20")
    assert "Syncd-Session: s-1" in head.message

    # The fact points at the exact transcript line of the person's message.
    (fact,) = result.facts
    line = result.entries[0].line
    assert (fact.source_session, fact.source_line) == ("s-1", line)
    entries = read_transcript_file(engine.home, "ana", "s-1")
    assert entries[line - 1]["content"] == "I keep bees on my roof." and entries[line - 1]["line"] == line
    assert entries[-1]["actions"] == steps
    blame = subprocess.run(
        [sys.executable, "-m", "syncd", "blame", fact.id, "--home", str(home)], capture_output=True, text=True
    )
    assert blame.returncode == 0, blame.stderr
    assert head.hexsha[:7] in blame.stdout and f"Syncd-Transcript-Line: {line}" in blame.stdout
    assert engine.search("bees on the roof", user_id="ana", kind="fact")[0].content == "Keeps bees on the roof."

    # Revert the turn: every file of it goes, and the index follows.
    repo.git.revert("--no-edit", head.hexsha)
    engine.sync()
    assert not (home / base / "transcript.jsonl").exists() and not (home / base / "state.json").exists()
    assert not any(p.startswith(base) for p in engine.index.files())
    assert not any(h.content == "Keeps bees on the roof." for h in engine.search("bees roof", user_id="ana"))


def test_lifecycle_fields_live_in_the_home_and_a_reset_is_recorded(engine, home):
    clock = Clock(dt.datetime(2026, 3, 1, 10, 0, tzinfo=UTC))
    manager = manager_for(engine, reply())
    runner = SessionRunner(manager, policy=SessionPolicy(daily_reset_hour=4), clock=clock)
    run(runner.process_turn("s-2", "hello", "hi", user_id="ana"))
    clock.now += dt.timedelta(hours=2)
    second = run(runner.process_turn("s-2", "again", "yes", user_id="ana"))
    assert second.reset is None and second.session.turn_count == 2
    clock.now += dt.timedelta(days=1)  # past 04:00 UTC
    third = run(runner.process_turn("s-2", "next day", "morning", user_id="ana"))
    assert third.reset == "daily_reset" and third.session.turn_count == 1 and third.session.resets == 1
    meta = json.loads((home / "memory/users/ana/sessions/s-2/session.json").read_text())
    assert meta["resets"] == 1 and meta["last_reset_reason"] == "daily_reset"
    events = [e["meta"].get("event") for e in read_transcript_file(engine.home, "ana", "s-2")]
    assert events.count("reset") == 1
    assert read_state_file(engine.home, "ana", "s-2")["steps"] == []  # a reset starts with empty state
    listed = list_sessions(engine.home, "ana")
    assert [(i.session, i.turn_count, i.resets) for i in listed] == [("s-2", 1, 1)]


def test_turns_of_one_session_run_at_once_are_each_counted_and_named_by_their_own_line(engine, home):
    """Turns of one session at once (several tasks, threads or processes) read the session's
    fields and its next transcript line before taking the home's write turn: each counted from the
    same turn_count (four turns, turn_count 1) and each commit named the same line and turn."""
    runner = SessionRunner(manager_for(engine, json.dumps({"facts": []})))
    before = git.Repo(home).head.commit

    async def four_at_once():
        return await asyncio.gather(*(runner.process_turn("s-1", f"Message {n}.", f"Answer {n}.") for n in range(4)))

    results = run(four_at_once())
    assert results[-1].session is not None
    info = json.loads((home / "memory/users/default/sessions/s-1/session.json").read_text())
    assert info["turn_count"] == 4
    commits = list(git.Repo(home).iter_commits(f"{before.hexsha}..HEAD"))
    assert sorted(c.summary for c in commits) == [f"Turn {n} of session s-1" for n in range(1, 5)]
    named = sorted(line for c in commits for line in c.message.splitlines() if "s-1#" in line)
    assert len(named) == len(set(named)) == 4, named
    assert sorted(r.entries[0].line for r in results) == [1, 3, 5, 7]


def bee_keeping_manager(engine) -> MemoryManager:
    """A manager whose model finds one ordinary fact in a turn and summarises flushed steps."""
    return MemoryManager(
        engine,
        settings=Settings(llm_model="gpt-4o-mini", core_refresh_importance=0.99),
        job_llm_options={
            "extract": {"mock_response": reply(("Keeps bees on the roof.", 0.6))},
            "compress": {"mock_response": "- Looked at twelve hives."},
        },
    )


def agent_past_its_budget():
    """An agent whose task and eight long steps pass a 300-token context budget."""
    steps = [{"type": "task", "task": "Help Ana with her bees"}] + [
        {"type": "action", "step_number": i, "model_output": "hive " * 60, "observations": "bees " * 60}
        for i in range(8)
    ]
    return type("Agent", (), {"steps": steps})()


def test_a_turn_past_the_context_budget_flushes_first_then_commits_the_turn_with_the_compressed_state(engine, home):
    """The compression check runs before the turn's group (its model calls hold no lock): the
    flush is a commit of its own, then the turn's commit holds the agent as compressed."""
    manager = bee_keeping_manager(engine)
    compressor = ContextCompressor(manager, session_id="s-c", max_context_tokens=300, keep_last_steps=2)
    runner = SessionRunner(manager, compressor=compressor)
    agent = agent_past_its_budget()
    repo = git.Repo(home)
    before = repo.head.commit
    result = run(runner.process_turn("s-c", "I keep bees.", "Lovely!", user_id="ana", agent=agent))
    assert result.compressed and len(agent.steps) == 4  # the task, the summary, the last two
    turn, flush = list(repo.iter_commits(max_count=2))
    assert flush.parents == (before,) and flush.message.startswith("Pre-compaction flush of 6 steps")
    assert turn.message.startswith("Turn 1 of session s-c")
    state = json.loads(turn.tree["memory/users/ana/sessions/s-c/state.json"].data_stream.read())
    assert len(state["steps"]) == 4 and "twelve hives" in json.dumps(state["steps"])
    events = [e.get("meta", {}).get("event") for e in read_transcript_file(manager.home, "ana", "s-c")]
    assert events == ["flush", None, None]  # the flush's record, then the turn's two lines
    meta = json.loads(turn.tree["memory/users/ana/sessions/s-c/session.json"].data_stream.read())
    assert meta["compressions"] == 1 and meta["turn_count"] == 1 and len(meta["flushed"]) == 1
    assert meta["flush_failures"] == 0


def test_a_turn_another_run_recorded_while_this_one_compressed_says_the_agent_was_compressed(engine, home):
    """Run again under its ``turn_id``, a turn looks whether it is recorded before asking the
    model (not yet, here), compresses the caller's agent, and looks again inside its group: by
    then another run of the same turn recorded it. The answer is a replay, and must still say
    the caller's agent was compressed (its flush is a commit of its own, and the agent's steps
    were cut): told ``compressed=False``, a caller would keep a context it no longer has.

    The other run is made from inside the compression (the compressor is the caller's object;
    this one runs the other turn to its end before answering), so it lands between the two looks
    every time."""
    manager = bee_keeping_manager(engine)
    other = SessionRunner(manager)

    class RacedCompressor(ContextCompressor):
        async def compress_context(self, agent, **where):
            done = await super().compress_context(agent, **where)
            await other.process_turn("s-r", "I keep bees.", "Lovely!", user_id="ana", turn_id="msg-1")
            return done

    compressor = RacedCompressor(manager, session_id="s-r", max_context_tokens=300, keep_last_steps=2)
    runner = SessionRunner(manager, compressor=compressor)
    agent = agent_past_its_budget()
    result = run(runner.process_turn("s-r", "I keep bees.", "Lovely!", user_id="ana", agent=agent, turn_id="msg-1"))
    assert result.replayed and result.compressed and len(agent.steps) == 4
    records = read_transcript_file(manager.home, "ana", "s-r")
    assert [r["content"] for r in records if r["role"] in ("user", "assistant")] == ["I keep bees.", "Lovely!"]


def test_a_flush_before_a_sessions_first_turn_records_the_sessions_clock(engine, home):
    """A runner on a clock of its own (a conversation replayed from its log, say) whose first
    turn flushes the agent's context: the flush made session.json first, stamped by the real
    clock, and the turn kept that ``created_at``, so the session said it began in December 2026
    while its turns were in May 2024. The flush now records the session's clock, as the turn."""
    manager = bee_keeping_manager(engine)
    compressor = ContextCompressor(manager, session_id="s-t", max_context_tokens=300, keep_last_steps=2)
    clock = Clock(dt.datetime(2024, 5, 1, 10, 0, tzinfo=UTC))
    runner = SessionRunner(manager, compressor=compressor, clock=clock)
    agent = agent_past_its_budget()
    result = run(runner.process_turn("s-t", "I keep bees.", "Lovely!", user_id="ana", agent=agent))
    assert result.compressed and result.reset is None
    stamp = "2024-05-01T10:00:00.000+00:00"
    flush = next(c for c in git.Repo(home).iter_commits() if c.message.startswith("Pre-compaction flush"))
    flushed = json.loads(flush.tree["memory/users/ana/sessions/s-t/session.json"].data_stream.read())
    assert flushed["created_at"] == flushed["last_active_at"] == stamp, flushed
    info = json.loads((home / "memory/users/ana/sessions/s-t/session.json").read_text())
    assert info["created_at"] == info["last_active_at"] == stamp and info["turn_count"] == 1, info
    records = read_transcript_file(manager.home, "ana", "s-t")
    assert {r["ts"][:10] for r in records} == {"2024-05-01"}, records  # the flush's line too


def test_a_reset_starts_the_count_of_compressed_turns_anew_with_the_turn_count(engine, home):
    """`compressions` counts the turns recorded with the context compressed, so it never passes
    `turn_count`, and a reset sets both back (the remote merge adds both up the same way, and
    takes the later side's after a reset): kept across it, one turn after a reset counted 1 of
    1 turns and 1 compression for a turn whose context nobody compressed."""
    clock = Clock(dt.datetime(2026, 3, 1, 10, 0, tzinfo=UTC))
    manager = bee_keeping_manager(engine)
    compressor = ContextCompressor(manager, session_id="s-r", max_context_tokens=300, keep_last_steps=2)
    runner = SessionRunner(manager, compressor=compressor, policy=SessionPolicy(daily_reset_hour=4), clock=clock)
    first = run(runner.process_turn("s-r", "I keep bees.", "Lovely!", user_id="ana", agent=agent_past_its_budget()))
    assert first.compressed and (first.session.turn_count, first.session.compressions) == (1, 1)
    clock.now += dt.timedelta(days=1)  # past 04:00 UTC: the next turn resets the session
    small = type("Agent", (), {"steps": [{"type": "task", "task": "Say hello"}]})()
    second = run(runner.process_turn("s-r", "next day", "morning", user_id="ana", agent=small))
    assert second.reset == "daily_reset" and not second.compressed
    meta = json.loads((home / "memory/users/ana/sessions/s-r/session.json").read_text())
    assert (meta["turn_count"], meta["compressions"], meta["resets"]) == (1, 0, 1)
