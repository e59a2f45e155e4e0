"""Writing daily logs: a new day's log, and a section appended to one (the only way syncd adds
facts to a log). Existing lines are never touched; the result is re-read only around the new
section (rescan.py), so appending to a big log costs the section, not the log."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable

from ..errors import InvalidIdError
from .daily_log import DailyLog, render_daily_log, reparse_daily_log
from .fact_grammar import ID_RULE, Fact, render_fact_line, valid_id
from .log_scan import TIME_RE, TextLine

__all__ = ["append_section", "new_daily_log"]


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
    if isinstance(time, dt.time):
        time = time.strftime("%H:%M")
    if not isinstance(time, str) or not TIME_RE.match(time):
        raise ValueError(f"section time must be HH:MM, not {time!r}")
    heading = f"## {time}"
    for kind, value in (("chat", chat), ("session", session)):
        if value is not None:
            if not isinstance(value, str) or not valid_id(value):
                raise InvalidIdError(kind, value, ID_RULE)
            heading += f" {kind}:{value}"
    facts = list(facts)
    if not all(isinstance(fact, Fact) for fact in facts):
        raise ValueError(f"append_section needs Facts, not {facts!r}")
    nl = log.newline
    text = rendered = render_daily_log(log)
    if text and not text.endswith("\n"):
        # A final lone '\r' is half of a CRLF: complete it rather than leave a stray CR.
        text += "\n" if text.endswith("\r") else nl
    # Re-read after completing the last line: terminating it can change what it is (a lone
    # trailing '\r' hid a fact or a closing fence), and the parser is the only judge of that.
    # Both reads start from the last ones: appending to a big log reads its last section only.
    base = reparse_daily_log(text, rendered, log)
    lines = []
    if base.closer is not None:
        lines.append(base.closer)
    if lines or (base.elements and base.elements[-1].text.strip()):
        lines.append("")
    lines.append(heading)
    lines.extend(render_fact_line(fact) for fact in facts)
    out = reparse_daily_log(text + "".join(line + nl for line in lines), text, base)
    if [f.fact for f in out.facts()[len(base.facts()) :]] != facts:
        raise ValueError("the new section would not read back as the given facts")
    return out
