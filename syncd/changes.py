"""Change groups: several file writes that belong together (one agent turn) become one commit.

``with engine.changes(intent):`` (or ``async with``) opens a group; every write inside it, in this
thread or in threads the work is handed to (the group travels in a context variable, which
``asyncio.to_thread`` copies), joins it, and a nested ``changes()`` joins the outer group. Files
are written as they come; the group is indexed and committed once, when the outermost block ends.

When a daemon holds the home, it is the one that commits. A group then leaves a *hold* under
``.syncd/holds/``: a file naming the paths it has written, flocked by the group's process. The
daemon commits none of those paths while the hold is alive, so a slow turn (an LLM call between
two writes) still lands as one commit. A process that dies releases its flock, and with it the hold.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import fcntl
import json
import logging
import os
import secrets
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .home import Home

if TYPE_CHECKING:
    from .history.intents import Intent

__all__ = ["ChangeGroup", "CommitQueue", "Hold", "held_paths", "current_group"]

log = logging.getLogger(__name__)

_CURRENT: contextvars.ContextVar[ChangeGroup | None] = contextvars.ContextVar("syncd_change_group", default=None)


def current_group(owner: object) -> ChangeGroup | None:
    """The group of ``owner`` (an engine) open in this context, if any."""
    group = _CURRENT.get()
    return group if group is not None and group.owner is owner else None


class ChangeGroup:
    """One intent's writes. ``owner`` provides ``_begin_group(group)`` (take what the group needs:
    the engine's write turn, the home lock or a hold; ``_try_begin_group`` only when that cannot
    block), ``_end_group(group)`` (index, commit, let
    go) and ``_release_group(group)`` (only let go); they may block, so the async form runs them
    in a worker thread. Writes from a thread that does not carry the context (a bare
    ``threading.Thread``) are not part of the group: they wait for it to end."""

    def __init__(self, owner: Any, intent: Intent | None):
        self.owner = owner
        self.intent = intent
        self.written: dict[str, str] = {}  # path -> sha of our last write
        self.mode: str | None = None  # "own", "borrowed" (the home lock, for this group) or "handoff"
        self.lock: Any = None
        self.hold: Hold | None = None
        self._outer: ChangeGroup | None = None
        self._token: contextvars.Token | None = None

    def adopt(self, intent: Intent | None) -> Intent | None:
        """The intent a write in this group records: the group's, else the first one given."""
        if self.intent is None:
            self.intent = intent
        return self.intent

    def __enter__(self) -> ChangeGroup:
        self._outer = current_group(self.owner)
        if self._outer is not None:
            self._outer.adopt(self.intent)
            return self._outer
        self.owner._begin_group(self)
        self._token = _CURRENT.set(self)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._outer is not None:
            return
        _CURRENT.reset(self._token)
        self.owner._end_group(self)

    async def __aenter__(self) -> ChangeGroup:
        self._outer = current_group(self.owner)
        if self._outer is not None:
            self._outer.adopt(self.intent)
            return self._outer
        if self.owner._try_begin_group(self):  # the common case, without a thread hop
            self._token = _CURRENT.set(self)
            return self
        begun = asyncio.ensure_future(asyncio.to_thread(self.owner._begin_group, self))
        try:
            await asyncio.shield(begun)
        except asyncio.CancelledError:
            # The thread still takes what it waits for (the engine's turn, the home lock): give
            # it back as soon as it has, or every later change would wait for it forever.
            begun.add_done_callback(lambda f: f.cancelled() or f.exception() or self.owner._release_group(self))
            raise
        self._token = _CURRENT.set(self)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._outer is not None:
            return
        _CURRENT.reset(self._token)
        await asyncio.to_thread(self.owner._end_group, self)


def _holds_dir(home: Home) -> Path:
    return home.state_dir / "holds"


