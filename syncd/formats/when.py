"""Time, resolved: relative time expressions in what was said, turned into the dates they mean.

A daily log's fact is dated (its log's day), but what it says is often relative to that day:
"yesterday", "last Friday", "two weeks ago". A question later names the date ("What did she do
on 7 May 2023?"), and no word of the fact matches it. :func:`resolve` finds the relative
expressions of a text and resolves each against the day it was said (the anchor) into a period
of days; :func:`period_words` says that period the way a question would name it, in the same
words the index already gives a log's own date ("Sunday 7 May 2023"), so full-text search matches
a question naming the date with no query parsing at all. :func:`named_periods` reads the dates a
question names ("on October 3, 2023", "in May 2023"), :func:`yearless_months` the months it names
without a year ("in June": the latest June by the day asked).

The rules, each a fixed English pattern (case is ignored; a number is digits or a word from "one"
to "twelve", or "a"/"an" for one). Weeks run Monday to Sunday; "last X" and "next X" are the
nearest X strictly before or after the anchor's own X:

=================================================  ==========================================
phrase                                             period
=================================================  ==========================================
today, tonight, this morning/afternoon/evening     the anchor day
yesterday, last night                              the day before
the day before yesterday                           two days before
tomorrow                                           the day after
the day after tomorrow                             two days after
last / this past / past <weekday>                  that weekday 1-7 days before
next / this coming <weekday>                       that weekday 1-7 days after
last weekend, this past weekend, over the weekend  the Saturday and Sunday before the anchor's week
                                                   (the weekend just gone when said on a weekend
                                                   day: the anchor's own weekend is "this weekend")
this weekend                                       the anchor week's Saturday and Sunday
next weekend                                       the next week's Saturday and Sunday
last week, this past week, the week before         the week before the anchor's week
this week                                          the anchor's week
next week                                          the week after the anchor's week
last / next / this month                           the calendar month before / after / of
last / next / this year                            the calendar year before / after / of
N days ago                                         the day N days before
N weeks ago                                        the week holding the day 7N days before
N months ago                                       the calendar month N months before
N years ago                                        the calendar year N before
=================================================  ==========================================

Vague amounts ("a few days ago", "some weeks ago", "recently") are not resolved: a period the
phrase does not pin down is no date. Nor are phrases relative to another event than the saying
("two days before the race", "the following week", "in three months" of a duration). Resolution is a function of the text and the anchor alone
(deterministic), never moves a period further from the anchor than the phrase says (a day
phrase moves exactly its days; a weekday at most 7; a week phrase's days lie within 7N-6 and
7N+6 days of the anchor; a month phrase's within its months), and text holding none of these
phrases resolves to nothing.
"""

from __future__ import annotations

import bisect
import datetime as dt
import re
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = [
    "Period",
    "date_words",
    "named_periods",
    "named_ranges",
    "period_words",
    "resolve",
    "resolved_words",
    "yearless_days",
    "yearless_months",
]

WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
_NUMBERS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "a couple of": 2,
    "couple of": 2,
}
# Larger offsets than this are not "relative time" but arithmetic nobody says.
_MAX_COUNT = 400
_YEAR_RANGE = (1, 9999)


@dataclass(frozen=True, order=True)
class Period:
    """Days ``first`` to ``last`` (inclusive) that a phrase (``text[start:end]``) means; ``unit``
    is how it was said: day, weekend, week, month, year, or range (named_ranges)."""

    first: dt.date
    last: dt.date
    unit: str
    start: int = 0
    end: int = 0
    phrase: str = ""


class _Taken:
    """The spans of a text already read as one period, none overlapping another: whether a new
    span overlaps one looks at its two neighbours (bisect), not at every span taken, so a text of
    thousands of dates reads in n log n, not n² (a 100 KB query of dates took half a minute)."""

    def __init__(self) -> None:
        self._starts: list[int] = []
        self._ends: list[int] = []

    def overlaps(self, start: int, end: int) -> bool:
        i = bisect.bisect_right(self._starts, start)
        return (i > 0 and self._ends[i - 1] > start and self._starts[i - 1] < end) or (
            i < len(self._starts) and self._starts[i] < end
        )

    def add(self, start: int, end: int) -> None:
        i = bisect.bisect_right(self._starts, start)
        self._starts.insert(i, start)
        self._ends.insert(i, end)


