"""A turn is atomic (issue 23, item 4): all the files of a ``SessionRunner.process_turn`` (transcript
lines, facts, blocks, MEMORY.md, state.json, session.json) are committed together or not at all.

Three ways a turn can fail to finish, each with real git, the real embedding model and real
processes:

1. An exception inside the turn's group (a ``state`` that is not JSON v2, raised after the
   transcript lines and the extracted fact are on disk): every file is byte-for-byte as before,
   nothing is committed, the index equals a rebuild, and the same turn run again succeeds once.
2. kill -9 of a process in the middle of a turn, at three points: during the extraction LLM call
   and during the key-facts summary call (both asked before the turn's group opens: nothing
   written yet), and after session.json (every file written, the commit not made). The LLM is a real HTTP endpoint
   on loopback that litellm calls as it would any OpenAI-compatible server, and holds the request
   open: the kill lands inside the real call path. Then either ``syncd sync`` (no daemon) or a
   running ``syncd watch`` must leave the home as it was before the turn and commit nothing of it.
3. The same turn retried after each of these: its transcript lines are there once, under the
   turn id (``session#line``) the failed attempt had, in one commit holding the whole turn. And a
   turn that *was* kept but whose caller never heard (it died once the turn was committed; the
   daemon committed it after the caller was told GitBusyError "saved but not committed"), run
   again under the caller's ``turn_id``: nothing is written twice (before ``turn_id``, both
   left the turn's lines in the transcript twice).

**Roll back, not complete.** What a turn still had to write when it died exists only in the dead
process: the extraction reply, the compressor's result, the agent state the caller handed in. A
"completed" turn would be a guess (transcript lines with no facts, a turn_count that counts a
turn whose state was never saved), and the caller, who never got an answer, retries anyway and
would then record the turn twice. Rolled back, the home is exactly as the last acknowledged turn
left it; the retry finds the transcript at the same length, gets the same line numbers and the
same turn id, and nothing that was acknowledged is lost, since nothing of the dead turn was.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

import syncd
from syncd.cli import main
from syncd.config import Settings
from syncd.errors import GitBusyError, ParseError
from syncd.home import Home
from syncd.memory import MemoryManager
from syncd.session import SessionRunner, read_transcript_file

from .daemon_helpers import git, isolate_git_identity, settled, start_cli_daemon, subjects, wait_for, warm_embed_cache
from .helpers import assert_matches_rebuild
from .llm_helpers import FakeLLM

pytestmark = pytest.mark.slow

SESSION = "s1"
BASE = f"memory/users/ana/sessions/{SESSION}/"
MODEL = "openai/gpt-4o-mini"
MESSAGE, ANSWER = "I keep bees on my roof.", "Lovely!"
STATE = {"version": 2, "steps": [], "tools": ["search"], "serialized_at": "2026-11-26T10:00:00+00:00"}


@pytest.fixture(autouse=True)
def global_gitconfig(tmp_path, monkeypatch):
    return isolate_git_identity(tmp_path, monkeypatch)


def reply(*facts: tuple[str, float]) -> str:
    return json.dumps({"facts": [{"content": c, "category": "personal", "importance": i} for c, i in facts]})


def runner_for(engine, extract_reply: str) -> SessionRunner:
    """A runner whose LLM is litellm's own mock (no network); the summary is never asked for."""
    manager = MemoryManager(
        engine,
        settings=Settings(llm_model=MODEL, core_refresh_importance=0.99),
        job_llm_options={"extract": {"mock_response": extract_reply}},
    )
    return SessionRunner(manager)


def tree(home: Path) -> dict[str, bytes]:
    """Every file of the home outside git's folder and the derived .syncd/, with its bytes."""
    found = {}
    for path in home.rglob("*"):
        rel = path.relative_to(home).as_posix()
        if rel.split("/")[0] in (".git", ".syncd") or not path.is_file():
            continue
        found[rel] = path.read_bytes()
    return found


