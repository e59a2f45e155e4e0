"""The person's git commands running in a home right now, read from ``/proc`` (Linux).

Why it matters: a command such as ``git merge`` reads HEAD and the index when it starts and takes
``index.lock`` only later, to write its result. If a commit pass of syncd's moves HEAD in between,
the merge writes an index computed from the old HEAD under the new one: ``git status`` then shows
syncd's files staged backwards, and ``git merge --abort`` refuses ("Entry ... not uptodate"). The
commit pass holds ``index.lock`` while it moves HEAD (staging.HeldIndex) and keeps holding it until
every such command that began before the move has ended: each one then either wrote the index
before the pass took the lock (the pass sees the index changed and commits next time), or finds
the lock taken and stops with git's own "index.lock exists" message having changed nothing, or
began after the move and saw HEAD and the index as they now are.

Only commands that write the index or the working tree from what they read count (merge, rebase,
stash, checkout...): a ``git log`` or syncd's own plumbing never holds a pass back. Without
``/proc`` (not Linux) nothing is found and a pass never waits.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

__all__ = ["process_clock", "running_git_writers", "wait_for_git_writers"]

log = logging.getLogger(__name__)

# Porcelain that reads HEAD or the index at its start and writes the index or the tree later.
# `pull` is not here: it runs `merge` or `rebase` as a process of their own, which is. `commit`
# is not either: it moves HEAD by compare-and-swap, so it fails cleanly after a pass of ours.
_WRITERS = frozenset(
    {"am", "apply", "checkout", "cherry-pick", "merge", "mv", "rebase", "reset", "restore", "revert", "rm", "switch"}
)
# `git stash pop` merges in its own process; `git stash` (push) saves what it read aside and
# leaves the tree to a `git reset --hard` process of its own, which is in _WRITERS: holding the
# stash itself back would only make that reset fail after the stash was saved.
_STASH_WRITERS = frozenset({"apply", "pop", "branch"})
# git's own options that take the next argument as their value.
_VALUED = frozenset({"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--super-prefix", "--config-env"})
_PROC = "/proc"
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_POLL_S = 0.005


def process_clock() -> int:
    """Now, on the clock ``/proc/PID/stat`` gives process start times in (ticks since boot)."""
    return int(time.clock_gettime(time.CLOCK_BOOTTIME) * _TICKS)


def _words(argv: list[str]) -> list[str]:
    """The command's words after git's own options: ``["merge", "--no-edit", "side"]`` for
    ``git -C x -c k=v merge --no-edit side``."""
    i = 1
    while i < len(argv):
        arg = argv[i]
        if arg in _VALUED:
            i += 2
        elif arg.startswith("-"):
            i += 1
        else:
            return argv[i:]
    return []


def _subcommand(argv: list[str]) -> str | None:
    """``merge`` for ``git -C x -c k=v merge --no-edit side``; None when there is none."""
    words = _words(argv)
    return words[0] if words else None


def _writes(argv: list[str]) -> bool:
    words = _words(argv)
    if not words:
        return False
    if words[0] == "stash":
        return len(words) > 1 and words[1] in _STASH_WRITERS
    return words[0] in _WRITERS


def _read(path: str) -> bytes | None:
    # os.open/os.read rather than pathlib: a scan reads one small file per process on the machine.
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # the process ended meanwhile, or is another user's
        return None
    try:
        return os.read(fd, 65536)
    except OSError:
        return None
    finally:
        os.close(fd)


def _running(pid: int) -> bool:
    """Whether ``pid`` still runs (a zombie, ended and not yet reaped, does not)."""
    stat = _read(f"{_PROC}/{pid}/stat")
    fields = stat.rpartition(b")")[2].split() if stat else []
    return bool(fields) and fields[0] != b"Z"


def _inside(cwd: str, top: str) -> bool:
    return cwd == top or cwd.startswith(top.rstrip("/") + "/")


def running_git_writers(root: Path, started_by: int | None = None) -> list[int]:
    """Process ids of the git commands in ``_WRITERS`` running with their working directory in
    ``root`` (git moves into the top of the tree it works on), other than this process; only
    those started at or before ``started_by`` (see :func:`process_clock`) when it is given."""
    try:
        entries = os.listdir(_PROC)
    except OSError:
        return []
    top = os.path.realpath(root)
    me = os.getpid()
    found = []
    for name in entries:
        if not name.isdigit() or int(name) == me:
            continue
        folder = f"{_PROC}/{name}"
        if _read(f"{folder}/comm") != b"git\n":
            continue
        argv = [a.decode("utf-8", "surrogateescape") for a in (_read(f"{folder}/cmdline") or b"").split(b"\0") if a]
        if not _writes(argv):
            continue
        try:
            cwd = os.readlink(f"{folder}/cwd")
        except OSError:
            continue
        if not _inside(cwd, top):
            continue
        if started_by is not None:
            stat = _read(f"{folder}/stat") or b""
            # Fields after the command name, which may hold spaces: the start time is field 22.
            fields = stat.rpartition(b")")[2].split()
            if len(fields) < 20 or int(fields[19]) > started_by:
                continue
        found.append(int(name))
    return found


def wait_for_git_writers(root: Path, started_by: int, limit_s: float) -> list[int]:
    """Wait (at most ``limit_s``) until no command of :func:`running_git_writers` started by
    ``started_by`` runs; the ones still running then (an interactive rebase waiting for its
    editor, say), or an empty list."""
    deadline = time.monotonic() + limit_s
    waiting = running_git_writers(root, started_by)
    while waiting and time.monotonic() < deadline:
        time.sleep(_POLL_S)
        waiting = [pid for pid in waiting if _running(pid)]
    if waiting:
        log.info("git command(s) %s still running after %.1f s; letting go of the index lock", waiting, limit_s)
    return waiting
