"""The LanceDB index's background writer, and the count of applies written that acknowledgements wait on.

An apply (``Index.apply``) changes the rows in memory at once and, when deferred, leaves its table
writes pending (pending.py). Applies are numbered from 1. ``wait_written(n)`` returns once the
first ``n`` are in the tables, and raises the error of the write that failed for the n-th, if one
did: a write path acknowledges an add only after that (writes/scheduler.py). Pending writes are
written by ``Index.persist``, which whoever needs the tables current calls, or by this writer's
thread once asked (``soon``), folded with whatever else is pending by then.

Locks: ``_wake`` guards the thread's state (started, due, closed); ``_done`` guards the count
written and the recent failures. Neither is held while writing: the write takes the index's own
locks (store.py), which must never be taken under these.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from ..errors import IndexError_, SyncdError

__all__ = ["BackgroundWriter"]

log = logging.getLogger(__name__)

# Failed writes remembered for waiters: a waiter asks about an apply it made moments ago.
_FAILURES_KEPT = 8


class BackgroundWriter:
    """Writes an index's pending changes behind its applies, and tells waiters what is written."""

    def __init__(self, write: Callable[[], None]) -> None:
        self._write = write  # Index.persist: writes everything pending, raises what writing raised
        self._wake = threading.Condition(threading.Lock())
        self._thread: threading.Thread | None = None
        self._due = False
        self._closed = False
        self._done = threading.Condition(threading.Lock())
        self._written = 0
        self._failures: list[tuple[int, int, SyncdError]] = []  # (written before, up to, error)

    def soon(self) -> None:
        """Have the thread write what is pending (started on first use). Raises once closed."""
        with self._wake:
            if self._closed:
                raise IndexError_("this index is closed")
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="syncd-index-writer", daemon=True)
                self._thread.start()
            self._due = True
            self._wake.notify()

    def close(self) -> None:
        """Stop the thread once it has written what it was asked to (the caller writes the rest)."""
        with self._wake:
            self._closed = True
            self._wake.notify()
            thread = self._thread
        if thread is not None:
            thread.join()

    def mark_written(self, upto: int, error: SyncdError | None = None) -> None:
        """The applies up to number ``upto`` are written, or with ``error`` failed to be."""
        with self._done:
            if error is not None:
                self._failures = [*self._failures[1 - _FAILURES_KEPT :], (self._written, upto, error)]
            self._written = max(self._written, upto)
            self._done.notify_all()

    def wait_written(self, applied: int) -> None:
        """Return once the first ``applied`` applies are in the tables; raise the error of the
        write that failed for the last of them, if one did (its paths are unwritten)."""
        with self._done:
            while self._written < applied:
                self._done.wait()
            for after, upto, error in self._failures:
                if after < applied <= upto:
                    raise error

    def _run(self) -> None:
        while True:
            with self._wake:
                while not self._due and not self._closed:
                    self._wake.wait()
                if not self._due:
                    return
                self._due = False
            try:
                self._write()
            except Exception as exc:  # noqa: BLE001 (remembered as unwritten: the next sync redoes those files)
                log.warning("%s", exc)  # the message names the index and what happens next
