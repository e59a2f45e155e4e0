"""Daily logs (``memory/users/<user>/YYYY-MM-DD.md``) and the fact lines inside them.

A daily log is a person-editable file, so the model is the file itself: an ordered tuple of lines,
each a :class:`FactLine` or a verbatim :class:`TextLine` with its own line ending (``'\n'``,
``'\r\n'``, or ``''`` for a missing final newline). Rendering an unchanged parse reproduces the
input byte for byte; rewriting one fact rewrites only that line.

What is a fact (strict on purpose; a peer's parser invented categories from look-alikes):

* the line starts at column 0 with ``- [`` (dash, ONE space); ``*``/``+``/numbered/indented
  bullets are text. A leading U+FEFF (a byte order mark on line 1) is ignored and kept;
* the category is ``[a-z][a-z0-9_-]*``, 2..32 characters: the two-character minimum keeps task
  boxes out (``[ ]``, ``[x]``, ``[X]``, the one-letter statuses of Obsidian themes), and so are
  ``[12:30]``, ``[[wikilinks]]``, ``[Some Thing]``;
* ``]`` is followed by spaces or tabs and non-empty content (``[text](url)``, ``[ref]: url`` are
  text), and the line holds no lone ``'\r'`` (CommonMark reads that as a line break);
* it is not in YAML frontmatter, a code fence or an HTML comment block (a line starting with
  ``<!--`` that does not close on that line hides everything up to a line containing ``-->``).

After the category, read from the right so content may hold anything:
``content [`tag1 tag2`] [<!-- key:value ... -->]``.

* The metadata comment is the final ``<!-- ... -->`` if every token in it is ``key:value`` (key
  ``[A-Za-z][A-Za-z0-9_.-]*``); any other comment is content. Known keys: ``id`` (the home's id
  charset), ``imp`` (0..1), ``src`` (``session`` or ``session#line``), ``ts`` (ISO date or
  date-time). The first valid occurrence of a known key fills its field; everything else
  (unknown, malformed or repeated keys) is kept in order in ``Fact.extra``.
* The tags group is a final backtick group, after whitespace, of space-separated words not
  starting with ``-`` (``rm -rf`` is code). So inline code ending hand-written content reads as
  tags; the raw line still renders unchanged.
* Content is stripped of surrounding whitespace and must be non-empty.

``Fact(...)`` raises ValueError for values that cannot be written as a line reading back as the
same Fact (it renders and re-parses to check): a newline or carriage return in the content,
content ending in what would read as tags or as the metadata comment, bad ids, importance
outside 0..1.

Sections: ``## HH:MM`` then ``chat:<id>`` / ``session:<id>`` tokens in any order and free text.
Any H1 or H2 ends the current section (H3 and deeper do not). The first H1 is the title; if its
text starts with a valid ``YYYY-MM-DD`` that is the log's date.

Ids: an explicit ``id:`` wins; a hand-written fact gets :func:`derive_fact_id` of the file's
relative path, its normalised content (NFC, casefolded, whitespace collapsed) and its occurrence
number (0 for the first id-less fact with that content in the file, 1 for the next...). Edits
elsewhere never change it; editing the fact does, rightly: it is then another fact. A repeated
explicit id (a copy-pasted line) counts once; later copies get derived ids, so ids stay unique.
"""

from __future__ import annotations

import datetime as dt
import numbers
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ..errors import InvalidInputError, NotFoundError
from .fact_ids import FactIdMemo, derive_fact_id, derive_id, normalise_content
from .text import (
    BOM,
    atx_heading,
    closes_fence,
    fence_opener,
    frontmatter_line_count,
    split_lines,
)

