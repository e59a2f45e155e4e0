"""Daily logs and the fact lines inside them, by the names they have always been imported by.

The format is three modules, one concept each, bottom up: fact_grammar.py (one fact line and the
:class:`Fact` it reads as), log_scan.py (a log's lines classified in one pass: where a line may be
a fact, sections, the title, free text), daily_log.py (the :class:`DailyLog` model, its reads and
edits); rescan.py re-reads a log around an edit and log_writing.py appends sections.
"""

from __future__ import annotations

from .daily_log import DailyLog, parse_daily_log, render_daily_log
from .fact_grammar import CATEGORY_RULE, ID_RULE, Fact, parse_fact_line, render_fact_line, valid_id
from .fact_ids import derive_fact_id
from .log_scan import TIME_RE, FactLine, LocatedFact, Resume, Scan, Section, TextLine, TextSpan, scan_lines

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
    # What the incremental re-read (rescan.py) and the log writer (log_writing.py) build on.
    "ID_RULE",
    "TIME_RE",
    "valid_id",
    "Scan",
    "Resume",
    "scan_lines",
]
