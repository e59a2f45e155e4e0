"""Deduplication made atomic with the write it decides (see :meth:`Screening.screened`): the
verdicts of syncd.memory.dedup on facts about to be written, under a per-user screening lock."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import AsyncIterator, Sequence

from ..config import Settings
from ..formats import Fact
from .backend import MemoryBackend
from .dedup import CANDIDATES, Known, Verdict, screen

__all__ = ["Screening"]

log = logging.getLogger(__name__)

# How often a second add of the same user looks whether the first has let go of the screening lock.
_SCREEN_POLL_S = 0.002


class Screening:
    """The screening of one manager's writes: a lock per user, held from the verdicts to the end
    of the change group that writes the facts."""

    def __init__(self, engine: MemoryBackend, settings: Settings):
        self.engine = engine
        self.settings = settings
        self._locks: dict[str, threading.Lock] = {}
        self._locks_guard = threading.Lock()

    def screen(self, facts: Sequence[Fact], user: str) -> list[Verdict]:
        """What becomes of each of ``facts``: a restatement of a fact the user already has (or of
        an earlier one of the batch) is a duplicate, anything else is new (syncd.memory.dedup).
        The candidates are the user's facts nearest in meaning, down to ``Settings.dedup_cosine``."""
        if not facts:
            return []
        floor = self.settings.dedup_cosine

        def nearest(vector) -> list[Known]:
            near = self.engine.nearest_facts(vector, user_id=user, limit=CANDIDATES)
            return [
                Known(id=row["id"], content=row["text"], path=row["path"], line=int(row["line"]), cosine=float(score))
                for score, row in near
                if score >= floor
            ]

        verdicts = screen(facts, self.engine.embed([f.content for f in facts]), nearest)
        for verdict in verdicts:
            if verdict.duplicate_of is not None:
                log.debug("already remembered as %s: %r", verdict.duplicate_of.id, verdict.fact.content)
        return verdicts

    @contextlib.asynccontextmanager
    async def screened(self, facts: Sequence[Fact], user: str, dedup: bool) -> AsyncIterator[list[Verdict] | None]:
        """Deduplication made atomic with the write it decides, without holding the writer's turn.

        Wrap the change group that writes ``facts``: yields their verdicts, decided under the
        user's screening lock, which is held until the group has ended (acknowledged, its facts
        indexed, or undone), so a second add of the same user screens against the first. Users
        screen side by side; the writer's turn (one writer at a time, all users) covers only the
        write, where the nearest-facts search inside it made every add wait for every other's
        search. Lock order: screening lock, then the turn. Inside a group already (a session's
        turn), taking the screening lock would reverse that order: yields None, and the caller
        screens inside the group, whose turn makes it atomic. Embedding happens first, outside
        both (the vectors then come from the embedding cache)."""
        if not dedup:
            yield [Verdict(f) for f in facts]
            return
        if facts:
            await asyncio.to_thread(self.engine.embed, [f.content for f in facts])
        if self.engine.in_change_group():
            yield None
            return
        with self._locks_guard:
            lock = self._locks.setdefault(user, threading.Lock())
        # Polled, not awaited in a thread: a cancelled caller never leaves the lock taken (the lock
        # is a thread lock, shared with callers outside this event loop: no asyncio.Event serves).
        while not lock.acquire(blocking=False):  # noqa: ASYNC110
            await asyncio.sleep(_SCREEN_POLL_S)
        try:
            yield await asyncio.to_thread(self.screen, facts, user)
        finally:
            lock.release()
