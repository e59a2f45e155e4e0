"""Vault pages, MEMORY.md and core blocks: frontmatter, heading chunks, wikilinks and tags.

A page is its text. :class:`Page` holds the exact text (so ``render_page`` is the identity and
equality is text equality) and derives everything else from it on construction:

* ``frontmatter_raw`` is the exact leading ``---`` ... ``---`` block (with a byte order mark, if
  the file has one) or ``''``; ``body`` is the rest, so ``frontmatter_raw + body == text``.
  ``frontmatter`` is the block read with YAML's safe loader; invalid YAML (or YAML that is not a
  mapping) gives ``{}`` and a ``frontmatter_error`` message instead of an exception, because a
  person's typo must not stop the rest of the page from being indexed.
* ``chunks`` split the body on ATX headings (``#`` to ``######``, up to three spaces of indent,
  outside code fences). Text before the first heading has an empty heading path. A chunk's text
  is its source lines (heading line included) joined with ``'\\n'``, blank lines trimmed from both
  ends; ``line`` is the 1-based file line of its first line. Chunks longer than
  ``MAX_CHUNK_CHARS`` are cut at paragraph boundaries (blank lines outside fences), a paragraph
  still too long at line boundaries, a line still too long near a space, so every embedded
  passage stays small enough to mean something. Setext headings are not split on.
* ``links``: ``[[target#heading^block|alias]]`` and ``![[...]]`` embeds, outside code fences,
  inline code, comments (``%%...%%``, ``<!-- ... -->``, both may span lines) and math (``$...$``
  on one line, ``$$...$$`` which may span lines); ``\\|`` (Obsidian's alias separator inside
  tables) counts as ``|``. Wikilinks in frontmatter values count too (Obsidian shows them as
  backlinks). ``target`` is ``''`` for a link into the same page; absent parts are None.
  ``raw`` keeps the text between the brackets (``\\|`` read as ``|``) so a resolver can read it
  exactly as Obsidian does (:mod:`syncd.wiki.resolve`).
* ``markdown_links``: ``[text](destination)`` links and ``![alt](destination)`` embeds to
  files of the vault (CommonMark inline links: the destination has no spaces unless written in
  ``<...>``, an optional title may follow), with the same exclusions as wikilinks; an image
  inside a link's text (``[![alt](a.png)](b.md)``) counts too. Destinations with a scheme
  (``https:``, ``mailto:``, ``obsidian:``, ...) point outside the vault and are not kept; the
  others are split at the first ``#`` and each part URL-decoded (``Note%20name.md``). Reference
  links (``[text][ref]``) and HTML ``<a href>`` are not read (Obsidian does not draw them in
  its graph either).
* ``headings``: every ATX heading outside code, comments and math, with its level and line, the
  targets of ``[[page#Heading]]``. ``block_ids``: ``^id`` (letters, digits, ``-``) ending a line
  after a space or alone on its line, the targets of ``[[page#^id]]``. ``footnotes``: ids of
  ``[^id]:`` definitions (targets of ``[[page#[^id]]]``).
* ``tags``: frontmatter ``tags`` / ``tag`` (a list, or a string split on commas and spaces; a
  leading ``#`` dropped), then body ``#tags`` by Obsidian's rules: ``#`` at the start of a line or
  after whitespace, then letters, digits, ``_``, ``-``, ``/`` with at least one non-digit; never
  inside code, comments, math, wikilinks, URL fragments (``http://x/#a``) or a heading's own
  ``#`` marker. Tags
  keep their spelling; duplicates are dropped.
* ``title``: the frontmatter ``title``, else the first H1, else None.

"Code" means fenced code (see :mod:`syncd.formats.text`) and inline code spans; indented code
blocks are not recognised, because list continuations look the same. A U+FEFF starting a line is
ignored. ``body_line`` is the 1-based line where the body starts.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

from .text import (
    BOM,
    atx_heading,
    closes_fence,
    fence_opener,
    frontmatter_line_count,
    split_lines,
)

__all__ = [
    "MAX_CHUNK_CHARS",
    "Chunk",
    "WikiLink",
    "MarkdownLink",
    "markdown_destination",
    "Heading",
    "BlockId",
    "Page",
    "parse_page",
    "parse_page_outline",
    "render_page",
    "page_from_body",
    "scalar_text",
]

MAX_CHUNK_CHARS = 2000

# libyaml is much faster but recurses in C: nesting ~100k levels deep ("- - - - ...") overflows the
# stack and kills the process. Nesting depth is bounded by length, so libyaml only reads
# frontmatter short enough to be harmless; longer blocks go to the pure-Python loader, which
# raises RecursionError instead.
_FAST_YAML_MAX_CHARS = 4096
_WIKILINK_RE = re.compile(r"(!?)\[\[([^\[\]\n]+?)\]\]")
# ``[text](destination "title")``: text with one level of nested brackets (an image inside a
# link), a destination in <...> or without spaces (balanced parentheses allowed), an optional title.
_MDLINK_RE = re.compile(
    r"(!?)\[((?:[^\[\]\n\\]|\\.|\[(?:[^\[\]\n\\]|\\.)*\])*)\]"
    r"\([ \t]*(<[^<>\n]*>|(?:[^\s()\\]|\\.|\((?:[^\s()\\]|\\.)*\))*)"
    r"(?:[ \t]+(?:\"[^\"\n]*\"|'[^'\n]*'|\([^()\n]*\)))?[ \t]*\)"
)
_SCHEME_RE = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")
_ESCAPED_RE = re.compile(r"\\([!-/:-@\[-`{-~])")
_TAG_RE = re.compile(r"(?<!\S)#([\w/-]+)")
_FM_TAG_SPLIT_RE = re.compile(r"[,\s]+")
_BLOCK_ID_RE = re.compile(r"(?:^|\s)\^([A-Za-z0-9-]+)[ \t]*$")
_FOOTNOTE_RE = re.compile(r"[ ]{0,3}\[\^([^\]\s]+)\]:")
# What closes each hidden region that may span lines.
_CLOSERS = {"%%": "%%", "<!--": "-->", "$$": "$$"}
# What opens one (``$`` also opens inline math).
_OPENERS = ("%%", "<!--", "$")
# Code spans and wikilinks are masked by a character that is neither a space nor a word character,
# so a '#' right after them is still "not preceded by whitespace" and never starts a tag.
_MASK = "\x00"


@dataclass(frozen=True)
class Chunk:
    """A heading-sized piece of a page, the unit that is embedded and searched."""

    heading_path: tuple[str, ...]
    text: str
    line: int


@dataclass(frozen=True)
class WikiLink:
    """One ``[[...]]`` link or ``![[...]]`` embed; ``line`` is 1-based in the whole file."""

    target: str
    heading: str | None
    block: str | None
    alias: str | None
    embed: bool
    line: int
    raw: str = field(default="", compare=False, repr=False)


@dataclass(frozen=True)
class MarkdownLink:
    """One ``[text](destination)`` link or ``![alt](destination)`` embed to a vault file:
    ``path`` and ``subpath`` (``'#...'`` or ``''``) URL-decoded, ``path`` ``''`` for a link
    into the same page; ``raw`` the link as written; ``line`` 1-based in the whole file."""

    path: str
    subpath: str
    text: str
    embed: bool
    line: int
    raw: str = field(default="", compare=False, repr=False)


@dataclass(frozen=True)
class Heading:
    """An ATX heading outside code, comments and math; ``line`` is 1-based in the whole file."""

    level: int
    text: str
    line: int


@dataclass(frozen=True)
class BlockId:
    """A ``^id`` block identifier as written; ``line`` is 1-based in the whole file."""

    id: str
    line: int


@dataclass(frozen=True)
class Page:
    """A markdown page; only ``text`` is stored and compared, the rest is derived from it."""

    text: str
    frontmatter_raw: str = field(init=False, compare=False, repr=False)
    frontmatter: dict[Any, Any] = field(init=False, compare=False, repr=False)
    frontmatter_error: str | None = field(init=False, compare=False, repr=False)
    body: str = field(init=False, compare=False, repr=False)
    body_line: int = field(init=False, compare=False, repr=False)
    title: str | None = field(init=False, compare=False, repr=False)
    chunks: tuple[Chunk, ...] = field(init=False, compare=False, repr=False)
    links: tuple[WikiLink, ...] = field(init=False, compare=False, repr=False)
    markdown_links: tuple[MarkdownLink, ...] = field(init=False, compare=False, repr=False)
    tags: tuple[str, ...] = field(init=False, compare=False, repr=False)
    headings: tuple[Heading, ...] = field(init=False, compare=False, repr=False)
    block_ids: tuple[BlockId, ...] = field(init=False, compare=False, repr=False)
    footnotes: tuple[str, ...] = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.text, str):
            raise ValueError(f"page text must be a str, not {type(self.text).__name__}")
        _analyse(self)


def parse_page(text: str) -> Page:
    """Parse a page. Never raises for any str."""
    return Page(text)


def render_page(page: Page) -> str:
    """The page's text, unchanged."""
    return page.text