def head(home: Path) -> str:
    return git(home, "rev-parse", "HEAD").strip()


def lines_of(home: Path, content: str) -> list[int]:
    """The transcript lines holding ``content``."""
    return [e["line"] for e in read_transcript_file(Home(home), "ana", SESSION) if e["content"] == content]


def next_line(home: Path) -> int:
    """The line the session's next transcript entry gets."""
    return max(e["line"] for e in read_transcript_file(Home(home), "ana", SESSION)) + 1


def knows_bees(engine) -> bool:
    """Whether a search finds the fact turn 2 extracts."""
    return any(h.content == "Keeps bees on the roof." for h in engine.search("bees on the roof", user_id="ana"))


def first_turn(home: Path, embedder) -> None:
    """The home indexed, then turn 1, acknowledged: the state a failed turn 2 must leave."""
    warm_embed_cache(home, embedder)
    with syncd.open(home, embedder=embedder) as engine:
        engine.sync()
        run_turn(
            engine,
            "Hello.",
            "Hi.",
            reply(("Lives in Lyon.", 0.5)),
            state={**STATE, "serialized_at": "2026-11-26T09:00:00+00:00"},
        )


def run_turn(engine, message: str = MESSAGE, answer: str = ANSWER, extract: str | None = None, state=STATE, **more):
    extract = reply(("Keeps bees on the roof.", 0.5)) if extract is None else extract
    return asyncio.run(
        runner_for(engine, extract).process_turn(SESSION, message, answer, user_id="ana", state=state, **more)
    )


def assert_as_before(home: Path, before: dict[str, bytes], commit: str) -> None:
    """Every file byte-for-byte as ``before``, none added, nothing committed since ``commit``."""
    after = tree(home)
    assert sorted(after) == sorted(before), "files were added or removed"
    for rel, data in before.items():
        assert after[rel] == data, f"{rel} was left with the failed turn's writes"
    assert head(home) == commit, f"the failed turn was committed: {subjects(home)[:3]}"
    assert not git(home, "status", "--porcelain", "--untracked-files=all")


def assert_retried_once(home: Path, engine, turn_line: int, before: str, turn: int = 2, **more) -> None:
    """The same turn run again: one new commit holding the whole turn, its lines once, at the line
    (so under the turn id) the failed attempt had."""
    result = run_turn(engine, **more)
    assert not result.replayed and result.entries[0].line == turn_line
    assert lines_of(home, MESSAGE) == [turn_line] and lines_of(home, ANSWER) == [turn_line + 1]
    assert git(home, "rev-parse", "HEAD^").strip() == before, "the retried turn is not exactly one commit"
    message = git(home, "log", "-1", "--format=%B")
    assert message.startswith(f"Turn {turn} of session {SESSION}") and f"Syncd-Turn: {SESSION}#{turn_line}" in message
    changed = set(git(home, "show", "--name-only", "--format=", "HEAD").split())
    assert {BASE + "transcript.jsonl", BASE + "state.json", BASE + "session.json"} <= changed
    assert any(p.startswith("memory/users/ana/20") for p in changed), changed  # the fact, same commit
    assert json.loads((home / BASE / "session.json").read_text())["turn_count"] == turn
    status = git(home, "status", "--porcelain")
    assert not status, _explain_status(home, status)


# -- 1. an exception inside the turn --------------------------------------------------------------


