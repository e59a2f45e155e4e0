"""One change, one commit: change groups in the engine, agent turns as one revertible commit (also
through a daemon), and a write git will not commit refused and undone rather than half-kept."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import threading
import time

import git
import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no network here: skip the fetch

import syncd
from syncd.config import Settings
from syncd.errors import ConflictError, GitBusyError
from syncd.history.intents import Intent
from syncd.memory import MemoryBlockUpdateTool, MemoryManager, MemorySearchTool

from .daemon_helpers import running_daemon
from .helpers import wait_for

run = asyncio.run

SUMMARY = "- Lives in Lisbon.\n- Learning Portuguese."
TURN = {"user_message": "I moved to Lisbon and I'm learning Portuguese.", "response": "Bem-vinda!"}


def reply(*facts: tuple[str, float]) -> str:
    return json.dumps({"facts": [{"content": c, "category": "personal", "importance": i} for c, i in facts]})


def make_manager(backend, embedder=None, **settings) -> MemoryManager:
    knobs = {"llm_model": "gpt-4o-mini", "core_refresh_importance": 0.9} | settings
    return MemoryManager(
        backend,
        settings=Settings(**knobs),
        embedder=embedder,
        job_llm_options={
            "extract": {"mock_response": reply(("Lives in Lisbon.", 0.95), ("Is learning Portuguese.", 0.6))},
            "summarise": {"mock_response": SUMMARY},
        },
    )


def commits(home) -> list[git.Commit]:
    return list(git.Repo(home).iter_commits())


def changed_files(commit: git.Commit) -> set[str]:
    return set(commit.stats.files)


def test_a_turn_with_an_important_fact_is_one_commit_and_one_revert_undoes_it(engine, home):
    manager = make_manager(engine)
    facts_block = home / "memory/users/ana/core/facts.md"
    before = len(commits(home))
    written = run(manager.process_conversation_turn_for_memories(TURN, "c1", "ana", session_id="s1", transcript_line=3))
    assert len(written) == 2 and facts_block.read_text().strip() == SUMMARY

    # The daily log, the facts block and MEMORY.md it refreshed: one commit, the turn's trailers.
    assert len(commits(home)) == before + 1
    head = commits(home)[0]
    day = next((home / "memory/users/ana").glob("????-??-??.md")).relative_to(home).as_posix()
    assert changed_files(head) == {day, "memory/users/ana/core/facts.md", "memory/users/ana/MEMORY.md"}
    assert head.summary == "Remember 2 facts from a conversation turn"
    for trailer in ("Syncd-User: ana", "Syncd-Chat: c1", "Syncd-Session: s1", "Syncd-Transcript-Line: 3"):
        assert trailer in head.message

    # git revert of that one commit undoes the whole turn, and the index follows.
    git.Repo(home).git.revert("--no-edit", head.hexsha)
    engine.sync()
    assert not (home / day).exists() and not facts_block.exists()
    assert not [h for h in engine.search("Lisbon", user_id="ana", limit=20) if h.kind == "fact"]
    assert run(manager.get_core_memory("c1", "ana"))["facts"] == "No key facts have been summarised yet."


def test_writes_in_a_group_are_indexed_once_and_committed_once(engine, home):
    intent = Intent(author="tester", summary="Two notes and a block", session="s9", turn="t1")
    before = len(commits(home))
    with engine.changes(intent) as group:
        engine.write_file("vault/a.md", b"# A\n\nAlpha note about herons.\n")
        with engine.changes(Intent(author="other", summary="nested")) as inner:
            assert inner is group  # a nested group joins the outer one
            engine.write_file("vault/b.md", b"# B\n\nBeta note about otters.\n")
        # Read-your-writes inside the group: a search sees what the group wrote so far.
        assert engine.search("herons", limit=1)[0].path == "vault/a.md"
        assert len(commits(home)) == before  # nothing committed before the group ends
    assert len(commits(home)) == before + 1
    head = commits(home)[0]
    assert changed_files(head) == {"vault/a.md", "vault/b.md"}
    assert head.author.name == "tester" and head.summary == "Two notes and a block"
    assert "Syncd-Session: s9" in head.message
    assert engine.search("otters", limit=1)[0].path == "vault/b.md"


def test_through_a_daemon_a_slow_group_is_still_one_commit(home, embedder):
    """The daemon commits 50 ms after a change; a group that writes, waits a second (an LLM
    call), then writes again must still land as one commit."""
    with running_daemon(home, embedder, commit_quiet_ms=50, debounce_ms=20) as daemon_run:
        reader = daemon_run.reader
        before = len(commits(home))
        with reader.changes(Intent(author="agent", summary="Slow turn", turn="t7")):
            reader.write_file("vault/first.md", b"# First\n\nWritten before the pause.\n")
            time.sleep(1.0)  # the pause is the point: 20 times the daemon's quiet period, as an LLM call is
            assert len(commits(home)) == before  # held: the daemon waits for the group
            reader.write_file("vault/second.md", b"# Second\n\nWritten after the pause.\n")
        # The group waited for the daemon's commit before returning.
        assert len(commits(home)) == before + 1
        assert changed_files(commits(home)[0]) == {"vault/first.md", "vault/second.md"}
        assert commits(home)[0].summary == "Slow turn"


def test_an_agent_turn_through_a_daemon_is_one_commit(home, embedder):
    with running_daemon(home, embedder, commit_quiet_ms=50, debounce_ms=20):
        with make_manager(home, embedder) as manager:
            assert manager.engine.read_only  # its own engine, holding no lock
            before = len(commits(home))
            run(manager.process_conversation_turn_for_memories(TURN, "c1", "ana", session_id="s2"))
            assert len(commits(home)) == before + 1
            head = commits(home)[0]
            assert "memory/users/ana/core/facts.md" in changed_files(head) and "Syncd-Session: s2" in head.message


@pytest.fixture
def busy_git(home):
    """The user's own git command holds the index lock."""
    lock = home / ".git" / "index.lock"
    lock.write_bytes(b"")
    yield lock
    lock.unlink(missing_ok=True)


