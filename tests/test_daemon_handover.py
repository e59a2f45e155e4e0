"""Agents writing with no daemon and a daemon coming and going beside them: the daemon starts
while their changes hold the home's lock one after another, and a change handed to a daemon that
then stops (or is killed) before committing it is committed by the agent itself.

Real processes throughout: agent processes adding facts through ``MemoryManager(home)`` (each
change borrows the home's lock, or hands the write to a daemon when one holds it), `syncd watch`
in its own process, real git, LanceDB and the bundled model.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

import syncd
from syncd.config import Settings
from syncd.errors import SyncdError

from .daemon_helpers import git, start_cli_daemon, wait_for
from .helpers import assert_matches_rebuild, write

pytestmark = pytest.mark.slow

_AGENT = textwrap.dedent(
    """
    import asyncio, sys
    from pathlib import Path
    from syncd.errors import SyncdError
    from syncd.memory import MemoryManager

    home, user, stop = sys.argv[1], sys.argv[2], Path(sys.argv[3])

    async def main():
        with MemoryManager(home) as memory:
            i = 0
            while not stop.exists():
                content = f"{user} remembers kite number {i}."
                try:
                    await memory.add_memory(content, user_id=user, dedup=False)
                except SyncdError as exc:
                    print(f"REFUSED {type(exc).__name__}: {exc}", flush=True)
                else:
                    print(f"OK {content}", flush=True)
                i += 1

    asyncio.run(main())
    """
)


class Agents:
    """Agent processes adding facts until stopped; what each acknowledged, what was refused."""

    def __init__(self, home: Path, count: int = 2):
        self.home = home
        self.stop_file = home.parent / "agents.stop"
        script = home.parent / "agent.py"
        script.write_text(_AGENT)
        self.logs = [home.parent / f"agent{n}.out" for n in range(count)]
        self.procs = []
        for n, log in enumerate(self.logs):
            with open(log, "w") as out:
                self.procs.append(
                    subprocess.Popen(
                        [sys.executable, str(script), str(home), f"agent{n}", str(self.stop_file)],
                        stdout=out,
                        stderr=subprocess.STDOUT,
                    )
                )

    def lines(self) -> list[str]:
        return [line for log in self.logs for line in log.read_text().splitlines()]

    def acknowledged(self) -> list[str]:
        return [line[3:] for line in self.lines() if line.startswith("OK ")]

    def wait_for_adds(self, more_than: int) -> None:
        wait_for(lambda: len(self.acknowledged()) > more_than, 120, f"the agents' adds past {more_than}")

    def stop(self) -> None:
        self.stop_file.touch()
        for proc in self.procs:
            assert proc.wait(180) == 0, self.lines()[-20:]


def _start_daemon(home: Path) -> subprocess.Popen:
    """`syncd watch` in its own process, once it holds the home (its lock names it), or failed."""
    daemon = start_cli_daemon(home)
    lock = home / ".git/syncd/lock"

    def holds() -> bool:
        if daemon.poll() is not None:
            return True
        return lock.exists() and f"pid {daemon.pid} (syncd watch)" in lock.read_text(errors="replace")

    wait_for(holds, 90, "the daemon to hold the home")
    errors = "".join(err.read_text() for err in home.parent.glob("daemon-*.err"))
    assert daemon.poll() is None, errors  # it runs: not refused
    return daemon


def _committed_text(home: Path) -> str:
    names = git(home, "ls-tree", "-r", "--name-only", "HEAD", "--", "memory/users").split()
    return "".join(git(home, "show", f"HEAD:{name}") for name in names if name.endswith(".md"))


def _check_everything_kept(home: Path, agents: Agents, embedder) -> None:
    refused = [line for line in agents.lines() if line.startswith("REFUSED") or "Traceback" in line]
    assert not refused, refused[:5]
    text = _committed_text(home)
    lost = [fact for fact in agents.acknowledged() if fact not in text]
    assert not lost, lost[:5]
    assert not git(home, "status", "--porcelain", "--", "memory").strip()
    with syncd.open(home, embedder=embedder) as engine:
        assert not engine.sync().plan.changed_paths  # nothing left behind for the next writer
        assert_matches_rebuild(engine)


def test_a_daemon_starts_beside_agents_writing_with_no_daemon(home, embedder):
    """Each change of an agent's holds the home's lock for a moment, back to back with the next:
    `syncd watch` (any writer holding the lock for good) tried the lock once and failed ("held
    by pid N (syncd change)") nearly every time. It now waits for the changes under way, and no
    new change begins meanwhile; the agents then hand their writes to it."""
    agents = Agents(home)
    try:
        for round_ in range(3):
            agents.wait_for_adds(8 * (round_ + 1))
            daemon = _start_daemon(home)
            before = len(agents.acknowledged())
            agents.wait_for_adds(before + 4)  # handed to the daemon now
            daemon.send_signal(signal.SIGTERM)
            assert daemon.wait(60) == 0
    finally:
        agents.stop()
    _check_everything_kept(home, agents, embedder)


def test_a_change_handed_to_a_daemon_killed_before_its_commit_is_committed_by_the_agent(home, embedder):
    """A change handed to the daemon waits for the daemon's commit: with the daemon killed (or
    stopped) first, it waited out lock_wait_s (30 s) and then said "saved but not committed",
    leaving the file for the next writer. The agent now sees the daemon gone and commits it."""
    agents = Agents(home)
    try:
        agents.wait_for_adds(4)
        for _ in range(2):
            daemon = _start_daemon(home)
            before = len(agents.acknowledged())
            agents.wait_for_adds(before + 6)
            daemon.send_signal(signal.SIGKILL)
            daemon.wait(60)
            killed = time.monotonic()
            before = len(agents.acknowledged())
            agents.wait_for_adds(before + 6)
            # Well before lock_wait_s: the agents did not wait it out.
            assert time.monotonic() - killed < 20
    finally:
        agents.stop()
    _check_everything_kept(home, agents, embedder)


_HOLDER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from syncd.errors import LockedError
    from syncd.home.lock import HomeLock

    lock, role, stop = HomeLock(Path(sys.argv[1])), sys.argv[2], Path(sys.argv[3])
    if role == "daemon":  # holds the home as a daemon does, and never commits anything
        lock.acquire("syncd watch")
        print("held", flush=True)
        time.sleep(600)
    while not stop.exists():  # agents' long changes, borrowing the lock one after another
        try:
            lock.acquire("syncd change", after_waiters=True)
        except LockedError:
            time.sleep(0.02)
            continue
        time.sleep(4)
        lock.release()
        time.sleep(0.1)
    """
)


