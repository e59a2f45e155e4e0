"""The key facts (syncd/memory/key_facts.py): the summary an important fact refreshes is asked of
the model before the write's change group, written in the group when its input still holds (one
commit with the fact), and made again after the group when it does not. Real git, the real
embedding model, litellm's own ``mock_response`` or a real OpenAI-compatible endpoint on loopback
(tests/llm_helpers.FakeLLM) that holds a request open while the test acts."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import logging
import threading

import git
import pytest

import syncd
from syncd.config import Settings
from syncd.memory import MemoryManager

from .helpers import wait_for
from .llm_helpers import NO_FACTS, FakeLLM, Gate

run = asyncio.run
FACTS_BLOCK = "memory/users/ana/core/facts.md"
MEMORY_MD = "memory/users/ana/MEMORY.md"


def changed_in(repo: git.Repo, commit: git.Commit) -> set[str]:
    return set(repo.git.show("--name-only", "--format=", commit.hexsha).split())


def test_an_important_fact_and_the_key_facts_it_refreshes_are_one_commit(engine, home):
    settings = Settings(llm_model="gpt-4o-mini", core_refresh_importance=0.9)
    manager = MemoryManager(
        engine, settings=settings, job_llm_options={"summarise": {"mock_response": "- Keeps bees on the roof."}}
    )
    repo = git.Repo(home)
    before = repo.head.commit
    run(manager.add_memory("Keeps bees on the roof.", user_id="ana", importance=0.95))
    assert repo.head.commit.parents == (before,), "more than one commit for one fact"
    log = next(p for p in changed_in(repo, repo.head.commit) if p.startswith("memory/users/ana/20"))
    assert changed_in(repo, repo.head.commit) == {log, FACTS_BLOCK, MEMORY_MD}
    assert "- Keeps bees on the roof." in (home / FACTS_BLOCK).read_text()
    # An ordinary fact asks for no summary and leaves the key facts alone.
    run(manager.add_memory("Cycles to work.", user_id="ana", importance=0.5))
    assert changed_in(repo, repo.head.commit) == {log}


@pytest.mark.parametrize("made_by", ["add_memory", "a conversation turn"])
def test_key_facts_whose_input_changed_while_the_model_wrote_them_are_made_again_after(
    home, embedder, monkeypatch, made_by
):
    """While the model writes the summary for one agent's important fact, another agent writes a
    fact (it is not kept waiting: the summary is asked before the first agent's group). The
    summary made ahead then misses that fact: it is never written; the first agent's fact is
    committed alone, and the summary is asked again and committed after it."""
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    monkeypatch.setenv("no_proxy", "127.0.0.1")
    extraction = '{"facts": [{"content": "Keeps bees on the roof.", "category": "personal", "importance": 0.95}]}'
    fresh = "- Keeps bees.\n- Cycles to work."
    # The summary held open (released, it answers NO_FACTS's text: the summary made ahead, stale
    # by then), then the one asked after the group.
    replies = ([extraction] if made_by != "add_memory" else []) + [None, fresh]
    llm = FakeLLM(replies)
    settings = Settings(llm_model="openai/gpt-4o-mini", core_refresh_importance=0.9, lock_wait_s=3)
    first = syncd.open(home, read_only=True, embedder=embedder, settings=settings)
    other = syncd.open(home, read_only=True, embedder=embedder, settings=settings)
    manager = MemoryManager(
        first, settings=settings, default_user_id="ana", llm_options={"api_base": llm.url, "api_key": "sk-test"}
    )
    repo = git.Repo(home)
    start = repo.head.commit
    done: list = []

    def remember() -> None:
        if made_by == "add_memory":
            done.append(run(manager.add_memory("Keeps bees on the roof.", importance=0.95)))
        else:
            done.append(run(manager.process_conversation_turn_for_memories("I keep bees on my roof.")))

    writer = threading.Thread(target=remember)
    try:
        writer.start()
        wait_for(lambda: llm.arrived(len(replies) - 1), 60, "the summary to be asked")
        fact = run(MemoryManager(other, settings=settings).add_memory("Cycles to work.", user_id="ana"))
        assert fact is not None and "Cycles to work." in repo.git.show("HEAD")
        llm.release()
        writer.join(timeout=120)
        assert done, "the first agent's write did not return"
    finally:
        llm.release()
        writer.join(timeout=120)
        llm.close()
        first.close()
        other.close()
    assert len(llm.requests) == len(replies), "the summary was not asked again"
    commits = list(repo.iter_commits(f"{start.hexsha}..HEAD", reverse=True))
    assert [c.summary for c in commits][-1] == "Refresh the key facts of ana"
    assert [changed_in(repo, c) for c in commits][-1] == {FACTS_BLOCK, MEMORY_MD}
    # Neither the agent's fact commit nor the other's holds a summary: the stale one never landed.
    assert all(FACTS_BLOCK not in changed_in(repo, c) for c in commits[:-1])
    assert (home / FACTS_BLOCK).read_text().count("Cycles to work.") == 1
    assert NO_FACTS not in repo.git.log("-p", "--", FACTS_BLOCK)


@pytest.mark.parametrize("index", ["lancedb", "postgresql"])
def test_a_refresh_never_writes_a_summary_older_than_the_facts_committed_before_it(
    request, embedder, monkeypatch, index
):
    """A refresh whose model call another agent's important fact overtakes (that agent's own
    summary, holding the fact, lands first) must not then write its summary made without that
    fact: it looks again inside its group, and asks again when the facts changed meanwhile. The
    same with the index in PostgreSQL (the summary reads the logs, never the index)."""
    home = request.getfixturevalue("home" if index == "lancedb" else "pg_home")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    monkeypatch.setenv("no_proxy", "127.0.0.1")
    # The refresh's summary held open (released, it answers NO_FACTS's text, made without the
    # gliders), the other agent's summary, then the refresh's summary asked again.
    llm = FakeLLM([None, "- Keeps bees.\n- Flies gliders.", "- Keeps bees.\n- Flies gliders, asked again."])
    settings = Settings(llm_model="openai/gpt-4o-mini", core_refresh_importance=0.9, lock_wait_s=3)
    options = {"api_base": llm.url, "api_key": "sk-test"}
    first = syncd.open(home, read_only=True, embedder=embedder, settings=settings)
    other = syncd.open(home, read_only=True, embedder=embedder, settings=settings)
    done: list = []
    try:
        manager = MemoryManager(first, settings=settings, default_user_id="ana", llm_options=options)
        run(manager.add_memory("Keeps bees.", importance=0.5))
        refresh = threading.Thread(target=lambda: done.append(run(manager.refresh_core_memory_facts())))
        refresh.start()
        wait_for(lambda: llm.arrived(1), 60, "the refresh's summary to be asked")
        agent = MemoryManager(other, settings=settings, default_user_id="ana", llm_options=options)
        assert run(agent.add_memory("Flies gliders.", importance=0.95)) is not None
        assert "Flies gliders." in (home / FACTS_BLOCK).read_text()
        llm.release()
        refresh.join(timeout=120)
        assert done, "the refresh did not return"
    finally:
        llm.release()
        llm.close()
        first.close()
        other.close()
    assert "Flies gliders" in (home / FACTS_BLOCK).read_text(), "a summary missing a committed fact was written"
    assert NO_FACTS not in (home / FACTS_BLOCK).read_text()
    assert len(llm.requests) == 3


def test_a_refresh_after_the_group_that_cannot_be_written_does_not_fail_the_write(home, embedder, monkeypatch, caplog):
    """The refresh made after an important fact's group (its summary made ahead was stale) is a
    change of its own, which may be refused (here: another writer holds the home past
    ``lock_wait_s``). The fact is committed by then: the write returns it, and the log says the
    key facts were not refreshed (raised, the caller took the committed fact for lost and wrote
    it again)."""
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    monkeypatch.setenv("no_proxy", "127.0.0.1")
    # The summary made ahead, held until another agent's fact makes it stale; the refresh after
    # the group, held until a third writer holds the home.
    after = Gate("- Keeps bees.\n- Cycles to work.")
    llm = FakeLLM([None, after])
    settings = Settings(llm_model="openai/gpt-4o-mini", core_refresh_importance=0.9, lock_wait_s=1)
    first = syncd.open(home, read_only=True, embedder=embedder, settings=settings)
    other = syncd.open(home, read_only=True, embedder=embedder, settings=settings)
    holder = syncd.open(home, read_only=True, embedder=embedder, settings=settings)
    manager = MemoryManager(
        first, settings=settings, default_user_id="ana", llm_options={"api_base": llm.url, "api_key": "sk-test"}
    )
    repo = git.Repo(home)
    done: list = []
    holding, let_go = threading.Event(), threading.Event()

    def remember() -> None:
        try:
            done.append(run(manager.add_memory("Keeps bees on the roof.", importance=0.95)))
        except syncd.SyncdError as exc:
            done.append(exc)

    def hold() -> None:
        with holder.changes():
            holding.set()
            let_go.wait(120)

    writer, holds = threading.Thread(target=remember), threading.Thread(target=hold)
    try:
        with caplog.at_level(logging.WARNING, logger="syncd"):
            writer.start()
            wait_for(lambda: llm.arrived(1), 60, "the summary to be asked")
            assert run(MemoryManager(other, settings=settings).add_memory("Cycles to work.", user_id="ana"))
            llm.release()
            wait_for(lambda: llm.arrived(2), 60, "the refresh after the group to be asked")
            assert "Keeps bees on the roof." in repo.git.show("HEAD")
            holds.start()
            assert holding.wait(60), "the third writer did not get the home"
            after.opened.set()
            writer.join(timeout=120)
            assert done, "the first agent's write did not return"
    finally:
        let_go.set()
        after.opened.set()
        llm.release()
        writer.join(timeout=120)
        if holds.is_alive() or holding.is_set():
            holds.join(timeout=120)
        llm.close()
        for engine in (first, other, holder):
            engine.close()
    assert not isinstance(done[0], Exception), f"the committed write was reported failed: {done[0]!r}"
    assert done[0] is not None and done[0].content == "Keeps bees on the roof."
    assert any("not refreshed" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("unreadable", [MEMORY_MD, FACTS_BLOCK])
def test_key_facts_that_cannot_be_written_leave_the_fact_written_and_say_so(engine, home, caplog, unreadable):
    """A MEMORY.md or facts block syncd cannot rewrite (a byte that is not UTF-8, which it never
    rewrites) stops the summary, not the important fact that called for it: the fact is
    committed, neither file gets half of the summary, and the log says why."""
    (home / unreadable).parent.mkdir(parents=True, exist_ok=True)
    (home / unreadable).write_bytes(b"# Memory of ana\n\nCaf\xe9 on Sundays.\n")
    repo = git.Repo(home)
    repo.git.add("-A")
    repo.git.commit("-qm", "a file saved as Latin-1")
    before = repo.head.commit
    settings = Settings(llm_model="gpt-4o-mini", core_refresh_importance=0.9)
    manager = MemoryManager(
        engine, settings=settings, job_llm_options={"summarise": {"mock_response": "- Keeps bees on the roof."}}
    )
    with caplog.at_level(logging.WARNING, logger="syncd"):
        fact = run(manager.add_memory("Keeps bees on the roof.", user_id="ana", importance=0.95))
    assert fact is not None and "Keeps bees on the roof." in repo.git.show("HEAD")
    assert repo.head.commit.parents == (before,)
    assert changed_in(repo, repo.head.commit) == {f"memory/users/ana/{fact.timestamp[:10]}.md"}
    assert (home / unreadable).read_bytes() == b"# Memory of ana\n\nCaf\xe9 on Sundays.\n"
    assert any("not refreshed" in r.getMessage() and "UTF-8" in r.getMessage() for r in caplog.records)


def test_a_refresh_whose_facts_keep_changing_writes_nothing_and_says_so(home, embedder, monkeypatch):
    """A refresh overtaken by another writer each time its model answers asks again a few times,
    then gives up with ConflictError: nothing written, never the summary of facts gone by."""
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    monkeypatch.setenv("no_proxy", "127.0.0.1")
    gates = [Gate(f"- Summary {n}, overtaken.") for n in range(3)]
    llm = FakeLLM(list(gates))
    settings = Settings(llm_model="openai/gpt-4o-mini", core_refresh_importance=0.9, lock_wait_s=3)
    first = syncd.open(home, read_only=True, embedder=embedder, settings=settings)
    other = syncd.open(home, read_only=True, embedder=embedder, settings=settings)
    done: list = []

    def refresh() -> None:
        try:
            done.append(run(manager.refresh_core_memory_facts()))
        except syncd.SyncdError as exc:
            done.append(exc)

    thread = threading.Thread(target=refresh)
    try:
        manager = MemoryManager(
            first, settings=settings, default_user_id="ana", llm_options={"api_base": llm.url, "api_key": "sk-test"}
        )
        agent = MemoryManager(other, settings=settings, default_user_id="ana")
        run(agent.add_memory("Keeps bees.", importance=0.5))
        thread.start()
        for n, gate in enumerate(gates):
            wait_for(lambda n=n: llm.arrived(n + 1), 60, f"summary {n} to be asked")
            assert run(agent.add_memory(f"Walked {n + 1} km today.", importance=0.5, dedup=False))
            gate.opened.set()
        thread.join(timeout=120)
        assert done, "the refresh did not return"
    finally:
        for gate in gates:
            gate.opened.set()
        thread.join(timeout=120)
        llm.close()
        first.close()
        other.close()
    assert isinstance(done[0], syncd.ConflictError), done[0]
    assert "memory/users/ana" in str(done[0])
    assert not (home / FACTS_BLOCK).exists() and not (home / MEMORY_MD).exists()
    assert len(llm.requests) == 3


def add_bees_while_the_summary_is_asked(manager, engine, llm: FakeLLM, ahead: Gate, meanwhile) -> None:
    """``manager`` adds an important fact on a thread of its own; once its summary is asked (held
    by ``ahead``), ``meanwhile()`` runs, then the summary is answered and the add must return the
    fact. Closes ``llm`` and ``engine``."""
    done: list = []
    thread = threading.Thread(target=lambda: done.append(run(manager.add_memory("Keeps bees.", importance=0.95))))
    try:
        thread.start()
        wait_for(lambda: llm.arrived(1), 60, "the summary to be asked")
        meanwhile()
        ahead.opened.set()
        thread.join(timeout=120)
        assert done and done[0] is not None
    finally:
        ahead.opened.set()
        thread.join(timeout=120)
        llm.close()
        engine.close()


def test_an_important_fact_written_past_midnight_gets_the_key_facts_of_the_new_day(home, embedder, monkeypatch):
    """The summary made ahead at 23:59 gives the fact yesterday's date; the fact is written after
    midnight, in the new day's log: that summary is not written, and the one made again after the
    group summarises the fact as the log holds it."""
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    monkeypatch.setenv("no_proxy", "127.0.0.1")
    ahead = Gate("- Keeps bees (made before midnight).")
    llm = FakeLLM([ahead, "- Keeps bees (made after midnight)."])
    now = [dt.datetime(2026, 12, 7, 23, 59, 59)]
    settings = Settings(llm_model="openai/gpt-4o-mini", core_refresh_importance=0.9)
    engine = syncd.open(home, read_only=True, embedder=embedder, settings=settings)
    manager = MemoryManager(
        engine,
        settings=settings,
        default_user_id="ana",
        llm_options={"api_base": llm.url, "api_key": "sk-test"},
        clock=lambda: now[0],
    )
    repo = git.Repo(home)
    start = repo.head.commit

    def past_midnight() -> None:
        now[0] = dt.datetime(2026, 12, 8, 0, 0, 1)

    add_bees_while_the_summary_is_asked(manager, engine, llm, ahead, past_midnight)
    commits = list(repo.iter_commits(f"{start.hexsha}..HEAD", reverse=True))
    assert [c.summary for c in commits] == ["Remember: Keeps bees.", "Refresh the key facts of ana"]
    assert changed_in(repo, commits[0]) == {"memory/users/ana/2026-12-08.md"}
    assert "2026-12-07" in json.dumps(llm.requests[0]) and "2026-12-08" in json.dumps(llm.requests[1])
    assert (home / FACTS_BLOCK).read_text().strip() == "- Keeps bees (made after midnight)."


@pytest.mark.parametrize("index", ["lancedb", "postgresql"])
def test_facts_already_remembered_ask_for_no_summary_and_no_second_commit(request, embedder, monkeypatch, index):
    """The summary is asked before the facts are screened for duplicates (under the writer's turn
    they would hold every other write back). An important fact restated asks the model nothing,
    and a turn whose important fact is new but another fact restated gets its summary in its
    own commit, asked once (made from the facts to be written, not the restated one too)."""
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    monkeypatch.setenv("no_proxy", "127.0.0.1")
    turn = json.dumps(
        {
            "facts": [
                {"content": "Cycles to work.", "category": "personal", "importance": 0.5},
                {"content": "Is allergic to peanuts.", "category": "personal", "importance": 0.95},
            ]
        }
    )
    # The duplicates are found by the index: LanceDB in the home, or a PostgreSQL database.
    home = request.getfixturevalue("home" if index == "lancedb" else "pg_home")
    llm = FakeLLM(["- Keeps bees.", turn, "- Keeps bees.\n- Allergic to peanuts."])
    settings = Settings(llm_model="openai/gpt-4o-mini", core_refresh_importance=0.9)
    repo = git.Repo(home)
    with syncd.open(home, embedder=embedder, settings=settings) as engine:
        manager = MemoryManager(
            engine, settings=settings, default_user_id="ana", llm_options={"api_base": llm.url, "api_key": "sk-test"}
        )
        try:
            assert run(manager.add_memory("Keeps bees on the roof.", importance=0.95)) is not None
            assert run(manager.add_memory("Cycles to work.", importance=0.5)) is not None
            head = repo.head.commit
            assert run(manager.add_memory("Keeps bees on the roof.", importance=0.95)) is None
            assert len(llm.requests) == 1, "a restated fact asked for a summary"
            assert repo.head.commit == head
            written = run(manager.process_conversation_turn_for_memories("I cycle to work; peanuts make me ill."))
        finally:
            llm.close()
    assert [f.content for f in written] == ["Is allergic to peanuts."]
    assert len(llm.requests) == 3, "the summary was asked more than once"
    assert list(repo.iter_commits(f"{head.hexsha}..HEAD")) == [repo.head.commit]
    assert FACTS_BLOCK in changed_in(repo, repo.head.commit)
    assert (home / FACTS_BLOCK).read_text().strip() == "- Keeps bees.\n- Allergic to peanuts."


def test_a_fact_a_person_types_while_the_summary_is_made_is_in_the_key_facts(home, embedder, monkeypatch):
    """A person saves a fact in a log (their editor, no syncd) while the model writes the summary
    for an agent's important fact: the summary made ahead lacks it and is not written; the one
    made after the agent's commit has it."""
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    monkeypatch.setenv("no_proxy", "127.0.0.1")
    ahead = Gate("- Keeps bees.")
    llm = FakeLLM([ahead, "- Keeps bees.\n- Flies gliders."])
    settings = Settings(llm_model="openai/gpt-4o-mini", core_refresh_importance=0.9)
    engine = syncd.open(home, read_only=True, embedder=embedder, settings=settings)
    manager = MemoryManager(
        engine, settings=settings, default_user_id="ana", llm_options={"api_base": llm.url, "api_key": "sk-test"}
    )
    repo = git.Repo(home)
    start = repo.head.commit

    def meanwhile() -> None:
        (home / "memory/users/ana").mkdir(parents=True, exist_ok=True)
        (home / "memory/users/ana/2026-11-01.md").write_text("# 2026-11-01\n\n- [personal] Flies gliders.\n")

    add_bees_while_the_summary_is_asked(manager, engine, llm, ahead, meanwhile)
    assert "Flies gliders." not in json.dumps(llm.requests[0]) and "Flies gliders." in json.dumps(llm.requests[1])
    commits = list(repo.iter_commits(f"{start.hexsha}..HEAD", reverse=True))
    assert [c.summary for c in commits][-1] == "Refresh the key facts of ana"
    assert all(FACTS_BLOCK not in changed_in(repo, c) for c in commits[:-1])
    assert (home / FACTS_BLOCK).read_text().strip() == "- Keeps bees.\n- Flies gliders."