__all__ = [
    "CATEGORY_RULE",
    "Fact",
    "FactLine",
    "TextLine",
    "Section",
    "LocatedFact",
    "TextSpan",
    "DailyLog",
    "parse_fact_line",
    "render_fact_line",
    "parse_daily_log",
    "render_daily_log",
    "derive_fact_id",
    # What the incremental re-parse (reparse.py) and the log writer (log_writing.py) build on.
    "ID_RULE",
    "TIME_RE",
    "valid_id",
    "Scan",
    "Resume",
    "scan_lines",
]

CATEGORY_RULE = "a category is 2-32 characters of a-z 0-9 _ -, starting with a letter a-z"
_CATEGORY_RE = re.compile(r"[a-z][a-z0-9_-]{1,31}\Z")
_FACT_HEAD_RE = re.compile(r"- \[([a-z][a-z0-9_-]{1,31})\][ \t]+")
_TAG_RE = re.compile(r"[^\s`\-][^\s`]*\Z")
_META_KEY_RE = re.compile(r"[A-Za-z][A-Za-z0-9_.-]*\Z")
# Mirrors syncd.home's id rule (a test pins the two); formats must not import the I/O layer.
_ID_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._@+-"
ID_RULE = "ids are 1-128 of A-Z a-z 0-9 . _ @ + -, starting with a letter or digit, no '..'"
_TAG_RULE = "a tag is one word without backticks, not starting with '-'"
_ID = r"[A-Za-z0-9][A-Za-z0-9._@+-]{0,127}"
_IMP_RE = re.compile(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?\Z")
_TS_RE = re.compile(
    r"\d{4}-\d{2}-\d{2}(?:T\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:Z|[+-]\d{2}(?::?\d{2})?)?)?\Z"
)
# What the engine writes for an extracted fact (``ts`` is ``isoformat(timespec="seconds")``);
# no optional groups, which makes the regex 3x faster. Anything else takes the general path.
_ENGINE_META = (
    rf"id:({_ID}) imp:([01]?\.[0-9]+|[01]) src:({_ID})(?:#([0-9]{{1,18}}))?"
    r" ts:([0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:Z|[+-][0-9]{2}:[0-9]{2}))"
)
# A whole engine-written line, with and without tags (an optional group would cost more than the
# two). Neither the tags group nor the comment can hold a backtick or '<', so each can only sit at
# one place and the lazy content never backtracks far.
_ENGINE_LINE = r"- \[([a-z][a-z0-9_-]{1,31})\][ \t]+(.+?)"
_ENGINE_TAGGED_LINE_RE = re.compile(
    rf"{_ENGINE_LINE} `([^\s`\-][^\s`]*(?: [^\s`\-][^\s`]*)*)` <!-- {_ENGINE_META} -->\Z"
)
_ENGINE_LINE_RE = re.compile(rf"{_ENGINE_LINE}() <!-- {_ENGINE_META} -->\Z")
# A section heading exactly as append_section writes it, so the common case skips the general path.
_ENGINE_SECTION_LINE_RE = re.compile(
    rf"## ((?:[01][0-9]|2[0-3]):[0-5][0-9]) chat:({_ID}) session:({_ID})\Z"
)
_SECTION_RE = re.compile(r"([01]\d|2[0-3]):([0-5]\d)(?:[ \t]+(.*))?\Z")
TIME_RE = re.compile(r"([01]\d|2[0-3]):([0-5]\d)\Z")
_TITLE_DATE_RE = re.compile(r"(\d{4}-\d{2}-\d{2})(?:[ \t].*)?\Z")
_ENDINGS = ("\n", "\r\n", "")
# First characters of lines that may be a heading, a fence or an HTML comment block.
_BLOCK_LEADS = frozenset("# \t`~<")
_object_new = object.__new__
_D = TypeVar("_D")


def valid_id(value: str) -> bool:
    # String methods instead of a regex: this runs for every id and session of every fact line.
    ok = len(value) <= 128 and value.isascii() and value[:1].isalnum()
    return ok and not value.strip(_ID_CHARS) and ".." not in value


# --------------------------------------------------------------------------- the Fact value


@dataclass(frozen=True)
class Fact:
    """One remembered statement. Always representable: the constructor checks the round trip."""

    content: str
    category: str
    tags: tuple[str, ...] = ()
    importance: float | None = None
    id: str | None = None
    source_session: str | None = None
    source_line: int | None = None
    timestamp: str | None = None
    extra: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        _normalise_and_check(self)


def _normalise_and_check(f: Fact) -> None:
    """Normalise types (lists to tuples, ints to floats), then check the line reads back as ``f``.

    The individual checks exist for their messages; the final round trip is what guarantees it.
    """

    def check(ok: object, message: str) -> None:
        if not ok:
            raise InvalidInputError(message)

    def is_(value: object, kind: type) -> bool:
        return isinstance(value, kind) and not isinstance(value, bool)

    set_ = object.__setattr__
    check(isinstance(f.content, str), f"fact content must be a str, not {f.content!r}")
    set_(f, "content", f.content.strip())
    check(f.content, "fact content is empty")
    check("\n" not in f.content and "\r" not in f.content, f"not one line: {f.content!r}")
    check(isinstance(f.category, str) and _CATEGORY_RE.match(f.category), CATEGORY_RULE)
    check(not isinstance(f.tags, str), "tags must be a sequence of words, not one string")
    set_(f, "tags", tuple(f.tags))
    for tag in f.tags:
        check(isinstance(tag, str) and _TAG_RE.match(tag), f"{tag!r}: {_TAG_RULE}")
    if f.importance is not None:
        check(is_(f.importance, numbers.Real), f"importance {f.importance!r} is not a number")
        check(0.0 <= float(f.importance) <= 1.0, f"importance {f.importance} is not in 0..1")
        set_(f, "importance", float(f.importance))
    for value in (f.id, f.source_session):
        check(
            value is None or (isinstance(value, str) and valid_id(value)), f"{value!r}: {ID_RULE}"
        )
    if f.source_line is not None:
        check(is_(f.source_line, numbers.Integral), f"source_line {f.source_line!r} is not an int")
        check(f.source_session is not None, "source_line needs a source_session")
        check(0 <= f.source_line < 10**18, f"source_line {f.source_line} is out of range")
        set_(f, "source_line", int(f.source_line))
    ts = f.timestamp
    check(ts is None or (isinstance(ts, str) and _TS_RE.match(ts)), f"{ts!r} is not ISO 8601")
    set_(f, "extra", tuple(tuple(pair) for pair in f.extra))
    for pair in f.extra:
        check(len(pair) == 2 and all(isinstance(x, str) for x in pair), f"bad extra {pair!r}")
        check(_META_KEY_RE.match(pair[0]), f"bad metadata key {pair[0]!r}")
        check(pair[1].split() == [pair[1]] and "-->" not in pair[1], f"bad value {pair[1]!r}")
    back = _parse_fact(render_fact_line(f))
    check(back == f, f"{f!r} cannot be written unambiguously: it would read back as {back!r}")


# --------------------------------------------------------------------------- one fact line


def _parse_fact(line: str) -> Fact | None:
    """The Fact on ``line`` (no line ending), or None. The hot path of every daily-log read.

    Read right to left: the final metadata comment, then the final tags group, then content.
    """
    if "\r" in line:
        return None
    if line.endswith(" -->") and (
        e := (_ENGINE_TAGGED_LINE_RE if "` <!-- " in line else _ENGINE_LINE_RE).match(line)
    ):
        # Fast path for a whole line exactly as the engine writes it (one regex instead of a
        # dozen steps). It must agree with the general path, so anything it cannot vouch for
        # (content ending in a backtick, '..' in an id, importance over 1) goes that way.
        category, content, tags, id_, imp, session, src_line, ts = e.groups()
        content = content.strip()
        imp = float(imp)
        if (
            content
            and (tags or not content.endswith("`"))
            and ".." not in id_
            and ".." not in session
            and imp <= 1.0
        ):
            fact = _object_new(Fact)
            d = fact.__dict__
            d["content"] = content
            d["category"] = category
            d["tags"] = tuple(tags.split(" ")) if tags else ()
            d["importance"] = imp
            d["id"] = id_
            d["source_session"] = session
            d["source_line"] = None if src_line is None else int(src_line)
            d["timestamp"] = ts
            d["extra"] = ()
            return fact
    m = _FACT_HEAD_RE.match(line, 1 if line[:1] == BOM else 0)
    if m is None:
        return None
    s = line[m.end() :].rstrip()
    meta = None
    if s.endswith("-->"):
        start = s.rfind("<!--")
        if 0 <= start <= len(s) - 7:
            body = s[start + 4 : -3]
            if "-->" not in body:
                meta = _read_meta(body)
                if meta is not None:
                    s = s[:start].rstrip()
    tags: tuple[str, ...] = ()
    if s.endswith("`"):
        open_ = s.rfind("`", 0, -1)
        if open_ > 0 and s[open_ - 1].isspace():
            inner = s[open_ + 1 : -1]
            words = inner.split()
            # Words separated by spaces or tabs only, none starting with '-' (``rm -rf`` is code).
            canonical = " ".join(words) == inner
            flat = inner if canonical else inner.replace("\t", " ")
            if (
                words
                and " -" not in " " + flat
                and (canonical or sum(map(len, words)) + flat.count(" ") == len(flat))
            ):
                tags = tuple(words)
                s = s[:open_]
    content = s.strip()
    if not content:
        return None
    # The parser's output is valid by construction; skipping __post_init__ halves parse time.
    fact = _object_new(Fact)
    d = fact.__dict__
    d["content"] = content
    d["category"] = m.group(1)
    d["tags"] = tags
    if meta is None:
        d["importance"] = d["id"] = d["source_session"] = d["source_line"] = d["timestamp"] = None
        d["extra"] = ()
    else:
        (
            d["id"],
            d["importance"],
            d["source_session"],
            d["source_line"],
            d["timestamp"],
            d["extra"],
        ) = meta
    return fact


def _read_meta(body: str) -> tuple | None:
    """``(id, imp, session, line, ts, extra)`` from a comment body, or None if not metadata."""
    id_ = imp = session = line = ts = None
    extra = None
    tokens = body.split()
    if not tokens:
        return None
    for token in tokens:
        key, _, value = token.partition(":")
        if not value:
            return None
        # The first valid occurrence of a known key fills its field; the rest is kept as extra.
        if key == "id":
            if id_ is None and valid_id(value):
                id_ = value
                continue
        elif key == "imp":
            if imp is None and _IMP_RE.match(value) and 0.0 <= (x := float(value)) <= 1.0:
                imp = x
                continue
        elif key == "src":
            name, hash_, number = value.partition("#")
            if (
                session is None
                and valid_id(name)
                and (not hash_ or (0 < len(number) <= 18 and number.isdecimal()))
            ):
                session, line = name, int(number) if hash_ else None
                continue
        elif key == "ts":
            if ts is None and _TS_RE.match(value):
                ts = value
                continue
        elif not _META_KEY_RE.match(key):
            return None
        if extra is None:
            extra = []
        extra.append((key, value))
    return id_, imp, session, line, ts, tuple(extra) if extra else ()


def parse_fact_line(line: str) -> Fact | None:
    """The Fact on one line (a trailing ``\\n`` or ``\\r\\n`` is ignored), or None if it is text.

    This ignores context: inside a daily log a fact-looking line in a code fence is text, which
    only :func:`parse_daily_log` can tell.
    """
    if line.endswith("\n"):
        line = line[:-2] if line.endswith("\r\n") else line[:-1]
    if "\n" in line:
        return None
    return _parse_fact(line)


def render_fact_line(fact: Fact) -> str:
    """The canonical line for ``fact``, without a line ending."""
    src = fact.source_session
    if src is not None and fact.source_line is not None:
        src = f"{src}#{fact.source_line}"
    imp = None if fact.importance is None else repr(fact.importance)
    known = (("id", fact.id), ("imp", imp), ("src", src), ("ts", fact.timestamp))
    tokens = [f"{k}:{v}" for k, v in (*known, *fact.extra) if v is not None]
    line = f"- [{fact.category}] {fact.content}"
    if fact.tags:
        line += f" `{' '.join(fact.tags)}`"
    return f"{line} <!-- {' '.join(tokens)} -->" if tokens else line


# --------------------------------------------------------------------------- lines and locations


def _check_ending(text: str, ending: str) -> None:
    # A text ending in '\r' before '\n' would read back as a CRLF line, hence the last rule.
    if (
        ending not in _ENDINGS
        or "\n" in text
        or not (text or ending)
        or (ending == "\n" and text.endswith("\r"))
    ):
        raise ValueError(f"{text!r} + {ending!r} is not one line ending in '\\n', '\\r\\n' or ''")


@dataclass(frozen=True)
class TextLine:
    """A line the fact grammar does not claim, kept verbatim."""

    text: str
    ending: str = "\n"

    def __post_init__(self) -> None:
        _check_ending(self.text, self.ending)


@dataclass(frozen=True)
class FactLine:
    """A fact line. ``raw`` is the exact source text, reused on render while it still matches.

    ``raw`` is excluded from equality so a parsed log equals the same log built by hand. A raw
    that no longer parses to ``fact`` (say after ``dataclasses.replace(line, fact=...)``) is
    dropped, so the line renders canonically rather than resurrecting the old text.
    """

    fact: Fact
    ending: str = "\n"
    raw: str | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.fact, Fact):
            raise ValueError(f"FactLine needs a Fact, not {type(self.fact).__name__}")
        if self.raw is not None and ("\n" in self.raw or _parse_fact(self.raw) != self.fact):
            object.__setattr__(self, "raw", None)
        _check_ending(self.text, self.ending)

    @property
    def text(self) -> str:
        """The line as it is rendered, without its ending."""
        return self.raw if self.raw is not None else render_fact_line(self.fact)


