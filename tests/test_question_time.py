"""What a question asks of time (syncd.formats.question_time): the periods it names, "when"."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from syncd.formats.question_time import asked_periods, asks_when, meant_periods, says_when
from syncd.formats.when import MONTHS, date_words, named_periods, resolve

from .strategies import examples

TODAY = dt.date(2023, 11, 30)  # a Thursday


@pytest.mark.parametrize(
    "question",
    [
        "When did Melanie paint a sunrise?",
        "when did she move?",
        "So when did Ana start pottery?",
        "Since when has Bo lived in Porto?",
        "How long ago was Caroline's 18th birthday?",
        "What date is the dentist appointment?",
        "In which month did they go camping?",
        "On what day did John meet his teammates?",
        "What year did she graduate?",
    ],
)
def test_questions_asking_when(question):
    assert asks_when(question)


@pytest.mark.parametrize(
    "question",
    [
        "What did Ana do on 7 May 2023?",
        "How long has Caroline had her friends?",  # a duration, not a date
        "Where did Ana go when she was in Lyon?",  # "when" not asked
        "What time-saving tips did Bo share?",
        "Whenever she paints, what does she feel?",
        "",
    ],
)
def test_questions_not_asking_when(question):
    assert not asks_when(question)


def test_named_days_and_months_are_asked():
    periods = asked_periods("What did Nate do for Joanna on 25 May, 2022 and in July 2022?", TODAY)
    assert [(p.first, p.last, p.unit) for p in periods] == [
        (dt.date(2022, 5, 25), dt.date(2022, 5, 25), "day"),
        (dt.date(2022, 7, 1), dt.date(2022, 7, 31), "month"),
    ]


@pytest.mark.parametrize(
    ("question", "first", "last"),
    [
        ("Where was John between August 11 and August 15 2023?", dt.date(2023, 8, 11), dt.date(2023, 8, 15)),
        ("What did she do from 3 May to 9 May, 2023?", dt.date(2023, 5, 3), dt.date(2023, 5, 9)),
        ("Who visited from May 3, 2023 until May 9, 2023?", dt.date(2023, 5, 3), dt.date(2023, 5, 9)),
        ("Where were they between December 28 and January 3, 2024?", dt.date(2023, 12, 28), dt.date(2024, 1, 3)),
    ],
)
def test_a_range_of_days_is_asked_whole(question, first, last):
    assert [(p.first, p.last, p.unit) for p in asked_periods(question, TODAY)] == [(first, last, "range")]


def test_a_start_after_its_end_is_no_range():
    # Read as the day named alone, as before ranges were read.
    periods = asked_periods("What happened between August 20 and August 15 2023?", TODAY)
    assert [(p.first, p.last, p.unit) for p in periods] == [(dt.date(2023, 8, 15), dt.date(2023, 8, 15), "day")]


def test_relative_time_is_resolved_against_the_day_named():
    periods = asked_periods("Where was Tim in the week before 16 November 2023?", TODAY)
    assert [(p.first, p.last, p.unit) for p in periods] == [
        (dt.date(2023, 11, 6), dt.date(2023, 11, 12), "week"),  # the week before that Thursday's
        (dt.date(2023, 11, 16), dt.date(2023, 11, 16), "day"),
    ]


def test_relative_time_without_a_named_day_is_resolved_against_today():
    assert [(p.first, p.last) for p in asked_periods("What did I do yesterday?", TODAY)] == [
        (dt.date(2023, 11, 29), dt.date(2023, 11, 29))
    ]
    weekend = asked_periods("Where did we go last weekend?", TODAY)
    assert [(p.first, p.last, p.unit) for p in weekend] == [(dt.date(2023, 11, 25), dt.date(2023, 11, 26), "weekend")]
    assert asked_periods("What does Ana like to drink?", TODAY) == []


@pytest.mark.parametrize(
    ("question", "first"),
    [
        ("When did Melanie go camping in June?", dt.date(2023, 6, 1)),
        ("What kind of deal did John get in December?", dt.date(2022, 12, 1)),  # asked in November
        ("What did she plant during Nov.?", dt.date(2023, 11, 1)),  # the month asked in
        ("Where was Tim in early March, as said on 2 June 2021?", dt.date(2021, 3, 1)),  # the day named
    ],
)
def test_a_month_named_without_a_year_is_the_latest_one(question, first):
    months = [p for p in asked_periods(question, TODAY) if p.unit == "month"]
    assert [(p.first, p.last.month, p.last.day >= 28) for p in months] == [(first, first.month, True)]


@pytest.mark.parametrize(
    "question",
    [
        "May I ask what Ana likes?",
        "What did she do in May 2022?",
        "in Mayhem",
        "in June 5",
        "in June of 2022",
        "in June '22",
        "in June last year",
        "in June two years ago",
        "in Jan's chat",
        "a party in Mar-a-Lago",
    ],
)
def test_a_month_word_that_says_its_year_otherwise_or_is_a_word_is_no_yearless_month(question):
    months = [p for p in asked_periods(question, TODAY) if p.unit == "month"]
    assert all(p.first.year == 2022 for p in months), months  # only the named "May 2022", if any


def test_a_yearless_month_beside_a_named_one_is_of_its_year():
    months = [(p.first, p.unit) for p in asked_periods("What did she do in June and July 2021?", TODAY)]
    assert months == [(dt.date(2021, 6, 1), "month"), (dt.date(2021, 7, 1), "month")]


def test_a_row_says_when_by_a_date_or_a_relative_time():
    day = dt.date(2023, 5, 8)
    assert says_when("I went to a pottery class yesterday.", day)
    assert says_when("The show is on 3 June 2023.", None)
    assert says_when("We moved here two years ago.", day)
    assert not says_when("Pottery is so relaxing.", day)
    assert not says_when("I went to a pottery class yesterday.", None)  # no day to resolve it by
    assert meant_periods("I went there last week.", day) == tuple(resolve("I went there last week.", day))


_DAYS = st.dates(min_value=dt.date(1900, 1, 1), max_value=dt.date(2200, 12, 31))


@settings(max_examples=examples(100))
@given(text=st.text(max_size=80), today=_DAYS)
def test_any_question_is_read_without_raising_and_the_same_way_twice(text, today):
    first = asked_periods(text, today)
    assert asked_periods(text, today) == first
    assert asks_when(text) == asks_when(text)
    for period in first:
        assert period.first <= period.last
    # The relative periods are those resolve finds outside the named ones: nothing is invented.
    named = named_periods(text)
    assert all(p in named or p.phrase in text for p in first)


@settings(max_examples=examples(100))
@given(
    day=_DAYS, today=_DAYS, before=st.text(alphabet="abc ?", max_size=12), after=st.text(alphabet="abc ?", max_size=12)
)
def test_a_day_named_in_any_question_is_asked(day, today, before, after):
    question = f"{before} What happened on {date_words(day)} {after}"
    assert any(p.first <= day <= p.last for p in asked_periods(question, today))


@settings(max_examples=examples(100))
@given(text=st.text(max_size=80), day=st.one_of(st.none(), _DAYS))
def test_says_when_is_what_the_time_module_finds(text, day):
    expected = bool(named_periods(text)) or (day is not None and bool(resolve(text, day)))
    assert says_when(text, day) == expected


def _day_month(day: dt.date, month_first: bool) -> str:
    month = day.strftime("%B")
    return f"{month} {day.day}" if month_first else f"{day.day} {month}"


@settings(max_examples=examples(100))
@given(
    end=_DAYS,
    length=st.integers(min_value=0, max_value=365),
    start_year=st.booleans(),
    month_first=st.booleans(),
    words=st.sampled_from([("between", "and"), ("from", "to"), ("from", "until"), ("from", "through")]),
)
def test_a_named_range_is_its_days_and_no_more(end, length, start_year, month_first, words):
    start = end - dt.timedelta(days=length)
    # A start without its year is read in the end's year, or the one before over a new year:
    # only such starts may leave it out.
    readable = start.year == end.year or (start.year == end.year - 1 and start.month > end.month)
    said = _day_month(start, month_first) + (f", {start.year}" if start_year or not readable else "")
    question = f"Where was she {words[0]} {said} {words[1]} {_day_month(end, not month_first)}, {end.year}?"
    assert [(p.first, p.last) for p in asked_periods(question, TODAY)] == [(start, end)]


# Texts made of the pieces a range is read from, in any order: most name no range, some one.
_PIECES = st.sampled_from(["between ", "from ", "and ", "to ", "May ", "August ", "12 ", "3 ", "31 ", "2023 ", ", "])


@settings(max_examples=examples(100))
@given(text=st.lists(_PIECES, max_size=12).map("".join))
def test_ranges_read_from_any_text_end_on_a_named_day_and_last_under_a_year(text):
    ends = {p.first for p in named_periods(text) if p.unit == "day"}
    for period in asked_periods(text, TODAY):
        if period.unit == "range":
            assert period.last in ends
            assert period.first <= period.last
            assert (period.last - period.first).days < 366
            assert period.phrase in text


@settings(max_examples=examples(200))
@given(
    month=st.sampled_from(MONTHS),
    lead=st.sampled_from(["in", "In", "during", "early", "mid-", "late"]),
    today=_DAYS,
    before=st.text(alphabet="abc ?", max_size=12),
)
def test_law_a_yearless_month_is_the_latest_to_begin_by_the_day_asked(month, lead, today, before):
    """Whole, begun on or before the day asked, and less than a year before it: the phrase says
    the month and nothing else, so no earlier one of that name is meant."""
    question = f"{before} What did she do {lead} {month}?"
    (period,) = [p for p in asked_periods(question, today) if p.unit == "month"]
    assert period.first.day == 1 and MONTHS[period.first.month - 1] == month
    assert (period.last + dt.timedelta(days=1)).day == 1 and period.last.month == period.first.month
    assert period.first <= today < period.first.replace(year=period.first.year + 1)


@pytest.mark.parametrize(
    ("question", "day"),
    [
        ("What did his teammates give him when they met on Aug 15th?", dt.date(2023, 8, 15)),
        ("What happened on the 2nd of December?", dt.date(2022, 12, 2)),  # the latest by today
        ("What did she say on the 15th?", dt.date(2023, 11, 15)),
        # Without a year, counted from the first day the question names with one.
        ("What did she do on 3 March, 2021, and on Dec 24th?", dt.date(2020, 12, 24)),
    ],
)
def test_a_day_named_without_its_year_is_asked(question, day):
    assert any(p.unit == "day" and p.first == day == p.last for p in asked_periods(question, TODAY))


def test_a_memory_naming_a_day_without_its_year_says_when_and_means_that_day():
    said = dt.date(2023, 8, 17)
    text = "I met back up with my teammates on the 15th after my trip."
    assert says_when(text, said)
    assert [(p.first, p.unit) for p in meant_periods(text, said)] == [(dt.date(2023, 8, 15), "day")]
    assert not says_when("I scored 15 points.", said)


@pytest.mark.parametrize(
    "piece",
    [
        # Each day named was checked against every day taken before it, and each named day
        # searched all the text before it for the start of a range: a 100 KB question or memory
        # of dates took half a minute (asked_periods), seconds a row (says_when, meant_periods).
        "2023-01-01 ",
        "between May 3 and 2023-05-09 ",
        "on Aug 15th ",
        "on the 15th ",
        "from the 3rd of May to ",
        "yesterday ",
    ],
)
@pytest.mark.timeout(60)  # each takes about a second; minutes is the quadratic reading back
def test_a_long_text_of_dates_is_read_in_near_linear_time(piece):
    # No timing assert: a quadratic reading here turns this test from a second into minutes.
    # What it reads: each more copy of the piece adds what the third copy added to two.
    copies = 400_000 // len(piece)
    for read in (
        lambda text: asked_periods(text, TODAY),
        lambda text: meant_periods(text, TODAY),
        named_periods,
    ):
        two, three = len(read(piece * 2)), len(read(piece * 3))
        assert len(read(piece * copies)) == two + (copies - 2) * (three - two)
    assert says_when(piece * copies, TODAY) is says_when(piece, TODAY)
