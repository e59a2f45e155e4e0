"""`syncd sync` beside a running daemon: the daemon, which holds the home, syncs and commits for
it (Daemon.sync_now over the socket), and the command returns once the change is committed and
searchable; a daemon that stops while asked answers with an error, never a hang."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import syncd
from syncd.errors import SyncdError

from .daemon_helpers import daily_log, git, running_daemon, start_cli_daemon, wait_for, warm_embed_cache
from .helpers import write

LOG = "memory/users/ana/2026-11-22.md"
WORDS = ["theremin", "kayaking", "origami", "falconry", "calligraphy"]


def _cli(home: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "syncd", *args, "--home", str(home)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _daemon_log(home: Path) -> str:
    path = home / ".syncd/daemon.log"
    return path.read_text(errors="replace") if path.exists() else ""


def test_syncd_sync_beside_a_running_daemon_returns_with_the_edit_committed_and_searchable(home, embedder):
    warm_embed_cache(home, embedder)
    daemon = start_cli_daemon(home)
    try:
        wait_for(lambda: "watching" in _daemon_log(home), 60, "the daemon to start")
        facts = ["Likes green tea."]
        for word in WORDS:
            # Each edit is followed at once by `syncd sync`: whichever of the daemon's watcher and
            # the asked pass indexes it, the command returns only once it is committed.
            facts.append(f"Took {word} lessons on Sunday.")
            write(home, LOG, daily_log(facts))
            done = _cli(home, "sync", "-q")
            assert done.returncode == 0, done.stderr
            assert f"by the running daemon (pid {daemon.pid}" in done.stdout, done.stdout
            assert git(home, "show", f"HEAD:{LOG}") == (home / LOG).read_text()
            # Whichever indexed it, the answer says the edit is committed, and where.
            head = git(home, "rev-parse", "HEAD").strip()
            assert f"everything indexed is committed (HEAD {head[:10]})" in done.stdout, done.stdout
            found = _cli(home, "search", f"{word} lessons", "--user", "ana", "--limit", "1")
            assert word in found.stdout, found.stdout + found.stderr
        refused = _cli(home, "sync", "--no-commit")
        assert refused.returncode == 1
        assert "beside a running daemon" in refused.stderr and "Traceback" not in refused.stderr
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(timeout=60)
    assert daemon.returncode == 0, _daemon_log(home)[-3000:]


def test_syncd_reindex_beside_a_running_daemon_is_done_by_the_daemon(home, embedder):
    """`syncd reindex` beside `syncd watch` used to fail on the home's lock: the daemon rebuilds
    the index for it (Daemon.reindex_now), and the index then serves every fact."""
    warm_embed_cache(home, embedder)
    write(home, LOG, daily_log(["Likes green tea.", "Took theremin lessons on Sunday."]))
    daemon = start_cli_daemon(home)
    try:
        wait_for(lambda: "watching" in _daemon_log(home), 60, "the daemon to start")
        done = _cli(home, "reindex", "-q")
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("rebuilt: ") and ", 2 facts, " in done.stdout, done.stdout
        assert "rebuilding" not in _daemon_log(home)  # asked, not a lost index found by the daemon
        found = _cli(home, "search", "theremin lessons", "--user", "ana", "--limit", "1")
        assert "theremin" in found.stdout, found.stdout + found.stderr
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(timeout=60)
    assert daemon.returncode == 0, _daemon_log(home)[-3000:]
    with syncd.open(home, read_only=True, embedder=embedder) as reader:
        assert reader.status().fresh and reader.counts()["facts"] == 2


def test_a_stopping_daemon_refuses_a_rebuild(home, embedder):
    with running_daemon(home, embedder) as run:
        run.daemon.stop()
        run.thread.join(timeout=60)
        with pytest.raises(SyncdError, match="stopping"):
            run.daemon.reindex_now()


def _ask(daemon, answers: list[object]) -> threading.Thread:
    def ask() -> None:
        try:
            answers.append(daemon.sync_now())
        except SyncdError as exc:
            answers.append(exc)

    asker = threading.Thread(target=ask)
    asker.start()
    return asker


def test_an_asked_sync_reports_the_change_it_indexed_and_its_commit(home, embedder):
    with running_daemon(home, embedder) as run:
        answers: list[object] = []
        # The work thread is held at its next step (each step takes the engine's exclusive turn)
        # while the file is written and the sync asked: the watcher's events for the file are
        # then queued with the ask, and the asked pass indexes the file and reports it.
        with run.engine.exclusive():
            write(home, LOG, daily_log(["Plays the cello."]))
            asker = _ask(run.daemon, answers)
            wait_for(lambda: run.daemon._asked, 30, "the ask to be queued")  # white-box: the queue
        asker.join(timeout=60)
        (answer,) = answers
        assert isinstance(answer, dict), answer
        assert answer["summary"].startswith("1 new, 0 changed"), answer
        assert (answer["facts"], answer["embedded_texts"], answer["uncommitted"]) == (1, 1, None)
        assert len(answer["commits"]) == 1
        assert git(home, "show", f"HEAD:{LOG}") == (home / LOG).read_text()
        assert "cello" in run.reader.search("cello", user_id="ana")[0].content


def test_a_daemon_stopping_answers_the_syncs_asked_of_it(home, embedder):
    with running_daemon(home, embedder) as run:
        answers: list[object] = []
        # The work thread is held at its next step, so the ask waits in the queue while the
        # daemon is told to stop.
        with run.engine.exclusive():
            asker = _ask(run.daemon, answers)
            wait_for(lambda: run.daemon._asked, 30, "the ask to be queued")  # white-box: the queue
            run.daemon.stop()
        asker.join(timeout=60)
        assert not asker.is_alive(), "an ask was left waiting by a stopped daemon"
        assert len(answers) == 1 and isinstance(answers[0], (dict, SyncdError))
        run.thread.join(timeout=60)
        with pytest.raises(SyncdError, match="stopping"):
            run.daemon.sync_now()


def test_without_a_daemon_syncd_sync_does_the_work_itself(home, embedder):
    write(home, LOG, daily_log(["Likes green tea."]))
    done = _cli(home, "sync", "-q")
    assert done.returncode == 0, done.stderr
    assert "by the running daemon" not in done.stdout
    with syncd.open(home, read_only=True, embedder=embedder) as reader:
        assert reader.status().fresh


def test_a_daemon_of_a_syncd_that_syncs_for_nobody_else_leaves_the_lock_error(home, embedder):
    """A daemon whose socket lacks ``sync`` (an older syncd): the command says who holds the home."""
    from syncd.daemon.control import ControlServer

    with syncd.open(home, embedder=embedder) as engine:
        engine.declare_daemon()
        server = ControlServer(engine).start()  # ping, search, status, revert: no sync
        try:
            done = _cli(home, "sync", "-q")
        finally:
            server.stop()
    assert done.returncode == 1
    assert "is held by pid" in done.stderr and "(syncd watch)" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def _has_socket(pid: int) -> bool:
    fds = Path(f"/proc/{pid}/fd")
    try:
        return any(str(fd.readlink()).startswith("socket:") for fd in fds.iterdir())
    except (FileNotFoundError, ProcessLookupError):
        return False


def test_a_daemon_killed_while_asked_leaves_the_command_to_sync_itself(home, embedder):
    warm_embed_cache(home, embedder)
    daemon = start_cli_daemon(home)
    try:
        wait_for(lambda: "watching" in _daemon_log(home), 60, "the daemon to start")
        daemon.send_signal(signal.SIGSTOP)  # it accepts no more, answers nothing
        write(home, LOG, daily_log(["Plays the cello."]))
        asking = subprocess.Popen(
            [sys.executable, "-m", "syncd", "sync", "-q", "--home", str(home)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        wait_for(lambda: _has_socket(asking.pid), 60, "the command to ask the daemon")
        daemon.kill()
        daemon.wait(timeout=60)
        out, err = asking.communicate(timeout=120)
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait(timeout=60)
    assert asking.returncode == 0, err
    assert "by the running daemon" not in out and "1 facts" in out, out
    assert "Traceback" not in err
    assert git(home, "show", f"HEAD:{LOG}") == (home / LOG).read_text()


def test_the_daemon_s_progress_reaches_the_command_waiting_on_it(home, embedder):
    """What the daemon's long sync notes in the progress file is what the waiting `syncd sync`
    draws (its progress bar is fed by follow_daemon_progress)."""
    from syncd.cli.index_commands import follow_daemon_progress
    from syncd.home import Home
    from syncd.sync.progress import SyncProgress
    from syncd.sync.progress_file import ProgressFile

    event = SyncProgress("sync", 3, 800, 1_000, 90_000, 250, 40, 12.0, texts_per_s=20.0, eta_s=300.0)
    with syncd.open(home, embedder=embedder):  # holds the home, as the daemon whose note it is
        clock = iter([0.0, 5.0])
        ProgressFile(Home(home), clock=lambda: next(clock)).note(event)  # a sync running 5 s
        heard: list[SyncProgress] = []
        stop = threading.Event()
        follower = threading.Thread(target=follow_daemon_progress, args=(home, heard.append, stop, 0.01))
        follower.start()
        wait_for(lambda: heard, 30, "the note to be read")
        stop.set()
        follower.join(timeout=30)
    assert heard == [event]  # told once: an unchanged note is not drawn again


def test_syncs_told_as_one_count_each_file_once():
    from syncd.sync.plan import SyncPlan, combined_plan

    startup = SyncPlan(new=("a.md", "b.md"), unchanged=3)
    watcher = SyncPlan(changed=("a.md",), unchanged=4)
    asked = SyncPlan(new=("c.md",), deleted=("b.md",), unchanged=4)
    assert combined_plan([startup, watcher, asked]).summary() == "3 new, 1 changed, 0 moved, 1 deleted, 3 unchanged"
    assert combined_plan([asked]).summary() == asked.summary()
    assert combined_plan([]).summary() == "0 new, 0 changed, 0 moved, 0 deleted, 0 unchanged"


def test_a_sync_waiting_on_a_stopped_daemon_says_so_and_ends_once_it_goes_on(home, embedder, tmp_path):
    """A daemon stopped in its terminal (Ctrl-Z) left `syncd sync` waiting without a word: it
    looked like a hang."""
    warm_embed_cache(home, embedder)
    daemon = start_cli_daemon(home)
    told = tmp_path / "sync.err"
    try:
        wait_for(lambda: "watching" in _daemon_log(home), 60, "the daemon to start")
        daemon.send_signal(signal.SIGSTOP)
        write(home, LOG, daily_log(["Plays the cello."]))
        with open(told, "w") as err:
            asking = subprocess.Popen([sys.executable, "-m", "syncd", "sync", "-q", "--home", str(home)],
                                      stdout=subprocess.PIPE, stderr=err, text=True)  # fmt: skip
        wait_for(lambda: "is stopped" in told.read_text(), 60, "the command to say the daemon is stopped")
        assert told.read_text() == (
            f"syncd: the daemon (pid {daemon.pid}) is stopped (Ctrl-Z in its terminal?) and answers once it goes "
            f"on: `fg` there, or `kill -CONT {daemon.pid}`; Ctrl-C stops waiting\n"
        )
        daemon.send_signal(signal.SIGCONT)
        out, _ = asking.communicate(timeout=120)
    finally:
        daemon.send_signal(signal.SIGCONT)
        daemon.terminate()
        daemon.wait(timeout=60)
    assert asking.returncode == 0 and f"by the running daemon (pid {daemon.pid}" in out, out
    assert git(home, "show", f"HEAD:{LOG}") == (home / LOG).read_text()


def test_a_search_beside_a_stopped_daemon_searches_here_at_once(home, embedder):
    """Asked, a stopped daemon kept `syncd search` waiting the socket's whole timeout (30 s), then
    'the daemon ... did not answer (timed out); working without it'."""
    warm_embed_cache(home, embedder)
    write(home, LOG, daily_log(["Plays the cello."]))
    daemon = start_cli_daemon(home)
    try:
        wait_for(lambda: "indexed" in _daemon_log(home), 60, "the daemon to index the log")
        daemon.send_signal(signal.SIGSTOP)
        found = _cli(home, "search", "cello", "--user", "ana")
    finally:
        daemon.send_signal(signal.SIGCONT)
        daemon.terminate()
        daemon.wait(timeout=60)
    assert found.returncode == 0 and "Plays the cello." in found.stdout, found.stderr
    assert "did not answer" not in found.stderr, found.stderr
