"""Time, resolved (syncd.formats.when): the rules by example, and their laws by property."""

from __future__ import annotations

import datetime as dt
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

# White-box: the precheck's law is that it agrees with trying every rule (_by_every_rule, _PATTERNS).
from syncd.formats.when import (
    _PATTERNS,
    MONTHS,
    Period,
    _by_every_rule,
    date_words,
    named_periods,
    period_words,
    resolve,
    resolved_words,
    yearless_days,
)

from .strategies import examples

MONDAY = dt.date(2023, 5, 8)  # a Monday
SUNDAY = dt.date(2023, 5, 14)
D = dt.date


@pytest.mark.parametrize(
    ("text", "anchor", "first", "last", "unit"),
    [
        ("I went to the support group yesterday.", MONDAY, D(2023, 5, 7), D(2023, 5, 7), "day"),
        ("Last night was loud", MONDAY, D(2023, 5, 7), D(2023, 5, 7), "day"),
        ("the day before yesterday", MONDAY, D(2023, 5, 6), D(2023, 5, 6), "day"),
        ("See you tomorrow!", MONDAY, D(2023, 5, 9), D(2023, 5, 9), "day"),
        ("We hiked last Friday.", MONDAY, D(2023, 5, 5), D(2023, 5, 5), "day"),
        ("We hiked last Monday.", MONDAY, D(2023, 5, 1), D(2023, 5, 1), "day"),  # not today
        ("this past Sunday", MONDAY, D(2023, 5, 7), D(2023, 5, 7), "day"),
        ("next Friday", MONDAY, D(2023, 5, 12), D(2023, 5, 12), "day"),
        ("last weekend", MONDAY, D(2023, 5, 6), D(2023, 5, 7), "weekend"),
        ("last weekend", SUNDAY, D(2023, 5, 6), D(2023, 5, 7), "weekend"),  # said on a Sunday
        ("this weekend", MONDAY, D(2023, 5, 13), D(2023, 5, 14), "weekend"),
        ("last week", MONDAY, D(2023, 5, 1), D(2023, 5, 7), "week"),
        ("the week before", SUNDAY, D(2023, 5, 1), D(2023, 5, 7), "week"),
        ("next week", MONDAY, D(2023, 5, 15), D(2023, 5, 21), "week"),
        ("3 days ago", MONDAY, D(2023, 5, 5), D(2023, 5, 5), "day"),
        ("two weeks ago", MONDAY, D(2023, 4, 24), D(2023, 4, 30), "week"),
        ("a month ago", MONDAY, D(2023, 4, 1), D(2023, 4, 30), "month"),
        ("Three months ago", D(2023, 1, 31), D(2022, 10, 1), D(2022, 10, 31), "month"),
        ("next month", D(2023, 12, 31), D(2024, 1, 1), D(2024, 1, 31), "month"),
        ("last year", MONDAY, D(2022, 1, 1), D(2022, 12, 31), "year"),
        ("10 years ago", MONDAY, D(2013, 1, 1), D(2013, 12, 31), "year"),
    ],
)
def test_each_rule(text, anchor, first, last, unit):
    (period,) = resolve(text, anchor)
    assert (period.first, period.last, period.unit) == (first, last, unit)
    assert text[period.start : period.end] == period.phrase


def test_words_are_the_ones_a_question_names_a_date_by():
    assert resolved_words("I went to the support group yesterday.", MONDAY) == "Sunday 7 May 2023"
    assert resolved_words("Last Friday, and again last weekend", MONDAY) == (
        "Friday 5 May 2023\nweekend of Saturday 6 May 2023 to Sunday 7 May 2023"
    )
    assert resolved_words("a month ago; three years ago", MONDAY) == "April 2023\n2020"
    assert resolved_words("yesterday", None) == ""
    assert date_words(MONDAY) == "Monday 8 May 2023"


def test_vague_and_foreign_phrases_are_not_dates():
    for text in (
        "a few days ago",
        "some weeks ago",
        "recently",
        "two days before the race",
        "the following week",
        "in three months",
        "weekends are quiet",
        "I read 300 books",
        "Yesterday's Child is a song title? no: yesterdays",
    ):
        got = resolve(text, MONDAY)
        assert all(p.phrase.lower() == "yesterday" for p in got), (text, got)