def test_a_change_handed_to_a_daemon_that_died_is_committed_while_other_agents_borrow_the_lock(home, embedder):
    """The daemon a change was handed to dies, and other agents' changes then hold the home's
    lock nearly all the time, one after another. The writer looked for a free lock to tell the
    daemon gone, so it waited out lock_wait_s twice and raised CommitDeferredError with no
    daemon left to commit its change. A lock held by agents' changes says no daemon holds the
    home: the writer borrows it between their changes and commits its own."""
    from syncd.home import Home
    from syncd.memory import MemoryManager

    script = home.parent / "holder.py"
    script.write_text(_HOLDER)
    lock_path, stop = str(Home(home).lock().path), home.parent / "holders.stop"
    daemon = subprocess.Popen([sys.executable, str(script), lock_path, "daemon", str(stop)], stdout=subprocess.PIPE)
    borrower = None
    try:
        assert daemon.stdout is not None and daemon.stdout.readline() == b"held\n"
        with MemoryManager(home, Settings(lock_wait_s=6), embedder=embedder) as memory:
            outcome, _, adding = _add_handed_to_the_daemon(home, memory)
            daemon.kill()
            daemon.wait(30)
            killed = time.monotonic()
            borrower = subprocess.Popen([sys.executable, str(script), lock_path, "change", str(stop)])
            adding.join(60)
            took = time.monotonic() - killed
        assert outcome and not isinstance(outcome[0], Exception), outcome
        # Committed between two of the other changes, not after waiting out lock_wait_s.
        assert took < 9, took
        assert "Flies a red kite." in _committed_text(home)
    finally:
        stop.touch()
        daemon.kill()
        daemon.wait(30)
        daemon.stdout.close()
        if borrower is not None:
            borrower.wait(30)


