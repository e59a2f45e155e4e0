"""A daemon whose home fails under it in a way no step of its own can mend: it goes on, backing
off between tries, and says what is wrong in one line when syncd knows what it is."""

from __future__ import annotations

import logging
import shutil
import time

import pytest

from syncd.errors import HomeError

from .daemon_helpers import daily_log, running_daemon
from .helpers import wait_for, write


def _failed(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if "watch step failed" in r.getMessage()]


def test_a_daemon_whose_commit_fails_before_it_backs_off_itself_backs_off_and_lives(home, embedder, caplog):
    """A commit pass that failed before it put its own retry off (here: the folder of the write
    journals it reads first is a file) was due again at once: the daemon tried it about 130 times
    a second, logging a traceback each time, and after 1,024 failures its backoff (0.5 s *
    2**failures) overflowed a float and killed it with an OverflowError. Deleting .git under a
    running daemon did the same."""
    caplog.set_level(logging.ERROR, logger="syncd.daemon.loop")
    with running_daemon(home, embedder) as run:
        journals = home / ".git" / "syncd" / "groups"
        shutil.rmtree(journals, ignore_errors=True)
        journals.write_text("not a folder\n")
        write(home, "memory/users/ana/2026-11-22.md", daily_log(["Likes green tea."]))
        wait_for(lambda: _failed(caplog), 60, "the daemon to fail to commit")
        before = len(_failed(caplog))
        time.sleep(3)  # the span whose failures are counted: a backoff of 0.5, 1 and 2 s tries 3 or 4 times
        assert len(_failed(caplog)) - before <= 4, len(_failed(caplog)) - before
        # White-box: the count of failures in a row that a long-lived daemon reaches.
        run.daemon._failures = 5000
        failed = len(_failed(caplog))
        wait_for(lambda: len(_failed(caplog)) > failed, 60, "one more failure")
        assert run.thread.is_alive()
        journals.unlink()


def test_a_failing_step_that_syncd_can_name_is_one_line_not_a_traceback(home, embedder, caplog):
    """Its .git deleted under it, the daemon logged 'has no git repository of its own ...; run
    `syncd init`' with a 30-line traceback on its terminal at every try."""

    def step() -> None:
        raise HomeError(f"{home} has no git repository of its own")

    caplog.set_level(logging.ERROR, logger="syncd.daemon.loop")
    with running_daemon(home, embedder) as run:
        run.daemon._guarded(step)  # white-box: the daemon's one broad catch, given a failing step
    [record] = _failed(caplog)
    assert record.exc_info is None and record.getMessage().startswith(
        f"watch step failed: {home} has no git repository of its own; trying again in"
    )