Element = FactLine | TextLine


@dataclass(frozen=True)
class Section:
    """A ``## HH:MM chat:<id> session:<id> note`` heading; ``line`` is its 1-based line."""

    time: str
    chat: str | None
    session: str | None
    note: str
    line: int


@dataclass(frozen=True)
class LocatedFact:
    """A fact with where it is: 1-based ``line``, enclosing ``section`` (or None), ``index``.

    ``index`` counts facts from 0 in file order and is what ``replace_fact`` / ``remove_fact`` take.
    """

    fact: Fact
    line: int
    section: Section | None
    index: int


@dataclass(frozen=True)
class TextSpan:
    """Consecutive non-blank free-text lines (joined by ``'\\n'``), for full-text indexing."""

    text: str
    line: int
    section: Section | None


def _build(cls: type[_D], values: tuple) -> _D:
    """An instance of a frozen dataclass without running its ``__init__`` (parser-internal)."""
    obj: Any = _object_new(cls)
    obj.__dict__.update(zip(cls.__dataclass_fields__, values, strict=False))  # type: ignore[attr-defined]
    return obj


def _parse_section(heading: str, line: int) -> Section | None:
    m = _SECTION_RE.match(heading)
    if m is None:
        return None
    chat = session = None
    note = []
    for token in (m.group(3) or "").split():
        if chat is None and token.startswith("chat:") and valid_id(token[5:]):
            chat = token[5:]
        elif session is None and token.startswith("session:") and valid_id(token[8:]):
            session = token[8:]
        else:
            note.append(token)
    return _build(Section, (f"{m.group(1)}:{m.group(2)}", chat, session, " ".join(note), line))