def page_from_body(body: str, frontmatter: dict[Any, Any] | None = None) -> Page:
    """A new page whose ``body`` is exactly ``body`` and whose ``frontmatter`` equals the dict.

    The frontmatter is written with ``yaml.safe_dump`` (keys in the given order). A body that
    itself starts like frontmatter gets an empty ``---``/``---`` block in front so it stays body.
    Raises ValueError if the frontmatter cannot be written as YAML that reads back equal.
    """
    if not isinstance(body, str):
        raise ValueError(f"page body must be a str, not {type(body).__name__}")
    if frontmatter:
        if not isinstance(frontmatter, dict):
            raise ValueError(f"frontmatter must be a dict, not {type(frontmatter).__name__}")
        import yaml  # here, not at the top: see _load_frontmatter

        try:
            dumped = yaml.safe_dump(frontmatter, sort_keys=False, allow_unicode=True, default_flow_style=False)
        except yaml.YAMLError as exc:
            raise ValueError(f"frontmatter cannot be written as YAML: {exc}") from None
        page = Page(f"---\n{dumped}---\n{body}")
    else:
        page = Page(body)
        if page.frontmatter_raw:
            page = Page(f"---\n---\n{body}")
    if page.body != body or page.frontmatter != (frontmatter or {}):
        raise ValueError("frontmatter does not survive a YAML round trip; use plain YAML values")
    return page


