"""Hypothesis strategies shared by the test suite.

Grouped by format. Generators of *texts* also return what a correct parser must find (the oracle)
where that is cheap to know, so properties check classification and not only round trips.
"""

from __future__ import annotations

import dataclasses
import string
from collections.abc import Callable

from hypothesis import reject, settings
from hypothesis import strategies as st

from syncd.formats import Fact, FactLine, TextLine, page_from_body, render_fact_line

__all__ = [
    "examples",
    "HOSTILE_TEXT",
    "unicode_text",
    "line_text",
    "prose_lines",
    "categories",
    "safe_ids",
    "tag_words",
    "fact_contents",
    "facts",
    "raw_fact_lines",
    "engine_shaped_lines",
    "LOOKALIKE_LINES",
    "lookalike_lines",
    "section_headings",
    "daily_log_texts",
    "daily_log_models",
    "daily_log_edits",
    "page_texts",
    "page_models",
    "odd_segments",
    "user_folder_paths",
    "sync_runs",
]


def examples(ci: int) -> int:
    """``max_examples`` for a law whose every example costs (a real engine, git, the model): ``ci``
    under the CI profile, which runs hypothesis's usual 100 for the other laws, and as many times
    more under ``pytest --slow`` (SYNCD_SLOW=1) as that profile runs (1000: ten times). Each CI
    run draws new examples (no database is kept), so a smaller ``ci`` still explores over runs."""
    return ci * settings().max_examples // 100


# ---------------------------------------------------------------------------------------- text

# Every script hypothesis can draw, plus characters that break naive line handling.
_TRICKY = [
    "\x0b",
    "\x0c",
    "\x1c",
    "\x1d",
    "\x1e",
    "\x85",
    "\u2028",
    "\u2029",
    "\t",
    "\ufeff",
    "\xa0",
]
_SCRIPTS = [
    "héllo",
    "Ωμέγα",
    "привет",
    "日本語",
    "한국어",
    "עברית",
    "العربية",
    "हिंदी",
    "🙂👍🏽",
    "ﬁ",
]


def unicode_text(*, exclude: str = "", max_size: int = 20) -> st.SearchStrategy[str]:
    """Any text (no surrogates) mixed with tricky separators and words of many scripts."""
    chars = st.characters(exclude_categories=("Cs",), exclude_characters=exclude)
    pieces = st.one_of(
        st.text(chars, max_size=max_size),
        st.sampled_from([c for c in _TRICKY if c not in exclude]),
        st.sampled_from(_SCRIPTS),
    )
    return st.lists(pieces, max_size=4).map("".join)


def line_text(max_size: int = 20) -> st.SearchStrategy[str]:
    """Text of one line: anything but '\\n' (a lone '\\r' included)."""
    return unicode_text(exclude="\n", max_size=max_size)


def _is_plain_prose(s: str) -> bool:
    lead = s.lstrip(" \t")
    return not (
        s.startswith("- [")
        or lead.startswith(("```", "~~~", "<!--", "#"))
        or s.rstrip(" \t") == "---"
        or s.lstrip("\ufeff").rstrip(" \t") == "---"
    )


def prose_lines() -> st.SearchStrategy[str]:
    """A line of free text opening no structure (fence, comment, heading, frontmatter, fact)."""
    return line_text().filter(_is_plain_prose).filter(lambda s: not s.endswith("\r"))


# ---------------------------------------------------------------------------------------- facts

_LOWER = string.ascii_lowercase
_ID_CHARS = string.ascii_letters + string.digits + "._@+-"


def _word(first: str, rest: str, max_rest: int, min_rest: int = 0) -> st.SearchStrategy[str]:
    # Cheaper than st.from_regex, which dominates run time when drawn thousands of times.
    return st.builds(str.__add__, st.sampled_from(first), st.text(rest, min_size=min_rest, max_size=max_rest))


