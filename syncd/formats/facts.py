"""Daily logs (``memory/users/<user>/YYYY-MM-DD.md``) and the fact lines inside them.

A daily log is a person-editable markdown file, so the model is the file itself: an ordered tuple
of lines, each either a :class:`FactLine` or a verbatim :class:`TextLine`, each carrying its own
line ending (``'\\n'``, ``'\\r\\n'`` or ``''`` for a missing final newline). Rendering an unchanged
parse reproduces the input byte for byte; rewriting one fact rewrites only that line.

What is a fact (strict on purpose; a peer's parser invented categories from look-alikes):

* the line starts at column 0 with ``- [`` (a dash and ONE space); ``*`` / ``+`` bullets, indented
  bullets and numbered lists are text;
* the category is ``[a-z][a-z0-9_-]*`` and 2..32 characters long. The two-character minimum is what
  keeps task boxes out: ``[ ]``, ``[x]``, ``[X]`` and the single-letter statuses of Obsidian themes
  (``[b]``, ``[i]``, ...) are text; so are ``[12:30]``, ``[[wikilinks]]``, ``[Some Thing]``;
* ``]`` is followed by at least one space or tab and then non-empty content (``[text](url)`` and
  ``[ref]: url`` are text);
* it is not inside YAML frontmatter, a code fence or an HTML comment block (a line starting with
  ``<!--`` that does not close on that line hides everything up to the line containing ``-->``);
* the line contains no lone ``'\\r'`` (CommonMark treats it as a line break).

A U+FEFF at the start of a line (a byte order mark on line 1) is invisible, so the line is read as
if it were not there; it stays in the raw text and survives a rewrite of that fact.

Grammar after the category, read from the right so content may hold anything:
``content [`tag1 tag2`] [<!-- key:value ... -->]``.

* The metadata comment is the final ``<!-- ... -->`` if every whitespace-separated token in it is
  ``key:value`` (key ``[A-Za-z][A-Za-z0-9_.-]*``, value non-empty); any other comment is content.
  Known keys: ``id`` (engine id, the home's id charset), ``imp`` (a float in 0..1), ``src``
  (``session`` or ``session#line``) and ``ts`` (ISO date or date-time). The first valid occurrence
  of a known key fills its field; everything else (unknown keys, malformed or repeated known keys)
  is kept in order in ``Fact.extra`` so nothing is lost on a rewrite.
* The tags group is a final backtick group, preceded by whitespace, of space-separated words that
  do not start with ``-`` (so ``rm -rf`` is not tags). Inline code at the very end of hand-written
  content is therefore read as tags; the raw line is still rendered unchanged.
* Content is stripped of surrounding whitespace and must be non-empty.

``Fact(...)`` raises ValueError when a value cannot be written as a line that reads back as the
same Fact (the constructor renders and re-parses to check). Typical cases: content with a newline
or a carriage return, content ending in something that would be read as a tags group or a
metadata comment, ids or sessions outside the id charset, importance outside 0..1.

Sections: ``## HH:MM`` then, in any order, ``chat:<id>`` / ``session:<id>`` tokens and free text.
Any H1 or H2 heading ends the current section (H3 and deeper do not). The first H1 is the title;
if its text starts with a valid ``YYYY-MM-DD`` that is the log's date.

Ids: an explicit ``id:`` wins; a hand-written fact gets :func:`derive_fact_id` of the file's
relative path, its normalised content (NFC, casefolded, whitespace collapsed) and its occurrence
number (0 for the first id-less fact with that normalised content in the file, 1 for the next...).
Edits elsewhere in the file never change it; editing the fact itself does, which is right because
it is then a different fact. A repeated explicit id (a copy-pasted line) only counts the first
time; later copies get a derived id so ids stay unique within a file.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import numbers
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field

from ..errors import InvalidIdError, NotFoundError
from .text import BOM, atx_heading, closes_fence, fence_opener, frontmatter_line_count, split_lines

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
    "append_section",
    "new_daily_log",
    "derive_fact_id",
]

CATEGORY_RULE = "a category is 2-32 characters of a-z 0-9 _ -, starting with a letter a-z"
_CATEGORY_RE = re.compile(r"[a-z][a-z0-9_-]{1,31}\Z")
_FACT_HEAD_RE = re.compile(r"- \[([a-z][a-z0-9_-]{1,31})\][ \t]+")
_TAG_RE = re.compile(r"[^\s`\-][^\s`]*\Z")
_TAGS_GROUP_RE = re.compile(r"[ \t]*[^\s`\-][^\s`]*(?:[ \t]+[^\s`\-][^\s`]*)*[ \t]*\Z")
_META_KEY_RE = re.compile(r"[A-Za-z][A-Za-z0-9_.-]*\Z")
# Mirrors syncd.home's id rule (a test pins the two together); formats must not import the I/O layer.
_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@+-]{0,127}\Z")
_IMP_RE = re.compile(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?\Z")
_SRC_RE = re.compile(r"([A-Za-z0-9][A-Za-z0-9._@+-]{0,127})(?:#(\d{1,18}))?\Z")
_TS_RE = re.compile(
    r"\d{4}-\d{2}-\d{2}(?:T\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:Z|[+-]\d{2}(?::?\d{2})?)?)?\Z"
)
_SECTION_RE = re.compile(r"([01]\d|2[0-3]):([0-5]\d)(?:[ \t]+(.*))?\Z")
_TIME_RE = re.compile(r"([01]\d|2[0-3]):([0-5]\d)\Z")
_TITLE_DATE_RE = re.compile(r"(\d{4}-\d{2}-\d{2})(?:[ \t].*)?\Z")
_ENDINGS = ("\n", "\r\n", "")
# First characters of lines that may be a heading, a fence or an HTML comment block.
_BLOCK_LEADS = frozenset("# \t`~<")


def _valid_id(value: str) -> bool:
    return _ID_RE.match(value) is not None and ".." not in value


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


def _set(obj: object, name: str, value: object) -> None:
    object.__setattr__(obj, name, value)


def _normalise_and_check(f: Fact) -> None:
    if not isinstance(f.content, str):
        raise ValueError(f"fact content must be a str, not {type(f.content).__name__}")
    content = f.content.strip()
    if not content:
        raise ValueError("fact content is empty")
    if "\n" in content or "\r" in content:
        raise ValueError(f"fact content must be one line: {content!r}")
    _set(f, "content", content)
    if not isinstance(f.category, str) or not _CATEGORY_RE.match(f.category):
        raise ValueError(f"invalid category {f.category!r}: {CATEGORY_RULE}")
    if isinstance(f.tags, str):
        raise ValueError("tags must be a sequence of words, not one string")
    tags = tuple(f.tags)
    for tag in tags:
        if not isinstance(tag, str) or not _TAG_RE.match(tag):
            raise ValueError(
                f"invalid tag {tag!r}: a tag is a word without spaces or backticks, not starting with -"
            )
    _set(f, "tags", tags)
    if f.importance is not None:
        if isinstance(f.importance, bool) or not isinstance(f.importance, numbers.Real):
            raise ValueError(f"importance must be a number in 0..1, not {f.importance!r}")
        imp = float(f.importance)
        if not 0.0 <= imp <= 1.0:
            raise ValueError(f"importance must be in 0..1, not {f.importance!r}")
        _set(f, "importance", imp)
    if f.id is not None and (not isinstance(f.id, str) or not _valid_id(f.id)):
        raise ValueError(f"invalid fact id {f.id!r}: 1-128 of A-Z a-z 0-9 . _ @ + -, no '..'")
    if f.source_session is not None and (
        not isinstance(f.source_session, str) or not _valid_id(f.source_session)
    ):
        raise ValueError(f"invalid source session {f.source_session!r}")
    if f.source_line is not None:
        if isinstance(f.source_line, bool) or not isinstance(f.source_line, numbers.Integral):
            raise ValueError(f"source_line must be an int, not {f.source_line!r}")
        if f.source_session is None:
            raise ValueError("source_line needs a source_session")
        if not 0 <= f.source_line < 10**18:
            raise ValueError(f"source_line out of range: {f.source_line}")
        _set(f, "source_line", int(f.source_line))
    if f.timestamp is not None and (not isinstance(f.timestamp, str) or not _TS_RE.match(f.timestamp)):
        raise ValueError(f"timestamp must be an ISO date or date-time, not {f.timestamp!r}")
    extra = tuple(tuple(pair) for pair in f.extra)
    for pair in extra:
        if len(pair) != 2 or not all(isinstance(x, str) for x in pair):
            raise ValueError(f"extra items must be (key, value) string pairs, not {pair!r}")
        key, value = pair
        if not _META_KEY_RE.match(key):
            raise ValueError(f"invalid metadata key {key!r}")
        if value.split() != [value] or "-->" in value or "<!--" in value:
            raise ValueError(f"invalid metadata value {value!r} for key {key!r}")
    _set(f, "extra", extra)
    back = _parse_fact(render_fact_line(f))
    if back != f:
        raise ValueError(
            f"{f!r} cannot be written unambiguously: its line would read back as {back!r}"
        )


def _new_fact(
    content: str,
    category: str,
    tags: tuple[str, ...],
    importance: float | None,
    id_: str | None,
    session: str | None,
    line: int | None,
    timestamp: str | None,
    extra: tuple[tuple[str, str], ...],
) -> Fact:
    # The parser's own output is valid by construction; skipping __post_init__ halves parse time.
    f = object.__new__(Fact)
    d = f.__dict__
    d["content"] = content
    d["category"] = category
    d["tags"] = tags
    d["importance"] = importance
    d["id"] = id_
    d["source_session"] = session
    d["source_line"] = line
    d["timestamp"] = timestamp
    d["extra"] = extra
    return f


# --------------------------------------------------------------------------- one fact line


def _split_rest(rest: str) -> tuple[str, tuple[str, ...], tuple[tuple[str, str], ...]] | None:
    """Split what follows ``- [category]`` into content, tags and metadata pairs (right to left)."""
    s = rest.rstrip()
    pairs: tuple[tuple[str, str], ...] = ()
    if s.endswith("-->"):
        start = s.rfind("<!--")
        end = len(s) - 3
        if 0 <= start and start + 4 <= end:
            body = s[start + 4 : end]
            if "-->" not in body:
                found = []
                for token in body.split():
                    key, sep, value = token.partition(":")
                    if not sep or not value or not _META_KEY_RE.match(key):
                        found = []
                        break
                    found.append((key, value))
                if found:
                    pairs = tuple(found)
                    s = s[:start].rstrip()
    tags: tuple[str, ...] = ()
    if s.endswith("`"):
        last = len(s) - 1
        open_ = s.rfind("`", 0, last)
        if open_ > 0 and s[open_ - 1].isspace() and _TAGS_GROUP_RE.match(s, open_ + 1, last):
            tags = tuple(s[open_ + 1 : last].split())
            s = s[:open_]
    content = s.strip()
    if not content:
        return None
    return content, tags, pairs


def _parse_importance(value: str) -> float | None:
    if not _IMP_RE.match(value):
        return None
    x = float(value)
    return x if 0.0 <= x <= 1.0 else None


def _assign_meta(pairs: tuple[tuple[str, str], ...]) -> tuple:
    id_ = imp = session = line = ts = None
    extra = []
    for key, value in pairs:
        if key == "id" and id_ is None and _valid_id(value):
            id_ = value
        elif key == "imp" and imp is None and (x := _parse_importance(value)) is not None:
            imp = x
        elif (
            key == "src"
            and session is None
            and (m := _SRC_RE.match(value)) is not None
            and ".." not in m.group(1)
        ):
            session = m.group(1)
            line = int(m.group(2)) if m.group(2) is not None else None
        elif key == "ts" and ts is None and _TS_RE.match(value):
            ts = value
        else:
            extra.append((key, value))
    return id_, imp, session, line, ts, tuple(extra)


def _parse_fact(line: str) -> Fact | None:
    m = _FACT_HEAD_RE.match(line, 1 if line[:1] == BOM else 0)
    if m is None:
        return None
    rest = line[m.end() :]
    if "\r" in rest:
        return None
    split = _split_rest(rest)
    if split is None:
        return None
    content, tags, pairs = split
    if pairs:
        id_, imp, session, src_line, ts, extra = _assign_meta(pairs)
        return _new_fact(content, m.group(1), tags, imp, id_, session, src_line, ts, extra)
    return _new_fact(content, m.group(1), tags, None, None, None, None, None, ())


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


def _meta_tokens(fact: Fact) -> list[str]:
    tokens = []
    if fact.id is not None:
        tokens.append(f"id:{fact.id}")
    if fact.importance is not None:
        tokens.append(f"imp:{fact.importance!r}")
    if fact.source_session is not None:
        if fact.source_line is None:
            tokens.append(f"src:{fact.source_session}")
        else:
            tokens.append(f"src:{fact.source_session}#{fact.source_line}")
    if fact.timestamp is not None:
        tokens.append(f"ts:{fact.timestamp}")
    tokens.extend(f"{k}:{v}" for k, v in fact.extra)
    return tokens


def render_fact_line(fact: Fact) -> str:
    """The canonical line for ``fact``, without a line ending."""
    parts = ["- [", fact.category, "] ", fact.content]
    if fact.tags:
        parts += [" `", " ".join(fact.tags), "`"]
    tokens = _meta_tokens(fact)
    if tokens:
        parts += [" <!-- ", " ".join(tokens), " -->"]
    return "".join(parts)


# --------------------------------------------------------------------------- lines and locations


def _check_ending(text: str, ending: str) -> None:
    if ending not in _ENDINGS:
        raise ValueError(f"line ending must be one of {_ENDINGS!r}, not {ending!r}")
    if "\n" in text:
        raise ValueError(f"a line cannot contain '\\n': {text!r}")
    if not text and not ending:
        raise ValueError("an empty line without a line ending is no line at all")
    if ending == "\n" and text.endswith("\r"):
        raise ValueError("a line ending in '\\r' followed by '\\n' is a '\\r\\n' ending")


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
    """A run of consecutive non-blank free-text lines (joined by ``'\\n'``) for full-text indexing."""

    text: str
    line: int
    section: Section | None


def _new_text_line(text: str, ending: str) -> TextLine:
    t = object.__new__(TextLine)
    d = t.__dict__
    d["text"] = text
    d["ending"] = ending
    return t


def _new_fact_line(fact: Fact, ending: str, raw: str) -> FactLine:
    t = object.__new__(FactLine)
    d = t.__dict__
    d["fact"] = fact
    d["ending"] = ending
    d["raw"] = raw
    return t


def _parse_section(heading: str, line: int) -> Section | None:
    m = _SECTION_RE.match(heading)
    if m is None:
        return None
    chat = session = None
    note = []
    for token in (m.group(3) or "").split():
        if chat is None and token.startswith("chat:") and _valid_id(token[5:]):
            chat = token[5:]
        elif session is None and token.startswith("session:") and _valid_id(token[8:]):
            session = token[8:]
        else:
            note.append(token)
    return Section(f"{m.group(1)}:{m.group(2)}", chat, session, " ".join(note), line)


def _title_date(heading: str) -> str | None:
    m = _TITLE_DATE_RE.match(heading)
    if m is None:
        return None
    try:
        return dt.date.fromisoformat(m.group(1)).isoformat()
    except ValueError:
        return None


@dataclass
class _Scan:
    elements: list
    facts: list
    sections: list
    spans: list
    date: str | None
    closer: str | None


def _scan(pairs: list[tuple[str, str]]) -> _Scan:
    """Classify every line in one pass; the single source of truth for what is a fact."""
    elements: list = []
    facts: list = []
    sections: list = []
    spans: list = []
    date = None
    title_seen = False
    section = None
    fence: tuple[str, int] | None = None
    in_comment = False
    span: list[str] = []
    span_start = 0
    span_section = None

    fm = frontmatter_line_count([c for c, _ in pairs]) if pairs and "---" in pairs[0][0] else 0
    add = elements.append
    lineno = 0
    for content, ending in pairs:
        lineno += 1
        if lineno <= fm:
            add(_new_text_line(content, ending))
            continue
        first = content[:1]
        probe = content
        if first == BOM:
            # U+FEFF is invisible; a line that starts with it reads as the line without it.
            probe = content[1:]
            first = probe[:1]
        if fence is not None:
            if probe.lstrip(" \t")[:1] == fence[0] and closes_fence(probe, *fence):
                fence = None
            add(_new_text_line(content, ending))
            if not span:
                span_start, span_section = lineno, section
            span.append(content)
            continue
        if in_comment:
            in_comment = "-->" not in content
        else:
            if first == "-":
                if probe.startswith("- ["):
                    fact = _parse_fact(content)
                    if fact is not None:
                        if span:
                            spans.append(TextSpan("\n".join(span), span_start, span_section))
                            span = []
                        add(_new_fact_line(fact, ending, content))
                        facts.append(LocatedFact(fact, lineno, section, len(facts)))
                        continue
            elif first in _BLOCK_LEADS:
                stripped = probe.lstrip(" \t")
                lead = stripped[:1]
                if lead == "#":
                    atx = atx_heading(probe)
                    if atx is not None and atx[0] <= 2:
                        heading = atx[1]
                        structural = False
                        if atx[0] == 1:
                            section = None
                            if not title_seen:
                                title_seen = True
                                date = _title_date(heading)
                                structural = date is not None
                        else:
                            section = _parse_section(heading, lineno)
                            if section is not None:
                                sections.append(section)
                                structural = True
                        if structural:
                            if span:
                                spans.append(TextSpan("\n".join(span), span_start, span_section))
                                span = []
                            add(_new_text_line(content, ending))
                            continue
                elif lead == "`" or lead == "~":
                    fence = fence_opener(probe)
                elif lead == "<" and stripped.startswith("<!--"):
                    in_comment = "-->" not in stripped[4:]
        add(_new_text_line(content, ending))
        if content.strip():
            if not span:
                span_start, span_section = lineno, section
            span.append(content)
        elif span:
            spans.append(TextSpan("\n".join(span), span_start, span_section))
            span = []
    if span:
        spans.append(TextSpan("\n".join(span), span_start, span_section))
    closer = fence[0] * fence[1] if fence is not None else ("-->" if in_comment else None)
    return _Scan(elements, facts, sections, spans, date, closer)


# --------------------------------------------------------------------------- the daily log


@dataclass(frozen=True)
class DailyLog:
    """A daily log file as an ordered tuple of lines.

    Built by :func:`parse_daily_log` or by hand; a hand-built log is checked on construction (its
    rendering must read back as the same elements, so a TextLine that is really a fact, a fact
    inside a code fence or a misplaced empty ending raise ValueError).
    """

    elements: tuple[Element, ...] = ()
    _facts: tuple[LocatedFact, ...] = field(init=False, repr=False, compare=False, default=())
    _sections: tuple[Section, ...] = field(init=False, repr=False, compare=False, default=())
    _spans: tuple[TextSpan, ...] = field(init=False, repr=False, compare=False, default=())
    _date: str | None = field(init=False, repr=False, compare=False, default=None)
    _closer: str | None = field(init=False, repr=False, compare=False, default=None)

    def __post_init__(self) -> None:
        elements = tuple(self.elements)
        for e in elements:
            if not isinstance(e, (FactLine, TextLine)):
                raise ValueError(f"daily log elements are FactLine or TextLine, not {e!r}")
        scan = _scan(split_lines("".join([e.text + e.ending for e in elements])))
        if scan.elements != list(elements):
            for i, (mine, back) in enumerate(zip(elements, scan.elements)):
                if mine != back:
                    raise ValueError(f"line {i + 1} {mine!r} would read back as {back!r}")
            raise ValueError(
                f"{len(elements)} elements would read back as {len(scan.elements)} lines "
                "(only the last line may lack a line ending)"
            )
        object.__setattr__(self, "elements", elements)
        _attach(self, scan)

    @property
    def date(self) -> str | None:
        """``YYYY-MM-DD`` from the title (the first H1), or None."""
        return self._date

    @property
    def sections(self) -> tuple[Section, ...]:
        """Every ``## HH:MM ...`` section heading, in file order."""
        return self._sections

    @property
    def newline(self) -> str:
        """The line ending new lines should use: the file's first one, else ``'\\n'``."""
        for e in self.elements:
            if e.ending:
                return e.ending
        return "\n"

    def facts(self) -> tuple[LocatedFact, ...]:
        """Every fact with its line, section and index, in file order."""
        return self._facts

    def text_spans(self) -> tuple[TextSpan, ...]:
        """Free text for full-text search: runs of non-blank non-fact lines.

        Frontmatter, the dated title and section headings are structure, not text, and are left
        out; code fence contents are included (and kept in one span across blank lines).
        """
        return self._spans

    def fact_ids(self, rel_path: str) -> tuple[str, ...]:
        """The effective id of each fact (aligned with :meth:`facts`); see the module docstring."""
        ids = []
        claimed: set[str] = set()
        seen: dict[str, int] = {}
        for located in self._facts:
            fact = located.fact
            if fact.id is not None and fact.id not in claimed:
                claimed.add(fact.id)
                ids.append(fact.id)
                continue
            norm = _normalise_content(fact.content)
            n = seen.get(norm, 0)
            seen[norm] = n + 1
            ids.append(_derive(rel_path, norm, n))
        return tuple(ids)

    def _find(self, key: int | str, rel_path: str | None) -> LocatedFact:
        if isinstance(key, int) and not isinstance(key, bool):
            if 0 <= key < len(self._facts):
                return self._facts[key]
        elif isinstance(key, str):
            if rel_path is not None:
                for located, fid in zip(self._facts, self.fact_ids(rel_path)):
                    if fid == key:
                        return located
            else:
                for located in self._facts:
                    if located.fact.id == key:
                        return located
        raise NotFoundError(f"no fact {key!r} in this daily log")

    def replace_fact(self, key: int | str, new_fact: Fact, *, rel_path: str | None = None) -> DailyLog:
        """A log with one fact replaced; only its line changes (and keeps its line ending).

        ``key`` is a fact index (from :meth:`facts`) or an id: an explicit id, or with
        ``rel_path`` any effective id from :meth:`fact_ids`. Raises NotFoundError.
        """
        if not isinstance(new_fact, Fact):
            raise ValueError(f"replace_fact needs a Fact, not {type(new_fact).__name__}")
        located = self._find(key, rel_path)
        i = located.line - 1
        old = self.elements[i]
        if old.fact == new_fact:
            return self
        # A byte order mark on the first line belongs to the file, not to the fact: keep it.
        raw = BOM + render_fact_line(new_fact) if old.text.startswith(BOM) else None
        new = FactLine(new_fact, old.ending, raw)
        elements = self.elements[:i] + (new,) + self.elements[i + 1 :]
        return DailyLog(elements)

    def remove_fact(self, key: int | str, *, rel_path: str | None = None) -> DailyLog:
        """A log without one fact's line (same ``key`` rules as :meth:`replace_fact`)."""
        i = self._find(key, rel_path).line - 1
        return DailyLog(self.elements[:i] + self.elements[i + 1 :])


