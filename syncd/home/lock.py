"""The home's single-writer lock, and what its holder's label says (a daemon, a change of an
agent's), which decides whether another process waits, hands its writes over, or is refused."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import time
from collections.abc import Iterator
from pathlib import Path

from ..errors import LockedError

__all__ = ["CHANGE_HOLDER", "DAEMON_ROLES", "HomeLock", "held_by_a_daemon"]

# What the lock file says while a daemon holds the home (the command that runs it: `syncd watch`,
# `syncd serve`, `syncd mcp`): other processes then hand their writes to it instead of waiting
# for a lock it never lets go.
DAEMON_ROLES = ("syncd watch", "syncd serve", "syncd mcp")


def held_by_a_daemon(holder: str | None) -> bool:
    """Whether a lock's text (``pid N (role)``) says a daemon holds the home."""
    return (holder or "").endswith(tuple(f"({role})" for role in DAEMON_ROLES))


# What the lock says while one change of an agent's holds it (WritePath borrows it per change):
# a holder that lets go within moments, which a writer wanting the lock for good waits out.
CHANGE_HOLDER = "syncd change"
_LOCK_POLL_S = 0.05
# is_free's shared flock lasts microseconds; a writer trying the lock then tries again this often.
_FREE_LOOK_TRIES = 4
_FREE_LOOK_GAP_S = 0.003


def _names_a_live_process(holder: str | None) -> bool:
    """Whether a lock's text (``pid N (role)``) names a process alive on this machine."""
    words = (holder or "").split()
    if len(words) < 2 or words[0] != "pid" or not (words[1].isascii() and words[1].isdigit()):
        return False
    try:
        os.kill(int(words[1]), 0)
    except (ProcessLookupError, OverflowError, ValueError):
        return False  # none such (a number too large for a pid included)
    except OSError:
        return True  # alive, someone else's
    return True


class HomeLock:
    """The single-writer lock ``<git dir>/syncd/lock`` (an flock, so a killed holder releases it
    at once). Outside ``.syncd/``: deleting the derived state must never let a second writer in.

    Beside it, ``lock.wait`` (an flock too) is a turnstile for writers that hold the lock for
    good (a daemon, ``syncd sync``): agents writing with no daemon borrow the lock for each change
    (:data:`CHANGE_HOLDER`), back to back, so a writer that only tried the lock could find it
    held every time, and `syncd watch` failed to start beside them. Such a writer holds the
    turnstile while it waits (:meth:`acquire_waiting`); a borrower passes the turnstile before
    it tries the lock (:meth:`acquire`, ``after_waiters``), so once a writer waits no new change
    begins, the ones under way finish, and the writer gets the lock."""

    def __init__(self, path: Path):
        self.path = path
        self._fd: int | None = None

    def acquire(self, what: str = "syncd", after_waiters: bool = False) -> HomeLock:
        """Take the lock now or raise LockedError naming its holder. ``after_waiters``: also
        LockedError while a writer waits for the lock in :meth:`acquire_waiting` (a change
        borrowing the lock lets that writer in first)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if after_waiters:
            with self._turnstile(fcntl.LOCK_SH) as passed:
                if not passed:
                    raise LockedError(self.path, "a writer waiting for the lock")
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            self._flock_exclusive(fd)
            os.ftruncate(fd, 0)
            os.write(fd, f"pid {os.getpid()} ({what})\n".encode())
            os.fsync(fd)
        except BaseException:
            os.close(fd)  # lets go of the flock too: a lock we could not label is not kept
            raise
        self._fd = fd
        return self

    def _flock_exclusive(self, fd: int) -> None:
        """Take the flock on ``fd`` or raise LockedError naming the holder. While no live
        process's name is on the lock, a few tries over a few milliseconds: :meth:`is_free`
        takes a shared flock for a moment, which must not make a free lock look held (a live
        holder is answered at once: a writer handing its change to a daemon asks every time)."""
        for attempt in range(_FREE_LOOK_TRIES):
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except OSError as exc:
                if exc.errno not in (errno.EWOULDBLOCK, errno.EACCES, errno.EAGAIN):
                    raise
            holder = self.holder()
            if _names_a_live_process(holder) or attempt + 1 == _FREE_LOOK_TRIES:
                raise LockedError(self.path, holder or "another process")
            time.sleep(_FREE_LOOK_GAP_S)

    def acquire_waiting(self, what: str, wait_s: float) -> HomeLock:
        """Take the lock for good: at once, or, while a change of an agent's holds it, once the
        changes under way are done (no new one begins meanwhile), waiting up to ``wait_s``.
        LockedError, naming the holder, when a holder of another kind has it (a daemon, another
        writer) or the wait runs out."""
        try:
            return self.acquire(what)
        except LockedError:
            if not self._held_for_a_change():
                raise
        deadline = time.monotonic() + wait_s
        with self._turnstile(fcntl.LOCK_EX, deadline) as waiting:
            while True:
                try:
                    return self.acquire(what)
                except LockedError:
                    if not waiting or not self._held_for_a_change() or time.monotonic() >= deadline:
                        raise
                time.sleep(_LOCK_POLL_S)

    def _held_for_a_change(self) -> bool:
        """Whether the lock's holder lets go within moments: a change of an agent's, or a holder
        that has not written its name yet or is letting go (the lock says nothing then)."""
        holder = self.holder()
        return holder is None or holder.endswith(f"({CHANGE_HOLDER})")

    @contextlib.contextmanager
    def _turnstile(self, mode: int, deadline: float | None = None) -> Iterator[bool]:
        """Hold ``lock.wait`` in ``mode`` for the block (True), trying until ``deadline`` (None:
        once); False when it could not be had in time."""
        fd = os.open(self.path.with_name("lock.wait"), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            while True:
                try:
                    fcntl.flock(fd, mode | fcntl.LOCK_NB)
                    break
                except OSError as exc:
                    if exc.errno not in (errno.EWOULDBLOCK, errno.EACCES, errno.EAGAIN):
                        raise
                    if deadline is None or time.monotonic() >= deadline:
                        yield False
                        return
                time.sleep(_LOCK_POLL_S)
            yield True
        finally:
            os.close(fd)  # lets go of the flock too

    def is_free(self) -> bool:
        """Whether nobody holds the lock at this moment (a daemon that stopped, or was killed,
        holds it no more), found without taking it."""
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return True
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            return False
        finally:
            os.close(fd)  # lets go of a shared flock taken
        return True

    def relabel(self, what: str) -> None:
        """Say what holds the lock now (a writer that became the daemon). Written over the old
        label, then cut to its length: a reader never finds it empty (which says "letting go"),
        and reads its first line (:meth:`holder`)."""
        if self._fd is None:
            return
        label = f"pid {os.getpid()} ({what})\n".encode()
        os.pwrite(self._fd, label, 0)
        os.ftruncate(self._fd, len(label))
        os.fsync(self._fd)

    def held_by_daemon(self) -> bool:
        """True when the text of the lock says a daemon holds it (meaningful while it is held)."""
        return held_by_a_daemon(self.holder())

    def holder(self) -> str | None:
        """The lock's label, ``pid N (role)`` (its first line: see :meth:`relabel`); None when
        it says nothing (not held, or being taken or let go)."""
        try:
            text = self.path.read_text(encoding="utf-8", errors="replace").strip()
        except FileNotFoundError:
            return None
        return text.splitlines()[0] if text else None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        if self._fd is None:
            return
        with contextlib.suppress(OSError):
            os.ftruncate(self._fd, 0)
        os.close(self._fd)
        self._fd = None

    def __enter__(self) -> HomeLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()