# The first turn of a session (its files did not exist), and a later one under a turn id of the
# caller's (a rolled back turn's id is free again).
@pytest.mark.parametrize(("earlier_turns", "turn_id"), [(0, None), (1, "msg-2")])
def test_a_turn_that_raises_leaves_every_file_as_it_was_and_its_retry_is_whole(home, embedder, earlier_turns, turn_id):
    more = {"turn_id": turn_id} if turn_id else {}
    if earlier_turns:
        first_turn(home, embedder)
    warm_embed_cache(home, embedder)
    before, commit = tree(home), head(home)
    with syncd.open(home, embedder=embedder) as engine:
        engine.sync()
        turn_line = 1 if not earlier_turns else 3
        with pytest.raises(ParseError):  # raised by state.json, after the transcript and the fact
            run_turn(engine, state=b'{"version": 1, "steps": []}', **more)
        assert_as_before(home, before, commit)
        assert not knows_bees(engine)
        assert_matches_rebuild(engine)

        assert_retried_once(home, engine, turn_line, commit, turn=earlier_turns + 1, **more)
        assert knows_bees(engine)
        assert_matches_rebuild(engine)


# -- 2. kill -9 in the middle of a turn -------------------------------------------------------------


# The process that dies mid-turn: a real engine (writable, or handing its writes to the daemon),
# MemoryManager and SessionRunner, its LLM at the FakeLLM. At "commit" it stops after writing
# session.json, the last file of the turn, before the commit, and at "answered" once process_turn
# returned (the caller dies before it could note the answer): it says so on a file and sleeps.
CHILD = textwrap.dedent("""
    import asyncio, os, sys, time
    home, url, point, ready, read_only, turn_id = sys.argv[1:7]
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import syncd
    import syncd.session.runner as runner
    from syncd.config import Settings
    from syncd.memory import MemoryManager

    if point == "commit":
        real = runner.write_session_info
        def stalled(*args, **kwargs):
            real(*args, **kwargs)
            open(ready, "w").close()
            time.sleep(600)
        runner.write_session_info = stalled
    if point == "answered":
        turn = runner.SessionRunner.process_turn
        async def answered(*args, **kwargs):
            result = await turn(*args, **kwargs)
            open(ready, "w").close()
            time.sleep(600)
        runner.SessionRunner.process_turn = answered
    more = {"turn_id": turn_id} if turn_id else {}
    settings = Settings(llm_model="openai/gpt-4o-mini", core_refresh_importance=0.8)
    engine = syncd.open(home, read_only=read_only == "1", settings=settings)
    manager = MemoryManager(engine, settings=settings, llm_options={"api_base": url, "api_key": "sk-test"})
    state = {"version": 2, "steps": [], "tools": ["search"], "serialized_at": "2026-11-26T10:00:00+00:00"}
    asyncio.run(runner.SessionRunner(manager).process_turn("s1", %r, %r, user_id="ana", state=state, **more))
    print("the turn finished")
""") % (MESSAGE, ANSWER)

# Where the child is when it is killed: what the LLM answers (None: held open), what is on disk.
POINTS = {
    # the transcript lines written, the extraction call under way
    "extract": [None],
    # the extraction answered (a fact of importance 0.9), the key-facts summary it calls for under
    # way: asked before the turn's group, so nothing is written yet
    "summarise": [reply(("Keeps bees on the roof.", 0.9)), None],
    # every file of the turn written, its commit not made
    "commit": [reply(("Keeps bees on the roof.", 0.5))],
}
# Not rolled back: the turn was committed, its caller just never heard.
KEPT = {"answered": [reply(("Keeps bees on the roof.", 0.5))]}


@contextmanager
def turn_stopped_at(home: Path, point: str, read_only: bool = False, turn_id: str = "") -> Iterator[None]:
    """Run turn 2 in a child process until it reaches ``point`` (held there: the LLM keeps its
    request open, or the child sleeps); kill -9 it on leaving."""
    replies = {**POINTS, **KEPT}[point]
    llm = FakeLLM(replies)
    ready = home.parent / f"ready-{point}"
    log = open(home.parent / f"child-{point}.log", "w+")  # noqa: SIM115 - closed below
    env = os.environ | {"NO_PROXY": "127.0.0.1", "no_proxy": "127.0.0.1"}
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(home), llm.url, point, str(ready), str(int(read_only)), turn_id],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
    )
    try:

        def stopped_where_wanted() -> bool:
            if child.poll() is not None:
                log.seek(0)
                raise AssertionError(f"the turn's process ended by itself ({child.returncode}):\n{log.read()[-3000:]}")
            if point in ("commit", "answered"):
                return ready.exists()
            return llm.arrived(len(replies))

        wait_for(stopped_where_wanted, 120, f"the turn to reach {point}")
        yield
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        llm.close()
        log.close()


