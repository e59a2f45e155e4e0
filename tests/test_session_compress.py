"""The context compressor: the pre-compaction flush runs first and its facts land in memory, git
and search; a failing flush compresses nothing; the same steps are never flushed twice; a
session.json it cannot read as its own stops it, kept byte for byte."""

from __future__ import annotations

import asyncio
import json
import threading

import git
import pytest

import syncd
from syncd.config import Settings
from syncd.errors import ParseError
from syncd.memory import MemoryManager
from syncd.session import ContextCompressor, read_session_info, read_transcript_file

from .daemon_helpers import wait_for
from .llm_helpers import FakeLLM

run = asyncio.run
SUMMARY = "- Looked up three tea shops; the best is Chá Lisboa."
FACT = "Prefers the tea shop Chá Lisboa."


def reply(*facts: str) -> str:
    return json.dumps({"facts": [{"content": c, "category": "preference", "importance": 0.6} for c in facts]})


def manager(engine, extract: str) -> MemoryManager:
    return MemoryManager(
        engine,
        settings=Settings(llm_model="gpt-4o-mini", core_refresh_importance=0.99),
        default_user_id="ana",
        job_llm_options={"extract": {"mock_response": extract}, "compress": {"mock_response": SUMMARY}},
    )


def long_steps(n: int = 8) -> list[dict]:
    steps = [{"type": "task", "task": "Find Ana a tea shop"}]
    for i in range(n):
        steps.append(
            {
                "type": "action",
                "step_number": i,
                "model_output": "searching " + "tea " * 60,
                "tool_calls": [{"id": f"c{i}", "name": "search", "arguments": {"q": "tea shop"}}],
                "observations": f"shop {i}: " + "leaves " * 60,
                "error": None,
            }
        )
    return steps


class Agent:
    def __init__(self, steps):
        self.steps = steps


def test_the_flush_runs_before_compression_and_its_facts_land_everywhere(engine, home):
    memory = manager(engine, reply(FACT))
    compressor = ContextCompressor(memory, session_id="s-9", max_context_tokens=300, keep_last_steps=2)
    agent = Agent(long_steps())
    before = len(list(git.Repo(home).iter_commits()))
    assert run(compressor.compress_context(agent)) is True
    # The first task and the last two steps stay; the rest became one summary step.
    assert agent.steps[0]["task"] == "Find Ana a tea shop" and len(agent.steps) == 4
    assert agent.steps[1]["summary"] is True and SUMMARY in agent.steps[1]["task"]
    # The flush's facts: in the markdown, in git (one commit), in search; with the flush's line.
    hits = engine.search("tea shop Chá Lisboa", user_id="ana", kind="fact")
    assert hits and hits[0].content == FACT
    commits = list(git.Repo(home).iter_commits())
    assert len(commits) == before + 1 and "flush" in commits[0].summary.lower()
    records = read_transcript_file(engine.home, "ana", "s-9")
    (flush,) = [r for r in records if r["meta"].get("event") == "flush"]
    day = (home / hits[0].path).read_text()
    assert f"src:s-9#{flush['line']}" in day
    assert compressor.stats["flushes"] == 1 and compressor.stats["compressions"] == 1


def test_a_failing_flush_leaves_the_context_uncompressed_and_says_so(engine, home):
    memory = manager(engine, "this is not JSON")
    compressor = ContextCompressor(memory, session_id="s-8", max_context_tokens=300, keep_last_steps=2)
    steps = long_steps()
    agent = Agent(list(steps))
    assert run(compressor.compress_context(agent)) is False
    assert agent.steps == steps
    assert compressor.stats["flush_failures"] == 1 and compressor.stats["compressions"] == 0
    events = [r["meta"].get("event") for r in read_transcript_file(engine.home, "ana", "s-8")]
    assert events == ["flush", "flush_failed"]
    assert not engine.search("tea shop", user_id="ana", kind="fact")
    info = read_session_info(engine.home, "ana", "s-8")  # the count outlives the process
    assert info.flush_failures == 1 and info.flushed == ()
    assert run(compressor.compress_context(Agent(list(steps)))) is False
    assert read_session_info(engine.home, "ana", "s-8").flush_failures == 2


