"""Block edits apply to the text that is there when they land (issue 23): ``append`` and
``search_replace`` are read-modify-write inside the compare-and-swap, so N concurrent appends leave
N lines, in the file and in git, and a passage that vanished meanwhile is an error, never a silent
overwrite of the edit that removed it. Through threads, processes, the REST server and a
hypothesis-chosen schedule of writes landing between an edit's read and its write."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import itertools
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

import syncd
from syncd.api.schemas import BlockUpdateInput
from syncd.config import Settings
from syncd.errors import GitBusyError, InvalidInputError
from syncd.memory import MemoryBlockUpdateTool, MemoryManager
from syncd.memory.tools import update_block

from .daemon_helpers import git, isolate_git_identity, warm_embed_cache
from .helpers import run_concurrently
from .server_helpers import served_in_thread
from .strategies import examples

BLOCK = "memory/users/ana/core/user.md"


@pytest.fixture(autouse=True)
def _git_identity(tmp_path, monkeypatch):
    isolate_git_identity(tmp_path, monkeypatch)


@pytest.fixture
def manager(engine):
    return MemoryManager(engine, settings=Settings(block_char_limit=5000))


def _append(label: str, text: str, user: str = "ana") -> BlockUpdateInput:
    return BlockUpdateInput(label=label, content=text, operation="append", user_id=user)


def _lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


def _assert_history_keeps(home: Path, rel: str, expected: set[str], edited: frozenset[str] = frozenset()) -> None:
    """HEAD holds every expected line, and no commit of ``rel`` ever dropped a line an earlier
    one had (an overwrite from a stale read would), but the ``edited`` ones."""
    shas = git(home, "log", "--reverse", "--format=%H", "--", rel).split()
    assert shas, f"{rel} was never committed"
    seen: set[str] = set()
    for sha in shas:
        now = set(_lines(git(home, "show", f"{sha}:{rel}")))
        assert seen - edited <= now, f"commit {sha[:8]} dropped {sorted(seen - edited - now)}"
        seen = now
    assert expected <= seen and set(_lines(git(home, "show", f"HEAD:{rel}"))) == seen
    assert git(home, "status", "--porcelain", "--", rel) == ""


def test_sixteen_threads_appending_through_the_agent_tool_keep_every_line(manager, home):
    texts = [f"Line {n} from agent {n}." for n in range(16)]

    def agent(n: int) -> None:
        tool = MemoryBlockUpdateTool(manager)
        tool.set_context(None, "ana")
        answer = tool.forward("user", texts[n], operation="append")
        assert answer.startswith("Updated block 'user'"), answer

    run_concurrently(agent, len(texts))
    on_disk = _lines((home / BLOCK).read_text())
    assert sorted(on_disk) == sorted(texts)
    assert sorted(_lines(manager.core_blocks(user_id="ana")["user"].content)) == sorted(texts)
    _assert_history_keeps(home, BLOCK, set(texts))


def test_concurrent_appends_and_replaces_on_one_loop_keep_every_append(manager, home):
    """Appends racing each other on the manager's own loop (as the REST and MCP servers run them),
    with a search_replace of the first line among them."""

    async def main() -> None:
        await update_block(manager, BlockUpdateInput(label="user", content="Name: Ana.", user_id="ana"), "ana")
        edits = [update_block(manager, _append("user", f"Fact {n}."), "ana") for n in range(12)]
        rename = BlockUpdateInput(
            label="user", content="Name: Ana Lima.", operation="search_replace", old_content="Name: Ana.", user_id="ana"
        )
        await asyncio.gather(*edits[:6], update_block(manager, rename, "ana"), *edits[6:])

    asyncio.run(main())
    lines = _lines((home / BLOCK).read_text())
    assert sorted(lines) == sorted(["Name: Ana Lima.", *(f"Fact {n}." for n in range(12))])
    assert lines[0] == "Name: Ana Lima."
    _assert_history_keeps(home, BLOCK, {f"Fact {n}." for n in range(12)}, edited=frozenset({"Name: Ana."}))


# Each child opens its own MemoryManager on the home (no daemon: each change borrows the home
# lock), waits for "go", then appends its lines as fast as it can.
_CHILD = textwrap.dedent(
    """
    import asyncio, sys
    from syncd.memory import MemoryManager
    from syncd.memory.tools import update_block
    from syncd.api.schemas import BlockUpdateInput

    home, who, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with MemoryManager(home) as manager:
        print("ready", flush=True)
        sys.stdin.readline()

        async def main():
            for n in range(count):
                request = BlockUpdateInput(label="user", content=f"{who} line {n}.", operation="append", user_id="ana")
                await update_block(manager, request, "ana")

        asyncio.run(main())
        print("done", flush=True)
    """
)


def test_appends_from_several_processes_keep_every_line(home, embedder):
    warm_embed_cache(home, embedder)
    source = str(Path(syncd.__file__).parent.parent)
    env = dict(os.environ, PYTHONPATH=source + os.pathsep + os.environ.get("PYTHONPATH", ""))
    names, count = ["p0", "p1", "p2"], 5
    command = [sys.executable, "-c", _CHILD, str(home)]
    pipes = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "text": True, "env": env}
    # Each Popen's context closes its pipes and waits for it once the finally has killed any left.
    with contextlib.ExitStack() as stack:
        children = [stack.enter_context(subprocess.Popen([*command, name, str(count)], **pipes)) for name in names]
        try:
            for child in children:
                assert child.stdout.readline().strip() == "ready"
            for child in children:
                child.stdin.write("go\n")
                child.stdin.flush()
            for child in children:
                assert child.stdout.readline().strip() == "done"
                assert child.wait(timeout=120) == 0
        finally:
            for child in children:
                if child.poll() is None:
                    child.kill()
    expected = {f"{name} line {n}." for name in names for n in range(count)}
    lines = _lines((home / BLOCK).read_text())
    assert sorted(lines) == sorted(expected)
    for name in names:  # each process's own lines in the order it wrote them
        assert [x for x in lines if x.startswith(name)] == [f"{name} line {n}." for n in range(count)]
    _assert_history_keeps(home, BLOCK, expected)


def test_sixteen_concurrent_rest_appends_all_answered_200_and_all_kept(home, embedder):
    """The reproduction of issue 23: 16 concurrent PUT /memory/core append on one block."""
    with served_in_thread(home, embedder) as served:

        def put(n: int) -> int:
            with served.client(served.admin) as client:
                body = {"label": "user", "content": f"Rest line {n}.", "operation": "append", "user_id": "ana"}
                return client.put("/memory/core", json=body).status_code

        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            statuses = list(pool.map(put, range(16)))
        with served.client(served.admin) as client:
            shown = client.get("/memory/core", params={"user_id": "ana"}).json()["blocks"]["user"]["content"]
    assert statuses == [200] * 16
    expected = {f"Rest line {n}." for n in range(16)}
    assert set(_lines(shown)) == expected and set(_lines((home / BLOCK).read_text())) == expected
    _assert_history_keeps(home, BLOCK, expected)


class _LandsBetween:
    """Stands in for the engine's write_file: before each of the first writes, ``foreign`` (a
    person's editor save, another process's write) changes the file between the edit's read and
    its compare-and-swap."""

    def __init__(self, engine, home: Path, foreign: list):
        self.write_file = engine.write_file
        self.home = home
        self.foreign = list(foreign)

    def __call__(self, rel, data, expected_sha=None, intent=None):
        if self.foreign:
            change = self.foreign.pop(0)
            path = self.home / rel
            path.write_text(change(path.read_text() if path.exists() else ""))
        return self.write_file(rel, data, expected_sha=expected_sha, intent=intent)


def test_search_replace_whose_passage_vanished_meanwhile_is_an_error_not_a_clobber(manager, home, engine, monkeypatch):
    asyncio.run(update_block(manager, BlockUpdateInput(label="user", content="Lives in Oslo.", user_id="ana"), "ana"))
    before = git(home, "rev-parse", "HEAD")
    moved = "Moved to Bergen.\n"
    monkeypatch.setattr(engine, "write_file", _LandsBetween(engine, home, [lambda _: moved]))
    request = BlockUpdateInput(label="user", content="Lives in Trondheim.", operation="search_replace",
                               old_content="Oslo", user_id="ana")  # fmt: skip
    with pytest.raises(InvalidInputError, match="not found"):
        asyncio.run(update_block(manager, request, "ana"))
    assert (home / BLOCK).read_text() == moved  # the person's edit stands
    # Nothing of ours was committed: at most the person's edit, as theirs, before our write.
    sources = git(home, "log", "--format=%(trailers:key=Syncd-Source,valueonly)", f"{before.strip()}..HEAD").split()
    assert set(sources) <= {"editor"}
    assert git(home, "show", f"HEAD:{BLOCK}") == moved
    # Through the agent tool the same race is an answer the agent can act on.
    monkeypatch.setattr(engine, "write_file", _LandsBetween(engine, home, [lambda _: "Lives in Oslo.\n"]))
    tool = MemoryBlockUpdateTool(manager)
    tool.set_context(None, "ana")
    answer = tool.forward("user", "Lives in Trondheim.", "search_replace", "Bergen")
    assert answer.startswith("Error: old_content not found")
    assert (home / BLOCK).read_text() == "Lives in Oslo.\n"


_labels = itertools.count()


# Each example is a real engine and git commit per append: 10 in CI, ten times that under --slow.
@hsettings(max_examples=examples(10))
@given(
    schedule=st.lists(st.tuples(st.booleans(), st.integers(min_value=0, max_value=3)), min_size=1, max_size=6),
    start_empty=st.booleans(),
)
def test_any_interleaving_of_appends_keeps_every_line(manager, home, engine, schedule, start_empty):
    """``schedule``: one append of ours per item; between its read and its write, ``others`` other
    writers each add a line of their own (at the top of the block or at its end), as another
    process or a person's editor would. Every line is kept, ours in the order we wrote them."""
    label = f"t{next(_labels)}"
    rel = f"memory/users/ana/core/{label}.md"
    expected: set[str] = set()
    mine: list[str] = []
    if not start_empty:
        asyncio.run(update_block(manager, BlockUpdateInput(label=label, content="Seed.", user_id="ana"), "ana"))
        expected.add("Seed.")
    for step, (at_top, others) in enumerate(schedule):
        foreign = []
        for k in range(others):
            line = f"Other {step}.{k}."
            expected.add(line)
            if at_top:
                foreign.append(lambda text, line=line: f"{line}\n{text}")
            else:
                foreign.append(lambda text, line=line: f"{text}{line}\n")
        mine.append(f"Mine {step}.")
        expected.add(mine[-1])
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(engine, "write_file", _LandsBetween(engine, home, foreign))
            block = asyncio.run(update_block(manager, _append(label, mine[-1]), "ana"))
        assert set(_lines(block.content)) == expected
        assert [line for line in _lines(block.content) if line.startswith("Mine")] == mine
    assert set(_lines((home / rel).read_text())) == expected
    assert set(_lines(git(home, "show", f"HEAD:{rel}"))) == expected