categories = _word(_LOWER, _LOWER + string.digits + "_-", 12, min_rest=1)
safe_ids = _word(string.ascii_letters + string.digits, _ID_CHARS, 12).filter(lambda s: ".." not in s)
tag_words = st.one_of(
    st.sampled_from(["tea", "morning", "half-marathon", "c++", "日本", "a/b", "x_y", "#x"]),
    _word(string.ascii_letters + "éß日", string.ascii_letters + "-/_.:é", 6),
)

_CONTENT_PIECES = st.one_of(
    line_text(12),
    st.sampled_from(["`code`", "<!--", "-->", "<!-- note -->", "[x]", "- [pref]", "``", "a:b", "#1", "`a", "b`"]),
)


def fact_contents() -> st.SearchStrategy[str]:
    """Fact content: any one-line text, with grammar-significant fragments mixed in."""
    return (
        st.lists(_CONTENT_PIECES, min_size=1, max_size=5)
        .map(" ".join)
        .map(str.strip)
        .filter(lambda s: s and "\r" not in s)
    )


_meta_values = st.text(string.ascii_letters + string.digits + ":#./_+-", min_size=1, max_size=8).filter(
    lambda v: "-->" not in v
)
_extra_pairs = st.lists(
    st.tuples(_word(string.ascii_letters, string.ascii_letters + string.digits + "_.-", 5), _meta_values),
    max_size=2,
)
_timestamps = st.sampled_from(
    [
        "2026-11-22",
        "2026-11-22T14:05",
        "2026-11-22T14:05:09Z",
        "2026-11-22T14:05:09+01:00",
        "2026-11-22T14:05:09.123+02:00",
    ]
)


@st.composite
def facts(draw: st.DrawFn) -> Fact:
    """A valid Fact; combinations the grammar cannot express are rejected, not silently fixed."""
    session = draw(st.none() | safe_ids)
    kwargs = dict(
        content=draw(fact_contents()),
        category=draw(categories),
        tags=tuple(draw(st.lists(tag_words, max_size=3))),
        importance=draw(st.none() | st.floats(0, 1) | st.sampled_from([0, 1, 0.5, 0.8])),
        id=draw(st.none() | safe_ids),
        source_session=session,
        source_line=None if session is None else draw(st.none() | st.integers(0, 10**6)),
        timestamp=draw(st.none() | _timestamps),
        extra=tuple(draw(_extra_pairs)),
    )
    try:
        return Fact(**kwargs)
    except ValueError:
        reject()


_ws = st.text(" \t", min_size=1, max_size=3)
_ws0 = st.text(" \t", max_size=3)


@st.composite
def raw_fact_lines(draw: st.DrawFn) -> tuple[str, Fact]:
    """A fact written by hand: canonical or with odd spacing, tabs and trailing blanks."""
    fact = draw(facts())
    if draw(st.booleans()):
        return render_fact_line(fact), fact
    line = f"- [{fact.category}]{draw(_ws)}{fact.content}"
    if fact.tags:
        sep = draw(_ws)
        line += f"{draw(_ws)}`{draw(_ws0)}{sep.join(fact.tags)}{draw(_ws0)}`"
    bare = render_fact_line(dataclasses.replace(fact, content="x", tags=()))
    tokens = bare.partition(" <!-- ")[2].removesuffix(" -->").split()
    if tokens:
        line += f"{draw(_ws0)}<!--{draw(_ws0)}{draw(_ws).join(tokens)}{draw(_ws0)}-->"
    return line + draw(_ws0), fact


