"""Helpers for daemon tests: an in-process daemon on a thread, waiting on conditions, git."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import syncd
from syncd.config import Settings
from syncd.daemon.loop import Daemon

from .helpers import wait_for  # the tests' one polling loop; daemon tests import it from here too

GIT_ENV = {
    "GIT_AUTHOR_NAME": "Test Person",
    "GIT_AUTHOR_EMAIL": "person@example.org",
    "GIT_COMMITTER_NAME": "Test Person",
    "GIT_COMMITTER_EMAIL": "person@example.org",
}


def isolate_git_identity(tmp_path: Path, monkeypatch) -> Path:
    """Point git at an empty global config (returned, for a test to fill): human edits are
    committed under the user's git identity, and this machine's own must not decide what a test
    sees. Call it from an autouse fixture in modules whose tests commit."""
    empty = tmp_path / "global.gitconfig"
    empty.write_text("")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(empty))
    return empty


def git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=root, env=os.environ | GIT_ENV, check=True, capture_output=True, text=True
    ).stdout


def person_git(root: Path, *args: str, timeout: float = 30) -> str:
    """A git command of the person's beside a running daemon: run again while git says another
    git process holds its index lock (the daemon's commit pass holds it for a moment to move
    HEAD), as a person would; any other failure fails the test with git's own words.

    ``git stash`` (push) says nothing when it finds the lock taken: it refreshes the index
    without asking git to report a lock it cannot take, and exits 1 with no message (git 2.39,
    builtin/stash.c do_create_stash). A silent exit 1 of a stash push is that case."""
    deadline = time.monotonic() + timeout
    silent_lock = args[:1] == ("stash",) and (len(args) == 1 or args[1] in ("push", "-q", "-u"))
    while True:
        done = subprocess.run(["git", *args], cwd=root, env=os.environ | GIT_ENV, capture_output=True, text=True)
        if done.returncode == 0:
            return done.stdout
        locked = "index.lock': File exists" in done.stderr or (silent_lock and not done.stderr.strip())
        if not locked or time.monotonic() > deadline:
            raise AssertionError(f"git {' '.join(args)} failed ({done.returncode}): {done.stderr.strip()}")
        time.sleep(0.2)


def subjects(root: Path) -> list[str]:
    """Commit subjects, newest first."""
    return git(root, "log", "--format=%s").splitlines()


def settled(reader) -> bool:
    """The index reflects every file and git holds every change."""
    status = reader.status()
    return status.fresh and not status.uncommitted


@dataclass
class Running:
    home: Path
    engine: object
    daemon: Daemon
    reader: object
    thread: threading.Thread

    def settle(self, timeout: float = 60.0) -> None:
        wait_for(lambda: settled(self.reader), timeout, "the daemon to index and commit everything")

    def stop(self) -> None:
        """Finish the batch in hand and commit, as SIGTERM would; the engine stays open."""
        self.daemon.stop()
        self.thread.join(timeout=60)
        assert not self.thread.is_alive(), "the daemon did not stop"


_WARM_CACHE: dict[str, Path] = {}


def warm_embed_cache(home: Path, embedder) -> None:
    """Give ``home`` an embedding cache that already holds the vault seed's vectors, so each test
    does not pay ~3 s to embed the same seed pages again (the cache is per home)."""
    target = home / ".syncd" / "embed_cache.sqlite"
    if target.exists():
        return
    if embedder.model_id not in _WARM_CACHE:
        seed = syncd.init(Path(tempfile.mkdtemp(prefix="syncd-warm-")) / "home").home
        with syncd.open(seed, embedder=embedder) as engine:
            engine.sync()
        _WARM_CACHE[embedder.model_id] = seed / ".syncd" / "embed_cache.sqlite"
    shutil.copyfile(_WARM_CACHE[embedder.model_id], target)


def new_home(folder: Path, embedder) -> Path:
    """``syncd.init`` at ``folder``, its embedding cache warmed (see :func:`warm_embed_cache`): for
    a law that makes a home per example, the seed's ~1.5 s of CPU is paid once per run."""
    home = syncd.init(folder).home
    warm_embed_cache(home, embedder)
    return home


@contextmanager
def running_daemon(home: Path, embedder, **overrides) -> Iterator[Running]:
    """A real daemon (real observer, LanceDB, git, model) on a thread, plus a read-only reader."""
    settings = Settings(**overrides)
    warm_embed_cache(home, embedder)
    engine = syncd.open(home, settings=settings, embedder=embedder)
    reader = syncd.open(home, read_only=True, settings=settings, embedder=embedder)
    daemon = Daemon(engine, settings)
    thread = threading.Thread(target=daemon.run, name="syncd-daemon", daemon=True)
    thread.start()
    run = Running(home, engine, daemon, reader, thread)
    try:
        wait_for(lambda: daemon.reconciles >= 1, 60, "the startup reconcile")
        yield run
    finally:
        if thread.is_alive():
            run.stop()
        reader.close()
        engine.close()


def start_cli_daemon(home: Path, *extra: str, prefix: list[str] | None = None) -> subprocess.Popen:
    """``syncd watch`` in its own process (``prefix`` wraps it, e.g. in setpriv). Its stderr goes
    to a file, not a pipe nobody reads: a full pipe would block the daemon's logging. The child
    writes to its own copy of the file's descriptor; ours is closed at once (not leaked)."""
    with open(home.parent / f"daemon-{time.monotonic_ns()}.err", "w+") as err:
        return subprocess.Popen(
            [*(prefix or []), sys.executable, "-m", "syncd", "watch", "--home", str(home), *extra],
            stdout=subprocess.DEVNULL,
            stderr=err,
            text=True,
        )


def daily_log(facts: list[str], day: str = "2026-11-22") -> str:
    lines = [f"# {day}", "", "## 09:30 chat:c1 session:s1"]
    lines += [f"- [preference] {fact}" for fact in facts]
    return "\n".join(lines) + "\n"