def _add_handed_to_the_daemon(home: Path, memory) -> tuple[list[object], list[str], threading.Thread]:
    """An agent's add on a thread, returned once written (handed to the daemon holding the
    home): what it will end with (the fact, or the SyncdError raised), what HEAD held the moment
    the add returned (its acknowledgement promises HEAD holds the fact by then), and its thread."""
    outcome: list[object] = []
    head_then: list[str] = []

    def add() -> None:
        try:
            outcome.append(asyncio.run(memory.add_memory("Flies a red kite.", "ana", dedup=False)))
        except SyncdError as exc:
            outcome.append(exc)
        head_then.append(_committed_text(home))

    adding = threading.Thread(target=add)
    adding.start()
    wait_for(lambda: "Flies a red kite." in _tree_text(home), 60, "the change handed to the daemon")
    return outcome, head_then, adding


def _tree_text(home: Path) -> str:
    return "".join(path.read_text() for path in (home / "memory/users").rglob("*.md"))


_OTHER_AGENT = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    import syncd
    from syncd.config import Settings

    home, go = Path(sys.argv[1]), Path(sys.argv[2])
    with syncd.open(home, read_only=True, settings=Settings(lock_wait_s=10)) as engine:
        print("ready", flush=True)
        while not go.exists() or not go.read_text():
            time.sleep(0.005)  # polled: the test writes the log's path here
        rel = go.read_text()
        with engine.changes():  # borrows the home's lock at once, and holds it a moment
            time.sleep(1.5)  # not a wait: the other change's length
            engine.append_file(rel, b"- [note] Sails a blue boat.\\n", (home / rel).stat().st_size)
        print("done", flush=True)
    """
)


def test_a_takeover_finding_its_change_committed_by_another_agent_is_acknowledged(home, embedder):
    """The daemon a change was handed to dies; another agent's change borrows the lock first,
    appends to the same daily log and commits both lines. The takeover then committed its own
    line against what it had written, git refused ("changed meanwhile"), and the writer got
    CommitDeferredError ("git refused it here") though HEAD held its line: a client retrying
    that would add the fact twice. What HEAD holds is now looked at first."""
    from syncd.home import Home
    from syncd.memory import MemoryManager

    (home.parent / "holder.py").write_text(_HOLDER)
    (home.parent / "other.py").write_text(_OTHER_AGENT)
    go = home.parent / "go"
    other = subprocess.Popen(
        [sys.executable, str(home.parent / "other.py"), str(home), str(go)], stdout=subprocess.PIPE
    )
    daemon = subprocess.Popen(
        [sys.executable, str(home.parent / "holder.py"), str(Home(home).lock().path), "daemon", str(go)],
        stdout=subprocess.PIPE,
    )
    try:
        assert other.stdout is not None and other.stdout.readline() == b"ready\n"
        assert daemon.stdout is not None and daemon.stdout.readline() == b"held\n"
        with MemoryManager(home, Settings(lock_wait_s=10), embedder=embedder) as memory:
            outcome, _, adding = _add_handed_to_the_daemon(home, memory)
            log = next((home / "memory/users").rglob("*.md")).relative_to(home).as_posix()
            daemon.kill()
            daemon.wait(30)
            go.write_text(log)
            adding.join(60)
        assert other.stdout.readline() == b"done\n"
        assert outcome and not isinstance(outcome[0], SyncdError), outcome
        committed = _committed_text(home)
        assert committed.count("Flies a red kite.") == 1 and "Sails a blue boat." in committed
    finally:
        for proc in (daemon, other):
            proc.kill()
            proc.wait(30)
            if proc.stdout is not None:
                proc.stdout.close()


def _stopped_daemon(home: Path, embedder) -> subprocess.Popen:
    """A real `syncd watch` holding the home, stopped (SIGSTOP) once idle: it holds the home's
    lock and commits nothing until it goes on or is killed."""
    daemon = _start_daemon(home)
    with syncd.open(home, read_only=True, embedder=embedder) as reader:
        wait_for(lambda: reader.status().fresh and not reader.status().uncommitted, 60, "the daemon's first sync")
    daemon.send_signal(signal.SIGSTOP)
    return daemon


def test_a_change_handed_to_a_daemon_is_not_acknowledged_when_the_file_changed_again_before_its_commit(home, embedder):
    """The writer waited for HEAD to hold the sha it wrote, and acknowledged at once when the file
    no longer held that sha ("whoever changed it commits it"): here a person appends a line
    while the daemon is stopped, the add returned its fact though HEAD held nothing of it, and
    the daemon, killed then, never committed it. The writer now acknowledges only once HEAD holds
    its line: the daemon gone, it takes the change over and commits the file as it is (the
    person's line with it, as the daemon would have)."""
    from syncd.memory import MemoryManager

    daemon = _stopped_daemon(home, embedder)
    try:
        with MemoryManager(home, Settings(lock_wait_s=20), embedder=embedder) as memory:
            outcome, head_then, adding = _add_handed_to_the_daemon(home, memory)
            log = next((home / "memory/users").rglob("*.md"))
            with open(log, "a", encoding="utf-8") as editor:  # the person's editor, after the agent
                editor.write("- [note] Sails a blue boat.\n")
            daemon.kill()  # stopped, it never committed the fact
            daemon.wait(30)
            adding.join(90)
        assert outcome and not isinstance(outcome[0], Exception), outcome
        assert "Flies a red kite." in head_then[0]  # acknowledged only once HEAD held it
        committed = _committed_text(home)
        assert "Flies a red kite." in committed and "Sails a blue boat." in committed
        assert not git(home, "status", "--porcelain", "--", "memory").strip()
    finally:
        daemon.kill()
        daemon.wait(30)


def test_a_change_handed_to_a_daemon_whose_line_the_person_removed_before_its_commit_is_refused(home, embedder):
    """The person deletes the agent's line before the daemon committed it: HEAD never holds the
    fact. The writer acknowledged it (the file no longer held its sha); it now says the line was
    changed by someone else before its commit (OverwrittenError), not that it is kept."""
    from syncd.errors import OverwrittenError
    from syncd.memory import MemoryManager

    daemon = _stopped_daemon(home, embedder)
    try:
        with MemoryManager(home, Settings(lock_wait_s=20), embedder=embedder) as memory:
            outcome, head_then, adding = _add_handed_to_the_daemon(home, memory)
            log = next((home / "memory/users").rglob("*.md"))
            kept = [line for line in log.read_text().splitlines(keepends=True) if "Flies a red kite." not in line]
            log.write_text("".join(kept))  # the person's editor takes the agent's line out
            daemon.kill()
            daemon.wait(30)
            adding.join(90)
        assert outcome and isinstance(outcome[0], OverwrittenError), outcome
        assert "Flies a red kite." not in head_then[0] + _committed_text(home) + _tree_text(home)
    finally:
        daemon.kill()
        daemon.wait(30)


def _answered_soon(adding: threading.Thread, daemon: subprocess.Popen) -> bool:
    """Whether the handed add answered within 60 s, far less than its ``lock_wait_s`` (the old
    code answered only at its end); then the daemon is killed, which lets such old code's writer
    end too (takeover, then OverwrittenError)."""
    adding.join(60)
    answered = not adding.is_alive()
    daemon.kill()
    daemon.wait(30)
    adding.join(90)
    return answered


def _refused_and_gone(home: Path, outcome: list[object]) -> None:
    """The handed add was told OverwrittenError, and its line is in neither HEAD nor the tree."""
    from syncd.errors import OverwrittenError

    assert outcome and isinstance(outcome[0], OverwrittenError), outcome
    assert "Flies a red kite." not in _committed_text(home) + _tree_text(home)


def test_a_handed_change_whose_line_the_running_daemon_committed_out_is_refused_at_once(home, embedder):
    """The person deletes the agent's just-written line before the daemon's commit, and the
    daemon (running again) commits the file without it: no commit will ever hold the line. The
    writer went on waiting for HEAD to hold it until ``lock_wait_s`` ran out (here 300 s) and only
    then said OverwrittenError; it now says so as soon as HEAD shows the line gone for good."""
    from syncd.memory import MemoryManager

    daemon = _stopped_daemon(home, embedder)
    try:
        with MemoryManager(home, Settings(lock_wait_s=300), embedder=embedder) as memory:
            outcome, _, adding = _add_handed_to_the_daemon(home, memory)
            log = next((home / "memory/users").rglob("*.md"))
            rel = log.relative_to(home).as_posix()
            kept = [line for line in log.read_text().splitlines(keepends=True) if "Flies a red kite." not in line]
            log.write_text("".join(kept))  # the person's editor takes the agent's line out
            daemon.send_signal(signal.SIGCONT)  # the daemon goes on and commits the file as it is
            wait_for(lambda: bool(git(home, "ls-tree", "HEAD", "--", rel).strip()), 60, "the daemon's commit")
            answered = _answered_soon(adding, daemon)
        assert answered, "the writer still waited once HEAD showed its line gone"
        _refused_and_gone(home, outcome)
    finally:
        daemon.kill()
        daemon.wait(30)


def test_a_handed_change_the_person_checked_out_of_the_file_is_refused_in_seconds(home, embedder):
    """The person runs `git checkout -- <log>` before the daemon's commit: the file is HEAD's
    again, HEAD never moves, and no commit will ever hold the agent's line. The writer waited
    out the whole ``lock_wait_s`` (here 300 s) for HEAD to move; it now says OverwrittenError
    once the file has stayed HEAD's for a moment (an editor's save passes through no such state)."""
    from syncd.memory import MemoryManager

    today = dt.datetime.now(dt.UTC).date().isoformat()
    rel = f"memory/users/ana/{today}.md"
    write(home, rel, f"# {today}\n\n## 08:00\n- [note] Keeps a tidy desk.\n")
    git(home, "add", "--", rel)
    git(home, "commit", "-qm", "the person's own note")
    daemon = _stopped_daemon(home, embedder)
    try:
        with MemoryManager(home, Settings(lock_wait_s=300), embedder=embedder) as memory:
            outcome, _, adding = _add_handed_to_the_daemon(home, memory)
            assert "Flies a red kite." in (home / rel).read_text()
            git(home, "checkout", "--", rel)
            daemon.send_signal(signal.SIGCONT)  # nothing to commit: the file is HEAD's
            answered = _answered_soon(adding, daemon)
        assert answered, "the writer still waited for a commit no one will make"
        _refused_and_gone(home, outcome)
    finally:
        daemon.kill()
        daemon.wait(30)


_FAILING_AGENT = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    import syncd
    from syncd.config import Settings

    home, rel, go = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
    with syncd.open(home, read_only=True, settings=Settings(lock_wait_s=60)) as engine:
        try:
            with engine.changes():  # handed to the daemon holding the home
                engine.append_file(rel, b"- [note] Sails a blue boat.\\n", (home / rel).stat().st_size)
                print("written", flush=True)
                while not go.exists():
                    time.sleep(0.005)  # polled: the test says when this turn fails
                raise RuntimeError("the turn failed")
        except RuntimeError:
            print("undone", flush=True)
    """
)


def test_a_takeover_never_commits_another_writers_change_still_open_on_its_file(home, embedder, caplog):
    """The daemon dies while another agent's turn, handed to it too, has appended to the same
    file and is still open. Taking the first change over, the writer must not commit that
    file as it is: the other turn then fails and is undone, and its line would stay in HEAD
    (an undo never takes out what HEAD holds), committed though its writer was told nothing
    was kept. The takeover waits for the other turn to end, then commits its own line alone."""
    import logging

    from syncd.home import Home
    from syncd.memory import MemoryManager

    (home.parent / "holder.py").write_text(_HOLDER)
    (home.parent / "failing.py").write_text(_FAILING_AGENT)
    go = home.parent / "go"
    daemon = subprocess.Popen(
        [sys.executable, str(home.parent / "holder.py"), str(Home(home).lock().path), "daemon", str(go)],
        stdout=subprocess.PIPE,
    )
    other = None
    try:
        assert daemon.stdout is not None and daemon.stdout.readline() == b"held\n"
        with (
            caplog.at_level(logging.INFO, logger="syncd.writes.scheduler"),
            MemoryManager(home, Settings(lock_wait_s=20), embedder=embedder) as memory,
        ):
            # Our add waits lock_wait_s for the daemon to index it (this one never does), the
            # other's append meanwhile for our turn to end (an open turn holds its file); the
            # other waits longer, so it appends once ours has ended.
            outcome, head_then, adding = _add_handed_to_the_daemon(home, memory)
            log = next((home / "memory/users").rglob("*.md"))
            other = subprocess.Popen(
                [sys.executable, str(home.parent / "failing.py"), str(home), log.relative_to(home).as_posix(), str(go)],
                stdout=subprocess.PIPE,
            )
            wait_for(lambda: "Sails a blue boat." in log.read_text(), 60, "the other agent's append")
            daemon.kill()
            daemon.wait(30)
            assert other.stdout is not None and other.stdout.readline() == b"written\n"
            # The takeover's log line says it looked at the file (the old code committed it then).
            wait_for(
                lambda: (
                    "waits for another writer's change" in caplog.text or "Sails a blue boat." in _committed_text(home)
                ),
                60,
                "the takeover to look at the file",
            )
            go.touch()
            assert other.stdout.readline() == b"undone\n"
            adding.join(90)
        assert outcome and not isinstance(outcome[0], Exception), outcome
        assert "Flies a red kite." in head_then[0]
        committed = _committed_text(home)
        assert "Flies a red kite." in committed and "Sails a blue boat." not in committed + _tree_text(home)
    finally:
        for proc in (daemon, other):
            if proc is not None:
                proc.kill()
                proc.wait(30)
                if proc.stdout is not None:
                    proc.stdout.close()


def _person_repo(tmp_path: Path) -> tuple[Path, str]:
    """A plain git repository with ``log.md`` committed: the repository and that commit."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "log.md").write_text("- [note] One.\n")
    git(repo, "add", "log.md")
    git(repo, "commit", "-q", "-m", "one")
    return repo, git(repo, "rev-parse", "HEAD").strip()


def _handed_line(repo: Path, base: str):
    """An agent's line written to ``log.md`` over ``base`` (as handed to a daemon), as a Handed."""
    from syncd.home import blob_sha
    from syncd.writes.handoff import Handed

    before = (repo / "log.md").read_bytes()
    after = before + b"- [note] Flies a red kite.\n"
    (repo / "log.md").write_bytes(after)
    return Handed(repo, "log.md", blob_sha(after), before, after, base)


def _person_commits_without_the_line(repo: Path) -> None:
    (repo / "log.md").write_text("- [note] One.\n- [note] Two.\n")
    git(repo, "commit", "-q", "-am", "two")


def test_a_handed_line_a_stash_keeps_is_not_lost_while_the_branch_moves_on_without_it(tmp_path):
    """`git stash` takes the agent's uncommitted line out for a moment, and a commit of the file
    lands meanwhile: the line is not lost (the pop brings it back). Dropped with the stash, it is."""
    from syncd.writes.handoff import Handed

    repo, base = _person_repo(tmp_path)
    handed = _handed_line(repo, base)
    git(repo, "stash", "-q")
    _person_commits_without_the_line(repo)
    assert not handed.landed() and not handed.lost
    git(repo, "stash", "drop", "-q")
    again = Handed(repo, "log.md", handed.sha, handed.before, handed.after, base)  # looks at once
    assert not again.landed() and again.lost


def test_a_handed_line_a_commit_held_before_the_next_took_it_out_is_committed(tmp_path):
    """The daemon commits the agent's line, and the person's deletion of it is committed before
    the writer looks: a commit on the branch held it, so it is acknowledged, not lost."""
    repo, base = _person_repo(tmp_path)
    handed = _handed_line(repo, base)
    git(repo, "commit", "-q", "-am", "the agent's line")
    _person_commits_without_the_line(repo)
    assert handed.landed() and not handed.lost


def test_a_handed_line_committed_on_the_branch_the_person_then_left_is_committed(tmp_path):
    """The daemon commits the agent's line on main, and the person checks out another branch
    (one that moved on from the write with a commit of the file) before the writer looks: it
    was told the line was lost (OverwrittenError), and wrote it again, a duplicate once the
    person is back on main, where the line was all along. A commit of a branch holds it."""
    repo, base = _person_repo(tmp_path)
    git(repo, "branch", "side")
    git(repo, "checkout", "-q", "side")
    _person_commits_without_the_line(repo)
    git(repo, "checkout", "-q", "main")
    handed = _handed_line(repo, base)
    git(repo, "commit", "-q", "-am", "the agent's line")
    git(repo, "checkout", "-q", "side")
    assert handed.landed() and not handed.lost
    git(repo, "checkout", "-q", "main")
    assert "- [note] Flies a red kite." in git(repo, "show", "HEAD:log.md")


def test_a_handed_line_in_a_file_the_person_renamed_is_not_lost(tmp_path):
    """The person renames the file the agent's line was handed to (as Obsidian does) and the
    rename is committed: the writer was told the line was lost (OverwrittenError), and wrote it
    again into a new file of the old name, a duplicate. The renamed file holds it, then a commit
    of it does. White-box: a second Handed, to look at the history at once."""
    from syncd.writes.handoff import Handed

    repo, base = _person_repo(tmp_path)
    handed = _handed_line(repo, base)
    git(repo, "mv", "log.md", "renamed.md")
    git(repo, "commit", "-q", "-m", "renamed")  # the line stays in renamed.md, not staged
    assert not handed.landed() and not handed.lost
    git(repo, "commit", "-q", "-am", "the daemon commits the line, in renamed.md")
    again = Handed(repo, "log.md", handed.sha, handed.before, handed.after, base)  # looks at once
    assert again.landed() and not again.lost


def test_a_handed_line_is_not_lost_when_the_branch_was_set_back(tmp_path):
    """A branch set back behind the write (a rebase's abort drops commits), then committed on:
    not "moved on" from the write, so what it dropped may come back (rewind.py); the writer
    keeps waiting."""
    repo, base = _person_repo(tmp_path)
    _person_commits_without_the_line(repo)
    handed = _handed_line(repo, git(repo, "rev-parse", "HEAD").strip())
    git(repo, "reset", "-q", "--hard", base)
    (repo / "log.md").write_text("- [note] One.\n- [note] Three.\n")
    git(repo, "commit", "-q", "-am", "three")
    assert not handed.landed() and not handed.lost
