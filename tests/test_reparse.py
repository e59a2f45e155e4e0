"""Re-reading an edited daily log from the old parse gives exactly what reading it whole gives."""

from __future__ import annotations

import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from syncd.formats import DailyLog, Fact, FactLine, append_section, parse_daily_log, render_daily_log
from syncd.formats.reparse import LogMemo, reparse_daily_log

from .strategies import daily_log_edits, examples, facts


def _same_parse(got, want, raw: bool = True) -> None:
    assert got.elements == want.elements
    if raw:  # a line written through the API keeps no raw text (rendered from its fact)
        assert [e.raw for e in got.elements if isinstance(e, FactLine)] == [
            e.raw for e in want.elements if isinstance(e, FactLine)
        ]
    # White-box: the parse's private index (facts with lines, sections, spans, title, date, what is
    # open) is what the next reparse starts from, so it must equal a full parse's too.
    assert got._info == want._info
    assert render_daily_log(got) == render_daily_log(want)


# A title between the restart and the meeting heading is gone in the new text: the two parses may
# not be joined at that heading (a re-read without its title check joined them).
TITLE_GONE = (
    (
        "## 00:00\n## 09:30 chat:c1 session:s1\n# 2026-11-22\n## 00:00\n## 00:00\n"
        "## 09:30 chat:c1 session:s1\n## 00:00\n## 09:30 chat:c1 session:s1\n"
    ),
    "## 00:00\n## 00:00\n## 09:30 chat:c1 session:s1\n## 00:00\n## 09:30 chat:c1 session:s1\n",
)


# The three laws of re-reading cost a full parse or two per example: a CI run draws 100, 60 and 20
# (600, 300 and 60 before: 3.4 minutes of every run), new ones each run since CI keeps no example
# database. Planted slips in the re-read (the facts after an edit keep their old index or line)
# fail within them; a rarer one, found at the old counts only, is pinned below as an example.
# Run `pytest --slow` (ten times as many) when changing syncd/formats/reparse.py.
@given(daily_log_edits())
@example(TITLE_GONE)
@settings(max_examples=examples(100))
def test_law_reparse_equals_a_full_parse(case):
    old, new = case
    _same_parse(reparse_daily_log(new, old, parse_daily_log(old)), parse_daily_log(new))


def _api_edits_equal_a_full_parse(text: str, fact: Fact, i: int) -> None:
    """append_section, then replace_fact and remove_fact of fact ``i``, on the parse of ``text``."""
    log = parse_daily_log(text)
    appended = append_section(log, "23:59", "c1", "s1", [fact])
    _same_parse(appended, parse_daily_log(render_daily_log(appended)), raw=False)
    for edited in (log.replace_fact(i, fact), log.remove_fact(i)):
        _same_parse(edited, parse_daily_log(render_daily_log(edited)), raw=False)
        assert edited == DailyLog(edited.elements)


@given(daily_log_edits(), facts(), st.data())
@settings(max_examples=examples(60))
def test_law_edits_through_the_api_equal_a_full_parse(case, fact, data):
    """replace_fact, remove_fact and append_section read again only around their edit."""
    facts_there = len(parse_daily_log(case[0]).facts())
    assume(facts_there)
    _api_edits_equal_a_full_parse(case[0], fact, data.draw(st.integers(0, facts_there - 1)))


# Removing a first-line fact made the `---` after it the first line, opening YAML frontmatter
# down to the next `---`: the facts between became YAML and remove_fact refused its own edit
# ("line 3 would not read back as given": the law's one CI failure, its example lost; these are
# rebuilt from its report, a case the law's strategy rarely draws). A byte order mark on that
# first line went with the fact. Pinned here: the law's `st.data()` cannot be given in an @example.
@pytest.mark.parametrize(
    "text",
    [
        "- [preference] tea\n---\n- [note] kept\n---\n",
        "- [preference] tea\n---\ntitle: x\n- [note] kept\n- [note] kept too\n---\n## 10:00\n- [note] after\n",
        "- [preference] tea\r\n\ufeff--- \r\n- [note] kept\r\n---\r\n",
        "\ufeff- [preference] tea\n---\n- [note] kept\n---",
        "\ufeff- [preference] tea\n- [note] kept\n",
        "\ufeff- [preference] tea",
    ],
)
def test_removing_a_first_line_fact_keeps_what_the_rest_means(text):
    _api_edits_equal_a_full_parse(text, Fact("coffee", "preference"), 0)
    log = parse_daily_log(text)
    removed = log.remove_fact(0)
    assert [f.fact for f in removed.facts()] == [f.fact for f in log.facts()[1:]]
    # Only the fact is gone: the line stays, empty, holding the file's byte order mark if any.
    bom = "\ufeff" if text.startswith("\ufeff") else ""
    assert render_daily_log(removed) == bom + text.split("]", 1)[1].removeprefix(" tea")


def _log(sections: int, edited: int | None = None, text: str = "edited") -> str:
    lines = ["# 2026-11-22", ""]
    for s in range(sections):
        lines.append(f"## {s % 24:02d}:00 chat:c1 session:s{s}")
        for f in range(3):
            fact = text if (s, f) == (edited, 1) else f"fact {f} of section {s}"
            lines.append(f"- [preference] {fact}")
        lines.append("")
    return "\n".join(lines) + "\n"


def test_a_one_line_edit_keeps_the_rest_of_the_parse():
    old_text = _log(50)
    old = parse_daily_log(old_text)
    new = reparse_daily_log(_log(50, edited=20), old_text, old)
    assert new == parse_daily_log(_log(50, edited=20))
    # Outside the edited section, the very same objects: nothing was read again.
    assert new.facts()[0] is old.facts()[0] and new.facts()[-1] is old.facts()[-1]
    assert new.facts()[61].fact.content == "edited"


def test_an_inserted_line_moves_what_follows():
    old_text = _log(10)
    new_text = old_text.replace("fact 1 of section 4\n", "fact 1 of section 4\n- [preference] new one\n")
    new = reparse_daily_log(new_text, old_text, parse_daily_log(old_text))
    assert new._info == parse_daily_log(new_text)._info  # white-box: as in _same_parse
    assert new.facts()[-1].line == parse_daily_log(old_text).facts()[-1].line + 1


def test_a_fence_opened_by_the_edit_swallows_what_follows():
    old_text = _log(10)
    new_text = old_text.replace("fact 1 of section 4\n", "fact 1 of section 4\n```\n")
    new = reparse_daily_log(new_text, old_text, parse_daily_log(old_text))
    assert new._info == parse_daily_log(new_text)._info  # white-box: as in _same_parse, and the fence left open
    assert len(new.facts()) == 4 * 3 + 2 and new._info.closer == "```"


@given(st.lists(daily_log_edits(), min_size=1, max_size=4), st.integers(1, 3))
@settings(max_examples=examples(20))
def test_law_a_memo_of_last_reads_parses_as_a_full_parse(cases, logs):
    """LogMemo: reads of a few keys in turn, each an edit of something else, with a budget small
    enough to drop logs on the way: always what a full parse gives, never over its bounds."""
    memo = LogMemo(logs=logs, chars=400)
    texts = [text for case in cases for text in case]
    for n, text in enumerate(texts):
        _same_parse(memo.parse(n % 2, text), parse_daily_log(text))
        assert len(memo) <= max(logs, 1)
        assert len(memo) == 1 or memo.chars <= 400