class Hold:
    """The paths an open group has written, for a committer in another process to leave alone."""

    def __init__(self, path: Path, fd: int):
        self.path = path
        self._fd: int | None = fd

    @classmethod
    def open(cls, home: Home) -> Hold:
        folder = _holds_dir(home)
        folder.mkdir(parents=True, exist_ok=True)
        name = f"{os.getpid()}-{secrets.token_hex(6)}"
        # Locked before it gets its visible name: an unlocked hold reads as a dead process's.
        tmp = folder / f".{name}.tmp"
        fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            path = folder / name
            os.replace(tmp, path)
        except BaseException:
            os.close(fd)
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
            raise
        return cls(path, fd)

    def add(self, rel: str) -> None:
        """Claim ``rel`` before it is written, so the daemon never sees it unclaimed."""
        if self._fd is not None:
            os.write(self._fd, (json.dumps(rel) + "\n").encode())

    def release(self) -> None:
        if self._fd is None:
            return
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        os.close(self._fd)
        self._fd = None


def held_paths(home: Home) -> set[str]:
    """Paths claimed by change groups that are still open (in any live process)."""
    folder = _holds_dir(home)
    try:
        names = [p for p in folder.iterdir() if not p.name.startswith(".")]
    except FileNotFoundError:
        return set()
    held: set[str] = set()
    for path in names:
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            continue
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                data = path.read_bytes()
            else:
                log.info("dropping the hold %s left by a process that ended", path.name)
                path.unlink(missing_ok=True)
                continue
        finally:
            os.close(fd)
        for line in data.decode("utf-8", errors="replace").splitlines(keepends=True):
            if line.endswith("\n"):  # a line being written right now is not complete yet
                with contextlib.suppress(ValueError):
                    held.add(json.loads(line))
    return held


class CommitQueue:
    """Change groups waiting for their files to be indexed and committed, done together (group
    commit).

    A group that has written its files queues their paths and waits; the first waiter that finds
    no pass running takes everything queued so far and runs one pass on it (``commit(paths)``:
    one index apply, then one commit per intent, made as one chain), while the next groups go on
    writing. So writers that arrive together share one pass instead of paying for a commit each,
    and each group still returns only once its own commit is made.

    A path queued or being committed is not written again until its pass ends (``wait_for_path``):
    two turns' versions of one file must not fold into one commit."""

    def __init__(self, commit: Callable[[set[str]], object]):
        self._commit = commit
        self._cond = threading.Condition()
        self._queued: set[str] = set()
        self._committing: set[str] = set()
        self._issued = 0  # tickets handed out
        self._done = 0  # every ticket up to this one has had its pass
        self._leading = False
        self._failures: dict[tuple[int, int], list] = {}  # (first, last ticket) -> [error, readers left]

    def add(self, paths: Iterable[str]) -> int:
        """Queue ``paths``; the ticket to :meth:`wait` on. Every ticket must be waited on."""
        with self._cond:
            self._queued |= set(paths)
            self._issued += 1
            return self._issued

    def wait(self, ticket: int) -> None:
        """Return once the pass that holds ``ticket``'s paths has ended, leading it if nobody is.
        If that pass failed, its error is raised here, in every group it held."""
        with self._cond:
            while self._done < ticket:
                if self._leading:
                    self._cond.wait()
                    continue
                self._leading = True
                batch, first, last = self._queued, self._done + 1, self._issued
                self._queued, self._committing = set(), batch
                self._cond.release()
                failure: BaseException | None = None
                try:
                    self._commit(batch)
                except BaseException as exc:  # noqa: BLE001 - handed to every group of the pass
                    failure = exc
                finally:
                    self._cond.acquire()
                    self._committing = set()
                    self._done = last
                    self._leading = False
                    if failure is not None:
                        self._failures[(first, last)] = [failure, last - first + 1]
                    self._cond.notify_all()
            for (first, last), entry in list(self._failures.items()):
                if first <= ticket <= last:
                    entry[1] -= 1  # each ticket is waited for once: the last reader drops it
                    if not entry[1]:
                        del self._failures[(first, last)]
                    raise entry[0]

    def paths(self) -> set[str]:
        """Paths queued or being committed: their groups' passes commit them."""
        with self._cond:
            return self._queued | self._committing

    def wait_for_path(self, rel: str) -> None:
        """Block while ``rel`` is queued or being committed by another group."""
        with self._cond:
            while rel in self._queued or rel in self._committing:
                self._cond.wait()