def _title_date(heading: str) -> str | None:
    m = _TITLE_DATE_RE.match(heading)
    if m is None:
        return None
    try:
        return dt.date.fromisoformat(m.group(1)).isoformat()
    except ValueError:
        return None


@dataclass(frozen=True)
class Scan:
    elements: tuple[Element, ...]
    facts: tuple[LocatedFact, ...]
    sections: tuple[Section, ...]
    spans: tuple[TextSpan, ...]
    date: str | None
    closer: str | None  # the line that closes a fence or comment left open at the end, if any
    title_line: int | None = None  # 1-based line of the first H1 (dated or not), if any
    frontmatter: int = 0  # lines of YAML frontmatter at the top


@dataclass(frozen=True)
class Resume:
    """Where a scan of the lines after a section heading starts: the heading is line ``line``
    (1-based) and ``facts`` facts precede it. Nothing is open just after a heading (no fence,
    comment or text span), so this and the title already seen are all the state there is."""

    line: int
    facts: int
    section: Section
    title_line: int | None
    date: str | None


def scan_lines(pairs: list[tuple[str, str]], resume: Resume | None = None) -> Scan:
    """Classify every line in one pass; the single source of truth for what is a fact.
    With ``resume``, ``pairs`` are the lines after a section heading (see reparse.py).

    Objects are built with ``object.__new__`` and direct ``__dict__`` stores: the dataclass
    ``__init__`` of a frozen class costs more than parsing the line it describes.
    """
    elements: list = []
    facts: list = []
    sections: list = []
    spans: list = []
    # Line numbers are 1-based and count the lines before ``pairs``; fact indexes count the facts.
    first_line, first_fact = (resume.line + 1, resume.facts) if resume else (1, 0)
    date, title_line, section = (resume.date, resume.title_line, resume.section) if resume else (None, None, None)
    fence: tuple[str, int] | None = None
    in_comment = False
    span_from = -1  # index of the first line of the open text span, -1 when none is open
    span_section = None
    new = _object_new

    def close_span(end: int) -> None:
        text = "\n".join([c for c, _ in pairs[span_from:end]])
        spans.append(_build(TextSpan, (text, span_from + first_line, span_section)))

    fm = frontmatter_line_count([c for c, _ in pairs]) if not resume and pairs and "---" in pairs[0][0] else 0
    add = elements.append
    for content, ending in pairs[:fm]:
        add(_build(TextLine, (content, ending)))
    # The loop below is the hot path of every daily-log read; it is written for speed (one state
    # test per line, objects built by hand) at some cost in elegance.
    index = fm - 1
    for content, ending in pairs[fm:] if fm else pairs:
        index += 1
        first = content[:1]
        probe = content
        if first == BOM:
            # U+FEFF is invisible; a line that starts with it reads as the line without it.
            probe = content[1:]
            first = probe[:1]
        if fence is not None:
            if probe.lstrip(" \t")[:1] == fence[0] and closes_fence(probe, *fence):
                fence = None
        elif in_comment:
            in_comment = "-->" not in content
        elif first == "-":
            if probe.startswith("- [") and (fact := _parse_fact(content)) is not None:
                if span_from >= 0:
                    close_span(index)
                    span_from = -1
                line = new(FactLine)
                d = line.__dict__
                d["fact"] = fact
                d["ending"] = ending
                d["raw"] = content
                add(line)
                located = new(LocatedFact)
                d = located.__dict__
                d["fact"] = fact
                d["line"] = index + first_line
                d["section"] = section
                d["index"] = len(facts) + first_fact
                facts.append(located)
                continue
        elif first in _BLOCK_LEADS:
            stripped = probe.lstrip(" \t")
            lead = stripped[:1]
            if lead == "#":
                structural = False
                atx = None
                engine = _ENGINE_SECTION_LINE_RE.match(probe)
                if engine is not None and ".." not in probe:
                    section = _build(Section, (*engine.groups(), "", index + first_line))
                    sections.append(section)
                    structural = True
                else:
                    atx = atx_heading(probe)
                if atx is not None and atx[0] == 1:
                    section = None
                    if title_line is None:
                        title_line = index + first_line
                        date = _title_date(atx[1])
                        structural = date is not None
                elif atx is not None and atx[0] == 2:
                    section = _parse_section(atx[1], index + first_line)
                    if section is not None:
                        sections.append(section)
                        structural = True
                if structural:
                    # The dated title and section headings are structure, not searchable text.
                    if span_from >= 0:
                        close_span(index)
                        span_from = -1
                    add(_build(TextLine, (content, ending)))
                    continue
            elif lead == "`" or lead == "~":
                fence = fence_opener(probe)
            elif lead == "<" and stripped.startswith("<!--"):
                in_comment = "-->" not in stripped[4:]
        line = new(TextLine)
        d = line.__dict__
        d["text"] = content
        d["ending"] = ending
        add(line)
        if fence is not None or (content and not content.isspace()):
            if span_from < 0:
                span_from, span_section = index, section
        elif span_from >= 0:
            close_span(index)
            span_from = -1
    if span_from >= 0:
        close_span(len(pairs))
    closer = fence[0] * fence[1] if fence is not None else ("-->" if in_comment else None)
    return Scan(tuple(elements), tuple(facts), tuple(sections), tuple(spans), date, closer, title_line, fm)