def kill_turn_at(home: Path, point: str, read_only: bool = False, turn_id: str = "") -> int:
    """Run turn 2 in a child process, kill -9 it at ``point``; return the first transcript line
    the dead turn had (or, killed while the model is asked, before the turn wrote anything, would
    have) written: its turn id is ``s1#<line>``."""
    with turn_stopped_at(home, point, read_only, turn_id):
        day = "".join(p.read_text() for p in (home / "memory/users/ana").glob("20*.md"))
        asked_before_the_group = point in ("extract", "summarise")
        assert ("Keeps bees on the roof." in day) != asked_before_the_group
        if asked_before_the_group:
            # The model is asked before the turn's group opens: nothing of the turn is written yet.
            assert lines_of(home, MESSAGE) == [] and lines_of(home, ANSWER) == []
            return next_line(home)
        (line,) = lines_of(home, MESSAGE)
        assert lines_of(home, ANSWER) == [line + 1]
        return line


@pytest.mark.parametrize("point", ["extract", "summarise"])
def test_while_the_model_answers_for_a_turn_other_agents_write(home, embedder, point):
    """The model's seconds are spent outside the home's writer turn: another agent's write,
    made while the turn's extraction call, or the key-facts summary call its important fact
    calls for, is held open, is committed at once (it used to wait for the model's reply, and
    past ``lock_wait_s`` was refused)."""
    first_turn(home, embedder)
    # Both as agents write beside each other (read-only engines, each change borrowing the lock).
    with turn_stopped_at(home, point, read_only=True):
        with syncd.open(home, read_only=True, embedder=embedder, settings=Settings(lock_wait_s=3)) as engine:
            fact = asyncio.run(MemoryManager(engine).add_memory("Cycles to work.", user_id="ana"))
        assert fact is not None and "Cycles to work." in git(home, "show", "HEAD")
    # The killed turn wrote nothing: the turn, run again, records once.
    with syncd.open(home, embedder=embedder) as engine:
        assert_retried_once(home, engine, next_line(home), head(home))
        assert_matches_rebuild(engine)


@pytest.mark.parametrize("point", list(POINTS))
def test_kill_9_mid_turn_then_sync_rolls_the_turn_back(home, embedder, point):
    first_turn(home, embedder)
    before, commit = tree(home), head(home)
    line = kill_turn_at(home, point)
    # `syncd sync` through its main() here: all the dead turn left is on disk, which a process of
    # its own would read no differently (and it saves a start of Python, syncd and the model).
    assert main(["sync", "--home", str(home), "-q"]) == 0
    assert_as_before(home, before, commit)
    # The dead turn's provenance went with it (no later commit can be attributed to it).
    assert not list((Home(home).private_dir / "intents").glob("*.json"))
    with syncd.open(home, embedder=embedder) as engine:
        assert not knows_bees(engine)
        assert_matches_rebuild(engine)
        assert_retried_once(home, engine, line, commit)
        assert_matches_rebuild(engine)