def test_letters_the_rules_fold_mean_what_their_ascii_spelling_means():
    """IGNORECASE matches "ſ" as "s", "K" (Kelvin) as "k", "İ" and "ı" as "i": such a phrase is
    resolved as its ASCII spelling is (a weekday spelled so once raised: str.capitalize keeps "ſ")."""
    for folded, plain in [
        ("this coming tue\u017fday", "this coming tuesday"),
        ("last fr\u0130day", "last friday"),
        ("last fr\u0131day", "last friday"),
        ("\u017fix days ago", "six days ago"),
        ("two wee\u212as ago", "two weeks ago"),
    ]:
        got, want = resolve(folded, MONDAY), resolve(plain, MONDAY)
        assert [(p.first, p.last, p.unit) for p in got] == [(p.first, p.last, p.unit) for p in want] != [], folded


def test_the_longest_phrase_wins_where_rules_overlap():
    assert [p.phrase for p in resolve("the day before yesterday", MONDAY)] == ["the day before yesterday"]
    assert [p.unit for p in resolve("last weekend", MONDAY)] == ["weekend"]


def test_named_dates_in_a_question():
    got = named_periods("What movie did she watch on 1 May, 2022? And on October 3, 2023, in July 2022, 2023-10-03?")
    assert [(p.first, p.last, p.unit) for p in got] == [
        (D(2022, 5, 1), D(2022, 5, 1), "day"),
        (D(2023, 10, 3), D(2023, 10, 3), "day"),
        (D(2022, 7, 1), D(2022, 7, 31), "month"),
        (D(2023, 10, 3), D(2023, 10, 3), "day"),
    ]
    assert named_periods("on 31 February 2023")[0].unit == "month"  # no such day: the month it names
    assert named_periods("nothing dated here") == []


# ----------------------------------------------------------------------------------- laws

_DAY_PHRASES = {
    "yesterday": 1,
    "last night": 1,
    "the day before yesterday": 2,
    "tomorrow": 1,
    "the day after tomorrow": 2,
    "today": 0,
    "tonight": 0,
    "this morning": 0,
}
_WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
_NUMBER_WORDS = {
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
}


@st.composite
def phrases(draw) -> tuple[str, int, int]:
    """A relative time phrase, and the fewest and most days it may move a date by (the bound
    the phrase itself states), measured from the anchor to the period's farthest day."""
    kind = draw(st.integers(0, 7))
    if kind == 0:
        phrase = draw(st.sampled_from(sorted(_DAY_PHRASES)))
        return phrase, _DAY_PHRASES[phrase], _DAY_PHRASES[phrase]
    if kind == 1:
        return (
            f"{draw(st.sampled_from(['last', 'next', 'this past', 'this coming']))} {draw(st.sampled_from(_WEEKDAYS))}",
            1,
            7,
        )
    if kind == 2:
        return draw(st.sampled_from(["last weekend", "this weekend", "next weekend", "over the weekend"])), 0, 13
    if kind == 3:
        return draw(st.sampled_from(["last week", "next week", "this week", "the week before"])), 0, 13
    word = draw(st.sampled_from(sorted(_NUMBER_WORDS)) | st.integers(1, 400).map(str))
    n = int(word) if word.isdigit() else _NUMBER_WORDS[word]
    unit = ["day", "week", "month", "year"][kind - 4]
    plural = "s" if n != 1 else ""
    phrase = f"{word} {unit}{plural} ago"
    if unit == "day":
        return phrase, n, n
    if unit == "week":
        return phrase, 7 * n - 6, 7 * n + 6
    if unit == "month":
        return phrase, 28 * n - 31, 31 * n + 31
    return phrase, 365 * n - 366, 366 * n + 366


