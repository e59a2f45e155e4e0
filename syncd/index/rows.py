"""From one file's bytes to the rows the index holds for it (pure: no I/O, no embedding).

Ids are derived from the file's relative path and what the row says, never written back into the
file, so a rebuild from the same tree yields the same ids.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from ..errors import ParseError
from ..formats import decode_markdown_lossy, parse_daily_log, parse_page
from ..layout import classify_path
from .records import EntryRow

__all__ = ["ParsedFile", "parse_file", "parse_file_checked", "chunk_id"]


def chunk_id(rel: str, key: str, occurrence: int) -> str:
    digest = hashlib.blake2b(f"{rel}\0{key}\0{occurrence}".encode(), digest_size=8).hexdigest()
    return f"c-{digest}"


@dataclass(frozen=True)
class ParsedFile:
    """A file's rows, and what a person should know about them (bytes that were not UTF-8)."""

    rows: list[EntryRow]
    warning: str | None = None


def parse_file_checked(rel: str, data: bytes) -> ParsedFile:
    """Rows for the file at home-relative path ``rel``, decoding invalid UTF-8 as U+FFFD (and
    saying which lines) so one bad byte never hides the rest of a file. Raises ParseError only
    for a file that must not be indexed at all: one whose owner's id in the path is not valid."""
    scope = classify_path(rel)
    if scope.error:
        raise ParseError(scope.error, rel)
    if scope.kind in ("transcript", "state"):
        return ParsedFile([])  # tracked for freshness; their own indexer comes with the session layer
    text, warning = decode_markdown_lossy(data, rel)
    if scope.kind == "daily_log":
        return ParsedFile(_daily_log_rows(rel, text, scope), warning)
    return ParsedFile(_page_rows(rel, text, scope), warning)


def parse_file(rel: str, data: bytes) -> list[EntryRow]:
    """Just the rows of :func:`parse_file_checked`."""
    return parse_file_checked(rel, data).rows


def _section_start(date: str | None, section) -> str | None:
    """When a daily log's section began: its date and heading time, or the date alone."""
    if date is None:
        return None
    return f"{date}T{section.time}:00" if section else date


def _daily_log_rows(rel: str, text: str, scope) -> list[EntryRow]:
    log = parse_daily_log(text)
    date = scope.date or log.date
    rows: list[EntryRow] = []
    for located, fact_id in zip(log.facts(), log.fact_ids(rel)):
        fact, section = located.fact, located.section
        session = fact.source_session or (section.session if section else None)
        created = fact.timestamp or _section_start(date, section)
        provenance = ""
        if fact.source_session:
            provenance = fact.source_session + (f"#{fact.source_line}" if fact.source_line is not None else "")
        rows.append(
            EntryRow(
                id=fact_id,
                kind="fact",
                source=scope.kind,
                path=rel,
                line=located.line,
                text=fact.content,
                user=scope.user,
                chat=section.chat if section else None,
                session=session,
                category=fact.category,
                tags=tuple(fact.tags),
                importance=fact.importance,
                created_at=created,
                provenance=provenance,
            )
        )
    seen: dict[str, int] = {}
    for span in log.text_spans():
        n = seen.get(span.text, 0)
        seen[span.text] = n + 1
        section = span.section
        rows.append(
            EntryRow(
                id=chunk_id(rel, span.text, n),
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
        )
    return rows


def _page_rows(rel: str, text: str, scope) -> list[EntryRow]:
    page = parse_page(text)
    rows: list[EntryRow] = []
    seen: dict[tuple[str, ...], int] = {}
    for chunk in page.chunks:
        n = seen.get(chunk.heading_path, 0)
        seen[chunk.heading_path] = n + 1
        heading = " > ".join(chunk.heading_path)
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
            )
        )
    return rows