def _attach(log: DailyLog, scan: _Scan) -> None:
    set_ = object.__setattr__
    set_(log, "_facts", tuple(scan.facts))
    set_(log, "_sections", tuple(scan.sections))
    set_(log, "_spans", tuple(scan.spans))
    set_(log, "_date", scan.date)
    set_(log, "_closer", scan.closer)


def parse_daily_log(text: str) -> DailyLog:
    """Parse a daily log. Never raises: anything the grammar does not claim is a TextLine."""
    scan = _scan(split_lines(text))
    log = object.__new__(DailyLog)
    object.__setattr__(log, "elements", tuple(scan.elements))
    _attach(log, scan)
    return log


def render_daily_log(log: DailyLog) -> str:
    """The file text; byte-identical to the parsed input for every line not replaced."""
    return "".join([e.text + e.ending for e in log.elements])


# --------------------------------------------------------------------------- writing helpers


def _check_token_id(kind: str, value: str | None) -> None:
    if value is not None and (not isinstance(value, str) or not _valid_id(value)):
        raise InvalidIdError(kind, value, "1-128 of A-Z a-z 0-9 . _ @ + -, no '..'")


def _format_time(time: str | dt.time) -> str:
    if isinstance(time, dt.time):
        return time.strftime("%H:%M")
    if not isinstance(time, str) or not _TIME_RE.match(time):
        raise ValueError(f"section time must be HH:MM, not {time!r}")
    return time


