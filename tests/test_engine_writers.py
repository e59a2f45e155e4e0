"""Two writers on one home without a daemon: each takes the home lock for its change (waiting for
the other's to end), so both see their own and each other's writes and every write keeps its
own commit. A holder that never lets go is a clear LockedError, not a silent half-write."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import git
import pytest

import syncd
from syncd.config import Settings
from syncd.errors import LockedError
from syncd.memory import MemoryManager

from .daemon_helpers import warm_embed_cache

run = asyncio.run

# The other process: a MemoryManager kept open for the whole test, adding the facts it is sent.
OTHER = textwrap.dedent(
    """
    import asyncio, sys
    from syncd.memory import MemoryManager

    with MemoryManager(sys.argv[1]) as manager:
        print("ready", flush=True)
        for line in sys.stdin:
            fact = asyncio.run(manager.add_memory(line.strip(), "ana", category="personal"))
            print("added" if fact is not None else "duplicate", flush=True)
    """
)


@pytest.fixture
def other(home, embedder):
    warm_embed_cache(home, embedder)
    env = dict(
        os.environ, PYTHONPATH=str(Path(syncd.__file__).parent.parent) + os.pathsep + os.environ.get("PYTHONPATH", "")
    )
    # The Popen's context closes our ends of its pipes (left open, each is a ResourceWarning).
    with subprocess.Popen(
        [sys.executable, "-c", OTHER, str(home)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
    ) as proc:
        assert proc.stdout.readline().strip() == "ready"
        yield proc
        proc.stdin.close()
        assert proc.wait(timeout=60) == 0


def ask(proc: subprocess.Popen, fact: str) -> str:
    proc.stdin.write(fact + "\n")
    proc.stdin.flush()
    return proc.stdout.readline().strip()


def summaries(home) -> list[str]:
    return [c.summary for c in git.Repo(home).iter_commits()]


def test_two_managers_in_two_processes_see_each_others_writes_and_keep_their_commits(home, embedder, other):
    with MemoryManager(home, Settings(), embedder=embedder) as manager:
        assert run(manager.add_memory("Keeps bees on the roof.", "ana", category="personal")) is not None
        # Its own write is visible to its next one: the same fact is not stored twice.
        assert run(manager.add_memory("keeps bees on the roof", "ana")) is None
        assert ask(other, "Plays the oboe in a quartet.") == "added"
        assert ask(other, "Keeps bees on the roof.") == "duplicate"  # the other sees ours
        assert run(manager.add_memory("plays the oboe in a quartet", "ana")) is None  # and we see theirs

        # Both at once: each waits for the other's change, nothing merges, nothing is lost.
        mine = ["Repairs old bicycles.", "Speaks fluent Finnish.", "Grows chillies indoors.", "Runs marathons."]
        theirs = ["Paints watercolours.", "Owns a grey cat.", "Studies astronomy.", "Brews kombucha."]
        answers: list[str] = []
        sender = threading.Thread(target=lambda: answers.extend(ask(other, t) for t in theirs))
        sender.start()
        for text in mine:
            assert run(manager.add_memory(text, "ana", category="personal")) is not None
        sender.join()
        assert answers == ["added"] * 4

    [log] = (home / "memory/users/ana").glob("????-??-??.md")
    text = log.read_text()
    for fact in ["Keeps bees on the roof.", "Plays the oboe in a quartet.", *mine, *theirs]:
        assert text.count(fact) == 1, fact
    # One commit per write, each with its own message.
    expected = {f"Remember: {t}" for t in ["Keeps bees on the roof.", "Plays the oboe in a quartet.", *mine, *theirs]}
    assert expected <= set(summaries(home)) and len(summaries(home)) == len(expected) + 1
    assert not git.Repo(home).is_dirty(untracked_files=True)


def test_a_writer_that_never_lets_go_is_a_clear_error(home, embedder):
    with syncd.open(home, embedder=embedder):  # holds the lock for its whole life, and is no daemon
        with MemoryManager(home, Settings(lock_wait_s=0.3), embedder=embedder) as manager:
            with pytest.raises(LockedError, match="did not let go"):
                run(manager.add_memory("Collects maps.", "ana"))
    assert not list((home / "memory/users").glob("ana/*.md"))