@pytest.fixture
def impatient(home, embedder):
    """An engine that waits half a second for git (30 s by default)."""
    with syncd.open(home, embedder=embedder, settings=Settings(lock_wait_s=0.5)) as eng:
        yield eng


def _log_text(home) -> str:
    return "".join(p.read_text() for p in sorted((home / "memory/users/ana").glob("20*.md")))


def test_git_busy_past_the_wait_refuses_the_write_and_keeps_nothing(impatient, home, busy_git):
    manager = make_manager(impatient)
    before, text = len(commits(home)), _log_text(home)
    with pytest.raises(GitBusyError, match=r"index\.lock"):
        run(manager.add_memory("Keeps a sourdough starter called Bob.", "ana"))
    # Not acknowledged, so not kept: the file is as it was, the index does not have it.
    assert _log_text(home) == text and len(commits(home)) == before
    assert not run(manager.search_memories("sourdough starter Bob", user_id="ana"))

    # Explicit commits say why they cannot run, in syncd's own terms.
    (home / "vault/typed.md").write_text("# Typed by hand\n")
    with pytest.raises(GitBusyError, match=r"index\.lock"):
        impatient.commit()

    busy_git.unlink()
    fact = run(manager.add_memory("Keeps a sourdough starter called Bob.", "ana"))
    assert fact is not None and commits(home)[0].summary == "Remember: Keeps a sourdough starter called Bob."
    impatient.commit()
    assert not git.Repo(home).is_dirty(untracked_files=True)


def test_a_lock_held_for_a_moment_is_waited_out(engine, home, busy_git):
    threading.Timer(0.4, busy_git.unlink).start()
    engine.write_file(
        "vault/note.md", b"# Note\n\nA note about kites.\n", intent=Intent(author="agent", summary="Kites")
    )
    assert commits(home)[0].summary == "Kites"
    assert not git.Repo(home).is_dirty(untracked_files=True)


