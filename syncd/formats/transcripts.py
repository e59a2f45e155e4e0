"""Session transcripts: one JSON object a line, append-only (pure parse/render/chunk, no I/O).

A line is ``{"ts", "role", "content", "actions", "meta"}``. Line numbers are 1-based and stable,
because a transcript is only ever appended to: a fact's ``src:<session>#<line>`` names the exact
line it came from. A crash mid-append can leave one torn line at the end (no final newline, not a
whole JSON object); parsing reports it and skips it, and the next append starts on a fresh line, so
the torn bytes keep their own line number and nothing before them is ever touched. A line that is
not an entry (a person's stray edit, a blank line) is reported and skipped the same way.

Chunks for search are windows of model tokens over the entries in order, cut at fixed token
positions (0, size - overlap, ...) so that appending changes only the last window (and adds new
ones): every earlier chunk keeps its text and its id, and its embedding comes from the cache.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import InvalidInputError

__all__ = [
    "TranscriptEntry",
    "SkippedLine",
    "Transcript",
    "TranscriptChunk",
    "TokenSpans",
    "make_entry",
    "render_entry",
    "parse_transcript",
    "entry_text",
    "chunk_transcript",
    "needs_newline",
]

_MAX_ROLE_CHARS = 64
# Control characters (category Cc), tab and newline included: an entry reads as "role: content"
# (search, `syncd sessions show`), so a newline in a role would make one entry look like two, the
# second said by whoever the role names after it; and a terminal acts on the others.
_ROLE_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


@dataclass(frozen=True)
class TranscriptEntry:
    """One transcript line. ``line`` is its 1-based line number in the file (0: not read from one)."""

    ts: str
    role: str
    content: str
    actions: list[Any] | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    line: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"ts": self.ts, "role": self.role, "content": self.content, "actions": self.actions, "meta": self.meta}


@dataclass(frozen=True)
class SkippedLine:
    """A line that is not an entry: ``torn`` when it is the unterminated end of the file."""

    line: int
    reason: str
    torn: bool = False


@dataclass(frozen=True)
class Transcript:
    entries: tuple[TranscriptEntry, ...]
    skipped: tuple[SkippedLine, ...] = ()
    # The number of lines the file holds (a torn tail counts as one): the next entry's number.
    lines: int = 0

    @property
    def torn(self) -> SkippedLine | None:
        return next((s for s in self.skipped if s.torn), None)


def make_entry(
    role: str,
    content: str,
    actions: Sequence[Any] | None = None,
    meta: Mapping[str, Any] | None = None,
    ts: dt.datetime | str | None = None,
) -> TranscriptEntry:
    """A new entry, checked: a non-empty role, str content, a timezone-aware (or ISO) timestamp,
    and actions/meta that are plain JSON data (so they round-trip exactly)."""
    if not isinstance(role, str) or not role.strip() or len(role) > _MAX_ROLE_CHARS:
        raise InvalidInputError(f"a transcript role is a non-empty string of at most {_MAX_ROLE_CHARS} characters")
    if found := _ROLE_CONTROL.search(role):
        raise InvalidInputError(
            f"a transcript role is one line of text: {role!r} holds the control character "
            f"U+{ord(found.group()):04X} at position {found.start()}"
        )
    if not isinstance(content, str):
        raise TypeError(f"transcript content must be a str, not {type(content).__name__}")
    if ts is None:
        ts = dt.datetime.now(dt.UTC)
    if isinstance(ts, dt.datetime):
        if ts.tzinfo is None:
            raise InvalidInputError("transcript timestamps must be timezone-aware")
        ts = ts.isoformat(timespec="milliseconds")
    elif not isinstance(ts, str) or _iso_time(ts) is None:
        raise InvalidInputError(f"a transcript timestamp is a timezone-aware datetime or ISO 8601 text, not {ts!r}")
    # A str, a dict or bytes is iterable too: list() made "abc" three actions and a dict its keys.
    if actions is not None and (isinstance(actions, (str, bytes, Mapping)) or not isinstance(actions, Sequence)):
        raise TypeError(f"transcript actions must be a list, not {type(actions).__name__}")
    if meta is not None and not isinstance(meta, Mapping):
        raise TypeError(f"transcript metadata must be a dict, not {type(meta).__name__}")
    # Through JSON and back: refuses what JSON cannot say (NaN, objects) before anything is
    # written, and the entry returned is the one a reader gets (tuples as lists, keys as str).
    plain = json.loads(json.dumps({"actions": actions, "meta": dict(meta or {})}, allow_nan=False))
    return TranscriptEntry(ts=ts, role=role, content=content, actions=plain["actions"], meta=plain["meta"])


def _iso_time(text: str) -> dt.datetime | None:
    """An ISO 8601 time with an offset (a ``Z`` too), else None."""
    try:
        when = dt.datetime.fromisoformat(text)
    except ValueError:
        return None
    return when if when.tzinfo is not None else None


def render_entry(entry: TranscriptEntry) -> bytes:
    """One line of UTF-8 JSON ending in ``\\n``. Readable text where it can be; a lone surrogate
    (which UTF-8 cannot carry) is escaped instead, so every str still round-trips."""
    data = entry.to_dict()
    try:
        text = json.dumps(data, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        return text.encode("utf-8") + b"\n"
    except UnicodeEncodeError:
        return json.dumps(data, ensure_ascii=True, allow_nan=False, separators=(",", ":")).encode() + b"\n"


def needs_newline(data: bytes) -> bool:
    """Whether an append must first end a torn last line (the file does not end with ``\\n``)."""
    return bool(data) and not data.endswith(b"\n")


def _entry_from(obj: object, line: int) -> TranscriptEntry | str:
    """The entry a decoded line holds, or why it is none."""
    if not isinstance(obj, dict):
        return "not a JSON object"
    ts, role, content = obj.get("ts"), obj.get("role"), obj.get("content")
    if not isinstance(role, str) or not isinstance(content, str):
        return "no role or content"
    actions = obj.get("actions")
    meta = obj.get("meta")
    return TranscriptEntry(
        ts=ts if isinstance(ts, str) else "",
        role=role,
        content=content,
        actions=actions if isinstance(actions, list) else None,
        meta=meta if isinstance(meta, dict) else {},
        line=line,
    )


def parse_transcript(data: bytes) -> Transcript:
    """Every entry of a transcript file with its line number; never raises."""
    parts = data.split(b"\n")
    tail = parts.pop()  # b"" when the file ends with a newline (or is empty)
    entries: list[TranscriptEntry] = []
    skipped: list[SkippedLine] = []
    for n, raw in enumerate([*parts, tail] if tail else parts, start=1):
        torn = bool(tail) and n == len(parts) + 1
        if not raw.strip():
            if not torn:
                skipped.append(SkippedLine(n, "blank line"))
            else:
                skipped.append(SkippedLine(n, "torn last line (an interrupted append)", torn=True))
            continue
        try:
            found = _entry_from(json.loads(raw.decode("utf-8")), n)
        except (UnicodeDecodeError, ValueError, RecursionError):
            found = "not valid JSON"
        if isinstance(found, TranscriptEntry):
            entries.append(found)
        elif torn:
            skipped.append(SkippedLine(n, "torn last line (an interrupted append)", torn=True))
        else:
            skipped.append(SkippedLine(n, found))
    return Transcript(tuple(entries), tuple(skipped), len(parts) + (1 if tail else 0))


def entry_text(entry: TranscriptEntry) -> str:
    """What search sees of an entry: who said it, and what."""
    return f"{entry.role}: {entry.content}"


# Character spans ``(start, end)`` of the model's tokens in a text, special tokens left out.
TokenSpans = Callable[[str], Sequence[tuple[int, int]]]


@dataclass(frozen=True)
class TranscriptChunk:
    """A window of tokens: ``start`` is its first token's position (stable: the chunk's key),
    ``line``/``end_line`` the transcript lines it spans, ``ts`` the first of those lines' time."""

    start: int
    line: int
    end_line: int
    text: str
    ts: str