@st.composite
def engine_shaped_lines(draw: st.DrawFn) -> str:
    """Lines shaped like the engine's own (the parser's fast path), including near misses."""
    tags = draw(st.sampled_from(["", " `a b`", " `x`", " `-x`", " `a  b`", " `a\tb`", " ``"]))
    imp = draw(st.sampled_from(["0.5", "1", "1.0", "0", ".25", "1.5", "0.", "01.5", "٠.٥"]))
    ids = safe_ids | st.sampled_from(["a..b", "x" * 129])
    src = draw(ids) + draw(st.sampled_from(["", "#0", "#12", "#" + "9" * 19, "#١٢"]))
    ts = draw(
        st.sampled_from(
            [
                "2026-11-22T14:05:09Z",
                "2026-11-22",
                "2026-11-22T14:05:09+02:00",
                "2026-11-22T14:05:09-0200",
            ]
        )
    )
    return f"- [{draw(categories)}] {draw(fact_contents())}{tags} <!-- id:{draw(ids)} imp:{imp} src:{src} ts:{ts} -->"


LOOKALIKE_LINES = [
    "- [ ] a task checkbox",
    "- [x] a done task",
    "- [X] a done task",
    "- [b] a bookmark status from a theme",
    "- [12:30] a timestamp",
    "- [text](https://example.com)",
    "- [[wikilink]]",
    "- [[wikilink]] with text",
    "> [!note] a callout",
    "- [Some Thing] capitalised",
    "- [some thing] spaced",
    "- [Preference] capitalised category",
    "* [preference] star bullet",
    "+ [preference] plus bullet",
    "  - [preference] indented bullet",
    "\t- [preference] tab-indented bullet",
    "1. [preference] numbered",
    "-  [preference] two spaces after the dash",
    "-[preference] no space after the dash",
    "- [preference]no space after the bracket",
    "- [preference]",
    "- [preference]   ",
    "- [preference] <!-- id:f-1 -->",
    "- [ref]: https://example.com",
    "- [a] one-letter category",
    "- [" + "a" * 33 + "] category too long",
    "- [préférence] non-ascii category",
    "- [pref!] punctuation",
    "- [pref] lone\rcarriage return",
]


def lookalike_lines() -> st.SearchStrategy[str]:
    return st.sampled_from(LOOKALIKE_LINES)


@st.composite
def section_headings(draw: st.DrawFn) -> str:
    tokens = []
    if draw(st.booleans()):
        tokens.append(f"chat:{draw(safe_ids)}")
    if draw(st.booleans()):
        tokens.append(f"session:{draw(safe_ids)}")
    if draw(st.booleans()):
        tokens.append(draw(st.sampled_from(["note", "follow-up", "ünïcode"])))
    tokens = draw(st.permutations(tokens))
    hh, mm = draw(st.integers(0, 23)), draw(st.integers(0, 59))
    return " ".join([f"## {hh:02d}:{mm:02d}", *tokens])


_endings = st.sampled_from(["\n", "\r\n"])


def _draw_log_element(
    draw: st.DrawFn, lines: list[str], expected: list[tuple[int, Fact]], hidden_fact: Callable[[], str]
) -> None:
    """One construct of a daily log appended to ``lines`` (a fact also to ``expected``)."""
    kind = draw(st.integers(0, 7))
    if kind <= 1:
        line, fact = draw(raw_fact_lines())
        lines.append(line)
        expected.append((len(lines), fact))
    elif kind == 2:
        lines.append(draw(lookalike_lines()))
    elif kind == 3:
        lines.append(draw(prose_lines()))
    elif kind == 4:
        lines.append(draw(st.sampled_from(["", "   ", "\t"])))
    elif kind == 5:
        lines.append(draw(section_headings()))
    elif kind == 6:
        fence = draw(st.sampled_from(["```", "~~~", "````", "  ```python"]))
        lines.append(fence)
        for _ in range(draw(st.integers(0, 3))):
            lines.append(hidden_fact() if draw(st.booleans()) else draw(prose_lines()))
        lines.append(fence.strip().rstrip(string.ascii_letters))
    else:
        lines.append("<!--")
        lines.append("- [preference] commented out")
        lines.append("-->")