def date_words(day: dt.date) -> str:
    """A day as people say it, in English whatever the locale: "Monday 8 May 2023"."""
    return f"{WEEKDAYS[day.weekday()]} {day.day} {MONTHS[day.month - 1]} {day.year}"


def period_words(period: Period) -> str:
    """A period in the words a question would name it by: a day as :func:`date_words`, a weekend
    or week by its days' dates (so "the week before 16 November" finds the days of that week), a
    month as "May 2023", a year as "2023"."""
    if period.unit == "year":
        return str(period.first.year)
    if period.unit == "month":
        return f"{MONTHS[period.first.month - 1]} {period.first.year}"
    if period.unit == "day":
        return date_words(period.first)
    # A week or a weekend: its first and last day ("week of 1 May 2023 to 7 May 2023").
    return f"{period.unit} of {date_words(period.first)} to {date_words(period.last)}"


# --- the patterns -----------------------------------------------------------------------------

_NUM = r"(?P<n>\d{1,3}|a couple of|couple of|an|a|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)"
_WEEKDAY = r"(?P<wd>monday|tuesday|wednesday|thursday|friday|saturday|sunday)s?"
_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    (name, re.compile(rf"\b(?:{pattern})\b", re.IGNORECASE))
    for name, pattern in (
        ("day_before_yesterday", r"the day before yesterday"),
        ("day_after_tomorrow", r"the day after tomorrow"),
        ("yesterday", r"yesterday|last night"),
        ("tomorrow", r"tomorrow"),
        ("today", r"today|tonight|this (?:morning|afternoon|evening)"),
        ("ago", rf"{_NUM} (?P<u>day|week|month|year)s? ago"),
        ("last_weekday", rf"(?:last|this past|past) {_WEEKDAY}"),
        ("next_weekday", rf"(?:next|this coming) {_WEEKDAY}"),
        ("last_weekend", r"(?:last|this past|past|over the) weekend"),
        ("this_weekend", r"this weekend"),
        ("next_weekend", r"next weekend"),
        ("last", r"(?:last|this past) (?P<u>week|month|year)|the (?P<u2>week) before"),
        ("next", r"next (?P<u>week|month|year)"),
        ("this", r"this (?P<u>week|month|year)"),
    )
]


def _named(word: str, names: Iterable[str]) -> str | None:
    """The one of ``names`` that ``word`` matched as the rules match: IGNORECASE also takes "ſ"
    for "s", "K" (Kelvin) for "k", "İ" and "ı" for "i", which str.lower() does not map back."""
    return next((name for name in names if re.fullmatch(re.escape(name), word, re.IGNORECASE)), None)


def _count(word: str) -> int | None:
    value = int(word) if word.isdigit() else _NUMBERS.get(_named(word, _NUMBERS) or "")
    return value if value is not None and 0 < value <= _MAX_COUNT else None


def _week(day: dt.date) -> tuple[dt.date, dt.date]:
    monday = day - dt.timedelta(days=day.weekday())
    return monday, monday + dt.timedelta(days=6)


def _month(year: int, month: int) -> tuple[dt.date, dt.date] | None:
    """A calendar month, ``month`` counted from 1 and allowed past 12 or below 1."""
    year, month = year + (month - 1) // 12, (month - 1) % 12 + 1
    if not _YEAR_RANGE[0] <= year <= _YEAR_RANGE[1]:
        return None
    last = dt.date(year + 1, 1, 1) if month == 12 else dt.date(year, month + 1, 1)
    return dt.date(year, month, 1), last - dt.timedelta(days=1)


def _year(year: int) -> tuple[dt.date, dt.date] | None:
    if not _YEAR_RANGE[0] <= year <= _YEAR_RANGE[1]:
        return None
    return dt.date(year, 1, 1), dt.date(year, 12, 31)


