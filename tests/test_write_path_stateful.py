"""Acknowledged means kept, whatever the person does with git meanwhile: a hypothesis state machine.

One real home, a real Daemon on a thread (observer, LanceDB, git, the model) and agents writing
through MemoryManager on the daemon's engine, as ``syncd serve`` does: facts (``add_memory``),
core block appends (``update_block``) and whole turns (``SessionRunner.process_turn``, the LLM
answering through litellm's ``mock_response``). Some writes run on threads of their own while the
following steps run, so the person's git commands meet writes in flight (one rule starts agents
and runs a git command of the person's a moment later, on purpose). The person runs real git
commands on the home: a commit of a hand edit, ``git stash`` + ``git stash pop``, ``git checkout
-b x`` + ``git checkout main``, ``git revert --no-edit`` of their own commit, a merge that
conflicts on a vault page then ``git merge --abort``, and hand edits left for the daemon to commit.
Their commands may fail (``index.lock`` held, local changes), as the person's do: that is recorded
(``hypothesis.event``), never an error; a write refused with GitBusyError is not acknowledged.

After every step: every acknowledged write (the fact's text, the block's line, the turn's
transcript lines and extracted facts) is in the tip of main, or of the branch the person had
checked out while it was in flight (and, if not, the failure says whether it is in any commit of
any branch, and which commit took it out); no commit made as the person (``Syncd-Source: editor``)
removes a fact line or an acknowledged line; a write answered GitBusyError ("nothing of this
change was committed") is in no commit made in the agent's name; no conflict markers and no
unmerged paths in the memory tree, and the person is back on main. At the end, once the daemon
has settled (nothing left uncommitted) and is stopped: the same, and the index equals a rebuild.

The interleavings are races, so a failure may not replay: shrinking is off (it would mostly end in
Flaky), and each failure says what was lost or wrongly committed, the git history around it and
the state of the tree, the stash and the writers.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
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
from hypothesis.errors import InvalidArgument
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

import syncd
from syncd.api.schemas import BlockUpdateInput
from syncd.config import Settings
from syncd.errors import CommitDeferredError, GitBusyError
from syncd.history.intents import Intent
from syncd.memory import MemoryManager
from syncd.memory.tools import update_block
from syncd.session import SessionRunner

from .daemon_helpers import GIT_ENV, daily_log, git, isolate_git_identity, running_daemon
from .helpers import assert_matches_rebuild, poll

pytestmark = pytest.mark.slow

USERS = ("ana", "bob")
LABELS = ("user", "facts")
PAGES = ("vault/Notes.md", "vault/index.md", "vault/Draft.md")
DAEMON_SETTINGS = {"lock_wait_s": 5.0, "commit_quiet_ms": 200}
# What an agent remembers: varied enough that no two facts read as duplicates of each other.
_WHO = ["Ana", "Bob", "The nurse", "Her brother", "The landlord", "His cousin", "The coach", "A neighbour"]
_DOES = ["collects", "repairs", "paints", "sells", "photographs", "grows", "restores", "sketches"]
_WHAT = [
    "copper kettles",
    "vintage bicycles",
    "alpine orchids",
    "harbour maps",
    "clay whistles",
    "wooden sledges",
    "glass marbles",
    "brass compasses",
    "silk kites",
    "tin robots",
]
_WHERE = [
    "in Lyon",
    "on Sundays",
    "near the river",
    "every winter",
    "for the museum",
    "at dawn",
    "with friends",
    "in the attic",
    "by the lake",
]
_SETTLE_S = 45.0


def _sentence(n: int, tag: str) -> str:
    # Strides prime to each list's length: consecutive sentences differ in every part.
    return (
        f"{_WHO[n % len(_WHO)]} {_DOES[n * 3 % len(_DOES)]} {_WHAT[n * 7 % len(_WHAT)]} "
        f"{_WHERE[n * 5 % len(_WHERE)]} ({tag} {n})."
    )


def _extraction(*contents: str) -> str:
    return json.dumps({"facts": [{"content": c, "category": "personal", "importance": 0.6} for c in contents]})


def _event(text: str) -> None:
    """hypothesis.event, also when a rule is called outside hypothesis (a reproduction)."""
    with contextlib.suppress(InvalidArgument):
        event(text)


@dataclass
class Ack:
    """One acknowledged write: the texts the markdown must hold, and which checkouts it overlapped."""

    what: str
    texts: tuple[str, ...]
    started: int  # the checkout epoch when the write began
    ended: int


@dataclass
class Refusal:
    """A write answered GitBusyError: "nothing of this change was committed, retry"."""

    what: str
    texts: tuple[str, ...]
    reason: str


@dataclass
class InFlight:
    what: str
    texts: tuple[str, ...]
    started: int
    thread: threading.Thread
    # ("ack" | "deferred", texts kept) | ("busy", reason) | ("error", exc)
    outcome: list = field(default_factory=list)


def _guarded(method):
    """Mark the machine broken when a rule fails, so teardown does not hide the failure."""

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except BaseException:
            self.broken = True
            raise

    return wrapper


class WritePathMachine(RuleBasedStateMachine):
    """See the module docstring."""

    embedder = None  # set by the test: the session's real model

    def __init__(self) -> None:
        super().__init__()
        self.broken = False
        self._stack = contextlib.ExitStack()
        self.tmp = Path(tempfile.mkdtemp(prefix="syncd-stateful-"))
        home = syncd.init(self.tmp / "home").home
        self.home = home
        self._git("config", "user.email", "person@example.org")
        self._git("config", "user.name", "The Person")
        self.run = self._stack.enter_context(running_daemon(home, self.embedder, **DAEMON_SETTINGS))
        self.manager_settings = Settings(llm_model="gpt-4o-mini", core_refresh_importance=0.99, **DAEMON_SETTINGS)
        self.n = 0
        self.epoch = 0  # checkouts of another branch so far
        self.checkouts_begun = 0  # checkout commands started: one may be moving the tree right now
        self.branches: dict[int, str] = {}  # checkout epoch -> the branch then checked out
        self.acks: list[Ack] = []
        self.refused: list[Refusal] = []
        self.refusals_checked = 0
        self.deferred: list[Ack] = []
        self.in_flight: list[InFlight] = []
        self.git_failures: list[str] = []
        self.seen_tips: list[str] = []
        self.editor_removals: list[str] = []

    # -- helpers -----------------------------------------------------------------------------------

    def _next(self) -> int:
        self.n += 1
        return self.n

    def _git(self, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["git", *args], cwd=cwd or self.home, env=os.environ | GIT_ENV, capture_output=True, text=True, check=False
        )

    def _out(self, *args: str) -> str:
        done = self._git(*args)
        assert done.returncode == 0, f"git {' '.join(args)}: {done.stderr}"
        return done.stdout

    def _person(self, what: str, *args: str, cwd: Path | None = None) -> bool:
        """A git command of the person's: it may fail, as theirs do; recorded."""
        done = self._git(*args, cwd=cwd)
        if done.returncode != 0:
            reason = (done.stderr.strip() or done.stdout.strip()).splitlines()
            self.git_failures.append(f"{what}: {' | '.join(reason[:2])}")
            _event(f"person's git {what} failed")
        return done.returncode == 0

    def _insist(self, what: str, *args: str, cwd: Path | None = None, limit_s: float = 20.0) -> bool:
        """Run it again until git starts it, as the person would (a held index.lock, an agent's
        write not committed yet: "local changes would be overwritten")."""
        return bool(poll(lambda: self._person(what, *args, cwd=cwd), limit_s, every=0.2))

    def _git_state(self) -> str:
        """What a failure report needs to say about the repository and the writers."""
        self._collect()
        journals = sorted(p.name for p in (self.run.engine.home.private_dir / "groups").glob("*"))
        return (
            f"status:\n{self._git('status', '--porcelain').stdout}"
            f"diff:\n{self._git('diff').stdout[-3000:]}"
            f"stash:\n{self._git('stash', 'show', '-p').stdout[-1500:]}"
            f"log:\n{self._git('log', '--format=%h [%an] %s', '-8').stdout}"
            f"writes in flight: {[f.what for f in self.in_flight]}; journals: {journals}; "
            f"held: {sorted(self.run.engine.writes.held())}; refused: {[r.what for r in self.refused[-3:]]}\n"
            f"person's failed git commands: {self.git_failures[:3]} ... {self.git_failures[-6:]}"
        )

    def _edit(self, rel: str, line: str) -> None:
        path = self.home / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        text = path.read_text() if path.exists() else f"# {path.stem}\n"
        path.write_text(text + f"\n{line}\n")

    def _manager(self, extract: str | None = None) -> MemoryManager:
        options = {"extract": {"mock_response": extract}} if extract is not None else {}
        return MemoryManager(
            self.run.engine, settings=self.manager_settings, job_llm_options=options, author="stateful-agent"
        )

    # -- agent writes ------------------------------------------------------------------------------

    # Each plan draws its texts on the rule's thread (they name the write) and returns them with
    # the call that writes them, which may run on a thread of its own and returns what it kept
    # (None: all of them).

    def _plan_add(self, user: str):
        text = _sentence(self._next(), f"fact by {user}")

        def work() -> None:
            fact = asyncio.run(self._manager().add_memory(text, user, category="personal", dedup=False))
            assert fact is not None and fact.content == text

        return (text,), work

    def _plan_append(self, user: str, label: str):
        line = f"Block line {self._next()} for {user} in {label}."

        def work() -> None:
            started, begun = self.epoch, self.checkouts_begun
            request = BlockUpdateInput(label=label, content=line, operation="append")
            block = asyncio.run(update_block(self._manager(), request, user))
            # The block is read back after the write: a checkout of another branch meanwhile may
            # have taken the file out of the tree (the write is on that branch, where
            # _check_kept looks for it), also one still running (the epoch moves once it ends).
            if self.epoch == started and self.checkouts_begun == begun:
                assert line in block.content

        return (line,), work

    def _plan_turn(self, user: str, session: str):
        n = self._next()
        said, answer, fact = f"Turn message {n} from {user}.", f"Turn answer {n} to {user}.", _sentence(n, "turn fact")

        def work() -> tuple[str, ...]:
            runner = SessionRunner(self._manager(_extraction(fact)))
            result = asyncio.run(
                runner.process_turn(
                    session, said, answer, user_id=user, state={"version": 2, "steps": [], "serialized_at": "x"}
                )
            )
            assert result.extraction_error is None, result.extraction_error
            # The extracted fact may be dropped as a near-duplicate of one remembered before.
            return (said, answer, *(f.content for f in result.facts))

        return (said, answer, fact), work

    def _write(self, what: str, plan, background: bool) -> None:
        """Run one agent write, now or on a thread of its own; record what it was told."""
        texts, work = plan
        flight = InFlight(what, texts, self.epoch, threading.Thread(target=lambda: None))

        def body() -> None:
            try:
                flight.outcome.append(("ack", work() or texts))
            except CommitDeferredError:
                flight.outcome.append(("deferred", texts))
            except GitBusyError as exc:
                flight.outcome.append(("busy", exc.reason))
            except BaseException as exc:  # noqa: BLE001 - reported by _collect
                flight.outcome.append(("error", exc))

        self.in_flight.append(flight)
        if background:
            flight.thread = threading.Thread(target=body, name=f"agent-{what}", daemon=True)
            flight.thread.start()
        else:
            body()
            self._collect()

    def _collect(self, wait: bool = False) -> None:
        """Record the writes that have returned (all of them when ``wait``)."""
        still = []
        for flight in self.in_flight:
            if wait and flight.thread.ident is not None:
                flight.thread.join(120)
                assert not flight.thread.is_alive(), f"{flight.what} never returned"
            if not flight.outcome:
                still.append(flight)
                continue
            kind, value = flight.outcome[0]
            if kind == "error":
                raise AssertionError(f"{flight.what} failed with {value!r}") from value
            if kind == "deferred":  # saved and committed later (handed to a daemon elsewhere)
                self.deferred.append(Ack(flight.what, value, flight.started, self.epoch))
                _event("agent write deferred (CommitDeferredError)")
            elif kind == "busy":
                self.refused.append(Refusal(flight.what, flight.texts, value))
                _event("agent write refused (GitBusyError)")
            else:
                self.acks.append(Ack(flight.what, value, flight.started, self.epoch))
        self.in_flight = still

    @rule(user=st.sampled_from(USERS), background=st.booleans())
    @_guarded
    def add_fact(self, user, background):
        self._write(f"add_memory({user})", self._plan_add(user), background)

    @rule(user=st.sampled_from(USERS), label=st.sampled_from(LABELS), background=st.booleans())
    @_guarded
    def append_to_block(self, user, label, background):
        self._write(f"append({user}, {label})", self._plan_append(user, label), background)

    @rule(user=st.sampled_from(USERS), session=st.sampled_from(("s1", "s2")), background=st.booleans())
    @_guarded
    def turn(self, user, session, background):
        self._write(f"turn({user}, {session})", self._plan_turn(user, session), background)

    @rule(
        kinds=st.lists(st.sampled_from(("add", "append", "turn")), min_size=2, max_size=4), user=st.sampled_from(USERS)
    )
    @_guarded
    def agents_at_once(self, kinds, user):
        """Several agents of one user write at the same time, on threads, while the next steps run."""
        self._agents(kinds, user)

    def _agents(self, kinds, user):
        for i, kind in enumerate(kinds):
            if kind == "add":
                self._write(f"add_memory({user})", self._plan_add(user), True)
            elif kind == "append":
                self._write(f"append({user}, user)", self._plan_append(user, "user"), True)
            else:
                self._write(f"turn({user}, s{3 + i})", self._plan_turn(user, f"s{3 + i}"), True)

    @rule(
        kinds=st.lists(st.sampled_from(("add", "append", "turn")), min_size=1, max_size=3),
        user=st.sampled_from(USERS),
        delay_ms=st.sampled_from((0, 20, 60, 150)),
        command=st.sampled_from(("stash", "stash -u", "checkout", "revert", "merge")),
    )
    @_guarded
    def agents_meet_the_persons_git(self, kinds, user, delay_ms, command):
        """Agents start writing and, a moment later, the person runs a git command: the race
        between a group's writes, its commit and git rewriting the tree, on purpose."""
        self._agents(kinds, user)
        time.sleep(delay_ms / 1000)  # the race's offset, drawn by hypothesis: the point of this rule
        if command.startswith("stash"):
            self.stash_and_pop("vault/Notes.md", command.endswith("-u"))
        elif command == "checkout":
            self.checkout_and_back()
        elif command == "revert":
            self.revert_own_commit()
        else:
            self.merge_conflict_then_abort()

    @rule()
    @_guarded
    def wait_for_agents(self):
        self._collect(wait=True)

    # -- the person ------------------------------------------------------------------------------

    @rule(page=st.sampled_from(PAGES))
    @_guarded
    def hand_edit(self, page):
        """Left for the daemon to commit (as the person)."""
        self._edit(page, f"The person's note {self._next()}.")

    @rule(page=st.sampled_from(PAGES))
    @_guarded
    def commit_hand_edit(self, page):
        self._edit(page, f"The person's committed note {self._next()}.")
        if self._person("add", "add", "--", page):
            self._person("commit", "commit", "-q", "-m", "my note", "--", page)

    @rule(page=st.sampled_from(PAGES), untracked=st.booleans())
    @_guarded
    def stash_and_pop(self, page, untracked):
        self._edit(page, f"The person's stashed note {self._next()}.")
        before = self._git("stash", "list").stdout.count("\n")
        stashed = self._person("stash", "stash", "push", *(["--include-untracked"] if untracked else []))
        if self._git("stash", "list").stdout.count("\n") == before:
            return  # nothing stashed (git failed, or the daemon had committed the edit already)
        if not stashed:
            # git saved the entry, then could not put the tree back (a commit pass held its
            # index.lock): the changes are still in the tree, and a pop would find them there.
            _event("git stash saved its entry but failed to clean the tree")
            if not self._person("stash pop after a failed stash", "stash", "pop"):
                self._resolve_conflicted_pop()  # else the entry stays
            return
        time.sleep(0.1)  # the person's pause with their changes stashed: writes in flight land meanwhile

        def popped() -> str:
            if self._person("stash pop", "stash", "pop"):
                return "popped"
            # A file the stash took untracked was made again meanwhile (an agent wrote the day's
            # first fact anew): git cannot pop that; the person keeps the entry and merges it by
            # hand. It holds nothing acknowledged (that was committed before the stash).
            # A pop may both conflict in a block and refuse an untracked file: the conflict is
            # resolved first, else it would be left behind with the entry.
            if self._resolve_conflicted_pop():
                return "resolved"
            return "refused" if "already exists, no checkout" in self.git_failures[-1] else ""

        outcome = poll(popped, 20, every=0.2)
        if outcome == "refused":
            _event("git stash pop refused: an untracked file was made again")
        elif not outcome:
            # "Your local changes would be overwritten": a change nobody commits (an agent's
            # write in flight is committed or undone in well under this).
            raise AssertionError(f"git stash pop kept failing: {self.git_failures[-3:]}\n{self._git_state()}")

    def _resolve_conflicted_pop(self) -> bool:
        """A pop that conflicts, as git may in a file without ``merge=union`` (a core block):
        the stash took an agent's append before its commit (that write was then refused,
        GitBusyError, never acknowledged), and another append was acknowledged on the tree the
        stash left, at the same place. No waiting resolves that; the person does, as git tells
        them: each file keeps both sides' lines (what the branch holds first), is added, and the
        entry dropped. Whatever was acknowledged is in the branch's side, so it stays; the
        refused line, now the person's edit, is theirs to keep (see _check_refused)."""
        unmerged = sorted({line.split("\t", 1)[1] for line in self._out("ls-files", "-u").splitlines()})
        if not unmerged:
            return False
        _event("git stash pop conflicted: the person resolves it")
        for rel in unmerged:
            ours, theirs = self._git("show", f":2:{rel}").stdout, self._git("show", f":3:{rel}").stdout
            have = set(ours.splitlines())
            extra = "".join(line + "\n" for line in theirs.splitlines() if line not in have)
            (self.home / rel).write_text(ours + ("\n" if ours and not ours.endswith("\n") and extra else "") + extra)
            if not self._insist("add resolved", "add", "--", rel):
                raise AssertionError(f"git add of the resolved {rel} kept failing: {self.git_failures[-3:]}")
        self._insist("stash drop", "stash", "drop")
        return True

    @rule()
    @_guarded
    def checkout_and_back(self):
        branch = f"x{self._next()}"
        self.checkouts_begun += 1
        if not self._person("checkout -b", "checkout", "-q", "-b", branch):
            return
        self.epoch += 1
        self.branches[self.epoch] = branch
        time.sleep(0.1)  # the person's moment on the other branch: writes in flight land there
        self.checkouts_begun += 1
        if not self._insist("checkout main", "checkout", "-q", "main"):
            raise AssertionError(f"git checkout main kept failing: {self.git_failures[-3:]}")
        self.epoch += 1  # writes from here on land on main again

    @rule()
    @_guarded
    def revert_own_commit(self):
        n = self._next()
        page = f"vault/Undo{n}.md"
        self._edit(page, f"A page to revert {n}.")
        if not (
            self._insist("add", "add", "--", page, limit_s=3)
            and self._insist("commit", "commit", "-q", "-m", f"page {n}", "--", page, limit_s=3)
        ):
            return
        mine = self._out("log", "-1", "--format=%H", "--", page).strip()
        # `git revert --no-edit HEAD` as the person means it: their commit, named by its sha
        # since an agent's commit may land on top of it before (or between tries of) the revert.
        self._insist("revert", "revert", "--no-edit", mine, limit_s=5)

    @rule()
    @_guarded
    def merge_conflict_then_abort(self):
        n = self._next()
        branch, side = f"side{n}", self.tmp / f"side{n}"
        if not self._person("worktree add", "worktree", "add", "-q", "-b", branch, str(side)):
            return
        try:
            (side / "vault/index.md").write_text(f"# Index as the side branch has it {n}\n")
            self._out_in(side, "commit", "-qam", "side edit")
            (self.home / "vault/index.md").write_text(f"# Index as main has it {n}\n")
            self._insist("commit main edit", "commit", "-q", "-m", "main edit", "--", "vault/index.md", limit_s=5)
            merges: list[subprocess.CompletedProcess] = []

            def started() -> bool:
                merges.append(self._git("merge", "--no-edit", branch))
                if "CONFLICT" in merges[-1].stdout or merges[-1].returncode == 0:
                    return True
                self.git_failures.append(f"merge: {merges[-1].stderr.strip()[:120]}")
                _event("person's git merge failed to start")
                return False

            poll(started, 10, every=0.2)
            merged = merges[-1]
            if "CONFLICT" not in merged.stdout:
                if merged.returncode == 0:
                    _event("merge went through without a conflict")
                elif (self.home / ".git" / "MERGE_HEAD").exists():
                    # A merge that failed after starting (its merge commit's ref update lost a
                    # race with a commit pass: git's own compare-and-swap) leaves MERGE_HEAD, as
                    # git then tells the person; they abort it, as they would.
                    _event("person's git merge failed midway")
                    self._insist("merge --abort", "merge", "--abort")
                return
            time.sleep(0.2)  # the person's moment in the conflicted merge: writes in flight land meanwhile
            if not self._insist("merge --abort", "merge", "--abort"):
                raise AssertionError(
                    f"git merge --abort kept failing: {self.git_failures[-3:]}\n"
                    f"staged:\n{self._git('diff', '--cached', '--stat').stdout}"
                    f"reflog:\n{self._git('reflog', '-n', '12', '--format=%h %gs').stdout}{self._git_state()}"
                )
        finally:
            self._git("worktree", "remove", "--force", str(side))

    def _out_in(self, cwd: Path, *args: str) -> None:
        done = self._git(*args, cwd=cwd)
        assert done.returncode == 0, f"git {' '.join(args)} in {cwd}: {done.stderr}"

    @rule()
    @_guarded
    def daemon_settles(self):
        self._collect(wait=True)
        self._settle()

    # -- invariants ------------------------------------------------------------------------------

    def _tip_matches(self, ref: str, texts: set[str]) -> set[str]:
        """Which of ``texts`` the memory files at ``ref`` hold (one git grep)."""
        if not texts:
            return set()
        patterns = self.tmp / "patterns.txt"
        patterns.write_text("".join(t + "\n" for t in sorted(texts)))
        done = self._git("grep", "-h", "-o", "-F", "-f", str(patterns), ref, "--", "memory")
        assert done.returncode in (0, 1), done.stderr
        return {line.split(":", 1)[1] if line.startswith(ref + ":") else line for line in done.stdout.splitlines()}

    def _explain(self, text: str) -> str:
        """Where ``text`` went: the commits that added and removed it, in any branch."""
        trail = self._git("log", "--all", "--format=%h %p [%an] %s", "-S", text).stdout.strip()
        reflog = self._git("reflog", "-n", "25", "--format=%h %gs").stdout.strip()
        return (
            f"{text!r}\n  commits adding or removing it:\n{trail or '  (none: never committed)'}\n  reflog:\n{reflog}"
        )

    def _check_kept(self, settled: bool = False) -> None:
        self._collect()
        on_main, elsewhere = set(), {}
        for ack in self.acks + (self.deferred if settled else []):
            branches = [b for e, b in self.branches.items() if ack.started < e <= ack.ended]
            for text in ack.texts:
                if branches:
                    elsewhere[text] = (ack, branches)
                else:
                    on_main.add(text)
        lost = sorted(on_main - self._tip_matches("main", on_main))
        for text, (_ack, branches) in elsewhere.items():
            if not any(self._tip_matches(ref, {text}) for ref in ["main", *branches]):
                lost.append(text)
        if lost:
            whose = {t: a.what for a in self.acks for t in a.texts}
            details = "\n".join(f"- {whose[t]}: {self._explain(t)}" for t in lost[:3])
            raise AssertionError(
                f"{len(lost)} acknowledged text(s) not at the tip of main (or of their branch):\n"
                f"{details}\nperson's failed git commands: {self.git_failures[-5:]}"
            )

    def _check_editor_commits(self) -> None:
        """No commit made as the person removes a fact line, or any line an agent had acknowledged."""
        tips = self._out("for-each-ref", "--format=%(objectname)").split()
        out = self._out(
            "log", "--all", "-p", "--format=@@commit %H %s%n%B", *(f"^{t}" for t in self.seen_tips), "--", "memory"
        )
        self.seen_tips = sorted(set(tips) | set(self.seen_tips))
        acked = {t for a in self.acks for t in a.texts}
        commit, editor = "", False
        for line in out.splitlines():
            if line.startswith("@@commit "):
                commit, editor = line[9:], False
            elif line.startswith("Syncd-Source: editor"):
                editor = True
            elif (
                editor
                and line.startswith("-")
                and not line.startswith("---")
                and (line.startswith("-- [") or any(t in line for t in acked))
            ):
                self.editor_removals.append(f"{commit}: {line}")
        if self.editor_removals:
            first = self.editor_removals[0]
            text = first.split(": -", 1)[1].split(" <!--", 1)[0].split("] ", 1)[-1]
            acknowledged = any(text in t or t in text for t in acked)
            raise AssertionError(
                f"commits made as the person removed agents' lines: {self.editor_removals[:5]}\n"
                f"the first one acknowledged: {acknowledged}; {self._explain(text)}\n"
                f"person's failed git commands: {self.git_failures[-5:]}"
            )

    def _check_refused(self, every: bool = False) -> None:
        """A write answered GitBusyError ("nothing of this change was committed") left nothing in
        any commit made in the agent's name. (Its bytes may come back as the person's edit, from
        a stash that took them: that is theirs to keep.)"""
        fresh = self.refused if every else self.refused[self.refusals_checked :]
        self.refusals_checked = len(self.refused)
        for refusal in fresh:
            for text in refusal.texts:
                found = self._out("log", "--all", "--author=stateful-agent", "--format=%h %s", "-S", text).strip()
                assert not found, (
                    f"{refusal.what} was answered GitBusyError ({refusal.reason}), yet the agent's commit(s)\n"
                    f"{found}\nhold {text!r}\n{self._git_state()}"
                )

    def _settle(self) -> None:
        try:
            self.run.settle(_SETTLE_S)
        except AssertionError as exc:
            raise AssertionError(f"{exc}: {self.run.reader.status().uncommitted}\n{self._git_state()}") from None

    def _check_tree(self) -> None:
        markers = self._git("grep", "-n", "-E", "^(<<<<<<<|>>>>>>>)( |$)", "HEAD", "--", "memory")
        assert markers.returncode == 1, f"conflict markers committed in memory files:\n{markers.stdout[:2000]}"
        unmerged = self._out("ls-files", "-u")
        assert not unmerged.strip(), f"unmerged paths left behind:\n{unmerged}"
        branch = self._out("rev-parse", "--abbrev-ref", "HEAD").strip()
        assert branch == "main", f"the person is left on {branch!r}"

    @invariant()
    def acknowledged_writes_are_kept(self):
        if self.broken:
            return
        try:
            self._check_kept()
            self._check_refused()
            self._check_editor_commits()
            self._check_tree()
        except BaseException:
            self.broken = True
            raise

    # -- the end ---------------------------------------------------------------------------------

    def teardown(self):
        try:
            if not self.broken:
                self._collect(wait=True)
                self._settle()
                self._check_kept(settled=True)
                self._check_refused(every=True)
                self._check_editor_commits()
                self._check_tree()
                markers = [
                    p
                    for p in (self.home / "memory").rglob("*")
                    if p.is_file() and any(m in p.read_text(errors="replace") for m in ("<<<<<<< ", ">>>>>>> "))
                ]
                assert not markers, f"conflict markers in the working tree: {markers}"
                self.run.stop()
                assert not self._out("status", "--porcelain", "--", "memory").strip(), "uncommitted memory files"
                assert_matches_rebuild(self.run.engine)
        finally:
            for flight in self.in_flight:
                flight.thread.join(60)
            self._stack.close()
            shutil.rmtree(self.tmp, ignore_errors=True)


