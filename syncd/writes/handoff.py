"""A change handed to a daemon (an agent writing while ``syncd watch`` or a server holds the home):
how the writer sees that daemon gone, and what it is told when the commit comes late."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Literal

from ..errors import CommitDeferredError
from ..home.lock import HomeLock

__all__ = ["TakeOver", "daemon_gone_look", "deferred"]

# How often a writer waiting for the daemon looks at the home's lock.
_DAEMON_LOOK_S = 0.5

# What became of a change handed to a daemon that let go of the home (WritePath._take_over):
# committed here; a daemon holds the home (again), which commits it; another writer kept the lock
# throughout; git refused the commit.
TakeOver = Literal["landed", "daemon", "held", "refused"]
_DEFERRED_BECAUSE: dict[str, str] = {
    "daemon": "the daemon commits it once git is free",
    "held": "another writer held the home's lock throughout; the next sync commits it",
    "refused": "the daemon stopped before committing it and git refused it here; the next sync commits it",
}


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