ANCHORS = st.dates(min_value=D(1900, 1, 1), max_value=D(2200, 12, 31))
# Text holding none of the words any rule starts from.
_TRIGGERS = re.compile(
    r"yesterday|tomorrow|today|tonight|night|morning|afternoon|evening|ago|last|next|"
    r"this|past|weekend|week|over|coming",
    re.IGNORECASE,
)
PLAIN = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=60).filter(
    lambda s: not _TRIGGERS.search(s)
)


@given(phrases(), ANCHORS, PLAIN, PLAIN)
@settings(max_examples=300)
def test_law_a_phrase_moves_a_date_by_what_it_says_no_more(phrase_bounds, anchor, before, after):
    phrase, least, most = phrase_bounds
    text = f"{before} {phrase} {after}"
    got = resolve(text, anchor)
    assert got == resolve(text, anchor)  # deterministic
    (period,) = [p for p in got if p.phrase.lower() == phrase]
    assert period.first <= period.last
    farthest = max(abs((period.first - anchor).days), abs((period.last - anchor).days))
    assert least <= farthest <= most, (phrase, anchor, period)
    # Said in a longer text, a phrase means what it means alone.
    (alone,) = resolve(phrase, anchor)
    assert (alone.first, alone.last, alone.unit) == (period.first, period.last, period.unit)
    assert period_words(period) in resolved_words(text, anchor).split("\n")


@given(PLAIN, ANCHORS)
@settings(max_examples=300)
def test_law_text_without_a_phrase_is_left_alone(text, anchor):
    assert resolve(text, anchor) == []
    assert resolved_words(text, anchor) == ""


# The characters other than its own two cases that IGNORECASE matches to an ASCII letter.
_FOLDED = {"i": "\u0130\u0131", "s": "\u017f", "k": "\u212a"}


@st.composite
def near_a_rule(draw) -> str:
    """Text some rule matches (in any case, in random text, as each rule's regex generates it),
    a letter at times swapped for another character IGNORECASE matches to it, and at times cut
    or spliced, so some are near a phrase without being one."""
    _, pattern = draw(st.sampled_from(_PATTERNS))
    text = draw(st.from_regex(pattern))
    swaps = draw(st.lists(st.integers(0, max(len(text) - 1, 0)), max_size=3))
    for at in swaps:
        if text[at : at + 1].lower() in _FOLDED:
            text = text[:at] + draw(st.sampled_from(_FOLDED[text[at].lower()])) + text[at + 1 :]
    if draw(st.booleans()):
        cut = draw(st.integers(0, len(text)))
        text = text[:cut] + draw(st.sampled_from(["", " ", "x", "-", "é", "_"])) + text[cut + 1 :]
    return text


@given(st.one_of(near_a_rule(), st.text(max_size=80)), ANCHORS)
@settings(max_examples=examples(500))
def test_law_the_precheck_rejects_only_text_no_rule_resolves(text, anchor):
    """resolve's one-regex pre-check (it rules out text holding none of the rules' words) never
    drops a phrase some rule would have resolved."""
    assert resolve(text, anchor) == _by_every_rule(text, anchor)


@given(st.text(max_size=200), ANCHORS)
@settings(max_examples=300)
def test_law_any_text_resolves_without_raising(text, anchor):
    for period in resolve(text, anchor):
        assert isinstance(period, Period) and period.first <= period.last
        assert text[period.start : period.end] == period.phrase
    named_periods(text)


# --- days named without a year (or a month) ----------------------------------------------------

ASKED = dt.date(2023, 10, 20)


