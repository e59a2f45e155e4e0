"""SessionPolicy / SessionLifecycle (seed API): when a session starts afresh.

A session resets when it has had ``max_turns`` turns, when it has been idle longer than
``idle_timeout_minutes``, or once a day at ``daily_reset_hour`` (UTC; 0 disables it, as in the
seed): exactly one reset for each time the reset hour passes between two turns, however long the
gap. Every datetime must be timezone-aware, so a DST change or another UTC offset never moves a
reset. The fields it reads (created_at, last_active_at, turn_count, resets) live in the session's
``session.json`` in the home, not in a hidden database.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from dataclasses import dataclass

from ..errors import SessionError
from ..home import ID_MAX_LEN, validate_id
from .files import Clock, utc_now

__all__ = ["SessionPolicy", "SessionLifecycle", "get_session_key", "last_reset_boundary"]

_DAY = dt.timedelta(days=1)
_MAX_MINUTES = 10**12  # ~1.9 million years: within what timedelta can hold


@dataclass(frozen=True)
class SessionPolicy:
    """0 disables each rule."""

    daily_reset_hour: int = 0
    idle_timeout_minutes: int = 0
    max_turns: int = 0

    def __post_init__(self) -> None:
        if not _whole(self.daily_reset_hour) or not 0 <= self.daily_reset_hour <= 23:
            raise SessionError("daily_reset_hour", "an hour of the day in UTC, 1-23 (0 disables it)")
        # timedelta takes at most 999,999,999 days: a larger timeout failed every turn's check.
        if not _whole(self.idle_timeout_minutes) or not 0 <= self.idle_timeout_minutes <= _MAX_MINUTES:
            raise SessionError("idle_timeout_minutes", f"a whole number of minutes, 0 to {_MAX_MINUTES}")
        if not _whole(self.max_turns) or self.max_turns < 0:
            raise SessionError("max_turns", "a whole number of turns, 0 or more")

    @classmethod
    def from_settings(cls, settings) -> SessionPolicy:
        return cls(settings.session_daily_reset_hour, settings.session_idle_timeout_minutes, settings.session_max_turns)


def _whole(value: object) -> bool:
    """An int, and not a bool (``True`` is an int to Python, and no hour or count)."""
    return isinstance(value, int) and not isinstance(value, bool)


def _aware(name: str, value: dt.datetime) -> dt.datetime:
    if not isinstance(value, dt.datetime) or value.tzinfo is None or value.utcoffset() is None:
        raise SessionError(name, "must be a timezone-aware datetime")
    return value.astimezone(dt.UTC)


def last_reset_boundary(now: dt.datetime, hour: int) -> dt.datetime:
    """The latest instant at or before ``now`` when the clock in UTC reads ``hour``:00."""
    now = _aware("now", now)
    boundary = now.replace(hour=hour, minute=0, second=0, microsecond=0)
    return boundary if boundary <= now else boundary - _DAY


def get_session_key(platform: str, sender_id: str, thread_id: str | None = None) -> str:
    """A session id for one conversation place: readable, valid, and distinct for distinct
    ``(platform, sender, thread)`` (a short digest of the exact triple settles look-alikes such as
    ``("a_b", "c")`` and ``("a", "b_c")``)."""
    parts = [validate_id("platform", platform), validate_id("sender", sender_id)]
    if thread_id is not None:
        parts.append(validate_id("thread", thread_id))
    digest = hashlib.blake2b("\0".join(parts).encode(), digest_size=4).hexdigest()
    readable = "_".join(parts)[: ID_MAX_LEN - len(digest) - 1].replace("..", "._")
    return validate_id("session", f"{readable}-{digest}")


class SessionLifecycle:
    """Decides resets under a policy; ``clock`` gives "now" (aware)."""

    def __init__(self, policy: SessionPolicy | None = None, clock: Clock = utc_now):
        self.policy = policy or SessionPolicy()
        self.clock = clock

    def now(self) -> dt.datetime:
        return _aware("clock()", self.clock())

    def should_reset(
        self,
        last_active_at: dt.datetime,
        turn_count: int,
        created_at: dt.datetime,
        now: dt.datetime | None = None,
    ) -> tuple[bool, str]:
        """``(True, reason)`` when the session must start afresh before its next turn; reason is
        ``max_turns``, ``idle_timeout`` or ``daily_reset`` (``(False, "")`` otherwise)."""
        last = _aware("last_active_at", last_active_at)
        created = _aware("created_at", created_at)
        now = _aware("now", now) if now is not None else self.now()
        if not _whole(turn_count) or turn_count < 0:
            raise SessionError("turn_count", "a whole number of turns, 0 or more")
        policy = self.policy
        if policy.max_turns and turn_count >= policy.max_turns:
            return True, "max_turns"
        if policy.idle_timeout_minutes and now - last > dt.timedelta(minutes=policy.idle_timeout_minutes):
            return True, "idle_timeout"
        if policy.daily_reset_hour and max(last, created) < last_reset_boundary(now, policy.daily_reset_hour):
            return True, "daily_reset"
        return False, ""

    get_session_key = staticmethod(get_session_key)