def _shift(anchor: dt.date, unit: str, n: int) -> tuple[dt.date, dt.date, str] | None:
    """The period ``n`` units from the anchor (negative: before), or None past the calendar."""
    try:
        if unit == "day":
            day = anchor + dt.timedelta(days=n)
            return day, day, "day"
        if unit == "week":
            first, last = _week(anchor + dt.timedelta(days=7 * n))
            return first, last, "week"
        if unit == "weekend":
            monday, _ = _week(anchor + dt.timedelta(days=7 * n))
            return monday + dt.timedelta(days=5), monday + dt.timedelta(days=6), "weekend"
        span = _month(anchor.year, anchor.month + n) if unit == "month" else _year(anchor.year + n)
    except OverflowError:
        return None
    return (*span, unit) if span else None


def _period(name: str, match: re.Match[str], anchor: dt.date) -> tuple[dt.date, dt.date, str] | None:
    groups = match.groupdict()
    said = groups.get("u") or groups.get("u2")
    unit = _named(said, ("day", "week", "month", "year")) if said else None
    if name == "today":
        return _shift(anchor, "day", 0)
    if name in ("yesterday", "tomorrow", "day_before_yesterday", "day_after_tomorrow"):
        days = {"yesterday": -1, "tomorrow": 1, "day_before_yesterday": -2, "day_after_tomorrow": 2}[name]
        return _shift(anchor, "day", days)
    if name == "ago":
        n = _count(groups["n"])
        # The pattern always captures the unit; the test says so to the type checker.
        return None if n is None or unit is None else _shift(anchor, unit, -n)
    if name in ("last_weekday", "next_weekday"):
        weekday = _named(groups["wd"], WEEKDAYS)
        if weekday is None:  # the pattern names only these; the test says so to the type checker
            return None
        target = WEEKDAYS.index(weekday)
        if name == "last_weekday":
            back = (anchor.weekday() - target) % 7 or 7
            return _shift(anchor, "day", -back)
        return _shift(anchor, "day", (target - anchor.weekday()) % 7 or 7)
    if name == "last_weekend":
        # Said on a Saturday or Sunday, "last weekend" is still the one before this one.
        return _shift(anchor, "weekend", -1)
    if name == "this_weekend":
        return _shift(anchor, "weekend", 0)
    if name == "next_weekend":
        return _shift(anchor, "weekend", 1)
    if name in ("last", "next", "this") and unit is not None:
        return _shift(anchor, unit, {"last": -1, "next": 1, "this": 0}[name])
    return None


# Every rule's phrase holds one of these words, whole and under the same flags: text holding none
# of them resolves to nothing. One search rules out most of a log's facts (they say no relative
# time), where the fourteen rules would each scan them: those scans were most of a big log's parse.
_RULE_WORDS = "yesterday|tomorrow|today|tonight|this|ago|last|past|next|weekend|before"
_ANY_RULE = re.compile(rf"\b(?:{_RULE_WORDS})\b", re.IGNORECASE)
# The same words in lowercase ASCII text, anywhere: a third of the search above, which a case-blind
# pattern makes slow. Only for ASCII text, whose lower() is what a case-blind match compares
# (elsewhere "İ" matches "i" case-blind and lower() makes it two characters).
_ANY_RULE_WORD = re.compile(_RULE_WORDS)


def resolve(text: str, anchor: dt.date) -> list[Period]:
    """The relative time expressions of ``text`` resolved against ``anchor`` (the day it was
    said), in the order they appear; overlapping matches go to the longer (earlier listed) rule,
    so "the day before yesterday" is not also "yesterday"."""
    if text.isascii() and not _ANY_RULE_WORD.search(text.lower()):
        return []
    if not _ANY_RULE.search(text):
        return []
    return _by_every_rule(text, anchor)


def _by_every_rule(text: str, anchor: dt.date) -> list[Period]:
    """:func:`resolve` without the pre-check (its law compares the two)."""
    taken = _Taken()
    found: list[Period] = []
    for name, pattern in _PATTERNS:
        for match in pattern.finditer(text):
            start, end = match.span()
            if taken.overlaps(start, end):
                continue
            span = _period(name, match, anchor)
            if span is None:
                continue
            taken.add(start, end)
            found.append(Period(span[0], span[1], span[2], start, end, match.group(0)))
    return sorted(found, key=lambda p: (p.start, p.end))


