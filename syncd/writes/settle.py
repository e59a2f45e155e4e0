"""When git is settled enough to commit: the settle rule of a home's write path.

A git command of the person's (a merge, a stash, a checkout) moves HEAD or rewrites the index and
the tree in steps, dropping its lock between them (a merge writes MERGE_HEAD only after it let go
of the index), and a commit made between two steps would record a half-rewritten tree, or move
HEAD under a command that read it already. Settled: git's HEAD and index file have not moved for
a quiet time, or their last move was our own commit.
"""

from __future__ import annotations

import time

from ..config import Settings
from ..errors import GitBusyError
from ..history.git import git_fingerprint, git_last_moved
from ..home import Home

__all__ = ["GitSettle"]

_POLL_S = 0.02


class GitSettle:
    """The settle rule for one write path (one process): what git looked like right after our
    last commit, and when someone else last moved it. Read and written by the threads of the
    write path without a lock: each field is one assignment of an immutable value."""

    def __init__(self, home: Home, settings: Settings):
        self.home = home
        self.settings = settings
        # git's state right after our last commit: a daemon that finds git so knows the last
        # move of HEAD and of the index was ours, not a git command of the person's.
        self.last_commit_fingerprint: tuple | None = None
        # When git was last moved by someone else (wall clock, as git's files say): for a while
        # after, a write checks that the file it builds on was not rewound by that git command
        # (rewind.py). The time of the move, not of our noticing it: a commit made before this
        # engine started is nothing to watch for.
        self.foreign_moved = float("-inf")

    def committed(self) -> None:
        """Our commit just ran (made or not): git as it is now is as we left it."""
        self.last_commit_fingerprint = git_fingerprint(self.home.root)

    def as_we_left_it(self) -> bool:
        """Whether git's HEAD and index are as our last commit left them."""
        return git_fingerprint(self.home.root) == self.last_commit_fingerprint

    def due(self, quiet_s: float | None = None) -> float:
        """Seconds until git counts as settled (0: it is): HEAD and the index file have not
        moved for ``quiet_s`` (default ``commit_quiet_ms``), or their last move was ours."""
        quiet_s = self.settings.commit_quiet_ms / 1000 if quiet_s is None else quiet_s
        seen = git_fingerprint(self.home.root)
        if seen is None or seen == self.last_commit_fingerprint:
            return 0.0
        moved = git_last_moved(self.home.root) or 0.0
        self.foreign_moved = max(self.foreign_moved, moved)
        return max(0.0, moved + quiet_s - time.time())

    def wait(self, deadline: float) -> None:
        """Wait until git is settled; GitBusyError when it would not be by ``deadline``
        (a ``time.monotonic()`` value)."""
        while (due := self.due()) > 0:
            if time.monotonic() + due > deadline:
                raise GitBusyError(
                    "git kept changing (a git command of yours is running); nothing of this "
                    "change was kept, retry once it is done"
                )
            time.sleep(min(due, _POLL_S))