def test_a_refused_append_whose_line_a_stash_pop_brings_back_is_never_the_agents_commit(manager, home, engine):
    """The person's `git stash` takes an agent's appended line out of the tree under its commit,
    so the append is refused ("nothing of this change was committed"); their `git stash pop`
    brings the line back, and a commit of the home (the daemon's, committing the pop) takes it
    in before the refused group is undone. That commit named the agent, whose intent for those
    bytes was still recorded: `git log` blamed the agent for a line it was told was not kept.
    The line is the person's now (it came back from their stash); the append stays refused."""
    asyncio.run(update_block(manager, _append("user", "First line."), "ana"))
    # White-box: the person's stash and pop are run where they race, inside the commit pass and
    # just before the undo, since a test cannot time real git commands into those instants.
    writes = engine.writes
    real_pass, real_undo = writes._queue._commit, writes._undo

    def stash_under_the_pass(paths):
        git(home, "stash", "push", "-q")
        return real_pass(paths)

    def pop_and_commit_before_the_undo(group, put_back=True):
        git(home, "stash", "pop", "-q")
        writes.commit_editor(None)
        return real_undo(group, put_back)

    writes._queue._commit, writes._undo = stash_under_the_pass, pop_and_commit_before_the_undo
    try:
        with pytest.raises(GitBusyError, match="changed under the commit"):
            asyncio.run(update_block(manager, _append("user", "Second line."), "ana"))
    finally:
        writes._queue._commit = real_pass
        del writes._undo
    sources = git(home, "log", "-S", "Second line.", "--format=%(trailers:key=Syncd-Source,valueonly)", "--", BLOCK)
    assert sources.split() == ["editor"], sources
    assert "Second line." in git(home, "show", f"HEAD:{BLOCK}")
