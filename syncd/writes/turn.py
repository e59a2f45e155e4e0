"""The write turn as a fair lock: handed out in the order it was asked for.

Agents' change groups take the turn many times a second; the daemon's steps (indexing what a
person saved, committing it) take it between them. A plain ``threading.Lock`` lets a thread that
releases it take it straight back, so under a steady stream of agent writes a daemon step could
wait as long as the stream lasted (bench_load.py measures how long a person's saved page waits
for its commit while agents write). With tickets, every waiter is served after at most the
holders that asked before it.
"""

from __future__ import annotations

import threading

__all__ = ["FairLock"]


class FairLock:
    """A non-reentrant lock served first come, first served (``with``, ``acquire``, ``release``).
    A waiter interrupted while waiting (an exception in its thread) gives up its place."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._next = 0  # the ticket the next caller gets
        self._serving = 0  # the ticket that holds the lock (free when it equals _next)
        self._abandoned: set[int] = set()

    def acquire(self, blocking: bool = True) -> bool:
        with self._cond:
            if not blocking:
                if self._serving != self._next:
                    return False
                self._next += 1
                return True
            ticket = self._next
            self._next += 1
            try:
                while self._serving != ticket:
                    self._cond.wait()
            except BaseException:
                if self._serving == ticket:
                    self._advance()  # served meanwhile: pass it on
                else:
                    self._abandoned.add(ticket)
                raise
            return True

    def release(self) -> None:
        with self._cond:
            if self._serving == self._next:
                raise RuntimeError("release of an unlocked FairLock")
            self._advance()

    def locked(self) -> bool:
        """Whether someone holds it (as ``threading.Lock.locked``)."""
        with self._cond:
            return self._serving != self._next

    def waiting(self) -> int:
        """How many threads wait for it now (asked, not served, not given up)."""
        with self._cond:
            return max(self._next - self._serving - 1, 0) - len(self._abandoned)

    def _advance(self) -> None:
        """Serve the next ticket, skipping those whose waiter gave up (``_cond`` held)."""
        self._serving += 1
        while self._serving in self._abandoned:
            self._abandoned.discard(self._serving)
            self._serving += 1
        self._cond.notify_all()

    def __enter__(self) -> FairLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
