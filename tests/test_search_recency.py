"""Recency breaks ties between answers; it does not lift what merely was said lately (issue 25
item 2: the recency part weighed by the row's relevance, syncd/index/search.py)."""

from __future__ import annotations

import datetime as dt

import pytest

import syncd

from .helpers import write

# An answer said months ago, and recent facts that say little of the question.
FACTS = {
    "2023-01-10": "Plays the cello in a community orchestra.",
    "2023-06-01": "Played a board game with friends at the cafe.",
    "2023-06-02": "Saw a play about a lighthouse keeper at the theatre.",
    "2023-06-03": "Bought new strings for the guitar of a friend.",
    # Two answers to one question, a year apart: the newer one is the current one.
    "2022-05-20": "Works at Initech as a data engineer.",
    "2023-05-20": "Works at Acme as a data engineer.",
}
NOW = dt.datetime(2023, 6, 4, 12, tzinfo=dt.UTC)


@pytest.fixture(scope="module")
def memory(tmp_path_factory, embedder):
    root = syncd.init(tmp_path_factory.mktemp("recency") / "home").home
    for day, fact in FACTS.items():
        write(root, f"memory/users/cy/{day}.md", f"# {day}\n\n- [fact] {fact}\n")
    engine = syncd.open(root, embedder=embedder)
    engine.sync()
    yield engine
    engine.close()


def test_an_old_answer_outranks_a_recent_row_that_says_less_of_the_query(memory):
    hits = memory.search("music instrument", user_id="cy", kind="fact", limit=3, now=NOW)
    # Added in full, the guitar strings' recency (0.97 against the cello's 0.03) carried them
    # over the cello, which is closer in meaning (cosine 0.54 against 0.42).
    assert hits[0].content == "Plays the cello in a community orchestra."
    guitar = next(h for h in hits if "guitar" in h.content)
    assert guitar.parts["semantic"] < hits[0].parts["semantic"]
    assert guitar.parts["fresh"] > 0.9 > 0.1 > hits[0].parts["fresh"]
    # The recency part is the row's newness weighed by its relevance: less than its newness.
    assert guitar.parts["recency"] < guitar.parts["fresh"]


def test_between_answers_about_as_relevant_the_newer_one_still_comes_first(memory):
    hits = memory.search("Where does Cy work?", user_id="cy", kind="fact", limit=2, now=NOW)
    assert [h.content for h in hits] == ["Works at Acme as a data engineer.", "Works at Initech as a data engineer."]
    assert hits[0].parts["recency"] > hits[1].parts["recency"]
