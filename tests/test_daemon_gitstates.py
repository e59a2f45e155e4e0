"""A running daemon beside the user's own git work: a conflicted merge, a rebase and its abort, a
conflicted ``git stash pop``, a detached HEAD, a stale ``index.lock``, temp files of a killed write.
An acknowledged write survives all of them; a refused one says so; nothing is committed that the
user has not resolved. Real git, real daemon (observer, LanceDB, model) on a thread."""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import time

import pytest

from syncd.errors import GitBusyError, SyncdError
from syncd.history.intents import Intent
from syncd.home import Home, blob_sha
from syncd.memory import MemoryManager

from .daemon_helpers import (
    daily_log,
    git,
    isolate_git_identity,
    person_git,
    running_daemon,
    subjects,
    wait_for,
)
from .helpers import assert_matches_rebuild, write

LOG = "memory/users/ana/2026-11-22.md"
FACTS = [
    "Likes green tea in the morning.",
    "Works as a nurse in Lyon.",
    "Is allergic to peanuts.",
    "Has a cat called Miso.",
]
NEW_FACT = "- [preference] Reads crime novels.\n"


@pytest.fixture(autouse=True)
def global_gitconfig(tmp_path, monkeypatch):
    return isolate_git_identity(tmp_path, monkeypatch)


@pytest.fixture
def home(home):
    """A home made before `syncd init` wrote .gitattributes: its daily logs conflict like any
    file when both sides of a merge changed the same line (a new home keeps both lines)."""
    (home / ".gitattributes").unlink()
    person_git(home, "commit", "-qm", "no union merge", "--", ".gitattributes")
    return home


def _turn(n: int) -> Intent:
    return Intent(author="tutor-bot", user="ana", session="s1", turn=f"t{n}", summary=f"turn {n}")


def _indexed(run, rel: str) -> bool:
    record = run.reader.index.files().get(rel)
    return record is not None and record.sha == blob_sha((run.home / rel).read_bytes())


def _warnings(caplog, text: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING and text in r.getMessage()]


def _conflict(home, *args: str) -> None:
    done = subprocess.run(
        ["git", *args],
        cwd=home,
        capture_output=True,
        text=True,
        check=False,
        env=os.environ
        | {
            "GIT_AUTHOR_NAME": "P",
            "GIT_AUTHOR_EMAIL": "p@x",
            "GIT_COMMITTER_NAME": "P",
            "GIT_COMMITTER_EMAIL": "p@x",
            "GIT_EDITOR": "true",
        },
    )
    assert done.returncode != 0 and "CONFLICT" in done.stdout + done.stderr, done.stdout + done.stderr


def _diverge(run) -> None:
    """``other`` and ``main`` change the same fact of ana's log differently, both committed."""
    home = run.home
    write(home, LOG, daily_log(FACTS[:2]))
    run.settle()
    person_git(home, "checkout", "-q", "-b", "other")
    write(home, LOG, daily_log([FACTS[0], "Works as a nurse in Paris."]))
    person_git(home, "commit", "-q", "-am", "paris")
    person_git(home, "checkout", "-q", "main")
    write(home, LOG, daily_log([FACTS[0], "Works as a doctor in Lyon."]))
    person_git(home, "commit", "-q", "-am", "doctor")
    run.settle()


def _refused(run, caplog) -> None:
    """An agent's write now is refused before anything is written, through every way in."""
    before = (run.home / LOG).read_bytes()
    with pytest.raises(GitBusyError, match="retry"):
        run.reader.write_file(LOG, before + NEW_FACT.encode(), intent=_turn(1))
    with pytest.raises(SyncdError, match="retry"):
        asyncio.run(MemoryManager(run.reader).add_memory("Has a cat called Miso.", "ana"))
    assert (run.home / LOG).read_bytes() == before
    assert not list((Home(run.home).private_dir / "intents").glob("*.json"))


def _lands(run) -> None:
    """The retried write is on disk, indexed and committed by its agent on the current branch."""
    current = (run.home / LOG).read_bytes()
    run.reader.write_file(LOG, current + NEW_FACT.encode(), intent=_turn(2))
    run.settle()
    assert NEW_FACT in git(run.home, "show", f"HEAD:{LOG}")
    assert subjects(run.home)[0] == "turn 2"
    assert any(h.content == "Reads crime novels." for h in run.reader.search("crime novels", kind="fact"))


def test_a_write_during_a_conflicted_merge_is_refused_and_lands_after_it(home, embedder, caplog):
    with running_daemon(home, embedder) as run:
        _diverge(run)
        _conflict(home, "merge", "other")
        wait_for(lambda: _indexed(run, LOG), 30, "the daemon to index the conflicted file")
        _refused(run, caplog)
        wait_for(lambda: _warnings(caplog, "merge"), 30, "one warning naming the merge")
        person_git(home, "checkout", "--theirs", LOG)
        person_git(home, "add", LOG)
        person_git(home, "commit", "-q", "--no-edit")
        _lands(run)
        run.stop()
        assert "<<<<<<<" not in git(home, "log", "-p", "--format=", "--", LOG)
        assert len(_warnings(caplog, "merge is under way")) == 1
        assert_matches_rebuild(run.engine)