def test_the_agent_tools_answer_instead_of_raising(impatient, home, busy_git):
    manager = make_manager(impatient)
    update, search = MemoryBlockUpdateTool(manager), MemorySearchTool(manager)
    update.set_context("c1", "ana")
    search.set_context("c1", "ana")
    # Not saved while git stays busy: the tool says so, and the block is as it was.
    assert update.forward("user", "Name: Ana.").startswith("Error:")
    assert not (home / "memory/users/ana/core/user.md").exists()
    assert search.forward("Ana", limit="many").startswith("Error:")


def test_a_shared_engine_is_what_memory_uses(home, embedder):
    with syncd.open(home, embedder=embedder) as eng:
        from syncd.memory.backend import MemoryBackend

        assert isinstance(eng, MemoryBackend)


def test_a_group_cancelled_while_it_waits_does_not_block_the_next_one(engine, monkeypatch):
    # The second group, finding the turn taken, waits for it in a thread: that thread calling
    # begin() is what is waited for below (through to the real one).
    waiting = threading.Event()
    real_begin = engine.writes.begin
    monkeypatch.setattr(engine.writes, "begin", lambda group: (waiting.set(), real_begin(group))[1])

    async def scenario() -> None:
        release, held = asyncio.Event(), asyncio.Event()

        async def holder() -> None:
            async with engine.changes(Intent(author="a", summary="first")):
                held.set()
                await release.wait()

        async def waiter() -> None:
            async with engine.changes(Intent(author="b", summary="second")):
                pass

        first = asyncio.create_task(holder())
        await held.wait()
        second = asyncio.create_task(waiter())
        # Its thread now waits for the first group to end (or is about to: it takes the turn all
        # the same once the first lets go, which is the case this test is about).
        assert await asyncio.to_thread(waiting.wait, 60), "the second group never waited for the turn"
        second.cancel()
        release.set()
        await first
        with pytest.raises(asyncio.CancelledError):
            await second
        # The cancelled group's thread took the engine's turn once the first let go; it must give
        # it back (checked before trying, so a leak fails here instead of hanging the run).
        await asyncio.to_thread(
            wait_for, lambda: not engine.exclusive().locked(), 5, "the cancelled group to give back the engine's turn"
        )
        async with engine.changes(Intent(author="c", summary="third")):
            engine.write_file("vault/after.md", b"# After\n\nWritten after a cancel.\n")

    run(scenario())
    assert engine.search("written after a cancel", limit=1)[0].path == "vault/after.md"


def test_more_writers_than_the_event_loops_threads_all_finish(engine):
    """Writers waiting for the turn must not hold the loop's executor threads: the group holding
    the turn needs one to write and to end. With a 2-thread executor and 6 writers, waiting there
    hung every writer for good (as 8 adds through one MemoryManager did on 2 cores)."""
    import concurrent.futures

    manager = MemoryManager(engine)

    async def scenario() -> None:
        asyncio.get_running_loop().set_default_executor(concurrent.futures.ThreadPoolExecutor(2))

        async def writer(k: int) -> None:
            for i in range(2):
                await manager.remember(f"Writer {k} notes kite number {k * 10 + i}.", f"w{k}", None, dedup=False)

        await asyncio.wait_for(asyncio.gather(*(writer(k) for k in range(6))), timeout=240)

    run(scenario())
    assert sum(engine.counts(user_id=f"w{k}")["facts"] for k in range(6)) == 12


