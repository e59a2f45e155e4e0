"""Pure parse/render functions for every file format syncd reads and writes (no I/O here).

Markdown is the truth, so each format keeps the source text it was given and renders an unchanged
parse back byte for byte; see the module docstrings for each grammar.
"""

from __future__ import annotations

from .daily_log import DailyLog, parse_daily_log, render_daily_log
from .fact_grammar import CATEGORY_RULE, Fact, parse_fact_line, render_fact_line
from .fact_ids import derive_fact_id
from .log_scan import FactLine, LocatedFact, Section, TextLine, TextSpan
from .log_writing import append_section, new_daily_log
from .pages import (
    MAX_CHUNK_CHARS,
    Chunk,
    Page,
    WikiLink,
    page_from_body,
    parse_page,
    render_page,
)
from .text import decode_markdown, decode_markdown_lossy, encode_markdown, split_lines, split_lines_keepends

__all__ = [
    # bytes and lines
    "decode_markdown",
    "decode_markdown_lossy",
    "encode_markdown",
    "split_lines",
    "split_lines_keepends",
    # daily logs and facts
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
    # pages, MEMORY.md, blocks
    "MAX_CHUNK_CHARS",
    "Chunk",
    "WikiLink",
    "Page",
    "parse_page",
    "render_page",
    "page_from_body",
]