def test_a_write_during_a_rebase_is_refused_and_lands_after_its_abort(home, embedder, caplog):
    with running_daemon(home, embedder) as run:
        _diverge(run)
        person_git(home, "checkout", "-q", "other")
        _conflict(home, "rebase", "main")
        _refused(run, caplog)
        person_git(home, "rebase", "--abort")
        _lands(run)
        assert git(home, "rev-parse", "--abbrev-ref", "HEAD").strip() == "other"
        run.stop()
        assert_matches_rebuild(run.engine)


def test_a_conflicted_stash_pop_is_never_committed_by_the_daemon(home, embedder, caplog):
    with running_daemon(home, embedder) as run:
        write(home, LOG, daily_log(FACTS[:2]))
        run.settle()
        write(home, LOG, daily_log([FACTS[0], "Works as a nurse in Paris."]))
        person_git(home, "stash", "-q")
        write(home, LOG, daily_log([FACTS[0], "Works as a doctor in Lyon."]))
        run.settle()
        head = git(home, "rev-parse", "HEAD")
        _conflict(home, "stash", "pop")
        wait_for(lambda: _indexed(run, LOG), 30, "the daemon to index the conflicted file")
        wait_for(lambda: _warnings(caplog, "unmerged"), 30, "one warning naming the unmerged path")
        assert git(home, "rev-parse", "HEAD") == head
        assert git(home, "ls-files", "-u").strip(), "the conflict was marked resolved"
        _refused(run, caplog)
        write(home, LOG, daily_log([FACTS[0], "Works as a doctor in Paris."]))
        person_git(home, "add", LOG)
        person_git(home, "stash", "drop", "-q")
        run.settle()
        run.stop()
        assert git(home, "show", f"HEAD:{LOG}") == daily_log([FACTS[0], "Works as a doctor in Paris."])
        assert "<<<<<<<" not in git(home, "log", "-p", "--format=", "--", LOG)
        assert len(_warnings(caplog, "unmerged")) == 1


def test_a_write_on_a_detached_head_is_refused_until_a_branch_is_back(home, embedder, caplog):
    with running_daemon(home, embedder) as run:
        write(home, LOG, daily_log(FACTS[:2]))
        run.settle()
        person_git(home, "checkout", "-q", "--detach")
        head = git(home, "rev-parse", "HEAD")
        current = (home / LOG).read_bytes()
        # Nothing written now could be committed on a branch: refused before anything is written.
        with pytest.raises(GitBusyError, match="git switch"):
            run.reader.write_file(LOG, current + NEW_FACT.encode(), intent=_turn(1))
        assert (home / LOG).read_bytes() == current and git(home, "rev-parse", "HEAD") == head
        person_git(home, "checkout", "-q", "main")
        run.reader.write_file(LOG, current + NEW_FACT.encode(), intent=_turn(1))
        run.settle()
        run.stop()
        assert NEW_FACT in git(home, "show", f"main:{LOG}")
        assert git(home, "log", "-1", "--format=%an %s", "main").strip() == "tutor-bot turn 1"


def test_a_stale_index_lock_is_a_warning_at_once_with_the_fix(home, embedder, caplog):
    caplog.set_level(logging.INFO, logger="syncd")  # each retry says so at INFO: counted below
    with running_daemon(home, embedder) as run:
        run.settle()
        lock = home / ".git/index.lock"
        lock.write_bytes(b"")
        os.utime(lock, (time.time() - 600, time.time() - 600))
        write(home, "vault/Tea.md", "# Tea\n\nGreen.\n")
        wait_for(lambda: _warnings(caplog, f"rm {lock}"), 5, "a warning with the fix, at once")

        def retries() -> list[str]:
            return [
                r.getMessage()
                for r in caplog.records
                if r.levelno == logging.INFO and f"rm {lock}" in r.getMessage() and "commit later" in r.getMessage()
            ]

        wait_for(lambda: len(retries()) >= 2, 30, "two retries after the warning")
        assert len(_warnings(caplog, f"rm {lock}")) == 1  # still one warning
        lock.unlink()
        run.settle()
        assert subjects(home)[0] == "add vault/Tea.md"


def test_temp_files_of_a_killed_write_are_removed_at_start_and_never_committed(home, embedder):
    stale = write(home, "memory/users/ana/.2026-11-22.md.k3j2h1x9.syncd-tmp", daily_log(FACTS[:1]))
    os.utime(stale, (time.time() - 60, time.time() - 60))
    with running_daemon(home, embedder) as run:
        run.settle()
        assert not stale.exists()
        run.stop()
    assert "syncd-tmp" not in git(home, "log", "--all", "--name-only", "--format=")
