"""A daily log read again after an edit (its last read remembered) gives the rows a first read
gives, and an index kept up to date that way equals a rebuild."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import syncd
from syncd.index import rows
from syncd.index.rows import parse_file, parse_file_checked

from .helpers import assert_matches_rebuild, write
from .strategies import daily_log_edits, examples

REL = "memory/users/ana/2026-11-22.md"


@pytest.fixture(autouse=True)
def nothing_remembered():
    """Each test starts from no remembered read (every log read is remembered, small ones too)."""
    rows.forget_last_reads()
    yield
    rows.forget_last_reads()


def _fresh(rel: str, data: bytes):
    rows.forget_last_reads()
    return parse_file_checked(rel, data)


# The edits of test_reparse's laws, whose planted re-read mistakes fail within 100 examples; the
# rows are built on that re-read (400 and 100 before; --slow runs ten times these).
@given(daily_log_edits(), st.sampled_from([REL, "memory/users/bob/2026-01-05.md"]))
@settings(max_examples=examples(100))
def test_law_rows_after_an_edit_equal_a_first_read(case, rel):
    old, new = case
    rows.forget_last_reads()
    parse_file(rel, old.encode())
    got = parse_file_checked(rel, new.encode())
    assert got == _fresh(rel, new.encode())


@given(st.lists(daily_log_edits(), min_size=2, max_size=4))
@settings(max_examples=examples(40))
def test_law_a_chain_of_reads_equals_first_reads(cases):
    """Reads of one path in a row, each an edit of the last or of something else altogether."""
    texts = [text.encode() for case in cases for text in case]
    want = [_fresh(REL, data) for data in texts]
    rows.forget_last_reads()
    assert [parse_file_checked(REL, data) for data in texts] == want


def test_bad_bytes_are_reported_the_same_after_an_edit():
    text = "# 2026-11-22\n\n" + "".join(f"## 10:{i:02d}\n- [preference] fact {i}\n" for i in range(40))
    parse_file(REL, text.encode())
    data = text.encode().replace(b"fact 30", b"fact \xff30")
    got = parse_file_checked(REL, data)
    assert got == _fresh(REL, data)
    assert got.warning and "line 64" in got.warning
    assert any("\ufffd30" in row.text for row in got.rows)


def test_an_unchanged_row_is_the_very_row_of_the_last_read():
    text = "# 2026-11-22\n\n" + "".join(f"## 10:{i:02d}\n- [preference] fact {i}\n" for i in range(40))
    first = parse_file(REL, text.encode())
    second = parse_file(REL, text.replace("fact 30", "fact thirty").encode())
    kept = [a is b for a, b in zip(first, second, strict=True)]
    assert kept.count(False) == 1 and not kept[30]


# A real engine per example: what the row laws above vouch for, checked once more end to end.
@settings(max_examples=examples(5))
@given(cases=st.lists(daily_log_edits(), min_size=1, max_size=2))
def test_incremental_index_equals_rebuild(tmp_path_factory, embedder, cases):
    root = syncd.init(tmp_path_factory.mktemp("home")).home
    with syncd.open(root, embedder=embedder) as engine:
        for text in (text for case in cases for text in case):
            write(root, REL, text)
            engine.sync()
        assert_matches_rebuild(engine)
