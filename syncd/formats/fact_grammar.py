"""The grammar of one fact line (``- [category] content `tags` <!-- key:value ... -->``) and the
:class:`Fact` it reads as. Where in a file a line may be a fact is log_scan.py's concern.

What is a fact line (strict on purpose; a peer's parser invented categories from look-alikes):

* the line starts at column 0 with ``- [`` (dash, ONE space); ``*``/``+``/numbered/indented
  bullets are text. A leading U+FEFF (a byte order mark on line 1) is ignored and kept;
* the category is ``[a-z][a-z0-9_-]*``, 2..32 characters: the two-character minimum keeps task
  boxes out (``[ ]``, ``[x]``, ``[X]``, the one-letter statuses of Obsidian themes), and so are
  ``[12:30]``, ``[[wikilinks]]``, ``[Some Thing]``;
* ``]`` is followed by spaces or tabs and non-empty content (``[text](url)``, ``[ref]: url`` are
  text), and the line holds no lone ``'\r'`` (CommonMark reads that as a line break).

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
"""

from __future__ import annotations

import numbers
import re
from dataclasses import dataclass

from ..errors import InvalidInputError
from .text import BOM

__all__ = [
    "CATEGORY_RULE",
    "ID_PATTERN",
    "ID_RULE",
    "Fact",
    "fact_on_line",
    "parse_fact_line",
    "render_fact_line",
    "valid_id",
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
# An id as a regex, for the fast paths that read a whole engine-written line in one match.
ID_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._@+-]{0,127}"
_IMP_RE = re.compile(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?\Z")
_TS_RE = re.compile(r"\d{4}-\d{2}-\d{2}(?:T\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:Z|[+-]\d{2}(?::?\d{2})?)?)?\Z")
# What the engine writes for an extracted fact (``ts`` is ``isoformat(timespec="seconds")``);
# no optional groups, which makes the regex faster (bench_parse.py measures parsing). Anything
# else takes the general path.
_ENGINE_META = (
    rf"id:({ID_PATTERN}) imp:([01]?\.[0-9]+|[01]) src:({ID_PATTERN})(?:#([0-9]{{1,18}}))?"
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
_object_new = object.__new__


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
        check(value is None or (isinstance(value, str) and valid_id(value)), f"{value!r}: {ID_RULE}")
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
    back = fact_on_line(render_fact_line(f))
    check(back == f, f"{f!r} cannot be written unambiguously: it would read back as {back!r}")


# --------------------------------------------------------------------------- one fact line


def fact_on_line(line: str) -> Fact | None:
    """The Fact on ``line`` (no line ending), or None. The hot path of every daily-log read.

    Read right to left: the final metadata comment, then the final tags group, then content.
    """
    if "\r" in line:
        return None
    if line.endswith(" -->") and (e := (_ENGINE_TAGGED_LINE_RE if "` <!-- " in line else _ENGINE_LINE_RE).match(line)):
        # Fast path for a whole line exactly as the engine writes it (one regex instead of a
        # dozen steps). It must agree with the general path, so anything it cannot vouch for
        # (content ending in a backtick, '..' in an id, importance over 1) goes that way.
        category, content, tag_words, id_, imp, session, src_line, ts = e.groups()
        content = content.strip()
        imp = float(imp)
        if (
            content
            and (tag_words or not content.endswith("`"))
            and ".." not in id_
            and ".." not in session
            and imp <= 1.0
        ):
            fact = _object_new(Fact)
            d = fact.__dict__
            d["content"] = content
            d["category"] = category
            d["tags"] = tuple(tag_words.split(" ")) if tag_words else ()
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
            if words and " -" not in " " + flat and (canonical or sum(map(len, words)) + flat.count(" ") == len(flat)):
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
            if session is None and valid_id(name) and (not hash_ or (0 < len(number) <= 18 and number.isdecimal())):
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
    return fact_on_line(line)


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
