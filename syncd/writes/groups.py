"""Change groups: several file writes that belong together (one agent turn) become one commit.

``with engine.changes(intent):`` (or ``async with``) opens a group; every write inside it, in this
thread or in threads the work is handed to (the group travels in a context variable, which
``asyncio.to_thread`` copies), joins it, and a nested ``changes()`` joins the outer group. Files
are written as they come; the group is indexed and committed once, when the outermost block ends
without an exception. When it ends with one, its files are put back as they were and nothing is
committed (see journal.py).
"""

from __future__ import annotations

import concurrent.futures
import contextvars
import threading
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ..history.intents import Intent
    from .journal import GroupJournal

__all__ = ["ChangeGroup", "GroupOwner", "current_group"]

_CURRENT: contextvars.ContextVar[ChangeGroup | None] = contextvars.ContextVar("syncd_change_group", default=None)


def current_group(owner: object) -> ChangeGroup | None:
    """The group of ``owner`` open in this context, if any."""
    group = _CURRENT.get()
    return group if group is not None and group.owner is owner else None


class GroupOwner(Protocol):
    """What runs a group (the write path, writes/scheduler.py). ``begin`` takes what the group
    needs (the write turn, the home lock, a journal) and may block; ``try_begin`` does the same
    only when that cannot block, else returns False; ``end`` indexes and commits (or, when
    ``failed``, undoes) and lets go; ``release`` only lets go (a group cancelled while beginning)."""

    def begin(self, group: ChangeGroup) -> None: ...

    def try_begin(self, group: ChangeGroup) -> bool: ...

    def end(self, group: ChangeGroup, failed: bool) -> None: ...

    def release(self, group: ChangeGroup) -> None: ...


def _begin_aside(owner: GroupOwner, group: ChangeGroup) -> concurrent.futures.Future[None]:
    """``owner.begin(group)`` (waiting for the write turn) on a thread of its own, in the caller's
    context. Not on asyncio's default executor: there, enough groups waiting at once fill every
    one of its threads (min(32, cores + 4): 6 on 2 cores) while the group holding the turn needs
    one to write and to end, so no group ever ends (8 concurrent adds through one MemoryManager
    hung for good). A thread waiting here costs only its stack, and there are as many as writers."""
    done: concurrent.futures.Future[None] = concurrent.futures.Future()
    context = contextvars.copy_context()

    def run() -> None:
        try:
            context.run(owner.begin, group)
        except BaseException as exc:  # noqa: BLE001 - handed to the awaiting caller
            done.set_exception(exc)
        else:
            done.set_result(None)

    threading.Thread(target=run, name="syncd-write-turn", daemon=True).start()
    return done


class ChangeGroup:
    """One intent's writes; their state while the group is open. Writes from a thread that does
    not carry the context (a bare ``threading.Thread``) are not part of the group: they wait for
    it to end. The owner's ``end`` may block, so the async form runs it in a worker thread."""

    def __init__(self, owner: GroupOwner, intent: Intent | None):
        self.owner = owner
        self.intent = intent
        self.written: dict[str, str] = {}  # path -> sha of our last write
        # path -> (its bytes before our first write, None: no file; our last write's bytes): what
        # the group changed, asked when a commit took the file in without us (rewind.head_holds).
        self.changed: dict[str, tuple[bytes | None, bytes]] = {}
        self.mode: str | None = None  # "own", "borrowed" (the home lock, for this group) or "handoff"
        # Handed to a daemon: HEAD's commit before the first write (what the commits since are
        # looked at from when HEAD's version lacks a change: handoff.Handed).
        self.handed_from: str | None = None
        self.lock: Any = None  # the home lock, when borrowed
        self.journal: GroupJournal | None = None
        self._outer: ChangeGroup | None = None
        self._token: contextvars.Token[ChangeGroup | None] | None = None

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
        self.owner.begin(self)
        self._token = _CURRENT.set(self)
        return self

    def __exit__(self, kind: object, *exc: object) -> None:
        if self._outer is not None:
            return
        assert self._token is not None  # set by __enter__ for a group that is not nested
        _CURRENT.reset(self._token)
        self.owner.end(self, failed=kind is not None)

    async def __aenter__(self) -> ChangeGroup:
        import asyncio  # here, not at the top: a loop that awaits this has it loaded; a sync never does

        self._outer = current_group(self.owner)
        if self._outer is not None:
            self._outer.adopt(self.intent)
            return self._outer
        if self.owner.try_begin(self):  # the common case, without a thread hop
            self._token = _CURRENT.set(self)
            return self
        waiting = _begin_aside(self.owner, self)
        try:
            await asyncio.shield(asyncio.wrap_future(waiting))
        except asyncio.CancelledError:
            # The thread still takes what it waits for (the write turn, the home lock): give it
            # back as soon as it has, or every later change would wait for it forever. The
            # callback runs in that thread (or here, if it is done), never needing this loop,
            # which may be closed by then.
            def give_back(f: concurrent.futures.Future[None]) -> None:
                if f.exception() is None:
                    self.owner.release(self)

            waiting.add_done_callback(give_back)
            raise
        self._token = _CURRENT.set(self)
        return self

    async def __aexit__(self, kind: object, *exc: object) -> None:
        if self._outer is not None:
            return
        assert self._token is not None  # set by __aenter__ for a group that is not nested
        _CURRENT.reset(self._token)
        import asyncio

        # A cancelled turn (the client went away) is a failed one: its files go back.
        await asyncio.to_thread(self.owner.end, self, kind is not None)
