"""What a question asks of time: the days it names, and whether it asks when.

A memory's rows are dated (a daily-log fact by its log's day), and what they say is often
relative to that day (:mod:`syncd.formats.when`). A question meets them from the other side:

- it may name a period outright ("on 25 May, 2022", "in July 2023") or relative to a day it names
  ("in the week before 16 November 2023") or to the day it is asked ("last weekend", "two days
  ago", "in June": the latest June): :func:`asked_periods` reads them, and search favours the
  rows of those days;
- it may ask *when* something happened ("When did she paint a sunrise?", "How long ago was his
  birthday?"): :func:`asks_when` says so, and search favours the rows that say a time ("I painted
  it last year", "we went yesterday"), which :func:`says_when` finds. An answer to "when" is a
  time; a turn that names none can hardly hold it.

English patterns, like the rest of the time module: a question in another language simply names
no period and asks no "when", and search ranks it as before.
"""

from __future__ import annotations

import datetime as dt
import re
from functools import lru_cache

from .when import Period, named_periods, named_ranges, resolve, yearless_days, yearless_months

__all__ = ["asked_periods", "asks_when", "meant_periods", "says_when"]

# Rows are read again by query after query (a memory's conversation is searched many times), and
# reading one's time expressions costs a dozen regular expressions: the last rows read are kept
# (a few MB at most).
_READ_ROWS = 32_768

# A question that asks for a time: "When ...", "How long ago ...", "What date/day/year did ...",
# "In which month was ...", "Since when ...". "How long" alone asks for a duration, not a date,
# and "What day trips ..." or "What time-saving ..." ask for things: the time word must be
# followed by a verb of the question or end it.
_ASKS_WHEN = re.compile(
    r"^\W*(?:(?:and|so|but)\s+)?(?:since\s+)?(?:when\b|how\s+long\s+ago\b"
    r"|(?:(?:on|in|at|by|during)\s+)?(?:what|which)\s+(?:date|day|month|year|week|weekend|time)"
    r"(?:\s+(?:did|does|do|is|was|were|are|will|would|has|have|had|should|can|could)\b|\s*\?))",
    re.IGNORECASE,
)


_RANGE_OPENING = re.compile(r"\b(?:between|from)\s+(?:the\s+)?$", re.IGNORECASE)


def _opens_range(question: str, start: int) -> bool:
    """Whether the text before ``start`` ends with "between"/"from" (and "the"): the day there
    starts a range. Searches only the words before ``start``, not all the text before it, which
    each of a question's days would read again (a 100 KB question of days took minutes)."""
    at = start
    for word in ("", "the"):  # back over the spaces, then over "the" and the spaces before it
        if word and question[max(0, at - len(word)) : at].lower() == word:
            at -= len(word)
        while at > 0 and question[at - 1].isspace():
            at -= 1
    return _RANGE_OPENING.search(question, max(0, at - len("between")), start) is not None


def asks_when(question: str) -> bool:
    """Whether ``question`` asks when something happened (its answer is a time)."""
    return bool(_ASKS_WHEN.search(question))


def asked_periods(question: str, today: dt.date) -> list[Period]:
    """The periods ``question`` asks about, in order: the days and months it names
    (:func:`~syncd.formats.when.named_periods`), and its relative expressions resolved against
    the first day it names ("the week before 16 November 2023"), or, when it names none, against
    ``today``, the day it is asked ("what did I do last weekend?"). Days and months named
    without a year ("on Aug 15th", "in June") are the latest by that first named day, or by
    ``today`` (:func:`~syncd.formats.when.yearless_days`). A range of days it names
    ("between August 11 and August 15 2023": :func:`~syncd.formats.when.named_ranges`) is asked
    whole, in place of the day that ends it."""
    named = named_periods(question)
    days = [period for period in named if period.unit == "day"]
    anchor = days[0].first if days else today
    ranges = named_ranges(question)
    if ranges:
        named = [*ranges, *(p for p in named if not any(p.start < r.end and r.start < p.end for r in ranges))]
    # A month named without a year is the latest by the end of the first period named with one.
    yearless_anchor = named[0].last if named else today
    months = yearless_months(question, yearless_anchor)
    # A day after "between" or "from" starts a range (named_ranges): asked with its end or, when
    # it is none ("between August 20 and August 15 2023"), not at all.
    days_alone = [day for day in yearless_days(question, yearless_anchor) if not _opens_range(question, day.start)]
    relative = [
        period
        for period in [*resolve(question, anchor), *months, *days_alone]
        if not any(period.start < other.end and other.start < period.end for other in named)
    ]
    return sorted([*named, *relative], key=lambda period: (period.start, period.end))


@lru_cache(maxsize=_READ_ROWS)
def says_when(text: str, day: dt.date | None) -> bool:
    """Whether ``text`` says a time a "when" question could be answered by: a date it names, a
    relative expression that resolves against ``day`` (the day it was said), or a day it names
    without its year or month ("on the 15th")."""
    if day is not None and (resolve(text, day) or yearless_days(text, day, nearest=True)):
        return True
    return bool(named_periods(text))


@lru_cache(maxsize=_READ_ROWS)
def meant_periods(text: str, day: dt.date) -> tuple[Period, ...]:
    """The periods the relative time expressions of ``text``, said on ``day``, mean
    (:func:`~syncd.formats.when.resolve`), and the days it names without their year or month
    ("we met on the 15th": the such day nearest ``day``, yearless_days), kept for the next query
    that reads the same row."""
    return tuple(sorted([*resolve(text, day), *yearless_days(text, day, nearest=True)], key=lambda p: (p.start, p.end)))
