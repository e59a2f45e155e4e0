"""From one file's bytes to the rows the index holds for it (pure: no I/O, no embedding).

Ids are derived from the file's relative path and what the row says, never written back into the
file, so a rebuild from the same tree yields the same ids.

A daily log's facts are conversations: the facts under one section heading, in file order (two
sections with the very same heading are one). Full text sees each fact with its date words (the
day it was said, and the days its "yesterday" or "last Friday" mean); search lets the best
neighbour's relevance flow to it (search.py), so a neighbour's words count once, through it, and
never as the fact's own. What a conversation is follows from how facts are written: one ``add_memory`` call writes one section, so a fact remembered on its own has no
neighbours (facts remembered separately are not one talk, and must not lend each other words);
one extracted turn or one imported session writes its facts as one section, so they are each
other's context; by hand, facts under a ``## HH:MM`` heading are that section's conversation and
facts outside any section are one conversation per file (a person's notes for the day). Rows are
derived from the file alone: a file's rows are always rebuilt together, and incremental equals
rebuild.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import ParseError
from ..formats import DailyLog, LocatedFact, TextSpan, decode_markdown_lossy, parse_daily_log, parse_page
from ..formats.fact_ids import FactIdMemo
from ..formats.pages import Page
from ..formats.reparse import reparse_daily_log
from ..formats.transcripts import TokenSpans, chunk_transcript, parse_transcript
from ..formats.when import date_words, resolved_words
from ..home import classify_path
from .records import HEADING_SEPARATOR, NEIGHBOURS, EntryRow

__all__ = [
    "KEPT_TEXT_KINDS",
    "ParsedFile",
    "TranscriptChunking",
    "parse_file",
    "parse_file_checked",
    "chunk_id",
    "forget_last_reads",
    "page_title",
]


def chunk_id(rel: str, key: str, occurrence: int) -> str:
    digest = hashlib.blake2b(f"{rel}\0{key}\0{occurrence}".encode(), digest_size=8).hexdigest()
    return f"c-{digest}"


@dataclass(frozen=True)
class ParsedFile:
    """A file's rows, and what a person should know about them (bytes that were not UTF-8)."""

    rows: list[EntryRow]
    warning: str | None = None
    # A wiki page's parse, for its node in the link graph (parsed once for both); None for
    # other files and for a page whose bytes were not all UTF-8 (the graph says so itself).
    page: Page | None = None
    # The file's text when it is a core block or a MEMORY.md (KEPT_TEXT_KINDS): files a reader
    # with no copy of the home serves whole, so an index that can hold them keeps them.
    text: str | None = None


# Kinds of file whose whole text the index keeps beside their rows (see ParsedFile.text).
KEPT_TEXT_KINDS = ("block", "memory_md")


@dataclass(frozen=True)
class TranscriptChunking:
    """How transcripts become rows when transcript indexing is on: windows of ``size`` tokens
    overlapping by ``overlap``, counted by ``spans`` (the embedding model's tokenizer)."""

    spans: TokenSpans
    size: int = 400
    overlap: int = 80


def parse_file_checked(rel: str, data: bytes, transcripts: TranscriptChunking | None = None) -> ParsedFile:
    """Rows for the file at home-relative path ``rel``, decoding invalid UTF-8 as U+FFFD (and
    saying which lines) so one bad byte never hides the rest of a file. Raises ParseError only
    for a file that must not be indexed at all: one whose owner's id in the path is not valid.
    Transcripts have rows only with ``transcripts`` (transcript indexing is opt-in)."""
    scope = classify_path(rel)
    if scope.error:
        raise ParseError(scope.error, rel)
    if scope.kind == "transcript":
        return _transcript_rows(rel, data, scope, transcripts)
    if scope.kind in ("state", "session"):
        return ParsedFile([])  # tracked for freshness and committed; not text to search
    text, warning = decode_markdown_lossy(data, rel)
    if scope.kind == "daily_log":
        return ParsedFile(_daily_log_rows(rel, text, scope), warning)
    page = parse_page(text)
    graph_page = page if scope.kind == "vault_page" and not warning else None
    kept = text if scope.kind in KEPT_TEXT_KINDS else None
    return ParsedFile(_page_rows(rel, page, scope), warning, graph_page, kept)


def parse_file(rel: str, data: bytes, transcripts: TranscriptChunking | None = None) -> list[EntryRow]:
    """Just the rows of :func:`parse_file_checked`."""
    return parse_file_checked(rel, data, transcripts).rows


def _transcript_rows(rel: str, data: bytes, scope, chunking: TranscriptChunking | None) -> ParsedFile:
    """A transcript's chunks, scoped to the user whose folder holds it. A chunk's id is keyed by
    its first token's position, which an append never moves."""
    transcript = parse_transcript(data)
    bad = [s for s in transcript.skipped if s.reason != "blank line"]
    warning = "; ".join(f"line {s.line}: {s.reason}" for s in bad[:5]) or None
    if chunking is None:
        return ParsedFile([], warning)
    rows = [
        EntryRow(
            id=chunk_id(rel, f"t{chunk.start}", 0),
            kind="transcript",
            source=scope.kind,
            path=rel,
            line=chunk.line,
            text=chunk.text,
            user=scope.user,
            session=scope.session,
            created_at=chunk.ts or None,
        )
        for chunk in chunk_transcript(transcript.entries, chunking.spans, chunking.size, chunking.overlap)
    ]
    return ParsedFile(rows, warning)


