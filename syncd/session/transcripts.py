"""TranscriptManager (seed API): append-only JSON-lines transcripts of a user's sessions.

Appends are durable (``Engine.append_file``: one ``O_APPEND`` write and an fsync, guarded by the
size last read, never a rewrite of earlier bytes) and join the caller's change group, so a turn's
transcript lines land in the same commit as its facts. One lock per session orders the appends of
this process; the size guard refuses an append that raced another process's. A torn last line (a
crash mid-append) is reported and skipped on reading, and the next append starts on a new line.

Reading needs no engine and takes no lock: :func:`read_transcript_file` is what a server thread
calls.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import ConflictError
from ..formats.transcripts import (
    Transcript,
    TranscriptEntry,
    make_entry,
    needs_newline,
    parse_transcript,
    render_entry,
)
from ..history.intents import Intent
from ..home import Home, validate_id
from .files import UserSessions, read_bytes, readable, utc_now

__all__ = ["TranscriptManager", "load_transcript", "read_transcript_file"]

log = logging.getLogger(__name__)

_APPEND_ATTEMPTS = 5
# One lock per (home, user, session) in this process: what orders its appends (see _lock).
_LOCKS: dict[tuple[str, str, str], threading.Lock] = {}
_LOCKS_GUARD = threading.Lock()


def load_transcript(home: Home, user_id: str, session_id: str) -> Transcript | None:
    """The parsed transcript of a user's session (None: there is none). Torn or foreign lines are
    in ``skipped``, never raised."""
    data = read_bytes(home, home.transcript_path(user_id, session_id))
    return None if data is None else parse_transcript(data)


def read_transcript_file(home: Home, user_id: str, session_id: str, last_n: int | None = None) -> list[dict[str, Any]]:
    """The entries of a user's session as plain dicts (``ts, role, content, actions, meta, line``),
    oldest first; the last ``last_n`` only when given. Empty when the session has no transcript.
    Strings are :func:`~syncd.session.files.readable` (a lone surrogate reads as U+FFFD). Safe from any thread or process: it only reads."""
    if last_n is not None and (not isinstance(last_n, int) or last_n < 0):
        raise ValueError("last_n must be a non-negative integer")
    transcript = load_transcript(home, user_id, session_id)
    if transcript is None:
        return []
    for skipped in transcript.skipped:
        if skipped.reason != "blank line":
            log.warning("transcript %s/%s line %d skipped: %s", user_id, session_id, skipped.line, skipped.reason)
    # Past the start there is nothing more to give: max(), or a last_n over the count would slice
    # from the end (4 of 3 entries gave 1).
    entries = transcript.entries if last_n is None else transcript.entries[max(0, len(transcript.entries) - last_n) :]
    return [readable({**e.to_dict(), "line": e.line}) for e in entries]


class TranscriptManager(UserSessions):
    """The transcripts of one user's sessions (``user_id``; each method may name another).

    ``TranscriptManager(engine)`` shares an open engine; ``TranscriptManager(home)`` opens one
    read-only and holds no lock between calls, like ``MemoryManager(home)``.
    """

    def __init__(
        self,
        home_or_engine: Any = None,
        user_id: str = "default",
        *,
        settings: Any = None,
        embedder: Any = None,
        author: str = "syncd-agent",
    ):
        super().__init__(home_or_engine, user_id, settings=settings, embedder=embedder, author=author)

    def _lock(self, user: str, session: str) -> threading.Lock:
        # Of the process, not of this manager: two managers of one home (a server making one per
        # request, an agent's threads) appending to one session raced on the size guard, and
        # after _APPEND_ATTEMPTS lost rounds an append failed with ConflictError.
        with _LOCKS_GUARD:
            return _LOCKS.setdefault((str(self.home.root), user, session), threading.Lock())

    # -- writing ---------------------------------------------------------------------------------

    def next_line(self, session_id: str, *, user_id: str | None = None) -> int:
        """The line number the next appended entry will get (a torn last line keeps its own)."""
        user, session = self._user(user_id), validate_id("session", session_id)
        data = read_bytes(self.home, self.home.transcript_path(user, session)) or b""
        return data.count(b"\n") + (1 if needs_newline(data) else 0) + 1

    def append_entries(
        self,
        session_id: str,
        entries: Sequence[TranscriptEntry],
        *,
        user_id: str | None = None,
        intent: Intent | None = None,
    ) -> list[TranscriptEntry]:
        """Append ``entries`` in one durable write (blocking); return them with their line numbers.
        Joins the change group open in this context, if any."""
        user, session = self._user(user_id), validate_id("session", session_id)
        if not entries:
            return []
        path = self.home.transcript_path(user, session)
        rel = self.home.rel(path)
        with self._lock(user, session):
            for attempt in range(_APPEND_ATTEMPTS):
                data = read_bytes(self.home, path) or b""
                prefix = b"\n" if needs_newline(data) else b""
                if prefix:
                    log.warning("%s ends in a torn line (an interrupted append); starting on a new line", rel)
                first = data.count(b"\n") + (1 if prefix else 0) + 1
                numbered = [
                    TranscriptEntry(e.ts, e.role, e.content, e.actions, e.meta, line=first + i)
                    for i, e in enumerate(entries)
                ]
                payload = prefix + b"".join(render_entry(e) for e in numbered)
                what = intent or Intent(
                    author=self.author,
                    summary=f"Transcript of session {session}: {len(entries)} line(s)",
                    user=user,
                    session=session,
                    transcript_line=first,
                )
                try:
                    self.engine.append_file(rel, payload, expected_size=len(data), intent=what)
                except ConflictError:
                    log.info("%s grew while we appended (attempt %d); re-reading", rel, attempt + 1)
                    continue
                return numbered
        raise ConflictError(path, "a stable size", "a file that kept growing")

    async def append_turn(
        self,
        session_id: str,
        role: str,
        content: str,
        actions: Sequence[Any] | None = None,
        metadata: Mapping[str, Any] | None = None,
        *,
        user_id: str | None = None,
        ts: dt.datetime | None = None,
    ) -> TranscriptEntry:
        """Append one entry (seed API); returns it with its line number. Indexed and committed
        with the change group it joins, or on its own."""
        entry = make_entry(role, content, actions, metadata, ts or utc_now())
        written = await asyncio.to_thread(self.append_entries, session_id, [entry], user_id=user_id)
        return written[0]

    # -- reading ---------------------------------------------------------------------------------

    async def read_transcript(
        self, session_id: str, last_n: int | None = None, *, user_id: str | None = None
    ) -> list[dict[str, Any]]:
        """The session's entries as dicts with their ``line`` (see :func:`read_transcript_file`)."""
        user, session = self._user(user_id), validate_id("session", session_id)
        return await asyncio.to_thread(read_transcript_file, self.home, user, session, last_n)

    def transcript_exists(self, session_id: str, *, user_id: str | None = None) -> bool:
        """Whether the session has a transcript (seed API: a plain method, as in the original; it
        only looks at one file)."""
        user, session = self._user(user_id), validate_id("session", session_id)
        return read_bytes(self.home, self.home.transcript_path(user, session)) is not None