def test_the_same_steps_are_never_flushed_twice(engine, home):
    memory = manager(engine, reply(FACT))
    steps = long_steps()
    first = ContextCompressor(memory, session_id="s-7", max_context_tokens=300, keep_last_steps=2)
    assert run(first.compress_context(Agent(list(steps))))
    # Another process, another compressor object: the flush done is remembered in session.json.
    memory.job_llm_options["extract"]["mock_response"] = reply("Something new from a repeat flush.")
    again = ContextCompressor(memory, session_id="s-7", max_context_tokens=300, keep_last_steps=2)
    assert run(again.compress_context(Agent(list(steps))))
    assert again.stats["flushes"] == 0 and again.stats["flush_skipped_repeat"] == 1
    assert not engine.search("Something new from a repeat flush", user_id="ana", kind="fact", min_cosine=0.9)
    info = read_session_info(engine.home, "ana", "s-7")
    assert len(info.flushed) == 1
    events = [r["meta"].get("event") for r in read_transcript_file(engine.home, "ana", "s-7")]
    assert events == ["flush"]


def test_a_context_within_budget_is_left_alone(engine):
    memory = manager(engine, reply(FACT))
    compressor = ContextCompressor(memory, session_id="s-6", max_context_tokens=100_000)
    agent = Agent(long_steps())
    assert run(compressor.compress_context(agent)) is False and len(agent.steps) == 9
    assert compressor.stats["flushes"] == 0


def test_while_the_model_reads_the_steps_to_flush_other_agents_write(home, embedder, monkeypatch):
    """The flush asks the model before its change group opens: another agent's write, made while
    that call is held open, is committed at once (it used to wait the model's seconds under the
    home's writer turn, and past ``lock_wait_s`` be refused)."""
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    monkeypatch.setenv("no_proxy", "127.0.0.1")
    llm = FakeLLM([None])  # the extraction held open; the summary that follows gets some text
    settings = Settings(llm_model="openai/gpt-4o-mini", core_refresh_importance=0.99, lock_wait_s=3)
    # Both as agents write beside each other: read-only engines, each change borrowing the lock.
    flushing = syncd.open(home, read_only=True, embedder=embedder, settings=settings)
    other = syncd.open(home, read_only=True, embedder=embedder, settings=settings)
    memory = MemoryManager(
        flushing, settings=settings, default_user_id="ana", llm_options={"api_base": llm.url, "api_key": "sk-test"}
    )
    compressor = ContextCompressor(memory, session_id="s-5", max_context_tokens=300, keep_last_steps=2)
    agent = Agent(long_steps())
    outcome: list = []
    flush = threading.Thread(target=lambda: outcome.append(run(compressor.compress_context(agent))))
    try:
        flush.start()
        wait_for(lambda: llm.arrived(1), 60, "the flush to ask the model")
        fact = run(MemoryManager(other, settings=settings).add_memory("Cycles to work.", user_id="ana"))
        assert fact is not None and "Cycles to work." in git.Repo(home).git.show("HEAD")
    finally:
        llm.release()
        flush.join(timeout=120)
        llm.close()
        flushing.close()
        other.close()
    assert outcome == [True]
    events = [e["meta"]["event"] for e in read_transcript_file(memory.home, "ana", "s-5") if e.get("meta")]
    assert events == ["flush"]


@pytest.mark.parametrize(
    ("damaged", "why"),
    [
        (b'{"created_at": "2026-11-22T09:30:00+00:00", "last_active_at": ', "not valid JSON"),  # cut short
        (b"\xff\xfe not UTF-8 at all\n", "not UTF-8 text"),
        (b'{"tool": "another program", "runs": [1, 2, 3]}\n', "created_at is missing"),  # another tool's file
        (b'["created_at", "last_active_at"]\n', "not a JSON object"),
    ],
)
def test_a_session_json_a_person_broke_stops_the_compressor_and_is_kept_byte_for_byte(engine, home, damaged, why):
    """The compressor records each flush in the session's session.json: one it cannot read as
    its own (cut short, not UTF-8, another program's, not an object) stops it before anything
    is written (ParseError naming the file and why), rather than being replaced by fresh fields."""
    memory = manager(engine, reply(FACT))
    compressor = ContextCompressor(memory, session_id="s-5", max_context_tokens=300, keep_last_steps=2)
    meta = engine.home.session_meta_path("ana", "s-5")
    meta.parent.mkdir(parents=True)
    meta.write_bytes(damaged)
    repo = git.Repo(home)
    repo.index.add([str(meta.relative_to(home))])
    repo.index.commit("A session.json, as the person left it")
    head = repo.head.commit.hexsha
    steps = long_steps()
    agent = Agent(list(steps))
    with pytest.raises(ParseError, match=why) as raised:
        run(compressor.compress_context(agent))
    assert raised.value.path == "memory/users/ana/sessions/s-5/session.json"
    assert meta.read_bytes() == damaged
    assert agent.steps == steps  # nothing forgotten
    assert repo.head.commit.hexsha == head and not repo.is_dirty(untracked_files=True)
    assert sorted(p.name for p in meta.parent.iterdir()) == ["session.json"]  # no transcript record
    assert not engine.search("tea shop Chá Lisboa", user_id="ana", kind="fact")
    assert compressor.stats["flushes"] == 0 and compressor.stats["compressions"] == 0