def _section_start(date: str | None, section) -> str | None:
    """When a daily log's section began: its date and heading time, or the date alone."""
    if date is None:
        return None
    return f"{date}T{section.time}:00" if section else date


def _section_heading(section) -> str:
    """A section's heading as its facts carry it ("" outside any section): the key that
    makes facts one conversation, and what a person reading a hit sees of where it was said."""
    if section is None:
        return ""
    parts = [section.time]
    if section.chat:
        parts.append(f"chat:{section.chat}")
    if section.session:
        parts.append(f"session:{section.session}")
    if section.note:
        parts.append(section.note)
    return " ".join(parts)


def _day(date: str | None) -> dt.date | None:
    if not date:
        return None  # most facts carry no timestamp of their own: no exception raised for each
    try:
        return dt.date.fromisoformat((date or "")[:10])
    except ValueError:  # no date, or a file name like 2026-02-30.md
        return None


def _date_words(date: str | None) -> str:
    """A log's date as people say it ("Monday 8 May 2023"), in English whatever the locale, so
    a question naming the day or the month finds what was said then."""
    day = _day(date)
    return date_words(day) if day else ""


def _headings(facts) -> list[str]:
    """Each fact's section heading, worked out once per section."""
    heading_of: dict[int, str] = {}
    headings = []
    for located in facts:
        heading = heading_of.get(id(located.section))
        if heading is None:
            heading = heading_of[id(located.section)] = _section_heading(located.section)
        headings.append(heading)
    return headings


def _neighbours(facts: Sequence[LocatedFact], headings: list[str]) -> list[tuple[LocatedFact, ...]]:
    """Each fact's neighbours in its conversation (the facts of its section; ``headings`` are the
    facts' section headings): the one just before and the one just after it."""
    conversations: dict[str, list[int]] = {}
    for n, heading in enumerate(headings):
        conversations.setdefault(heading, []).append(n)
    around: list[tuple[LocatedFact, ...]] = [()] * len(facts)
    for members in conversations.values():
        talk = [facts[n] for n in members]
        for at, n in enumerate(members):
            around[n] = tuple(talk[at - 1 : at + 2 : 2] if at else talk[1:2])
    return around


def _own_words(located: LocatedFact, when: str, day: dt.date | None) -> str:
    """A fact's date words: the day it was said ("Saturday 14 March 2026", ``when``: the log's
    day) and the days its relative time expressions mean, resolved against that day ("yesterday"
    said then is "Friday 13 March 2026"; see syncd.formats.when)."""
    resolved = resolved_words(located.fact.content, _day(located.fact.timestamp) or day)
    return "\n".join(w for w in (when, resolved) if w)


def _context_window(own: str, around: list[str]) -> str:
    """A fact's context window for full text: its date words (``own``), then the facts just
    before and after it in its conversation (``around``). A section written by one agent call
    holds only that call's facts, so a fact remembered on its own has only its dates. The
    neighbours come after a NEIGHBOURS mark (records.py): full text counts their words at half
    the weight of the fact's own."""
    return "\n".join([*filter(None, [own]), NEIGHBOURS, *around]) if around else own


@dataclass(frozen=True)
class _LastRead:
    """A big daily log as last read, so that reading an edited version parses again only the
    lines around the edit (reparse.py) and builds only the rows whose inputs changed: a row is
    kept when its fact (or text span) is the very object the last read had, under the same id,
    with the same context window and date. Rows stay a function of the file alone."""

    text: str
    log: DailyLog
    date: str | None
    ids: FactIdMemo
    facts: dict[str, _FactRead]
    chunks: dict[tuple[str, int], tuple[TextSpan, EntryRow]]


@dataclass(frozen=True, slots=True)
class _FactRead:
    """A fact as the last read built its row: its date words and its neighbours are the inputs
    of the row's context window, so a fact that is the very object it was, beside the very
    neighbours, keeps its row with no window built again (an edit's re-read costs its lines)."""

    located: LocatedFact
    row: EntryRow
    own: str
    around: tuple[LocatedFact, ...]


# The logs remembered: the ones being written to (a daemon serving many users appends to many
# logs in turn). Each costs about its parse and rows in memory, in proportion to its facts and
# many times their text (bench_scale.py log measures one big log's peak), so besides the newest
# read, whatever its size, at most this many logs and this much of their text are kept, the least
# recent going first.
_REMEMBERED_LOGS = 64
_REMEMBERED_CHARS = 4_000_000
_last_reads: OrderedDict[str, _LastRead] = OrderedDict()
_last_reads_lock = threading.Lock()


def forget_last_reads() -> None:
    """Forget every log read so far, as a new process starts: the next read of each parses it
    whole (what a fresh ``syncd sync`` or a daemon's first pass does)."""
    with _last_reads_lock:
        _last_reads.clear()