def test_a_write_handed_to_the_daemon_never_builds_on_a_group_not_yet_committed(home, embedder):
    """A refused write's bytes must never ride in another writer's commit (the state machine's
    "refused, yet committed"). A group of the daemon's process has written a page and not yet
    committed it; a write from another engine that would append to that page waits until the
    group is acknowledged or undone. Here the group fails: its line is taken out again, and the
    other writer, whose append was sized on the doomed line, gets a ConflictError instead of
    writing after it (nothing of the doomed group is ever committed)."""
    page = "vault/shared.md"
    (home / page).write_bytes(b"# Shared\n")
    with running_daemon(home, embedder, commit_quiet_ms=50, debounce_ms=20) as daemon_run:
        daemon_run.settle()
        entered, release = threading.Event(), threading.Event()

        def doomed() -> None:
            with contextlib.suppress(RuntimeError):
                with daemon_run.engine.changes(Intent(author="agent", summary="Doomed turn")):
                    daemon_run.engine.write_file(page, b"# Shared\nThe doomed line.\n")
                    entered.set()
                    release.wait(30)
                    raise RuntimeError("the turn fails after its write")

        outcome: list[object] = []

        def other() -> None:
            size = (home / page).stat().st_size
            try:
                outcome.append(daemon_run.reader.append_file(page, b"The other line.\n", expected_size=size))
            except ConflictError as exc:
                outcome.append(exc)

        first = threading.Thread(target=doomed)
        first.start()
        assert entered.wait(30)
        second = threading.Thread(target=other)
        second.start()
        second.join(0.5)
        assert second.is_alive(), "the other write did not wait for the group holding the page"
        release.set()
        first.join(30)
        second.join(30)
        assert len(outcome) == 1 and isinstance(outcome[0], ConflictError), outcome
        daemon_run.settle()
        assert (home / page).read_bytes() == b"# Shared\n"
        assert not git.Repo(home).git.log("--all", "-S", "The doomed line.", "--format=%h %s")


def test_a_persons_uncommitted_edit_is_committed_as_theirs_before_an_agent_builds_on_it(engine, home):
    """Every line traceable to whoever wrote it: a line the person added to a daily log by hand
    and nobody committed yet (the daemon commits such edits after a quiet moment; a ``git stash
    pop`` puts changes back the same way) must not ride in the next agent's commit of that log,
    where it would read as the agent's turn and be taken out again if that turn were undone. It
    gets a commit of its own, in the person's name, before the agent's write."""
    manager = MemoryManager(engine)
    run(manager.add_memory("Likes green tea.", user_id="ana"))
    (log,) = (home / "memory/users/ana").glob("20*.md")
    with log.open("a") as handle:
        handle.write("- Hand-written by the person.\n")
    run(manager.add_memory("Keeps bees on the roof.", user_id="ana"))
    repo = git.Repo(home)
    rel = str(log.relative_to(home))
    agent, person = list(repo.iter_commits(max_count=2))
    agent_diff = repo.git.show(agent.hexsha, "--format=", "--", rel)
    person_diff = repo.git.show(person.hexsha, "--format=", "--", rel)
    assert "+- Hand-written by the person." in person_diff and "Keeps bees" not in person_diff
    assert "Syncd-Source: editor" in person.message and person.author.name != "syncd"
    assert "Keeps bees on the roof." in agent_diff and "+- Hand-written" not in agent_diff
    assert not repo.is_dirty(path=rel)


def test_a_group_whose_lines_a_commit_of_the_persons_took_in_meanwhile_is_acknowledged(engine, home):
    """A group's file that a commit made meanwhile took in whole, the group's lines with it (the
    person's `git commit -a`, or a stash popped back and committed), is committed: the group is
    acknowledged, never told that nothing of it was kept, which a client retrying would answer by
    writing its lines twice. (Seen in the write path's stateful test: an append answered
    GitBusyError while another commit held its line.)"""
    rel = "vault/notes.md"
    engine.write_file(rel, b"# Notes\n\n- first\n")

    def person(*args: str) -> None:
        subprocess.run(["git", *args], cwd=home, check=True, capture_output=True)

    with engine.changes(Intent(author="agent", summary="A second line")):
        engine.write_file(rel, b"# Notes\n\n- first\n- second\n")
        # The person adds a line of their own under it and commits the file as it is.
        with open(home / rel, "ab") as f:
            f.write(b"- theirs\n")
        person("commit", "-qam", "My line")
    head = subprocess.run(["git", "show", f"HEAD:{rel}"], cwd=home, capture_output=True, check=True).stdout
    assert head == b"# Notes\n\n- first\n- second\n- theirs\n"
    assert (home / rel).read_bytes() == head
    assert engine.search("second", limit=1)[0].path == rel


