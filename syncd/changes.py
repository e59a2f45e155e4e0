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
from dataclasses import dataclass
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


@dataclass(eq=False)
class _Batch:
    """Groups' paths taken from the queue together: tickets ``first``..``last``."""

    paths: set[str]
    first: int
    last: int
    indexed: bool = False
    failure: BaseException | None = None  # of its indexing
    receipt: object = None  # what indexing returned, for ``settle``


class CommitQueue:
    """Change groups waiting for their files to be indexed and committed, done together (group
    commit), in two stages that overlap.

    A group that has written its files queues their paths and waits. A waiter that finds the
    index stage free takes everything queued so far and indexes it (``index(paths)``: one
    apply); a waiter that finds the commit stage free takes every batch indexed so far and
    commits them together (``commit(paths)``: one commit per intent, made as one chain, so
    the git processes of a chain are paid once for all of them). So the next batch is indexed
    while the last one commits, batches indexed meanwhile share the next commit, and each group
    still returns only once its own commit is made. Batches are committed in the order they
    were indexed; a batch whose indexing failed is committed all the same, then the failure is
    raised in each of its groups, as a failed commit's is in each group it held. What indexing
    returned is handed to ``settle`` once the batch is committed: what it raises is that batch's
    failure (the index's own tables are written behind, beside the commit: see Index.apply).

    A path queued, being indexed or waiting for its commit is not written again until its
    commit is made (``wait_for_path``): two turns' versions of one file must not fold into one
    commit."""

    def __init__(
        self,
        index: Callable[[set[str]], object],
        commit: Callable[[set[str]], object],
        settle: Callable[[object], object] = lambda receipt: None,
    ):
        self._index, self._commit, self._settle = index, commit, settle
        self._cond = threading.Condition()
        self._queued: set[str] = set()
        self._batches: list[_Batch] = []  # taken from the queue, not committed yet, in order
        self._indexing = False
        self._committing = False
        self._issued = 0  # tickets handed out
        self._done = 0  # every ticket up to this one has been committed
        self._failures: dict[tuple[int, int], list] = {}  # (first, last ticket) -> [error, readers left]

    def add(self, paths: Iterable[str]) -> int:
        """Queue ``paths``; the ticket to :meth:`wait` on. Every ticket must be waited on."""
        with self._cond:
            self._queued |= set(paths)
            self._issued += 1
            return self._issued

    def wait(self, ticket: int) -> None:
        """Return once ``ticket``'s paths are committed, doing a stage's work whenever one is
        free and has work. If their indexing or their commit failed, that error is raised here,
        in every group of the batch."""
        with self._cond:
            while self._done < ticket:
                if not self._indexing and self._issued > self._last_taken():
                    self._index_next()
                elif not self._committing and self._batches and self._batches[0].indexed:
                    self._commit_indexed()
                else:
                    self._cond.wait()
            for (first, last), entry in list(self._failures.items()):
                if first <= ticket <= last:
                    entry[1] -= 1  # each ticket is waited for once: the last reader drops it
                    if not entry[1]:
                        del self._failures[(first, last)]
                    raise entry[0]

    def _last_taken(self) -> int:
        """The last ticket taken from the queue."""
        return self._batches[-1].last if self._batches else self._done

    def _index_next(self) -> None:
        """Index everything queued (called and returning with ``_cond`` held)."""
        batch = _Batch(self._queued, self._last_taken() + 1, self._issued)
        self._queued = set()
        self._batches.append(batch)
        self._indexing = True
        self._cond.release()
        try:
            batch.receipt = self._index(batch.paths)
        except BaseException as exc:  # noqa: BLE001 - raised in the batch's groups once committed
            batch.failure = exc
        finally:
            self._cond.acquire()
            batch.indexed = True
            self._indexing = False
            self._cond.notify_all()

    def _commit_indexed(self) -> None:
        """Commit every batch indexed so far, oldest first, as one (called with ``_cond`` held)."""
        ready: list[_Batch] = []
        while len(ready) < len(self._batches) and self._batches[len(ready)].indexed:
            ready.append(self._batches[len(ready)])
        self._committing = True
        self._cond.release()
        failures = [batch.failure for batch in ready]
        try:
            self._commit(set().union(*(batch.paths for batch in ready)))
            for n, batch in enumerate(ready):
                if failures[n] is None:
                    try:
                        self._settle(batch.receipt)
                    except BaseException as exc:  # noqa: BLE001 - raised in this batch's groups
                        failures[n] = exc
        except BaseException as exc:  # noqa: BLE001 - handed to every group of these batches
            failures = [exc] * len(ready)
        finally:
            self._cond.acquire()
            del self._batches[: len(ready)]
            self._committing = False
            for batch, error in zip(ready, failures, strict=True):
                if error is not None:
                    self._failures[(batch.first, batch.last)] = [error, batch.last - batch.first + 1]
            self._done = ready[-1].last
            self._cond.notify_all()

    def paths(self) -> set[str]:
        """Paths queued or on their way to a commit: their groups' batches commit them."""
        with self._cond:
            return self._queued.union(*(batch.paths for batch in self._batches))

    def wait_for_path(self, rel: str) -> None:
        """Block while ``rel`` is queued or on its way to a commit for another group."""
        with self._cond:
            while rel in self._queued or any(rel in batch.paths for batch in self._batches):
                self._cond.wait()
