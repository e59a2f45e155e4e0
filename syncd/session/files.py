"""A session's three files, read without an engine (safe from any thread, any process).

``memory/users/<user>/sessions/<session>/``: ``transcript.jsonl`` (append-only), ``state.json``
(JSON v2 agent state) and ``session.json`` (lifecycle fields). Reading never takes a lock and
never follows a symbolic link; a file that is absent reads as None.

Also the one way the session layer opens an engine for its writes: given a home rather than an
engine, it opens one read-only, so it holds no lock between calls (each change borrows the home
lock, or is handed to the daemon), exactly as ``MemoryManager(home)`` does.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ParseError, SyncdError
from ..home import Home, blob_sha, read_regular, validate_id

__all__ = [
    "Clock",
    "SessionInfo",
    "UserSessions",
    "list_sessions",
    "load_session_info",
    "new_session_info",
    "open_backend",
    "read_bytes",
    "read_session_info",
    "readable",
    "render_session_info",
    "utc_now",
    "write_session_info",
]


Clock = Callable[[], dt.datetime]


def utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def read_bytes(home: Home, path: Path) -> bytes | None:
    return read_regular(home.root, home.rel(path))


_SURROGATE = re.compile("[\ud800-\udfff]")


def readable(value: Any) -> Any:
    """JSON data with every string one UTF-8 can carry, for readers (REST, MCP, the terminal): a
    lone surrogate, which a transcript keeps exactly (an agent may say one through the Python API,
    a JSON file may spell one ``\\ud800``), reads as U+FFFD instead of failing the whole answer."""
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [readable(v) for v in value]
    if isinstance(value, dict):
        return {readable(k): readable(v) for k, v in value.items()}
    return value


@dataclass(frozen=True)
class SessionInfo:
    """The lifecycle fields of one session, as ``session.json`` holds them (ISO timestamps).
    ``flushed`` are digests of step runs already flushed to memory, so a flush never repeats;
    ``flush_failures`` counts pre-compaction flushes whose extraction failed (the context then
    stays uncompressed), ``compressions`` the turns recorded with the agent's context compressed."""

    user: str
    session: str
    created_at: str
    last_active_at: str
    turn_count: int = 0
    resets: int = 0
    last_reset_at: str | None = None
    last_reset_reason: str | None = None
    chat: str | None = None
    flushed: tuple[str, ...] = ()
    flush_failures: int = 0
    compressions: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["flushed"] = list(self.flushed)
        return data

    @property
    def created(self) -> dt.datetime:
        return dt.datetime.fromisoformat(self.created_at)

    @property
    def last_active(self) -> dt.datetime:
        return dt.datetime.fromisoformat(self.last_active_at)


def render_session_info(info: SessionInfo, kept: dict[str, Any] | None = None) -> bytes:
    """``session.json``'s bytes: ``info``'s fields over ``kept`` (what the file held, so keys a
    person added that syncd does not know survive)."""
    data = {**(kept or {}), **info.to_dict()}
    return json.dumps(data, ensure_ascii=False, indent=2, sort_keys=True).encode() + b"\n"


def _stamp(value: object) -> str | None:
    """An ISO timestamp as a string with its UTC offset (one written without is read as UTC), or
    None when ``value`` is no timestamp: every time syncd compares is aware."""
    if not isinstance(value, str):
        return None
    try:
        when = dt.datetime.fromisoformat(value)
    except ValueError:
        return None
    if when.tzinfo is None:
        return when.replace(tzinfo=dt.UTC).isoformat(timespec="milliseconds")
    return value if _in_utc(when) else None


def _in_utc(when: dt.datetime) -> bool:
    """Whether an aware time is one UTC can say: year 1 at +05:00 (or 9999-12-31 at -05:00) is
    a valid ISO time but not a UTC one, and the lifecycle, which compares in UTC, raised
    OverflowError on it, taking `syncd sessions` (every session listed) down with one file."""
    try:
        when.astimezone(dt.UTC)
    except OverflowError:
        return False
    return True


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _parse_session_info(data: bytes, user: str, session: str) -> SessionInfo | None:
    """The fields of a ``session.json`` that are what they should be; a field of the wrong type
    (the file is hand-edited at times) takes its default. None without both timestamps."""
    try:
        obj = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    if not isinstance(obj, dict):
        return None
    created, active = _stamp(obj.get("created_at")), _stamp(obj.get("last_active_at"))
    if created is None or active is None:
        return None
    flushed = obj.get("flushed")
    chat, reason = obj.get("chat"), obj.get("last_reset_reason")
    extra = obj.get("extra")
    return SessionInfo(
        user,  # the path says whose it is, never the file
        session,
        created,
        active,
        turn_count=_count(obj.get("turn_count")),
        resets=_count(obj.get("resets")),
        last_reset_at=_stamp(obj.get("last_reset_at")),
        last_reset_reason=reason if isinstance(reason, str) else None,
        chat=chat if isinstance(chat, str) and _valid("chat", chat) else None,
        flushed=tuple(d for d in flushed if isinstance(d, str)) if isinstance(flushed, list) else (),
        flush_failures=_count(obj.get("flush_failures")),
        compressions=_count(obj.get("compressions")),
        extra=extra if isinstance(extra, dict) else {},
    )