def test_a_group_whose_lines_are_not_all_in_head_is_still_refused_and_undone(engine, home):
    """The other side of the rule above: a commit of the person's that took the file in without
    the group's line (they wrote over it) leaves the group refused, as before."""
    rel = "vault/notes.md"
    engine.write_file(rel, b"# Notes\n\n- first\n")
    with pytest.raises(GitBusyError, match="changed under the commit"):
        with engine.changes(Intent(author="agent", summary="A second line")):
            engine.write_file(rel, b"# Notes\n\n- first\n- second\n")
            (home / rel).write_bytes(b"# Notes\n\n- first\n- theirs\n")
            subprocess.run(["git", "commit", "-qam", "My line"], cwd=home, check=True, capture_output=True)
    head = subprocess.run(["git", "show", f"HEAD:{rel}"], cwd=home, capture_output=True, check=True).stdout
    assert head == b"# Notes\n\n- first\n- theirs\n"


@pytest.mark.parametrize(
    ("before", "written"),
    [
        # The line added was in the file already: as a set of lines, nothing was added.
        (b"# Notes\n\n- first\n", b"# Notes\n\n- first\n- first\n"),
        # Lines moved: as a set of lines, nothing changed.
        (b"# Notes\n\n- first\n- second\n", b"# Notes\n\n- second\n- first\n"),
    ],
    ids=["a-copy-of-a-line-there-already", "lines-moved"],
)
def test_a_group_whose_change_head_does_not_hold_is_refused_however_its_lines_repeat(engine, home, before, written):
    """HEAD holding the lines of a change counts each copy and their order where nothing else
    tells them apart: a group that added a second copy of a line, or moved lines, under a commit
    of the person's that took the file in without that change is refused (its client retries),
    never acknowledged with its bytes in no commit."""
    rel = "vault/notes.md"
    engine.write_file(rel, before)
    with pytest.raises(GitBusyError, match="changed under the commit"):
        with engine.changes(Intent(author="agent", summary="A change")):
            engine.write_file(rel, written)
            (home / rel).write_bytes(before + b"- theirs\n")
            subprocess.run(["git", "commit", "-qam", "My line"], cwd=home, check=True, capture_output=True)
    head = subprocess.run(["git", "show", f"HEAD:{rel}"], cwd=home, capture_output=True, check=True).stdout
    assert head == before + b"- theirs\n"


def test_an_acknowledged_group_taken_in_by_a_commit_is_never_undone_on_disk(engine, home):
    """A group acknowledged because a commit of the person's took its changes in keeps them in
    the tree: its journal's undo (for its bookkeeping) must not put back a line it deleted where
    the tree still holds the group's write (the person committed the file with a line of theirs,
    then took their line out again). Put back, the next commit would bring the deleted fact back."""
    deleted, added = "vault/deleted.md", "vault/added.md"
    engine.write_file(deleted, b"# Notes\n\n- keep\n- drop\n")
    engine.write_file(added, b"# Notes\n\n- first\n")
    with engine.changes(Intent(author="agent", summary="Drop one, add one")):
        engine.write_file(deleted, b"# Notes\n\n- keep\n")
        engine.write_file(added, b"# Notes\n\n- first\n- second\n")
        # The person adds a line to each, commits both, then takes theirs out of the first again.
        for rel in (deleted, added):
            with open(home / rel, "ab") as f:
                f.write(b"- theirs\n")
        subprocess.run(["git", "commit", "-qam", "My lines"], cwd=home, check=True, capture_output=True)
        (home / deleted).write_bytes(b"# Notes\n\n- keep\n")
    assert (home / deleted).read_bytes() == b"# Notes\n\n- keep\n"
    # What the next commit of the file (the daemon's, `syncd sync`'s) holds: still without it.
    engine.commit([deleted])
    head = subprocess.run(["git", "show", f"HEAD:{deleted}"], cwd=home, capture_output=True, check=True).stdout
    assert head == b"# Notes\n\n- keep\n"
