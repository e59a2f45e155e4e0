"""Who said a fact, and a query naming them (syncd.formats.speakers; the search's speaker part)."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given
from hypothesis import strategies as st

import syncd
from syncd.formats.speakers import MAX_LABEL_CHARS, may_name, named_speakers, speaker

from .helpers import write


@pytest.mark.parametrize(
    ("text", "label"),
    [
        ("Melanie: I painted a sunset.", "Melanie"),
        ("Mary Ann: We went to Porto.", "Mary Ann"),
        ("José: Olá!", "José"),
        ("O'Brien: Fine, thanks.", "O'Brien"),
        ("Anne-Marie: Hello.", "Anne-Marie"),
        ("Likes green tea.", None),
        ("note: lowercase is no name", None),
        ("Mary ann: the second word is not a name", None),
        ("Meeting at 10:30 tomorrow.", None),
        ("Flight AF12: delayed", None),
        ("Ana:no space after the colon", None),
        ("Ana Bo Cy: three words are no label", None),
        (" Ana: not at the very start", None),
        ("", None),
    ],
)
def test_the_label_a_fact_starts_with(text, label):
    assert speaker(text) == label


def test_a_label_longer_than_a_name_is_none():
    long = "A" + "b" * MAX_LABEL_CHARS
    assert speaker(f"{long}: hello") is None
    assert speaker(f"{long[:MAX_LABEL_CHARS]}: hello") == long[:MAX_LABEL_CHARS]


@pytest.mark.parametrize(
    ("query", "named"),
    [
        ("What does Melanie do to destress?", {"Melanie"}),
        ("What are Melanie's hobbies?", {"Melanie"}),
        ("What do Jon and Gina both have in common?", {"Jon", "Gina"}),
        ("Where did Mary Ann go?", {"Mary Ann"}),
        ("Where did Mary go?", set()),  # one word of a two-word label is not the label
        ("What does melanie like?", set()),  # a name is written with its capital
        ("Melanie, what do you like?", set()),  # the first word is capitalised whoever it is
        ("What does Melanies like?", set()),  # a whole word, not a prefix
        ("hobbies", set()),
        ("", set()),
    ],
)
def test_the_speakers_a_query_names(query, named):
    assert named_speakers(query, {"Melanie", "Jon", "Gina", "Mary Ann"}) == named


@given(st.text(max_size=60))
def test_a_label_is_always_the_start_of_its_text(text):
    label = speaker(text)
    assert label is None or (text.startswith(label + ": ") and label[0].isupper() and len(label) <= MAX_LABEL_CHARS)


_NAMES = st.from_regex(r"[A-Z][a-z]{1,8}", fullmatch=True)


@given(st.lists(_NAMES, min_size=1, max_size=4, unique=True), st.text(max_size=40), st.data())
def test_a_query_names_only_labels_it_spells_and_every_label_it_spells(labels, query, data):
    named = named_speakers(query, set(labels))
    assert named <= set(labels)
    assert all(label in query for label in named)
    # Said after a first word, as a whole word, a label is named, whatever else the query says.
    label = data.draw(st.sampled_from(labels))
    assert label in named_speakers(f"What did {label} say? {query}", set(labels))
    assert named_speakers(query.lower(), set(labels)) == set()


CONVERSATION = """# 2023-05-08

## 10:00 session:s1
- [dialog] Ana: Hi Bo! I have been so busy with the new job.
- [dialog] Bo: Ana, guess what, I took up pottery and painting on weekends.
- [dialog] Ana: Nice! I started rock climbing and I bake sourdough bread on weekends.
- [dialog] Bo: Sounds fun. See you soon, Ana!
"""
NOW = dt.datetime(2023, 5, 9, 12, tzinfo=dt.UTC)


def test_what_the_named_person_said_outranks_what_was_said_to_them(tmp_path, embedder):
    """Bo's turn says "Ana" and hobbies; Ana's own says what hers are. Asked about Ana, her turn
    comes first; without the speaker part Bo's would (the name weighs little in full text)."""
    root = syncd.init(tmp_path / "home").home
    write(root, "memory/users/ana/2023-05-08.md", CONVERSATION)
    question = "What hobbies does Ana have?"
    with syncd.open(root, embedder=embedder) as engine:
        engine.sync()
        hits = engine.search(question, user_id="ana", kind="fact", limit=4, now=NOW)
        plain = engine.settings.model_copy(update={"search_weight_speaker": 0.0})
    assert hits[0].content.startswith("Ana: Nice! I started rock climbing")
    assert {h.content.split(":")[0]: h.parts["speaker"] for h in hits} == {"Ana": 1.0, "Bo": 0.0}
    with syncd.open(root, settings=plain, embedder=embedder, read_only=True) as engine:
        unweighted = engine.search(question, user_id="ana", kind="fact", limit=4, now=NOW)
    assert unweighted[0].content.startswith("Bo: Ana, guess what")
    assert all(h.parts["speaker"] == 0.0 for h in unweighted)
    # A query naming nobody gives every row a speaker part of 0.
    with syncd.open(root, embedder=embedder, read_only=True) as engine:
        anonymous = engine.search("What are the hobbies?", user_id="ana", kind="fact", limit=4, now=NOW)
    assert all(h.parts["speaker"] == 0.0 for h in anonymous)


@pytest.mark.parametrize(
    ("query", "may"),
    [("What does Melanie like?", True), ("Melanie, what do you like?", False), ("hobbies of ana", False), ("", False)],
)
def test_only_a_query_with_a_capitalised_word_after_its_first_may_name_anyone(query, may):
    assert may_name(query) == may


@given(st.text(max_size=40), st.sets(_NAMES, max_size=3))
def test_a_query_that_may_name_no_one_names_no_one(query, labels):
    if not may_name(query):
        assert named_speakers(query, labels) == set()