@st.composite
def daily_log_texts(draw: st.DrawFn) -> tuple[str, list[tuple[int, Fact]]]:
    """A daily log text mixing every construct, and the (line, Fact) pairs a parser must find."""
    lines: list[str] = []
    expected: list[tuple[int, Fact]] = []

    def hidden_fact() -> str:
        return draw(raw_fact_lines())[0] if draw(st.booleans()) else "- [preference] hidden"

    if draw(st.booleans()):
        lines.append("---")
        for _ in range(draw(st.integers(0, 3))):
            lines.append(draw(st.sampled_from(["title: x", "- [preference] in frontmatter", ""])))
        lines.append("---")
    if draw(st.booleans()):
        lines.append(f"# 2026-{draw(st.integers(1, 12)):02d}-{draw(st.integers(1, 28)):02d}")
    for _ in range(draw(st.integers(0, 12))):
        _draw_log_element(draw, lines, expected, hidden_fact)
    if draw(st.booleans()):
        lines.append("```")
        lines.append("- [preference] inside an unclosed fence")
    endings = [draw(_endings) for _ in lines]
    if lines and draw(st.booleans()):
        endings[-1] = ""
    text = "".join(line + end for line, end in zip(lines, endings, strict=True))
    if draw(st.booleans()):
        # A byte order mark changes nothing: not frontmatter, not a first-line fact.
        text = "\ufeff" + text
    return text, expected


@st.composite
def daily_log_models(draw: st.DrawFn) -> tuple:
    """Elements of a valid DailyLog built by hand (never through the parser)."""
    elements: list = []
    if draw(st.booleans()):
        elements.append(TextLine("# 2026-11-22"))
    for _ in range(draw(st.integers(0, 10))):
        kind = draw(st.integers(0, 5))
        if kind <= 1:
            elements.append(FactLine(draw(facts())))
        elif kind == 2:
            elements.append(TextLine(draw(prose_lines())))
        elif kind == 3:
            elements.append(TextLine(draw(lookalike_lines().filter(lambda s: "\r" not in s))))
        elif kind == 4:
            elements.append(TextLine(draw(section_headings())))
        else:
            elements.append(TextLine("```"))
            elements.append(TextLine(render_fact_line(draw(facts()))))
            elements.append(TextLine("```"))
    out = []
    for i, e in enumerate(elements):
        ending = draw(_endings)
        if i == len(elements) - 1 and e.text and draw(st.booleans()):
            ending = ""
        out.append(FactLine(e.fact, ending) if isinstance(e, FactLine) else TextLine(e.text, ending))
    return tuple(out)


# Lines that change what the lines after them are: structure a log is re-read around (reparse.py).
_STATEFUL_LINES = [
    "## 09:30 chat:c1 session:s1",
    "## 10:00",
    "## 23:59 chat:c2 note",
    "## notes",
    "## 25:00 bad time",
    "# 2026-11-22",
    "# Tuesday",
    "```",
    "~~~",
    "````",
    "  ```python",
    "<!--",
    "<!-- one line -->",
    "-->",
    "---",
    "\ufeff## 11:00",
    "### deeper",
    "",
]


# Facts whose rows carry the dates their words mean (syncd.formats.when), and whose neighbours
# then carry them as context: an edit beside them must redo exactly what a first read makes.
_TIME_FACT_LINES = [
    "- [dialog] Ana: I went to the support group yesterday.",
    "- [note] Met Bo last Friday.",
    "- [note] Moved here two weeks ago. `move`",
    "- [plan] Flying to Lyon next month.",
    "- [dialog] Bo: We hiked last weekend and the week before.",
    "- [note] 3 days ago it snowed.",
]


@st.composite
def _log_lines(draw: st.DrawFn, max_blocks: int) -> list[str]:
    """Lines of a daily log heavy in sections and in what opens or closes a block: blocks of a
    few lines, most under a section heading."""
    line = st.one_of(
        st.sampled_from(_STATEFUL_LINES),
        st.sampled_from(_TIME_FACT_LINES),
        raw_fact_lines().map(lambda pair: pair[0]),
        engine_shaped_lines(),
        lookalike_lines(),
        prose_lines(),
    )
    lines: list[str] = []
    for _ in range(draw(st.integers(0, max_blocks))):
        if draw(st.integers(0, 3)):
            lines.append(draw(section_headings()))
        lines += draw(st.lists(line, max_size=4))
    return lines