def resolved_words(text: str, anchor: dt.date | None) -> str:
    """The dates the relative expressions of ``text`` mean, as words (one period per line, each
    once); "" without an anchor or without such expressions."""
    if anchor is None:
        return ""
    seen: dict[str, None] = {}
    for period in resolve(text, anchor):
        seen.setdefault(period_words(period), None)
    return "\n".join(seen)


# --- dates a question names --------------------------------------------------------------------

_MONTH_NAMES = {name.lower(): n for n, name in enumerate(MONTHS, 1)}
_MONTH_NAMES.update({name.lower()[:3]: n for n, name in enumerate(MONTHS, 1)})
_MONTH_NAMES["sept"] = 9
_MONTH_RE = r"(?P<m>" + "|".join(sorted(_MONTH_NAMES, key=len, reverse=True)) + r")\.?"
_DAY_RE = r"(?P<d>[0-3]?\d)(?:st|nd|rd|th)?"
_YEAR_RE = r"(?P<y>\d{4})"
_NAMED = [
    re.compile(rf"\b{_DAY_RE}(?: of)? ?{_MONTH_RE},? ?{_YEAR_RE}\b", re.IGNORECASE),  # 3 October 2023
    re.compile(rf"\b{_MONTH_RE} {_DAY_RE},? ?{_YEAR_RE}\b", re.IGNORECASE),  # October 3, 2023
    re.compile(rf"\b{_MONTH_RE},? {_YEAR_RE}\b", re.IGNORECASE),  # May 2023
    re.compile(r"\b(?P<iy>\d{4})-(?P<im>\d{2})-(?P<id>\d{2})\b"),  # 2023-10-03
]

_FOUR_DIGITS = re.compile(r"\d{4}")
_MONTH_NAME_WORD = re.compile(r"\b(?:" + "|".join(_MONTH_NAMES) + r")\b", re.IGNORECASE)


def named_periods(text: str) -> list[Period]:
    """The days and months ``text`` names outright ("on October 3, 2023", "3 Oct 2023", "in May
    2023", "2023-10-03"), in order; impossible dates (30 February) are not dates."""
    taken = _Taken()
    found: list[Period] = []
    if not _FOUR_DIGITS.search(text):  # every pattern names a year; most texts name none
        return found
    for pattern in _NAMED:
        for match in pattern.finditer(text):
            start, end = match.span()
            if taken.overlaps(start, end):
                continue
            groups = match.groupdict()
            try:
                if groups.get("iy"):
                    day = dt.date(int(groups["iy"]), int(groups["im"]), int(groups["id"]))
                    span = (day, day, "day")
                else:
                    year, month = int(groups["y"]), _MONTH_NAMES[groups["m"].lower()]
                    if groups.get("d"):
                        day = dt.date(year, month, int(groups["d"]))
                        span = (day, day, "day")
                    else:
                        bounds = _month(year, month)
                        if bounds is None:
                            continue
                        span = (*bounds, "month")
            except (ValueError, KeyError):
                continue
            taken.add(start, end)
            found.append(Period(span[0], span[1], span[2], start, end, match.group(0)))
    return sorted(found, key=lambda p: (p.start, p.end))


# A month named after a word that puts something in it ("in June", "during May", "early July"),
# with no year of its own (a named year is named_periods'). A bare month name is no period:
# "May I ask", "March on", "August" as a name; nor one that goes on into a word ("Mar-a-Lago",
# "Jan's") or says its year another way ("June of 2022", "June '22", "June last year").
_MONTH_ALONE = re.compile(
    rf"\b(?:in|during|early|mid|late|mid-)\s*(?:the\s+month\s+of\s+)?{_MONTH_RE}(?!\w)"
    r"(?!['’]s\b|-|,?\s*['’]?\d|\s+of\s+\d|\s+(?:last|this|next)\s+year|\s+\w+\s+years?\s+ago)",
    re.IGNORECASE,
)