def read_session_info(home: Home, user_id: str, session_id: str) -> SessionInfo | None:
    """The lifecycle fields of a session, or None when it has none (yet) or they are unreadable.
    Lenient, for readers: a writer uses :func:`load_session_info`, which refuses a damaged file."""
    data = read_bytes(home, home.session_meta_path(user_id, session_id))
    return None if data is None else _parse_session_info(data, user_id, session_id)


_COUNTS = ("turn_count", "resets", "flush_failures", "compressions")


def _damage(data: bytes) -> tuple[str, int | None] | None:
    """Why ``session.json`` bytes are not a file syncd may rewrite without losing a byte of what a
    person put there (and the line, for a JSON syntax error), or None when they are."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return "not UTF-8 text", None
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        return f"not valid JSON ({exc.msg} at column {exc.colno})", exc.lineno
    except ValueError as exc:  # nested deeper than the parser goes
        return f"not readable JSON ({exc})", None
    if not isinstance(obj, dict):
        return "not a JSON object", None
    for name in ("created_at", "last_active_at"):
        if _stamp(obj.get(name)) is None:
            return f"{name} is {'missing' if name not in obj else 'not an ISO timestamp'}", None
    for name in _COUNTS:
        if name in obj and _count(obj[name]) != obj[name]:
            return f"{name} is not a whole number, 0 or more", None
    if obj.get("last_reset_at") is not None and _stamp(obj["last_reset_at"]) is None:
        return "last_reset_at is not an ISO timestamp", None
    if obj.get("last_reset_reason") is not None and not isinstance(obj["last_reset_reason"], str):
        return "last_reset_reason is not a string", None
    chat = obj.get("chat")
    if chat is not None and not (isinstance(chat, str) and _valid("chat", chat)):
        return "chat is not a chat id", None
    flushed = obj.get("flushed", [])
    if not isinstance(flushed, list) or not all(isinstance(d, str) for d in flushed):
        return "flushed is not a list of strings", None
    if not isinstance(obj.get("extra", {}), dict):
        return "extra is not a JSON object", None
    return None


def _damaged_error(rel: str, why: str, line: int | None) -> ParseError:
    return ParseError(
        f"{why}; syncd will not write over it. Correct it by hand, or move it aside to start the "
        f"session's fields afresh (`git show HEAD:{rel}` prints the last committed version)",
        rel,
        line,
    )


def load_session_info(home: Home, user_id: str, session_id: str) -> SessionInfo | None:
    """The lifecycle fields of a session for a writer about to rewrite them: None when there is
    no ``session.json`` yet; ParseError (naming the file, why, and how to recover) when there is
    one a person broke (not JSON, a field of the wrong type), so it is kept as it is, never
    replaced by fresh fields."""
    path = home.session_meta_path(user_id, session_id)
    data = read_bytes(home, path)
    if data is None:
        return None
    damage = _damage(data)
    if damage is not None:
        raise _damaged_error(home.rel(path), *damage)
    return _parse_session_info(data, user_id, session_id)


def _valid(kind: str, name: str) -> bool:
    try:
        validate_id(kind, name)
    except ValueError:
        return False
    return True


def list_sessions(
    home: Home, user_id: str | None = None, unreadable: list[str] | None = None, damaged: list[str] | None = None
) -> list[SessionInfo]:
    """The sessions of one user (or of every user), most recently active first. A session with a
    transcript but no (readable) ``session.json`` is listed with what its transcript says. A
    session whose files cannot be read at all (a folder or a link where a file belongs) is left
    out, and said in ``unreadable`` ("user/session: why"): one bad session never hides the rest.
    A ``session.json`` a person broke (which a turn refuses to write over) is said in ``damaged``
    (the file, why, and how to recover), its session listed with what can be read."""
    users_dir = home.memory_dir / "users"
    if user_id is not None:
        users = [validate_id("user", user_id)]
    else:
        try:
            users = sorted(e.name for e in os.scandir(users_dir) if e.is_dir(follow_symlinks=False))
        except OSError:
            users = []
    found: list[SessionInfo] = []
    for user in users:
        if not _valid("user", user):
            continue
        try:
            names = sorted(e.name for e in os.scandir(home.sessions_dir_of(user)) if e.is_dir(follow_symlinks=False))
        except OSError:
            continue
        for name in names:
            if not _valid("session", name):
                continue
            try:
                meta = home.session_meta_path(user, name)
                data = read_bytes(home, meta)
                problem = None if data is None else _damage(data)
                if problem is not None and damaged is not None:
                    damaged.append(str(_damaged_error(home.rel(meta), *problem)))
                info = (None if data is None else _parse_session_info(data, user, name)) or _from_transcript(
                    home, user, name
                )
            except (OSError, SyncdError) as exc:
                if unreadable is not None:
                    why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
                    unreadable.append(f"{user}/{name}: {why}")
                continue
            if info is not None:
                found.append(info)
    return sorted(found, key=lambda i: (i.last_active, i.user, i.session), reverse=True)


def _from_transcript(home: Home, user: str, session: str) -> SessionInfo | None:
    from ..formats.transcripts import parse_transcript

    data = read_bytes(home, home.transcript_path(user, session))
    if data is None:
        return None
    entries = parse_transcript(data).entries
    stamps = [e.ts for e in entries if _is_time(e.ts)]
    if not stamps:
        return None
    turns = sum(1 for e in entries if e.role == "user")
    return SessionInfo(user, session, stamps[0], stamps[-1], turn_count=turns)


def _is_time(value: str) -> bool:
    try:
        when = dt.datetime.fromisoformat(value)
    except ValueError:
        return False
    return when.tzinfo is not None and _in_utc(when)


def open_backend(home_or_engine: Any, settings: Any = None, embedder: Any = None) -> tuple[Any, bool]:
    """``(engine, owned)``: the engine given, or a read-only one opened on the home given."""
    if home_or_engine is None or isinstance(home_or_engine, (Home, Path, str)):
        from ..engine.facade import open_engine

        root = home_or_engine.root if isinstance(home_or_engine, Home) else home_or_engine
        return open_engine(root, read_only=True, settings=settings, embedder=embedder), True
    return home_or_engine, False


class UserSessions:
    """What TranscriptManager and StateMirror share: an engine (shared, or opened read-only on a
    home and closed with this object), the user acted for by default, and the commit author."""

    def __init__(
        self,
        home_or_engine: Any = None,
        user_id: str = "default",
        *,
        settings: Any = None,
        embedder: Any = None,
        author: str = "syncd-agent",
    ):
        self.engine, self._owns_engine = open_backend(home_or_engine, settings, embedder)
        self.home: Home = self.engine.home
        self.user_id = validate_id("user", user_id)
        self.author = author

    def close(self) -> None:
        if self._owns_engine:
            self.engine.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _user(self, user_id: str | None) -> str:
        return self.user_id if user_id is None else validate_id("user", user_id)


def write_session_info(engine: Any, info: SessionInfo, intent: Any = None) -> None:
    """Write ``session.json`` through the engine (joins the change group open in this context).

    The file there is read again first: keys a person added that syncd does not know are kept,
    and a file they broke meanwhile is refused (ParseError), never written over. The engine's
    compare-and-swap against that read keeps an edit landing between the two from being lost."""
    home: Home = engine.home
    path = home.session_meta_path(info.user, info.session)
    rel = home.rel(path)
    current = read_bytes(home, path)
    if current is not None:
        damage = _damage(current)
        if damage is not None:
            raise _damaged_error(rel, *damage)
    rendered = render_session_info(info, None if current is None else json.loads(current))
    engine.write_file(rel, rendered, None if current is None else blob_sha(current), intent)


def new_session_info(user_id: str, session_id: str, now: dt.datetime, chat_id: str | None = None) -> SessionInfo:
    stamp = now.isoformat(timespec="milliseconds")
    return SessionInfo(user_id, session_id, stamp, stamp, chat=chat_id)