def new_daily_log(date: str | dt.date, *, newline: str = "\n") -> DailyLog:
    """A fresh log holding only its ``# YYYY-MM-DD`` title."""
    if isinstance(date, dt.datetime):
        date = date.date()
    iso = date.isoformat() if isinstance(date, dt.date) else dt.date.fromisoformat(date).isoformat()
    if newline not in ("\n", "\r\n"):
        raise ValueError(f"newline must be '\\n' or '\\r\\n', not {newline!r}")
    return DailyLog((TextLine(f"# {iso}", newline),))


def append_section(
    log: DailyLog,
    time: str | dt.time,
    chat: str | None = None,
    session: str | None = None,
    facts: Iterable[Fact] = (),
) -> DailyLog:
    """``log`` plus a ``## HH:MM chat:<chat> session:<session>`` section holding ``facts``.

    New lines use the file's own line ending. Existing lines are untouched, except that a last
    line without a line ending gets one. A blank line separates the section from what precedes
    it; if the file ends inside an unclosed code fence or HTML comment, a closing line is written
    first, because otherwise the new facts would be swallowed as code.
    """
    _check_token_id("chat", chat)
    _check_token_id("session", session)
    heading = f"## {_format_time(time)}"
    if chat is not None:
        heading += f" chat:{chat}"
    if session is not None:
        heading += f" session:{session}"
    facts = list(facts)
    for fact in facts:
        if not isinstance(fact, Fact):
            raise ValueError(f"append_section needs Facts, not {type(fact).__name__}")
    nl = log.newline
    elements = list(log.elements)
    if elements and elements[-1].ending == "":
        last = elements[-1]
        if isinstance(last, FactLine):
            elements[-1] = FactLine(last.fact, nl, last.raw)
        elif last.text.endswith("\r"):
            elements[-1] = TextLine(last.text[:-1], "\r\n")
        else:
            elements[-1] = TextLine(last.text, nl)
    if log._closer is not None:
        elements.append(TextLine(log._closer, nl))
    if elements and elements[-1].text.strip():
        elements.append(TextLine("", nl))
    elements.append(TextLine(heading, nl))
    elements.extend(FactLine(fact, nl) for fact in facts)
    return DailyLog(tuple(elements))


# --------------------------------------------------------------------------- ids


def _normalise_content(content: str) -> str:
    return " ".join(unicodedata.normalize("NFC", content).casefold().split())


def _derive(rel_path: str, normalised: str, occurrence: int) -> str:
    key = f"{rel_path}\x00{normalised}\x00{occurrence}".encode("utf-8", "surrogatepass")
    return "h-" + hashlib.blake2b(key, digest_size=8).hexdigest()


def derive_fact_id(rel_path: str, content: str, occurrence: int) -> str:
    """``h-`` + 16 hex digits identifying a hand-written fact (see the module docstring).

    ``rel_path`` is the POSIX path relative to the home (``memory/users/u/2026-11-22.md``);
    ``occurrence`` counts from 0 among the file's id-less facts with the same normalised content.
    """
    return _derive(rel_path, _normalise_content(content), occurrence)