def yearless_months(text: str, anchor: dt.date) -> list[Period]:
    """The months ``text`` names without a year ("in June", "during May", "early July"), each the
    latest such month to begin on or before ``anchor`` (the day a question is asked, or the last
    day of the first period it names: "in June and July 2023" is June 2023): asked in October,
    "in June" is June of the same year, and "in December" the December before. A question asks
    mostly of what is past; one asking of a month ahead finds the one before. A month word that
    is a name ("confide in June") reads as the month: nothing tells the two apart."""
    found: list[Period] = []
    if not _MONTH_NAME_WORD.search(text):
        return found
    for match in _MONTH_ALONE.finditer(text):
        month = _MONTH_NAMES[match.group("m").lower()]
        bounds = _month(anchor.year - (month > anchor.month), month)
        if bounds is not None:
            found.append(Period(*bounds, "month", match.start(), match.end(), match.group(0)))
    return found


# The start of a range whose end is a named day: "between August 11 and", "from 3 May 2023 to".
# The start may leave out its year: it is then the end's, or the year before when its month comes
# after the end's (a range over the new year).
_RANGE_START = re.compile(
    rf"\b(?:between|from)\s+(?:the\s+)?(?:{_MONTH_RE}\s+{_DAY_RE}"
    rf"|{_DAY_RE.replace('<d>', '<d2>')}(?:\s+of)?\s+{_MONTH_RE.replace('<m>', '<m2>')})"
    r"(?:,?\s+(?P<y>\d{4}))?,?\s+(?:and|to|until|till|through)\s+(?:the\s+)?",
    re.IGNORECASE,
)
# A range longer than this is not one period a question asks about but a span of a life.
_MAX_RANGE_DAYS = 366


def named_ranges(text: str) -> list[Period]:
    """The ranges of days ``text`` names ("between August 11 and August 15 2023", "from 3 May to 9
    May 2023"), in order: from the start day to the named day that ends it, both included. A
    start after its end, or a range over a year long, is no range."""
    found: list[Period] = []
    ends = named_periods(text)
    # The starts are read once, each by where it ends: searching the text before each named day
    # for a start ending there read the text once per day (a 100 KB text of dates took minutes).
    # A start ends on the space (or "the ") before a day, which begins with a digit or a month.
    starts = {match.end(): match for match in _RANGE_START.finditer(text)} if ends else {}
    for end in ends:
        if end.unit != "day":
            continue
        match = starts.get(end.start)
        if match is None:
            continue
        groups = match.groupdict()
        month, day = (groups["m"], groups["d"]) if groups["m"] else (groups["m2"], groups["d2"])
        year = int(groups["y"]) if groups["y"] else end.first.year
        try:
            first = dt.date(year, _MONTH_NAMES[month.lower()], int(day))
            if not groups["y"] and first.month > end.first.month:
                first = first.replace(year=year - 1)  # "between December 28 and January 3, 2024"
        except (ValueError, KeyError):
            continue
        if first > end.first or (end.first - first).days >= _MAX_RANGE_DAYS:
            continue
        found.append(Period(first, end.last, "range", match.start(), end.end, text[match.start() : end.end]))
    return found


# A day named without its year: "Aug 15th", "August 15" (not followed by a year or by more digits:
# "May 2023" is a month, "May 15, 2023" a named day), "the 15th of May", "on 15 May". A day
# before its month needs "the" or "on" before it, or an ordinal after it, so "5 may be enough" is
# no date. A day named with neither month nor year needs both "on/by/since/until/from the" and
# an ordinal: "on the 15th" (not "the 15th time", nor "on the 15" of anything).
_NO_YEAR_AFTER = r"(?![\w'’-])(?!,?\s*['’]?\d)"
_YEARLESS_DAY = [
    re.compile(rf"\b{_MONTH_RE}\s+(?:the\s+)?{_DAY_RE}{_NO_YEAR_AFTER}", re.IGNORECASE),
    re.compile(
        rf"(?:\b(?:the|on)\s+{_DAY_RE}|\b(?P<d2>[0-3]?\d)(?:st|nd|rd|th))(?:\s+of)?\s+"
        rf"{_MONTH_RE.replace('<m>', '<m2>')}{_NO_YEAR_AFTER}",
        re.IGNORECASE,
    ),
]
_MONTHLESS_DAY = re.compile(
    r"\b(?:on|by|since|until|from)\s+the\s+(?P<d>[0-3]?\d)(?:st|nd|rd|th)(?![\w'’-])(?!\s+(?:of\b|time|century))",
    re.IGNORECASE,
)