def _held_llm_memory(home, embedder, llm: FakeLLM):
    settings = Settings(llm_model="openai/gpt-4o-mini", core_refresh_importance=0.99, lock_wait_s=30)
    engine = syncd.open(home, read_only=True, embedder=embedder, settings=settings)
    memory = MemoryManager(
        engine, settings=settings, default_user_id="ana", llm_options={"api_base": llm.url, "api_key": "sk-test"}
    )
    return engine, memory


def test_two_agents_flushing_the_same_steps_at_once_flush_them_once(home, embedder, monkeypatch):
    """Two processes of one session (each its own engine and compressor, the same context):
    both ask the model before their flush's group, so both found the steps not flushed yet, and
    both flushed them (two flush records, the digest twice in session.json). The flush looks
    again inside its group."""
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    monkeypatch.setenv("no_proxy", "127.0.0.1")
    llm = FakeLLM([None, None])  # both extractions held until both have asked
    engines, outcomes, threads = [], [], []
    try:
        for _ in range(2):
            engine, memory = _held_llm_memory(home, embedder, llm)
            engines.append(engine)
            compressor = ContextCompressor(memory, session_id="s-7", max_context_tokens=300, keep_last_steps=2)
            agent = Agent(long_steps())
            threads.append(
                threading.Thread(target=lambda c=compressor, a=agent: outcomes.append(run(c.compress_context(a))))
            )
        for thread in threads:
            thread.start()
        wait_for(lambda: llm.arrived(2), 60, "both flushes to ask the model")
    finally:
        llm.release()
        for thread in threads:
            thread.join(timeout=120)
        llm.close()
        for engine in engines:
            engine.close()
    assert outcomes == [True, True]
    events = [e["meta"]["event"] for e in read_transcript_file(engines[0].home, "ana", "s-7") if e.get("meta")]
    assert events == ["flush"]
    info = read_session_info(engines[0].home, "ana", "s-7")
    assert info is not None and len(info.flushed) == 1


def test_a_flush_whose_group_failed_is_made_again_not_taken_as_done(home, embedder, monkeypatch):
    """The flush's digest was marked done in the compressor before its group ended: a group
    undone (here: session.json broken by hand while the model read the steps) left the steps
    marked flushed, and the next compression summarised them away with their facts never kept."""
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    monkeypatch.setenv("no_proxy", "127.0.0.1")
    llm = FakeLLM([None, reply(FACT), SUMMARY])
    engine, memory = _held_llm_memory(home, embedder, llm)
    compressor = ContextCompressor(memory, session_id="s-8", max_context_tokens=300, keep_last_steps=2)
    agent = Agent(long_steps())
    info_file = engine.home.session_dir("ana", "s-8") / "session.json"
    errors: list = []

    def first() -> None:
        try:
            run(compressor.compress_context(agent))
        except ParseError as exc:  # the broken session.json, looked at below
            errors.append(exc)

    thread = threading.Thread(target=first)
    try:
        thread.start()
        wait_for(lambda: llm.arrived(1), 60, "the flush to ask the model")
        info_file.parent.mkdir(parents=True, exist_ok=True)
        info_file.write_text("{ broken by hand")
        llm.release()
        thread.join(timeout=120)
        assert len(errors) == 1 and "session.json" in str(errors[0]), errors
        assert len(agent.steps) == 9  # nothing compressed
        info_file.unlink()  # the person puts it right
        assert run(compressor.compress_context(agent)) is True
    finally:
        llm.release()
        thread.join(timeout=120)
        llm.close()
        engine.close()
    assert FACT in "".join(p.read_text() for p in (home / "memory" / "users" / "ana").rglob("*.md"))
    events = [e["meta"]["event"] for e in read_transcript_file(memory.home, "ana", "s-8") if e.get("meta")]
    assert events == ["flush"]