def _explain_status(home: Path, status: str) -> str:
    """What a tree left unclean after a turn holds: each path's blob in HEAD, in git's index and
    on disk, the reflog, and the daemon's last words."""
    lines = [status]
    for entry in status.splitlines():
        rel = entry[3:]
        staged = git(home, "ls-files", "-s", "--", rel).split()
        on_disk = git(home, "hash-object", "--", rel).strip() if (home / rel).exists() else "-"
        lines.append(
            f"{rel}: HEAD {git(home, 'rev-parse', f'HEAD:{rel}').strip()[:10]} "
            f"HEAD^ {git(home, 'rev-parse', f'HEAD^:{rel}').strip()[:10]} "
            f"index {staged[1][:10] if len(staged) > 1 else '-'} disk {on_disk[:10]}"
        )
    lines.append(git(home, "reflog", "-n", "8", "--format=%h %gs"))
    return "\n".join(lines) + "\n" + _log_text(home)[-4000:]


def _log_text(home: Path) -> str:
    try:
        return (home / ".syncd/daemon.log").read_text(errors="replace")
    except FileNotFoundError:
        return ""


@pytest.mark.parametrize("point", ["extract", "commit"])
def test_kill_9_mid_turn_beside_a_daemon_the_daemon_rolls_it_back(home, embedder, point):
    first_turn(home, embedder)
    before, commit = tree(home), head(home)
    daemon = start_cli_daemon(home)
    reader = syncd.open(home, read_only=True, embedder=embedder)
    try:
        wait_for(lambda: "watching" in _log_text(home) and settled(reader), 60, "the daemon to start")
        line = kill_turn_at(home, point, read_only=True)
        # The daemon undoes the dead turn at its next commit, and commits nothing of it.
        try:
            wait_for(
                lambda: tree(home) == before and settled(reader), 60, "the daemon to put the dead turn's files back"
            )
        except AssertionError:
            assert_as_before(home, before, commit)  # says what was left, or what was committed
            raise
        assert_as_before(home, before, commit)
        assert daemon.poll() is None, _log_text(home)[-3000:]
        # The retry, handed to the daemon like the dead turn's writes were.
        assert_retried_once(home, reader, line, commit)
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(timeout=60)
        assert daemon.returncode == 0, _log_text(home)[-3000:]
    finally:
        reader.close()
        if daemon.poll() is None:
            daemon.kill()
    with syncd.open(home, embedder=embedder) as engine:
        assert_matches_rebuild(engine)


# -- 3. a turn that was kept, run again under its turn id --------------------------------------------


def assert_recorded_once(home: Path, result, line: int, commit: str) -> None:
    """``result`` is a replay of the turn at ``line``: nothing new written or committed."""
    assert result.replayed and [e.line for e in result.entries] == [line, line + 1]
    assert [e.content for e in result.entries] == [MESSAGE, ANSWER]
    assert lines_of(home, MESSAGE) == [line] and lines_of(home, ANSWER) == [line + 1]
    assert head(home) == commit, "the replayed turn made a commit"
    assert json.loads((home / BASE / "session.json").read_text())["turn_count"] == 2
    assert not git(home, "status", "--porcelain", "--untracked-files=all")


def test_a_turn_whose_caller_died_after_its_commit_is_not_recorded_twice(home, embedder):
    first_turn(home, embedder)
    line = kill_turn_at(home, "answered", turn_id="msg-2")
    assert main(["sync", "--home", str(home), "-q"]) == 0  # as in the test above
    # Kept whole: the dead process had its commit, and nothing undid it.
    assert subjects(home)[0] == f"Turn 2 of session {SESSION}"
    commit = head(home)
    with syncd.open(home, embedder=embedder) as engine:
        assert knows_bees(engine)
        assert_recorded_once(home, run_turn(engine, turn_id="msg-2"), line, commit)
        # Another turn id is another turn, even with the same words.
        again = run_turn(engine, turn_id="msg-3", state={**STATE, "serialized_at": "2026-11-26T11:00:00+00:00"})
        assert not again.replayed and lines_of(home, MESSAGE) == [line, line + 2]
        assert_matches_rebuild(engine)