def yearless_days(text: str, anchor: dt.date, *, nearest: bool = False) -> list[Period]:
    """The days ``text`` names without a year ("on Aug 15th", "the 15th of May") or without a
    month ("on the 15th"), in order, each the latest such day on or before ``anchor`` (the day a
    question is asked, or the last day of the first period it names with its year): asked in
    October 2023, "Aug 15th" is 15 August 2023 and "Dec 24th" 24 December 2022; asked on 10 May,
    "on the 15th" is 15 April. A day no month of the last year has (31 June, 30 February) is no
    day; 29 February is the latest one. A day named with its year is named_periods'.

    ``nearest``: each is the such day nearest ``anchor`` instead, before or after it (the earlier
    on a tie): what a memory says of a day it names without its year is as often ahead ("my game
    on the 20th", said on the 17th) as past ("we met on the 15th"). A day with its month then lies
    at most half a year (183 days) from the anchor (but 29 February), a day without one (up to
    the 28th, which every month holds) at most 16 days."""
    found: list[Period] = []
    taken = _Taken()
    if not _DIGIT.search(text):  # every pattern holds a day's number; most texts hold none
        return found
    pick = _nearest_day if nearest else _latest_day
    for pattern in _YEARLESS_DAY:
        for match in pattern.finditer(text):
            groups = match.groupdict()
            month = _MONTH_NAMES[(groups.get("m") or groups["m2"]).lower()]
            day = pick(anchor, int(groups.get("d") or groups["d2"]), month)
            if day is not None and not taken.overlaps(*match.span()):
                taken.add(*match.span())
                found.append(Period(day, day, "day", match.start(), match.end(), match.group(0)))
    for match in _MONTHLESS_DAY.finditer(text):
        if taken.overlaps(*match.span()):
            continue
        day = pick(anchor, int(match.group("d")), None)
        if day is not None:
            taken.add(*match.span())
            found.append(Period(day, day, "day", match.start(), match.end(), match.group(0)))
    return sorted(found, key=lambda p: (p.start, p.end))


_DIGIT = re.compile(r"\d")
# How far back a day without its year (or its month) is looked for: eight years hold a 29 February.
_LOOK_BACK_MONTHS = 8 * 12


def _day_in_months(anchor: dt.date, day: int, month: int | None, step: int) -> dt.date | None:
    """The first date with this day of the month (and this month) going month by month from
    ``anchor``'s month, back (``step`` -1: on or before ``anchor``) or ahead (+1: after it),
    within the look-back's span; None when no month there holds it or the calendar ends first."""
    if not 1 <= day <= 31:
        return None
    for n in range(_LOOK_BACK_MONTHS + 1):
        year, index = divmod(anchor.year * 12 + anchor.month - 1 + step * n, 12)
        if not _YEAR_RANGE[0] <= year <= _YEAR_RANGE[1]:
            return None
        if month is not None and index + 1 != month:
            continue
        try:
            candidate = dt.date(year, index + 1, day)
        except ValueError:
            continue
        if (candidate <= anchor) if step < 0 else (candidate > anchor):
            return candidate
    return None


def _latest_day(anchor: dt.date, day: int, month: int | None) -> dt.date | None:
    """The latest date on or before ``anchor`` with this day of the month (and this month)."""
    return _day_in_months(anchor, day, month, -1)


def _nearest_day(anchor: dt.date, day: int, month: int | None) -> dt.date | None:
    """The date with this day of the month (and this month) nearest ``anchor``, the earlier on a
    tie: the latest on or before it, or the earliest after it, whichever lies closer."""
    before = _latest_day(anchor, day, month)
    after = _day_in_months(anchor, day, month, +1)
    if before is None or (after is not None and (after - anchor) < (anchor - before)):
        return after
    return before
