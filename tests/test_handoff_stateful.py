"""Writes handed to a daemon in another process, and the person's hands and git: a state machine.

A real `syncd watch` holds the home; agents write through ``MemoryManager(home)`` in this process
(a read-only engine: each change is handed to the daemon, and the writer waits until HEAD holds
it). Some writes run on threads of their own while the following steps run. The person deletes
agents' lines in their editor (acknowledged ones, or ones still in flight), commits everything
with ``git commit -am``, runs ``git stash`` + ``git stash pop``, and restores the logs
(``git checkout -- <log>``).

After every step: an acknowledged fact is in a commit of main (and in HEAD unless the person
deleted it); a write answered OverwrittenError ("not kept") is in no commit of main and was
deleted by the person (no one else takes lines out here); one answered GitBusyError is in no
commit made in the agent's name. At the end, once the daemon committed everything: an
acknowledged or deferred (CommitDeferredError: "kept") fact the person did not delete is in HEAD.

The interleavings are races, so shrinking is off (see tests/test_write_path_stateful.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import Phase, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

import syncd
from syncd.config import Settings
from syncd.errors import CommitDeferredError, GitBusyError, OverwrittenError
from syncd.memory import MemoryManager

from .daemon_helpers import GIT_ENV, isolate_git_identity, start_cli_daemon, wait_for
from .helpers import poll

pytestmark = pytest.mark.slow

AGENT = "handoff-agent"


@dataclass
class Flight:
    text: str
    thread: threading.Thread
    outcome: list = field(default_factory=list)  # (kind, detail): ack, deferred, overwritten, busy, error


class HandoffMachine(RuleBasedStateMachine):
    """See the module docstring."""

    embedder = None  # set by the test: the session's real model

    def __init__(self) -> None:
        super().__init__()
        self.broken = False
        self.tmp = Path(tempfile.mkdtemp(prefix="syncd-handoff-"))
        self.home = syncd.init(self.tmp / "home").home
        self._git("config", "user.email", "person@example.org")
        self._git("config", "user.name", "The Person")
        self._stack = contextlib.ExitStack()
        self.daemon = start_cli_daemon(self.home)
        self._stack.callback(self._stop_daemon)
        lock = self.home / ".git/syncd/lock"
        wait_for(
            lambda: (
                self.daemon.poll() is not None
                or (lock.exists() and f"pid {self.daemon.pid} (syncd watch)" in lock.read_text(errors="replace"))
            ),
            90,
            "the daemon to hold the home",
        )
        assert self.daemon.poll() is None, "the daemon did not start"
        # A write whose line a restore took out waits all of lock_wait_s before OverwrittenError
        # (HEAD never moves: nothing shows it gone for good, handoff.Handed); kept short here.
        self.memory = self._stack.enter_context(
            MemoryManager(self.home, Settings(lock_wait_s=8), embedder=self.embedder, author=AGENT)
        )
        self.n = 0
        self.flights: list[Flight] = []
        self.acked: list[str] = []
        self.deferred: list[str] = []
        self.overwritten: list[str] = []
        self.refused: list[str] = []
        self.deleted: set[str] = set()

    def _stop_daemon(self) -> None:
        if self.daemon.poll() is None:
            self.daemon.terminate()
            try:
                self.daemon.wait(60)
            except subprocess.TimeoutExpired:
                self.daemon.kill()
                self.daemon.wait(30)

    def _git(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["git", *args], cwd=self.home, env=os.environ | GIT_ENV, capture_output=True, text=True, check=False
        )

    def _logs(self) -> list[Path]:
        return sorted((self.home / "memory/users").rglob("20*.md"))

    # -- the agents ------------------------------------------------------------------------------

    @rule(background=st.booleans())
    def add_fact(self, background):
        self._add(background)

    @rule(delay_ms=st.sampled_from([0, 50, 200, 600]))
    def add_and_delete_it_soon(self, delay_ms):
        """An add the person deletes as soon as it is on disk (or a moment later): before the
        daemon's commit, during it, or after."""
        text = self._add(background=True)
        seen = poll(lambda: any(text in path.read_text() for path in self._logs()), 30, every=0.005)
        if not seen:
            return  # refused before it wrote (busy): nothing to delete
        if delay_ms:
            time.sleep(delay_ms / 1000)  # the person's pause: the daemon's commit may land meanwhile
        self._delete(lambda line: text in line)

    def _add(self, background: bool) -> str:
        self.n += 1
        text = f"Keeps garden tool number {self.n} in the blue shed."
        flight = Flight(text, threading.Thread(target=lambda: None))

        def body() -> None:
            try:
                asyncio.run(self.memory.add_memory(text, "ana", category="personal", dedup=False))
                flight.outcome.append(("ack", ""))
            except CommitDeferredError as exc:
                flight.outcome.append(("deferred", str(exc)))
            except OverwrittenError as exc:
                flight.outcome.append(("overwritten", str(exc)))
            except GitBusyError as exc:
                flight.outcome.append(("busy", str(exc)))
            except BaseException as exc:  # noqa: BLE001 - reported by _collect
                flight.outcome.append(("error", repr(exc)))

        self.flights.append(flight)
        if background:
            flight.thread = threading.Thread(target=body, name="handoff-agent", daemon=True)
            flight.thread.start()
        else:
            body()
        self._collect()
        return text

    def _collect(self, wait: bool = False) -> None:
        still = []
        for flight in self.flights:
            if wait and flight.thread.ident is not None:
                flight.thread.join(120)
            if not flight.outcome:
                assert not wait, f"the add of {flight.text!r} never returned"
                still.append(flight)
                continue
            kind, detail = flight.outcome[0]
            assert kind != "error", f"the add of {flight.text!r} failed: {detail}"
            event(f"agent write: {kind}")
            {"ack": self.acked, "deferred": self.deferred, "overwritten": self.overwritten, "busy": self.refused}[
                kind
            ].append(flight.text)
        self.flights = still

    @rule()
    def wait_for_agents(self):
        self._collect(wait=True)

    # -- the person ------------------------------------------------------------------------------

    @rule(pick=st.integers(0, 1000))
    def delete_an_agents_line(self, pick):
        self._delete(lambda line: True, pick)

    def _delete(self, wanted, pick: int = 0) -> None:
        """The person's editor takes one of the agents' lines out (read, then written whole)."""
        for path in self._logs():
            text = path.read_text()
            ours = [line for line in text.splitlines() if "Keeps garden tool number" in line and wanted(line)]
            if not ours:
                continue
            line = ours[pick % len(ours)]
            fact = line.split("] ", 1)[1].split(" <!--", 1)[0]
            path.write_text("".join(kept for kept in text.splitlines(keepends=True) if kept.rstrip("\n") != line))
            self.deleted.add(fact)
            event("the person deleted an agent's line")
            return

    @rule()
    def restore_the_logs(self):
        """``git checkout -- <log>``: what is not committed in the daily logs is gone (counted as
        deleted by the person: what the logs held, and every write still in flight)."""
        for path in self._logs():
            for line in path.read_text().splitlines():
                if "Keeps garden tool number" in line:
                    self.deleted.add(line.split("] ", 1)[1].split(" <!--", 1)[0])
        self.deleted.update(flight.text for flight in self.flights)
        logs = [path.relative_to(self.home).as_posix() for path in self._logs()]
        if logs and self._git("checkout", "--", *logs).returncode == 0:
            event("the person restored the logs")

    @rule()
    def commit_everything(self):
        if self._git("commit", "-qam", "the person's commit").returncode != 0:
            event("the person's commit failed or had nothing")

    @rule()
    def stash_and_pop(self):
        before = self._git("stash", "list").stdout.count("\n")
        self._git("stash", "push", "-u", "-q")
        if self._git("stash", "list").stdout.count("\n") == before:
            return
        event("the person stashed")
        # Popped as the person would: again while git's lock is held by a commit pass.
        popped = poll(lambda: self._git("stash", "pop", "-q").returncode == 0, 20, every=0.2)
        if not popped:
            unmerged = self._git("ls-files", "-u").stdout
            assert not unmerged.strip(), f"a stash pop conflicted in a union-merged log: {unmerged}"
            raise AssertionError(f"git stash pop kept failing: {self._git('stash', 'pop').stderr}")

    # -- what must hold --------------------------------------------------------------------------

    def _in_main(self, text: str) -> str:
        return self._git("log", "main", "--format=%h %an %s", "-S", text).stdout.strip()

    def _check(self, settled: bool = False) -> None:
        head = "".join(self._git("show", f"HEAD:{p.relative_to(self.home).as_posix()}").stdout for p in self._logs())
        for text in self.acked:
            assert self._in_main(text), f"acknowledged, in no commit of main: {text!r}"
            if text not in self.deleted:
                assert text in head, f"acknowledged and never deleted, not in HEAD: {text!r}"
        for text in self.overwritten:
            assert text in self.deleted, f"answered OverwrittenError, yet nobody deleted it: {text!r}"
            assert not self._in_main(text), f"answered OverwrittenError ('not kept'), yet committed: {text!r}"
        for text in self.refused:
            found = self._git("log", "main", f"--author={AGENT}", "--format=%h %s", "-S", text).stdout.strip()
            assert not found, f"answered GitBusyError, yet in the agent's commit {found}: {text!r}"
        if settled:
            for text in self.deferred:
                if text not in self.deleted:
                    assert text in head, f"deferred ('kept') and never deleted, not in HEAD: {text!r}"

    @invariant()
    def writes_are_answered_truthfully(self):
        if self.broken:
            return
        try:
            self._collect()
            self._check()
        except BaseException:
            self.broken = True
            raise

    def teardown(self):
        try:
            if not self.broken:
                self._collect(wait=True)
                wait_for(
                    lambda: not self._git("status", "--porcelain", "--", "memory").stdout.strip(),
                    60,
                    "the daemon to commit what the person left",
                )
                self._check(settled=True)
        finally:
            for flight in self.flights:
                flight.thread.join(60)
            self._stack.close()
            shutil.rmtree(self.tmp, ignore_errors=True)


@pytest.fixture(autouse=True)
def _global_gitconfig(tmp_path, monkeypatch):
    return isolate_git_identity(tmp_path, monkeypatch)


def test_writes_handed_to_a_daemon_are_answered_truthfully_whatever_the_person_does(embedder):
    HandoffMachine.embedder = embedder
    run_state_machine_as_test(
        HandoffMachine,
        settings=settings(
            max_examples=6,
            stateful_step_count=20,
            deadline=None,
            print_blob=True,
            phases=(Phase.explicit, Phase.reuse, Phase.generate),
        ),
    )