@pytest.fixture(autouse=True)
def _global_gitconfig(tmp_path, monkeypatch):
    return isolate_git_identity(tmp_path, monkeypatch)


def test_acknowledged_writes_survive_the_persons_git(embedder):
    WritePathMachine.embedder = embedder
    # About 70 s on 2 cores: each example builds a home and starts a daemon (~3 s), each step
    # costs a few git processes, the teardown a reindex.
    run_state_machine_as_test(
        WritePathMachine,
        settings=settings(
            max_examples=5,
            stateful_step_count=25,
            deadline=None,
            print_blob=True,
            phases=(Phase.explicit, Phase.reuse, Phase.generate),
        ),
    )


def test_a_group_is_committed_whole_or_not_at_all_when_git_puts_one_of_its_files_back(tmp_path, embedder):
    """Found by the state machine above (a turn refused "nothing of this change was committed"
    while "Turn 1 of session s3" was committed); here without a race. A turn writes the daily log
    and a second file; before it ends (its LLM call, say) the person's git puts the second file
    back (``git checkout -- file``; a stash does the same to every file). The turn must then be
    committed whole, or not at all with the tree as it was; never half of it, answered
    "GitBusyError: nothing of this change was committed" (the agent retries: a duplicate), with
    the committed half deleted again in the tree, where it blocks the person's git ("your local
    changes would be overwritten") until a restart of the daemon commits the deletion as theirs."""
    log = "memory/users/ana/2026-11-22.md"
    home = syncd.init(tmp_path / "home").home
    (home / log).parent.mkdir(parents=True)
    (home / log).write_text(daily_log(["Likes tea."]))
    (home / "vault/A.md").write_text("# A\n")
    for args in (
        ["config", "user.email", "person@example.org"],
        ["config", "user.name", "The Person"],
        ["add", "-A"],
        ["commit", "-qm", "seed"],
    ):
        git(home, *args)
    with running_daemon(home, embedder, **DAEMON_SETTINGS) as run:
        run.settle()
        before = git(home, "rev-parse", "HEAD").strip()
        refused = None
        try:
            with run.engine.changes(Intent(author="stateful-agent", summary="Turn 2 of session s1", user="ana")):
                run.engine.write_file(log, daily_log(["Likes tea.", "Keeps bees."]).encode())
                run.engine.write_file("vault/A.md", b"# A\n\nThe agent's note.\n")
                git(home, "checkout", "--", "vault/A.md")  # the person, meanwhile
        except GitBusyError as exc:
            refused = exc
        problems = []
        committed = git(home, "log", "--format=%h %s", f"{before}..HEAD")
        if refused is None and "Keeps bees." not in git(home, "show", f"HEAD:{log}"):
            problems.append("acknowledged, yet HEAD lacks the fact")
        if refused is not None and committed:
            problems.append(f"refused ({refused}), yet committed: {committed}")
        try:
            run.settle(10)
        except AssertionError:
            problems.append(f"never settled; left uncommitted: {git(home, 'status', '--porcelain')}")
    with running_daemon(home, embedder, **DAEMON_SETTINGS) as run:  # the next start
        run.settle()
    removals = git(home, "log", "-p", "--format=%h [%an] %s", "--author=The Person", "--", log)
    if "-- [preference] Keeps bees." in removals:
        problems.append(f"a commit as the person deletes the agent's fact:\n{removals}")
    assert not problems, "\n".join(problems)