@st.composite
def daily_log_edits(draw: st.DrawFn) -> tuple[str, str]:
    """A daily log and an edited version of it: some lines replaced by others (none, or more),
    then maybe a few characters typed or deleted anywhere (a line split or joined, a lone CR)."""
    lines = draw(_log_lines(12))
    endings = [draw(_endings) for _ in lines]
    if lines and draw(st.booleans()):
        endings[-1] = ""
    old = "".join(line + end for line, end in zip(lines, endings, strict=True))
    start = draw(st.integers(0, len(lines)))
    stop = draw(st.integers(start, min(len(lines), start + 4)))
    if draw(st.booleans()):  # lines rewritten in place, the line count kept
        new_lines = [draw(_log_lines(1).filter(len).map(lambda ls: ls[-1])) for _ in range(stop - start)]
    else:
        new_lines = draw(_log_lines(2))
    new_endings = [draw(_endings) for _ in new_lines]
    if stop == len(lines) and new_lines and draw(st.booleans()):
        new_endings[-1] = ""
    new = (
        "".join(line + end for line, end in zip(lines[:start], endings[:start], strict=True))
        + "".join(line + end for line, end in zip(new_lines, new_endings, strict=True))
        + "".join(line + end for line, end in zip(lines[stop:], endings[stop:], strict=True))
    )
    if draw(st.booleans()):
        at = draw(st.integers(0, len(new)))
        cut = draw(st.integers(0, 3))
        typed = draw(st.sampled_from(["", "\n", "\r", "\r\n", "`", "```", "<!--", "-->", "# ", "## 12:00\n", "x"]))
        new = new[:at] + typed + new[at + cut :]
    if new == old:
        reject()
    return old, new


# ---------------------------------------------------------------------------------------- pages

_page_lines = st.one_of(
    st.sampled_from(
        [
            "# Title",
            "## Sub heading #tag",
            "### Deeper",
            "#notaheading",
            "Text with [[Page]] and [[Page#Head|alias]] and ![[image.png]] and [[#Local]].",
            "See [[Other^block]] and [[Other#H^b]] and [[]] and `[[in code]]` and `#incode`.",
            "| a | [[Page\\|alias]] |",
            "Tags: #one #two/three #123 #4x a#b http://x.com/#frag (#paren) #日本語",
            "```",
            "~~~",
            "```python",
            "# comment in code maybe",
            "",
            "   ",
            "---",
        ]
    ),
    line_text(30),
)


@st.composite
def page_texts(draw: st.DrawFn) -> str:
    """Page-like texts: frontmatter (valid or not), headings, fences, links, tags, any unicode."""
    lines = []
    fm = draw(st.integers(0, 3))
    if fm:
        lines.append("---")
        lines.extend(
            draw(
                st.lists(
                    st.sampled_from(
                        [
                            "title: T",
                            "tags: [a, b]",
                            "tags: a, #b c",
                            "up: '[[Parent]]'",
                            "bad: [unclosed",
                            "date: 2001-13-45",
                            "- a list",
                            ": :",
                            "x: 1",
                        ]
                    ),
                    max_size=3,
                )
            )
        )
        if fm > 1:
            lines.append("---")
    lines.extend(draw(st.lists(_page_lines, max_size=15)))
    endings = [draw(_endings) for _ in lines]
    if lines and draw(st.booleans()):
        endings[-1] = ""
    text = "".join(line + end for line, end in zip(lines, endings, strict=True))
    return ("\ufeff" + text) if draw(st.booleans()) else text


_yaml_scalars = st.one_of(
    st.text(st.characters(categories=("L", "N", "P", "Zs")), max_size=12),
    st.integers(-(10**6), 10**6),
    st.booleans(),
    st.none(),
)