# --------------------------------------------------------------------------- analysis


def _load_frontmatter(source: str) -> tuple[dict[Any, Any], str | None]:
    # PyYAML is imported by the first page that has frontmatter: a process that reads only daily
    # logs (a one-shot sync of an edited log, a search) never needs it.
    import yaml

    try:
        loader = (
            getattr(yaml, "CSafeLoader", yaml.SafeLoader) if len(source) <= _FAST_YAML_MAX_CHARS else yaml.SafeLoader
        )
        data = yaml.load(source, Loader=loader)
    except Exception as exc:  # noqa: BLE001 (a page must parse whatever its frontmatter holds)
        # Besides YAMLError, constructors raise ValueError/TypeError/OverflowError on input such
        # as an impossible date or an unhashable key; a page must still parse.
        first = str(exc).strip().splitlines()
        return {}, f"invalid YAML frontmatter: {first[0] if first else type(exc).__name__}"
    if data is None:
        return {}, None
    if not isinstance(data, dict):
        return {}, f"frontmatter is a {type(data).__name__}, not a mapping"
    return data, None


def scalar_text(value: Any) -> str | None:
    """A frontmatter value written as text when it is a scalar people mean as text (a string,
    an integer or a float; not a boolean), else None. An integer too long for Python to write
    (past 4300 digits it raises ValueError) is None too: YAML 1.1 reads ``1:59:59:...`` as one
    number in base 60, so a few kilobytes of frontmatter make one."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return None
    try:
        return str(value)
    except ValueError:
        return None


def _frontmatter_tags(fm: dict[Any, Any]) -> list[str]:
    out: list[str] = []
    for key in ("tags", "tag"):
        value = fm.get(key)
        items = value if isinstance(value, list) else [value]
        for item in items:
            text = scalar_text(item)
            if text is None:
                continue
            for word in _FM_TAG_SPLIT_RE.split(text):
                word = word.lstrip("#")
                if word:
                    out.append(word)
    return out


def _frontmatter_title(fm: dict[Any, Any]) -> str | None:
    text = scalar_text(fm.get("title"))
    return None if text is None else text.strip() or None


def _mask_code_spans(line: str) -> str:
    """``line`` with every inline code span (backticks included) replaced by mask characters."""
    n = len(line)
    out = []
    pos = 0
    search = 0
    while True:
        start = line.find("`", search)
        if start < 0:
            break
        end = start
        while end < n and line[end] == "`":
            end += 1
        run = end - start
        close = end
        while True:
            close = line.find("`" * run, close)
            if close < 0:
                break
            after = close + run
            if after < n and line[after] == "`":
                while after < n and line[after] == "`":
                    after += 1
                close = after
                continue
            break
        if close < 0:
            # An unmatched backtick run is literal text (CommonMark); keep scanning after it.
            search = end
            continue
        out.append(line[pos:start])
        out.append(_MASK * (close + run - start))
        pos = search = close + run
    if not out:
        return line
    out.append(line[pos:])
    return "".join(out)


def _math_closers(line: str) -> list[int]:
    """Where a ``$`` may close inline math, in order: Pandoc's rule (which Obsidian follows
    closely) is that the closing ``$`` is not preceded by a space or a backslash nor followed by
    a digit, so ``$5 and $10`` is text."""
    n = len(line)
    out = []
    close = line.find("$", 1)
    while close >= 0:
        if line[close - 1] not in " \t\\" and not (close + 1 < n and line[close + 1].isdigit()):
            out.append(close)
        close = line.find("$", close + 1)
    return out


def _inline_math_end(line: str, start: int, closers: list[int]) -> int:
    """End (exclusive) of a ``$...$`` span opening at ``start``, or -1 if none opens there
    (the opening ``$`` is not followed by a space); ``closers`` from :func:`_math_closers`.
    Looked up, not searched for: a line of many ``$`` that close nothing (prices, ``$a $b``)
    would otherwise be scanned to its end once per ``$``."""
    n = len(line)
    if start + 1 >= n or line[start + 1] in " \t$":
        return -1
    at = bisect.bisect_left(closers, start + 2)
    return closers[at] + 1 if at < len(closers) else -1


def _mask_hidden(line: str, hidden: str | None) -> tuple[str, str | None]:
    """Mask code spans, comments and math in ``line``; ``hidden`` is the closer still awaited
    from an earlier line (or None). Returns the masked line and the closer awaited after it.

    Linear in the line's length: each opener's next place is searched for again only once the
    scan has passed it, so a line of thousands of ``$`` or ``%%`` costs one pass, not one each."""
    if "`" in line:
        line = _mask_code_spans(line)
    n = len(line)
    out: list[str] = []
    pos = 0
    upcoming = dict.fromkeys(_OPENERS, -2)  # -2: not searched yet; -1: none left in the line
    closers: list[int] | None = None
    while pos < n:
        if hidden is not None:
            end = line.find(hidden, pos)
            if end < 0:
                out.append(_MASK * (n - pos))
                return "".join(out), hidden
            end += len(hidden)
            out.append(_MASK * (end - pos))
            pos = end
            hidden = None
            continue
        for opener, at in upcoming.items():
            if -1 < at < pos or at == -2:
                upcoming[opener] = line.find(opener, pos)
        starts = [i for i in upcoming.values() if i >= 0]
        if not starts:
            break
        start = min(starts)
        if line.startswith("%%", start):
            opener = "%%"
        elif line.startswith("<!--", start):
            opener = "<!--"
        elif line.startswith("$$", start):
            opener = "$$"
        else:
            if start and line[start - 1] == "\\":
                end = -1
            else:
                if closers is None:
                    closers = _math_closers(line)
                end = _inline_math_end(line, start, closers)
            if end < 0:
                out.append(line[pos : start + 1])
                pos = start + 1
                continue
            out.append(line[pos:start])
            out.append(_MASK * (end - start))
            pos = end
            continue
        out.append(line[pos:start])
        out.append(_MASK * len(opener))
        pos = start + len(opener)
        hidden = _CLOSERS[opener]
    out.append(line[pos:])
    return "".join(out), hidden


def _wikilink(embed: bool, inner: str, line: int) -> WikiLink | None:
    raw = inner.replace("\\|", "|")
    link, sep, alias = raw.partition("|")
    target, hash_, fragment = link.partition("#")
    if hash_:
        heading, _, block = fragment.partition("^")
    else:
        target, _, block = target.partition("^")
        heading = ""
    target = target.strip()
    heading_ = heading.strip() or None
    block_ = block.strip() or None
    if not target and heading_ is None and block_ is None:
        return None
    alias_ = alias.strip() or None if sep else None
    return WikiLink(target, heading_, block_, alias_, embed, line, raw)


def _line_links(line: str, lineno: int, out: list[WikiLink]) -> None:
    for m in _WIKILINK_RE.finditer(line):
        link = _wikilink(m.group(1) == "!", m.group(2), lineno)
        if link is not None:
            out.append(link)


def markdown_destination(destination: str) -> tuple[str, str] | None:
    """``(path, subpath)`` of a markdown link's destination as written between the
    parentheses, URL-decoded; None for a destination outside the vault (a scheme) or none."""
    if destination.startswith("<") and destination.endswith(">"):
        destination = destination[1:-1]
    destination = _ESCAPED_RE.sub(r"\1", destination.strip())
    if not destination or _SCHEME_RE.match(destination):
        return None
    path, hash_, fragment = destination.partition("#")
    path, subpath = unquote(path), ("#" + unquote(fragment) if hash_ else "")
    if not path and not subpath.strip("#"):
        return None
    return path, subpath


def _line_markdown_links(masked: str, content: str, lineno: int, out: list[MarkdownLink], start: int = 0,
                         end: int | None = None) -> None:  # fmt: skip
    for m in _MDLINK_RE.finditer(masked, start, len(masked) if end is None else end):
        found = markdown_destination(m.group(3))
        if found is not None:
            out.append(MarkdownLink(found[0], found[1], m.group(2), m.group(1) == "!", lineno,
                                    content[m.start() : m.end()]))  # fmt: skip
        if "](" in m.group(2):
            _line_markdown_links(masked, content, lineno, out, m.start(2), m.end(2))


def parse_page_outline(text: str) -> Page:
    """A page with everything but its ``chunks`` (left empty): for readers of its links,
    headings and metadata alone (the wiki's link graph), which would not use them. Never
    raises for any str."""
    if not isinstance(text, str):
        raise ValueError(f"page text must be a str, not {type(text).__name__}")
    page = object.__new__(Page)
    object.__setattr__(page, "text", text)
    _analyse(page, with_chunks=False)
    return page


# One pass over the lines reading every construct at once, on purpose: it runs for every line of
# a vault, and a pass per construct (or a call per line) costs more (hence the C901 noqa).
def _analyse(page: Page, with_chunks: bool = True) -> None:  # noqa: C901
    text = page.text
    lines = split_lines(text)
    contents = [c for c, _ in lines]
    fm_count = frontmatter_line_count(contents)
    fm_raw = "".join([c + e for c, e in lines[:fm_count]])
    links: list[WikiLink] = []
    md_links: list[MarkdownLink] = []
    if fm_count:
        frontmatter, error = _load_frontmatter("\n".join(contents[1 : fm_count - 1]))
        for i in range(1, fm_count - 1):
            if "[[" in contents[i]:
                _line_links(contents[i], i + 1, links)
    else:
        frontmatter, error = {}, None
    tags = _frontmatter_tags(frontmatter)
    title = _frontmatter_title(frontmatter)
    first_h1: str | None = None

    chunks: list[Chunk] = []
    stack: list[tuple[int, str]] = []
    path: tuple[str, ...] = ()
    current: list[tuple[int, str]] = []
    fence: tuple[str, int] | None = None
    hidden: str | None = None  # the closer of a comment or math block still open
    headings: list[Heading] = []
    block_ids: list[BlockId] = []
    footnotes: list[str] = []
    for index in range(fm_count, len(contents)):
        content = contents[index]
        lineno = index + 1
        if content[:1] == BOM:
            content = content[1:]
        if fence is not None:
            if closes_fence(content, *fence):
                fence = None
            current.append((lineno, content))
            continue
        stripped = content.lstrip(" \t")
        lead = stripped[:1]
        if hidden is None and (lead == "`" or lead == "~"):
            fence = fence_opener(content)
            if fence is not None:
                current.append((lineno, content))
                continue
        elif lead == "#" and (atx := atx_heading(content)) is not None:
            if with_chunks:
                _flush(path, current, chunks)
            current = []
            level = atx[0]
            heading = atx[1].strip()
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, heading))
            path = tuple(h for _, h in stack)
            if level == 1 and first_h1 is None and heading:
                first_h1 = heading
            if hidden is None:
                headings.append(Heading(level, heading, lineno))
        current.append((lineno, content))
        masked = content
        # Spelled out rather than any(...) over the hints: this runs for every line of a vault.
        if hidden is not None or "`" in content or "%%" in content or "<!--" in content or "$" in content:
            masked, hidden = _mask_hidden(content, hidden)
        if "[[" in masked:
            _line_links(masked, lineno, links)
            # Same length: positions in ``masked`` stay those of ``content``.
            masked = _WIKILINK_RE.sub(lambda m: _MASK * len(m.group(0)), masked)
        if "](" in masked:
            _line_markdown_links(masked, content, lineno, md_links)
        if "#" in masked:
            for m in _TAG_RE.finditer(masked):
                tag = m.group(1)
                if not tag.isdigit():
                    tags.append(tag)
        if "^" in masked:
            if (b := _BLOCK_ID_RE.search(masked)) is not None:
                block_ids.append(BlockId(b.group(1), lineno))
            if lead == "[" and (f := _FOOTNOTE_RE.match(masked)) is not None:
                footnotes.append(f.group(1))
    if with_chunks:
        _flush(path, current, chunks)

    set_ = object.__setattr__
    set_(page, "frontmatter_raw", fm_raw)
    set_(page, "frontmatter", frontmatter)
    set_(page, "frontmatter_error", error)
    set_(page, "body", text[len(fm_raw) :])
    set_(page, "body_line", fm_count + 1)
    set_(page, "title", title if title is not None else first_h1)
    set_(page, "chunks", tuple(chunks))
    set_(page, "links", tuple(links))
    set_(page, "markdown_links", tuple(md_links))
    set_(page, "tags", tuple(dict.fromkeys(tags)))
    set_(page, "headings", tuple(headings))
    set_(page, "block_ids", tuple(block_ids))
    set_(page, "footnotes", tuple(dict.fromkeys(footnotes)))


# --------------------------------------------------------------------------- chunking


def _trim(lines: list[tuple[int, str]]) -> list[tuple[int, str]]:
    start, end = 0, len(lines)
    while start < end and not lines[start][1].strip():
        start += 1
    while end > start and not lines[end - 1][1].strip():
        end -= 1
    return lines[start:end]


def _flush(path: tuple[str, ...], lines: list[tuple[int, str]], out: list[Chunk]) -> None:
    lines = _trim(lines)
    if not lines:
        return
    text = "\n".join(c for _, c in lines)
    if len(text) <= MAX_CHUNK_CHARS:
        out.append(Chunk(path, text, lines[0][0]))
        return
    for a, b in _pack(_paragraphs(lines), lines):
        _emit_range(path, lines, a, b, out)


def _paragraphs(lines: list[tuple[int, str]]) -> list[tuple[int, int]]:
    """Index ranges of paragraphs: runs of lines between blank lines outside code fences."""
    paras = []
    start = None
    fence: tuple[str, int] | None = None
    for i, (_, content) in enumerate(lines):
        if fence is not None:
            if closes_fence(content, *fence):
                fence = None
            continue
        if not content.strip():
            if start is not None:
                paras.append((start, i))
                start = None
            continue
        if start is None:
            start = i
        if content.lstrip(" \t")[:1] in ("`", "~"):
            fence = fence_opener(content)
    if start is not None:
        paras.append((start, len(lines)))
    return paras


def _pack(ranges: list[tuple[int, int]], lines: list[tuple[int, str]]) -> list[tuple[int, int]]:
    """Greedily merge consecutive ranges while the joined text stays within MAX_CHUNK_CHARS."""
    offsets = [0]
    for _, content in lines:
        offsets.append(offsets[-1] + len(content) + 1)

    def size(a: int, b: int) -> int:
        return offsets[b] - offsets[a] - 1

    out: list[tuple[int, int]] = []
    cur: tuple[int, int] | None = None
    for a, b in ranges:
        if cur is not None and size(cur[0], b) <= MAX_CHUNK_CHARS:
            cur = (cur[0], b)
            continue
        if cur is not None:
            out.append(cur)
        cur = (a, b)
    if cur is not None:
        out.append(cur)
    return out


def _emit_range(path: tuple[str, ...], lines: list[tuple[int, str]], a: int, b: int, out: list[Chunk]) -> None:
    piece = _trim(lines[a:b])
    if not piece:
        return
    text = "\n".join(c for _, c in piece)
    if len(text) <= MAX_CHUNK_CHARS:
        out.append(Chunk(path, text, piece[0][0]))
    elif len(piece) > 1:
        for x, y in _pack([(i, i + 1) for i in range(len(piece))], piece):
            _emit_range(path, piece, x, y, out)
    else:
        lineno, content = piece[0]
        for part in _cut_line(content):
            if part.strip():
                out.append(Chunk(path, part, lineno))


def _cut_line(content: str) -> list[str]:
    """Cut an over-long line into pieces of at most MAX_CHUNK_CHARS, at a space if one is near."""
    parts = []
    while len(content) > MAX_CHUNK_CHARS:
        cut = content.rfind(" ", MAX_CHUNK_CHARS // 2, MAX_CHUNK_CHARS)
        if cut <= 0:
            cut = MAX_CHUNK_CHARS
        parts.append(content[:cut])
        content = content[cut:]
    parts.append(content)
    return parts