def _daily_log_rows(rel: str, text: str, scope) -> list[EntryRow]:
    with _last_reads_lock:
        last = _last_reads.get(rel)
    log = reparse_daily_log(text, last.text, last.log) if last else parse_daily_log(text)
    date = scope.date or log.date
    if last is not None and last.date != date:
        last = None  # every row carries the date: none can be kept
    facts = log.facts()
    ids = FactIdMemo(rel, last.ids.norms, last.ids.ids) if last else FactIdMemo(rel)
    fact_ids = log.fact_ids(rel, ids)
    headings = _headings(facts)
    neighbours = _neighbours(facts, headings)
    when, day = _date_words(date), _day(date)
    kept_facts = last.facts if last else {}
    rows: list[EntryRow] = []
    fact_rows: dict[str, _FactRead] = {}
    for located, fact_id, heading, around in zip(facts, fact_ids, headings, neighbours, strict=True):
        before = kept_facts.get(fact_id)
        if before is not None and before.located is located:
            # The same fact of the same date (a new date kept nothing): the same date words.
            own = before.own
            if before.around == around:  # the very neighbours (a tuple compares identity first)
                row = before.row
            else:
                window = _context_window(own, [f.fact.content for f in around])
                row = (
                    before.row
                    if before.row.context == window
                    else _fact_row(rel, scope, date, located, fact_id, window, heading)
                )
        else:
            own = _own_words(located, when, day)
            window = _context_window(own, [f.fact.content for f in around])
            row = _fact_row(rel, scope, date, located, fact_id, window, heading)
        rows.append(row)
        fact_rows[fact_id] = _FactRead(located, row, own, around)
    kept_chunks = last.chunks if last else {}
    chunk_rows: dict[tuple[str, int], tuple[TextSpan, EntryRow]] = {}
    seen: dict[str, int] = {}
    for span in log.text_spans():
        n = seen.get(span.text, 0)
        seen[span.text] = n + 1
        kept = kept_chunks.get((span.text, n))
        row = kept[1] if kept is not None and kept[0] is span else _chunk_row(rel, scope, date, span, n)
        rows.append(row)
        chunk_rows[(span.text, n)] = (span, row)
    with _last_reads_lock:
        _last_reads.pop(rel, None)
        _last_reads[rel] = _LastRead(text, log, date, ids, fact_rows, chunk_rows)
        held = sum(len(last.text) for last in _last_reads.values())
        while len(_last_reads) > 1 and (len(_last_reads) > _REMEMBERED_LOGS or held > _REMEMBERED_CHARS):
            _, dropped = _last_reads.popitem(last=False)
            held -= len(dropped.text)
    return rows


def _fact_row(
    rel: str, scope, date: str | None, located: LocatedFact, fact_id: str, window: str, heading: str
) -> EntryRow:
    fact, section = located.fact, located.section
    provenance = ""
    if fact.source_session:
        provenance = fact.source_session + (f"#{fact.source_line}" if fact.source_line is not None else "")
    return EntryRow(
        id=fact_id,
        kind="fact",
        source=scope.kind,
        path=rel,
        line=located.line,
        text=fact.content,
        user=scope.user,
        chat=section.chat if section else None,
        session=fact.source_session or (section.session if section else None),
        category=fact.category,
        tags=tuple(fact.tags),
        importance=fact.importance,
        created_at=fact.timestamp or _section_start(date, section),
        provenance=provenance,
        heading=heading,
        context=window,
    )


def _chunk_row(rel: str, scope, date: str | None, span: TextSpan, occurrence: int) -> EntryRow:
    section = span.section
    return EntryRow(
        id=chunk_id(rel, span.text, occurrence),
        kind="chunk",
        source=scope.kind,
        path=rel,
        line=span.line,
        text=span.text,
        user=scope.user,
        chat=section.chat if section else None,
        session=section.session if section else None,
        created_at=_section_start(date, section),
    )


def page_title(rel: str, title: str | None) -> str:
    """The title a person knows a vault page by: its frontmatter ``title`` or first H1 (the
    parsed ``title``), else its file name without ``.md``, as Obsidian shows it."""
    if title:
        return title
    name = rel.rpartition("/")[2]
    return name[:-3] if name.lower().endswith(".md") else name


def _page_rows(rel: str, page: Page, scope) -> list[EntryRow]:
    # Only the wiki's pages are known by a title; MEMORY.md and blocks are known by their path.
    title = page_title(rel, page.title) if scope.kind == "vault_page" else None
    rows: list[EntryRow] = []
    seen: dict[tuple[str, ...], int] = {}
    for chunk in page.chunks:
        n = seen.get(chunk.heading_path, 0)
        seen[chunk.heading_path] = n + 1
        heading = HEADING_SEPARATOR.join(chunk.heading_path)
        rows.append(
            EntryRow(
                id=chunk_id(rel, heading, n),
                kind="chunk",
                source=scope.kind,
                path=rel,
                line=chunk.line,
                text=chunk.text,
                user=scope.user,
                chat=scope.chat,
                tags=tuple(page.tags),
                heading=heading,
                label=scope.label,
                title=title,
            )
        )
    return rows
