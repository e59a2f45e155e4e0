"""StateMirror (seed API): an inspectable JSON v2 snapshot of each session's agent state.

``state.json`` sits beside the session's transcript and is rewritten whole (atomic, through the
engine, so it is indexed as tracked, and committed with the turn it belongs to). A legacy pickle
handed to the mirror is never unpickled: a placeholder naming its size and digest is written
instead, unless the caller opts in, and then only through the safe unpickler.
"""

from __future__ import annotations

import hashlib
import json
import logging
from typing import Any

from ..errors import UnsafePickleError
from ..formats.agent_state import AgentState, legacy_placeholder, parse_state, render_state, sniff_format
from ..history.intents import Intent
from ..home import Home, validate_id
from .files import UserSessions, read_bytes, readable, utc_now
from .serializer import deserialize_agent

__all__ = ["StateMirror", "read_state_file"]

log = logging.getLogger(__name__)


def read_state_file(home: Home, user_id: str, session_id: str) -> dict[str, Any] | None:
    """The session's snapshot as JSON data (None: there is none, or it is not JSON v2), its strings
    :func:`~syncd.session.files.readable`. Safe from any thread or process: it only reads."""
    data = read_bytes(home, home.state_path(user_id, session_id))
    if data is None:
        return None
    try:
        return readable(parse_state(data).to_dict())
    except Exception as exc:  # noqa: BLE001 - a hand-broken file reads as no state, loudly
        log.warning("state of %s/%s is not JSON v2: %s", user_id, session_id, exc)
        return None


class StateMirror(UserSessions):
    """Mirror agent state into ``memory/users/<user>/sessions/<session>/state.json``."""

    def to_state(self, state: Any, *, allow_pickle: bool = False) -> AgentState:
        """What ``state`` (JSON v2 bytes, a pickle, an AgentState, or a dict of one) becomes."""
        if isinstance(state, AgentState):
            return state
        if isinstance(state, dict):
            return parse_state(json.dumps(state).encode())
        if not isinstance(state, (bytes, bytearray)):
            raise TypeError(f"state must be bytes, a dict or an AgentState, not {type(state).__name__}")
        data = bytes(state)
        fmt = sniff_format(data)
        if fmt == "json":
            return parse_state(data)
        if allow_pickle and fmt == "pickle":
            return deserialize_agent(data, allow_pickle=True)
        log.warning(
            "agent state of %d bytes is a legacy %s; writing a placeholder, never unpickling it", len(data), fmt
        )
        return legacy_placeholder(fmt, len(data), hashlib.sha256(data).hexdigest(), utc_now())

    def write_state(
        self,
        session_id: str,
        state: Any,
        *,
        user_id: str | None = None,
        allow_pickle: bool = False,
        intent: Intent | None = None,
    ) -> AgentState:
        """Blocking form of :meth:`mirror_state` (joins the change group open in this context)."""
        user, session = self._user(user_id), validate_id("session", session_id)
        snapshot = self.to_state(state, allow_pickle=allow_pickle)
        rel = self.home.rel(self.home.state_path(user, session))
        what = intent or Intent(
            author=self.author, summary=f"Agent state of session {session}", user=user, session=session
        )
        self.engine.write_file(rel, render_state(snapshot), intent=what)
        return snapshot

    def mirror_state(
        self, session_id: str, state_bytes: Any, *, user_id: str | None = None, allow_pickle: bool = False
    ) -> AgentState:
        """Write the session's snapshot (seed API: a plain, blocking method, as in the original;
        it joins the change group open in this context). A pickle becomes a placeholder unless
        ``allow_pickle`` (then the safe unpickler reads it, or UnsafePickleError, nothing written).

        Safe from an event loop's thread (it blocks the loop for one file write and, outside a
        group, its commit); async code that must not block calls
        ``await asyncio.to_thread(mirror.mirror_state, ...)``, which carries the context along."""
        try:
            return self.write_state(session_id, state_bytes, user_id=user_id, allow_pickle=allow_pickle)
        except UnsafePickleError as exc:
            log.warning("refused to unpickle the state of session %s: %s", session_id, exc)
            raise

    def read_state(self, session_id: str, *, user_id: str | None = None) -> dict[str, Any] | None:
        """The session's snapshot as JSON data, or None (seed API: a plain method; it only reads
        one file, see :func:`read_state_file`)."""
        user, session = self._user(user_id), validate_id("session", session_id)
        return read_state_file(self.home, user, session)