@pytest.mark.parametrize(
    ("text", "days"),
    [
        ("What did they give him when they met on Aug 15th?", [D(2023, 8, 15)]),
        ("What happened on the 15th of May?", [D(2023, 5, 15)]),
        ("What did she bake on 3 June?", [D(2023, 6, 3)]),
        ("Where was he on December 24?", [D(2022, 12, 24)]),  # the latest by the day asked
        ("What did he do on the 15th?", [D(2023, 10, 15)]),
        ("And since the 21st?", [D(2023, 9, 21)]),  # this month's 21st is still to come
        ("Was it on the 29th of February?", [D(2020, 2, 29)]),
        ("on Oct 20th", [D(2023, 10, 20)]),  # the day asked is its own latest
        # Not days without a year: a year follows, or no day, or no date at all.
        ("What did she do on May 15, 2023?", []),
        ("on the 15th of May, 2023", []),
        ("in May 2023", []),
        ("5 may be enough", []),
        ("for the 15th time", []),
        ("the 15th of the month", []),
        ("on 31 June", []),
        ("on the 32nd", []),
        ("Flight AF 15 to Paris", []),
    ],
)
def test_days_named_without_a_year(text, days):
    assert [p.first for p in yearless_days(text, ASKED)] == days
    for p in yearless_days(text, ASKED):
        assert p.unit == "day" and p.first == p.last and text[p.start : p.end] == p.phrase


@settings(max_examples=examples(100))
@given(text=st.text(max_size=60), anchor=st.dates(min_value=D(1, 1, 1), max_value=D(9999, 12, 31)))
def test_any_text_reads_its_yearless_days_without_raising_and_never_after_the_anchor(text, anchor):
    found = yearless_days(text, anchor)
    assert yearless_days(text, anchor) == found  # deterministic
    for period in found:
        # Never after the day asked, never further back than eight years (a 29 February's wait).
        assert period.first <= anchor and (anchor - period.first).days <= 8 * 366
        assert text[period.start : period.end] == period.phrase


@settings(max_examples=examples(100))
@given(
    day=st.dates(min_value=D(1900, 1, 1), max_value=D(2200, 12, 31)),
    ahead=st.integers(min_value=0, max_value=364),
    form=st.sampled_from(["on {b} {d}", "on {b} {o}", "the {o} of {B}", "on {d} {B}", "{o} {B}"]),
)
def test_a_day_said_without_its_year_is_the_latest_such_day(day, ahead, form):
    """Asked any day of the year that follows it, a day said without its year is that day."""
    if (day.month, day.day) == (2, 29):
        return  # the next year holds no 29 February: that day's law is the example above
    anchor = day + dt.timedelta(days=ahead)
    suffix = {1: "st", 2: "nd", 3: "rd"}.get(day.day % 10 if day.day not in (11, 12, 13) else 0, "th")
    said = form.format(b=day.strftime("%b"), B=day.strftime("%B"), d=day.day, o=f"{day.day}{suffix}")
    assert [p.first for p in yearless_days(f"What happened {said}?", anchor)] == [day]


@pytest.mark.parametrize(
    ("text", "day"),
    [
        ("I met my teammates on the 15th after the trip.", D(2023, 8, 15)),  # said on the 17th
        ("My game is on the 20th!", D(2023, 8, 20)),  # ahead is as near as behind
        ("We fly out on Dec 24th.", D(2023, 12, 24)),
        ("It was on Feb 20th.", D(2023, 2, 20)),
        ("on the 31st", D(2023, 8, 31)),  # 14 days ahead against 17 back
    ],
)
def test_a_memory_s_day_without_its_year_is_the_nearest_such_day(text, day):
    assert [p.first for p in yearless_days(text, D(2023, 8, 17), nearest=True)] == [day]


@settings(max_examples=examples(100))
@given(
    anchor=st.dates(min_value=D(2, 1, 1), max_value=D(9998, 12, 31)),
    day=st.integers(min_value=1, max_value=28),
    month=st.one_of(st.none(), st.integers(min_value=1, max_value=12)),
)
def test_the_nearest_day_is_near_and_none_is_nearer(anchor, day, month):
    said = f"on the {day}th" if month is None else f"on {MONTHS[month - 1]} {day}th"
    found = yearless_days(said, anchor, nearest=True)
    assert len(found) == 1
    first = found[0].first
    assert first.day == day and (month is None or first.month == month)
    distance = abs((first - anchor).days)
    assert distance <= (16 if month is None else 183)
    # Every other such day in the years around lies at least as far (the earlier wins a tie).
    for year in range(anchor.year - 1, anchor.year + 2):
        for m in [month] if month is not None else range(1, 13):
            other = D(year, m, day)
            assert abs((other - anchor).days) >= distance or other == first