def chunk_transcript(
    entries: Sequence[TranscriptEntry], spans: TokenSpans, size: int = 400, overlap: int = 80
) -> list[TranscriptChunk]:
    """Windows of ``size`` tokens, each overlapping the one before by ``overlap``, over the entries'
    texts in order. Each entry is tokenised on its own, so an entry's tokens never depend on what
    follows it: an append leaves every complete window exactly as it was."""
    if size <= 0 or not 0 <= overlap < size:
        raise ValueError("chunks need size > 0 and 0 <= overlap < size")
    texts = [entry_text(e) for e in entries]
    tokens: list[tuple[int, int, int]] = []  # (entry index, start, end)
    for i, text in enumerate(texts):
        tokens.extend((i, a, b) for a, b in spans(text))
    chunks: list[TranscriptChunk] = []
    step = size - overlap
    start = 0
    while start < len(tokens):
        window = tokens[start : start + size]
        pieces: dict[int, list[int]] = {}
        for i, a, b in window:
            bounds = pieces.setdefault(i, [a, b])
            bounds[1] = b
        text = "\n".join(texts[i][a:b] for i, (a, b) in pieces.items())
        first, last = entries[window[0][0]], entries[window[-1][0]]
        chunks.append(TranscriptChunk(start, first.line, last.line, text, first.ts))
        if start + size >= len(tokens):
            break
        start += step
    return chunks