# --------------------------------------------------------------------------- the daily log


@dataclass(frozen=True)
class DailyLog:
    """A daily log file as an ordered tuple of lines.

    Built by :func:`parse_daily_log` or by hand; a hand-built log is checked on construction (its
    rendering must read back as the same elements, so a TextLine that is really a fact, a fact
    inside a code fence or a misplaced empty ending raise ValueError).
    """

    elements: tuple[Element, ...] = ()
    # What the parser learned about the lines (facts, sections, spans, date); derived, not compared.
    _info: Scan = field(init=False, repr=False, compare=False, default=None)  # type: ignore[assignment]

    def __post_init__(self) -> None:
        elements = tuple(self.elements)
        for e in elements:
            if not isinstance(e, (FactLine, TextLine)):
                raise ValueError(f"daily log elements are FactLine or TextLine, not {e!r}")
        self._read_back(elements, scan_lines(split_lines(_render(elements))))

    def _read_back(self, elements: tuple[Element, ...], scan: Scan) -> None:
        """Become ``elements`` if ``scan`` (the parse of their rendering) reads them back."""
        if scan.elements != elements:
            pairs = zip(elements, scan.elements, strict=False)
            i = next((i for i, (a, b) in enumerate(pairs) if a != b), len(scan.elements))
            raise ValueError(
                f"line {i + 1} would not read back as given (a fact written as a TextLine, a fact "
                "inside a code fence, or a line ending missing before the last line?)"
            )
        object.__setattr__(self, "elements", elements)
        object.__setattr__(self, "_info", scan)

    def _edited(self, elements: tuple[Element, ...]) -> DailyLog:
        """A log of ``elements``, an edit of this one, checked as the constructor checks but read
        again only around what changed (reparse.py): a one-fact edit of a big log costs the fact."""
        from .reparse import reparse_daily_log

        log = _object_new(DailyLog)
        log._read_back(elements, reparse_daily_log(_render(elements), _render(self.elements), self)._info)
        return log

    @property
    def date(self) -> str | None:
        """``YYYY-MM-DD`` from the title (the first H1), or None."""
        return self._info.date

    @property
    def sections(self) -> tuple[Section, ...]:
        """Every ``## HH:MM ...`` section heading, in file order."""
        return self._info.sections

    @property
    def newline(self) -> str:
        """The line ending new lines should use: the file's first one, else ``'\\n'``."""
        return next((e.ending for e in self.elements if e.ending), "\n")

    def facts(self) -> tuple[LocatedFact, ...]:
        """Every fact with its line, section and index, in file order."""
        return self._info.facts

    def text_spans(self) -> tuple[TextSpan, ...]:
        """Free text for full-text search: runs of non-blank non-fact lines.

        Frontmatter, the dated title and section headings are structure, not text, and are left
        out; code fence contents are included (and kept in one span across blank lines).
        """
        return self._info.spans

    def fact_ids(self, rel_path: str, memo: FactIdMemo | None = None) -> tuple[str, ...]:
        """The effective id of each fact (aligned with :meth:`facts`); see the module docstring.
        With ``memo`` (of this ``rel_path``) what an earlier read derived is looked up, not
        derived again; the memo then holds what this read used."""
        ids = []
        claimed: set[str] = set()
        seen: dict[str, int] = {}
        known = memo if memo is not None and memo.rel_path == rel_path else FactIdMemo(rel_path)
        norms: dict[str, str] = {}
        derived: dict[tuple[str, int], str] = {}
        for located in self._info.facts:
            fact = located.fact
            if fact.id is not None and fact.id not in claimed:
                claimed.add(fact.id)
                ids.append(fact.id)
            else:
                content = fact.content
                norm = norms.get(content) or known.norms.get(content) or normalise_content(content)
                norms[content] = norm
                seen[norm] = n = seen.get(norm, -1) + 1
                key = (norm, n)
                derived[key] = fact_id = known.ids.get(key) or derive_id(rel_path, norm, n)
                ids.append(fact_id)
        if memo is not None:
            memo.rel_path, memo.norms, memo.ids = rel_path, norms, derived
        return tuple(ids)

    def _find(self, key: int | str, rel_path: str | None) -> LocatedFact:
        facts = self._info.facts
        if isinstance(key, int) and not isinstance(key, bool):
            if 0 <= key < len(facts):
                return facts[key]
        elif isinstance(key, str):
            ids = self.fact_ids(rel_path) if rel_path is not None else [f.fact.id for f in facts]
            if key in ids:
                return facts[ids.index(key)]
        raise NotFoundError(f"no fact {key!r} in this daily log")

    def replace_fact(
        self, key: int | str, new_fact: Fact, *, rel_path: str | None = None
    ) -> DailyLog:
        """A log with one fact replaced; only its line changes (and keeps its line ending).

        ``key`` is a fact index (from :meth:`facts`) or an id: an explicit id, or with
        ``rel_path`` any effective id from :meth:`fact_ids`. Raises NotFoundError.
        """
        if not isinstance(new_fact, Fact):
            raise ValueError(f"replace_fact needs a Fact, not {type(new_fact).__name__}")
        i = self._find(key, rel_path).line - 1
        old = self.elements[i]
        if old.fact == new_fact:
            return self
        # A byte order mark on the first line belongs to the file, not to the fact: keep it.
        raw = BOM + render_fact_line(new_fact) if old.text.startswith(BOM) else None
        return self._edited(
            (*self.elements[:i], FactLine(new_fact, old.ending, raw), *self.elements[i + 1 :])
        )

    def remove_fact(self, key: int | str, *, rel_path: str | None = None) -> DailyLog:
        """A log without one fact's line (same ``key`` rules as :meth:`replace_fact`)."""
        i = self._find(key, rel_path).line - 1
        return self._edited(self.elements[:i] + self.elements[i + 1 :])


def parse_daily_log(text: str) -> DailyLog:
    """Parse a daily log. Never raises: anything the grammar does not claim is a TextLine."""
    scan = scan_lines(split_lines(text))
    log = _object_new(DailyLog)
    object.__setattr__(log, "elements", scan.elements)
    object.__setattr__(log, "_info", scan)
    return log


def render_daily_log(log: DailyLog) -> str:
    """The file text; byte-identical to the parsed input for every line not replaced."""
    return _render(log.elements)


def _render(elements: Iterable[Element]) -> str:
    return "".join([e.text + e.ending for e in elements])
