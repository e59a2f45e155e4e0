"""A daily log's lines, classified in one pass: which are facts, section headings, the title,
free text, and what is left open at the end. The single source of truth for what is a fact in a
file (fact_grammar.py reads one line; this knows where a line may be one).

A fact line is not a fact in YAML frontmatter, a code fence or an HTML comment block (a line
starting with ``<!--`` that does not close on that line hides everything up to a line containing
``-->``).

Sections: ``## HH:MM`` then ``chat:<id>`` / ``session:<id>`` tokens in any order and free text.
Any H1 or H2 ends the current section (H3 and deeper do not). The first H1 is the title; if its
text starts with a valid ``YYYY-MM-DD`` that is the log's date.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from .fact_grammar import ID_PATTERN, Fact, fact_on_line, render_fact_line, valid_id
from .text import BOM, atx_heading, closes_fence, fence_opener, frontmatter_line_count

__all__ = [
    "TIME_RE",
    "Element",
    "FactLine",
    "LocatedFact",
    "Resume",
    "Scan",
    "Section",
    "TextLine",
    "TextSpan",
    "render_elements",
    "scan_lines",
]

# A section heading exactly as append_section writes it, so the common case skips the general path.
_ENGINE_SECTION_LINE_RE = re.compile(
    rf"## ((?:[01][0-9]|2[0-3]):[0-5][0-9]) chat:({ID_PATTERN}) session:({ID_PATTERN})\Z"
)
_SECTION_RE = re.compile(r"([01]\d|2[0-3]):([0-5]\d)(?:[ \t]+(.*))?\Z")
TIME_RE = re.compile(r"([01]\d|2[0-3]):([0-5]\d)\Z")
_TITLE_DATE_RE = re.compile(r"(\d{4}-\d{2}-\d{2})(?:[ \t].*)?\Z")
_ENDINGS = ("\n", "\r\n", "")
# First characters of lines that may be a heading, a fence or an HTML comment block.
_BLOCK_LEADS = frozenset("# \t`~<")
_object_new = object.__new__
_D = TypeVar("_D")


def _check_ending(text: str, ending: str) -> None:
    # A text ending in '\r' before '\n' would read back as a CRLF line, hence the last rule.
    if ending not in _ENDINGS or "\n" in text or not (text or ending) or (ending == "\n" and text.endswith("\r")):
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
        if self.raw is not None and ("\n" in self.raw or fact_on_line(self.raw) != self.fact):
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


# One loop with one state test per line, on purpose: this is the hot path of every daily-log read,
# and a function call per line or per construct costs more than the parse (hence the C901 noqa).
def scan_lines(pairs: list[tuple[str, str]], resume: Resume | None = None) -> Scan:  # noqa: C901
    """Classify every line in one pass; the single source of truth for what is a fact.
    With ``resume``, ``pairs`` are the lines after a section heading (see rescan.py).

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
            if probe.startswith("- [") and (fact := fact_on_line(content)) is not None:
                if span_from >= 0:
                    close_span(index)
                    span_from = -1
                fact_line = new(FactLine)
                d = fact_line.__dict__
                d["fact"] = fact
                d["ending"] = ending
                d["raw"] = content
                add(fact_line)
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


def render_elements(elements: Iterable[Element]) -> str:
    """The text of ``elements``: each line with its own ending."""
    return "".join([e.text + e.ending for e in elements])