@st.composite
def page_models(draw: st.DrawFn):
    """A Page built by hand with page_from_body, plus the (body, frontmatter) it was built from."""
    body = draw(page_texts())
    frontmatter = draw(
        st.none()
        | st.dictionaries(
            st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True),
            _yaml_scalars | st.lists(_yaml_scalars, max_size=3),
            max_size=4,
        )
    )
    return page_from_body(body, frontmatter), body, frontmatter


# Query text that would change a filter's meaning if anything pasted it into SQL or FTS syntax.
HOSTILE_TEXT = st.one_of(
    st.text(max_size=60),
    st.sampled_from(
        [
            "' OR 1=1 --",
            "user = 'bob'",
            '"; DROP TABLE entries; --',
            "tea') OR ('1'='1",
            "ünïcödé 茶 чай",
            "*",
            "\\",
            "NULL",
            "%",
            "AND kind = 'chunk'",
        ]
    ),
)


# ---------------------------------------------------------------------------------------- paths

# Folder and file names people and tools really make, most of them not valid ids or labels.
_ODD_NAMES = [
    "Medical",
    "bad chat",
    "josé",
    "ana b",
    "...",
    "..x",
    "a..b",
    ".hidden",
    "-lead",
    "_x",
    "UPPER",
    " ",
    " x ",
    "\t",
    "日本",
    "e\u0301",
    "x" * 130,
    "core",
    "chats",
    "MEMORY",
    "2026-11-22",
    "a'b",
    'a"b',
    "100%",
    "*",
    "?",
    "a\\b",
    "\u200b",
    "\ufeff",
    "CON",
]


def odd_segments() -> st.SearchStrategy[str]:
    """One path segment a file system accepts (no '/', no NUL, not '.' or '..', at most 255 bytes),
    valid as an id or not."""
    return st.one_of(
        safe_ids,
        st.sampled_from(_ODD_NAMES),
        st.text(st.characters(exclude_categories=("Cs",), exclude_characters="/\x00"), min_size=1, max_size=12),
    ).filter(lambda s: s not in (".", "..") and len(s.encode()) <= 250)


@st.composite
def user_folder_paths(draw: st.DrawFn, owner: st.SearchStrategy[str]) -> tuple[str, str]:
    """``(owner, path)``: a markdown file somewhere under ``memory/users/<owner>/``, in one of the
    places a memory file goes or anywhere else, with odd names at every level."""
    user = draw(owner)
    seg = odd_segments()
    name = draw(st.one_of(seg.map(lambda s: s + ".md"), st.sampled_from(["MEMORY.md", "2026-11-22.md", "x.md"])))
    middle = draw(st.sampled_from([(), ("core",), ("chats", "*", "core"), ("chats", "*"), ("*",), ("*", "*")]))
    parts = [draw(seg) if p == "*" else p for p in middle]
    return user, "/".join(["memory", "users", user, *parts, name])


# ---------------------------------------------------------------------------- sync progress


@st.composite
def sync_runs(draw: st.DrawFn) -> list[tuple[int, int, list[tuple[int, int, list[int]]]]]:
    """The steps of one sync as apply.py reports them to a ProgressTracker: batches of
    ``(files, bytes, calls)``; each call embeds ``texts`` texts of which ``cached`` came from the
    cache, and reports the model's share at the given cumulative counts (the slices). A second
    call for a batch is a redo (the index changed under it: the batch is embedded again)."""
    batches = []
    for _ in range(draw(st.integers(0, 6))):
        files = draw(st.integers(0, 4))
        nbytes = draw(st.integers(0, 50_000)) if files else 0
        calls = []
        for _ in range(draw(st.integers(1, 2))):
            texts = draw(st.integers(0, 1_000))
            cached = draw(st.integers(0, texts))
            cuts = sorted(draw(st.lists(st.integers(0, texts - cached), max_size=4)))
            calls.append((texts, cached, [*cuts, texts - cached]))
        batches.append((files, nbytes, calls))
    return batches