def test_a_turn_the_daemon_commits_late_is_not_recorded_twice(home, embedder):
    """Handed to a daemon that cannot commit while the person's git command runs, the turn is
    saved, and the caller hears GitBusyError once lock_wait_s is over. Retried under its turn id:
    refused while it waits for its commit, then answered from what was committed."""
    first_turn(home, embedder)
    daemon = start_cli_daemon(home)
    reader = syncd.open(home, read_only=True, embedder=embedder, settings=Settings(lock_wait_s=2))
    lock = home / ".git/index.lock"
    try:
        wait_for(lambda: "watching" in _log_text(home) and settled(reader), 60, "the daemon to start")
        lock.write_bytes(b"")  # a git command of the person's is running
        with pytest.raises(GitBusyError, match="saved but not committed"):
            run_turn(reader, turn_id="msg-2")
        (line,) = lines_of(home, MESSAGE)
        commit = head(home)
        with pytest.raises(GitBusyError, match="saved but not committed"):
            run_turn(reader, turn_id="msg-2")
        assert lines_of(home, MESSAGE) == [line] and head(home) == commit
        lock.unlink()
        wait_for(lambda: subjects(home)[0] == f"Turn 2 of session {SESSION}", 60, "the daemon's commit")
        wait_for(lambda: settled(reader), 60, "the daemon to settle")
        assert_recorded_once(home, run_turn(reader, turn_id="msg-2"), line, head(home))
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(timeout=60)
        assert daemon.returncode == 0, _log_text(home)[-3000:]
    finally:
        lock.unlink(missing_ok=True)
        reader.close()
        if daemon.poll() is None:
            daemon.kill()


def test_a_turn_that_seemed_recorded_and_was_put_back_runs_as_any_turn(home, embedder):
    """Run again under its ``turn_id`` after a run of it died before its commit: before the group
    the transcript holds the dead run's lines (saved, not committed: "seems recorded", so the
    model is not asked and the caller's agent not compressed); inside it, the dead run is put
    back first (its group's undo) and the turn is not recorded. The turn then asked the model
    inside its group (holding the home's write turn for the model's seconds) and never
    compressed the caller's agent. It now runs as any turn: the model asked and the agent
    compressed (a flush of its own) outside the group, then the turn recorded once."""
    from syncd.session import ContextCompressor

    first_turn(home, embedder)
    line = kill_turn_at(home, "commit", read_only=True, turn_id="msg-2")
    commit = head(home)
    steps = [{"type": "task", "task": "Help Ana with her bees"}] + [
        {"type": "action", "step_number": i, "model_output": "hive " * 60, "observations": "bees " * 60}
        for i in range(8)
    ]
    agent = type("Agent", (), {"steps": steps})()
    manager = MemoryManager(
        home,
        Settings(llm_model=MODEL, core_refresh_importance=0.99),
        embedder=embedder,
        job_llm_options={
            "extract": {"mock_response": reply(("Keeps bees on the roof.", 0.5))},
            "compress": {"mock_response": "- Looked at twelve hives."},
        },
    )
    with manager:
        compressor = ContextCompressor(manager, session_id=SESSION, max_context_tokens=300, keep_last_steps=2)
        runner = SessionRunner(manager, compressor=compressor)
        result = asyncio.run(runner.process_turn(SESSION, MESSAGE, ANSWER, user_id="ana", agent=agent, turn_id="msg-2"))
    assert not result.replayed and result.compressed and len(agent.steps) == 4
    assert lines_of(home, MESSAGE) == [result.entries[0].line] and lines_of(home, ANSWER) == [result.entries[1].line]
    assert result.entries[0].line >= line  # the dead run's lines were put back, then the flush's record
    turn, flush = git(home, "log", "-2", "--format=%s").splitlines()
    assert turn == f"Turn 2 of session {SESSION}" and flush.startswith("Pre-compaction flush"), (turn, flush)
    assert git(home, "rev-parse", "HEAD~2").strip() == commit
    assert not git(home, "status", "--porcelain", "--untracked-files=all")
