"""A change handed to a daemon (an agent writing while ``syncd watch`` or a server holds the home):
when it counts as committed, how the writer sees that daemon gone, and what it is told when the
commit comes late."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Literal

from ..errors import CommitDeferredError, GitBusyError, HistoryError, SyncdError
from ..history.git import blob_at_head, run_git
from ..home import read_memory_file
from ..home.lock import HomeLock
from .rewind import holds_change

__all__ = ["Handed", "TakeOver", "daemon_gone_look", "deferred", "still_late"]

# How often a writer waiting for the daemon looks at the home's lock.
_DAEMON_LOOK_S = 0.5
# How often a writer waiting for the daemon looks whether HEAD holds its change.
_POLL_S = 0.02

# What became of a change handed to a daemon that let go of the home (WritePath._take_over):
# committed here; a daemon holds the home (again), which commits it; another writer kept the lock
# throughout; another writer's change built on it and waits for its own commit; git refused the
# commit.
TakeOver = Literal["landed", "daemon", "held", "waiting", "refused"]
_DEFERRED_BECAUSE: dict[str, str] = {
    "daemon": "the daemon commits it once git is free",
    "held": "another writer held the home's lock throughout; the next sync commits it",
    "waiting": "another writer's change to the same file waits for its commit, which takes it in",
    "refused": "the daemon stopped before committing it and git refused it here; the next sync commits it",
}


class Handed:
    """One file of a change handed to a daemon: the sha written (``sha``) and the change it made
    (``before`` -> ``after``, as ``ChangeGroup.changed`` keeps it), and whether it is committed.

    Committed means HEAD holds the change (:func:`rewind.holds_change`: every line it added,
    counted with copies, and none it took out; byte-exact when counts cannot show it), not that
    the file no longer holds ``sha``: changed again before the daemon's commit (a person's edit,
    another writer), the file may still hold our lines, and then whoever commits it commits them
    too; or it may not, and then no commit ever holds them. So the writer waits for HEAD, not for
    the file."""

    def __init__(self, root: Path, rel: str, sha: str, before: bytes | None, after: bytes):
        self.root, self.rel, self.sha = root, rel, sha
        self.before, self.after = before, after
        self._looked: str | None = None  # HEAD's last blob of the file whose bytes were looked at

    def landed(self) -> bool:
        """Whether HEAD holds the change: HEAD's blob of the file each time (one git process),
        its bytes only when that blob is new."""
        head = blob_at_head(self.root, self.rel)
        if head == self.sha:
            return True
        if head is None or head == self._looked:
            return False  # not in HEAD (or git busy: looked at again), or looked at already
        try:
            data = run_git(self.root, "cat-file", "blob", head)
        except (GitBusyError, HistoryError):
            return False
        self._looked = head
        return holds_change(data, self.before, self.after)

    def kept(self) -> bool:
        """Whether the file on disk still holds the change (as :meth:`landed` counts)."""
        try:
            return holds_change(read_memory_file(self.root, self.rel), self.before, self.after)
        except (OSError, SyncdError):
            return False  # a link or a folder there now: not ours

    def wait(self, deadline: float, gone: Callable[[], bool]) -> bool:
        """Wait until HEAD holds the change (True), at most until ``deadline`` or until ``gone()``
        says there is no daemon to wait for (False)."""
        while not self.landed():
            if time.monotonic() >= deadline or gone():
                return False
            time.sleep(_POLL_S)
        return True


def still_late(handed: dict[str, Handed]) -> dict[str, Handed]:
    """Of ``handed``, the files whose change HEAD does not hold yet."""
    return {rel: one for rel, one in handed.items() if not one.landed()}


def daemon_gone_look(lock: HomeLock) -> Callable[[], bool]:
    """A check, made at most every ``_DAEMON_LOOK_S``, that no daemon holds the home's ``lock``
    any more (the one a change was handed to stopped, or was killed): the lock is free, or held
    by another kind of writer (agents' changes borrowing it back to back, a ``syncd sync``),
    which does not take changes handed over (a sync may commit one, or may not). Once it says
    so, it keeps saying so."""
    next_look = time.monotonic() + _DAEMON_LOOK_S
    found = False

    def gone() -> bool:
        nonlocal next_look, found
        if found or time.monotonic() < next_look:
            return found
        next_look = time.monotonic() + _DAEMON_LOOK_S
        found = lock.is_free() or not lock.held_by_daemon()
        return found

    return gone


def deferred(late: Iterable[str], wait_s: float, outcome: TakeOver) -> CommitDeferredError:
    """What a writer whose change is saved but not committed in time is told, and why."""
    return CommitDeferredError(
        f"saved but not committed within {wait_s:.0f} s ({', '.join(late)}): "
        f"{_DEFERRED_BECAUSE[outcome]}; it is kept, do not write it again"
    )
