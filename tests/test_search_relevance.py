"""Ranking that means what it says, and an honest "nothing found" (issue 25 items 1, 3 and 4)."""

from __future__ import annotations

import asyncio
import datetime as dt

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import syncd
from syncd.index.search import Weights, answered, chance_cosine
from syncd.memory import MemoryManager

from .helpers import assert_matches_rebuild, write
from .strategies import examples

LOG = "memory/users/ana/2023-05-08.md"
CONVERSATION = """# 2023-05-08

## 10:00 session:s1
- [dialog] Ana: I went to a pottery class yesterday, it was so relaxing.
- [dialog] Bo: That sounds lovely! What did you make?
- [dialog] Ana: A small blue bowl for my keys.

## 18:00 session:s2
- [dialog] Bo: My brother is visiting from Porto next month.
- [dialog] Ana: You should take him to the botanical garden.
"""
MEMORY = """# Ana

## Projects

### Garden
Planting tomatoes and basil on the balcony.

## Health
Allergic to peanuts and to shellfish.
"""
NOW = dt.datetime(2023, 5, 9, 12, tzinfo=dt.UTC)


@pytest.fixture(scope="module")
def memory(tmp_path_factory, embedder):
    root = syncd.init(tmp_path_factory.mktemp("relevance") / "home").home
    write(root, LOG, CONVERSATION)
    write(root, "memory/users/ana/MEMORY.md", MEMORY)
    engine = syncd.open(root, embedder=embedder)
    engine.sync()
    yield engine
    engine.close()


def test_a_relative_date_is_found_by_the_date_it_means(memory):
    hit = memory.search("What did Ana do on 7 May 2023?", user_id="ana", kind="fact", limit=1, now=NOW)[0]
    assert hit.content.startswith("Ana: I went to a pottery class yesterday")
    later = memory.search("Who is coming in June 2023?", user_id="ana", kind="fact", limit=1, now=NOW)[0]
    assert later.content.startswith("Bo: My brother is visiting")


def test_heading_only_chunks_are_never_hits(memory):
    hits = memory.search("Projects", user_id="ana", limit=20, now=NOW)
    assert hits, "the chunks under the heading are found by it"
    assert all(h.content.strip() not in ("# Ana", "## Projects") for h in hits)
    assert any("tomatoes" in h.content for h in hits)


def test_rows_without_a_date_get_the_middle_recency(memory):
    hits = memory.search("peanut allergy", user_id="ana", limit=10, now=NOW)
    memory = next(h for h in hits if h.path.endswith("MEMORY.md"))
    # Its newness; the recency part weighs it by the row's relevance (test_search_recency.py).
    assert memory.parts["fresh"] == 0.5
    fact = next(h for h in hits if h.kind == "fact")
    assert 0.9 < fact.parts["fresh"] <= 1.0  # said the day before


def test_no_padding_with_rows_that_hold_nothing_of_the_query(memory):
    hits = memory.search("shellfish allergy", user_id="ana", kind="fact", limit=10, now=NOW)
    for hit in hits:
        assert hit.parts["bm25"] > 0 or hit.parts["context"] > 0 or hit.parts["semantic"] >= 0.05


def test_the_floor_answers_nothing_to_what_the_memory_does_not_hold(memory):
    for query in ("What is the capital of Australia?", "zorblat quimfex vorpish", "Tuesday", "world"):
        assert memory.search(query, user_id="ana", now=NOW, floor=True) == []
        # Without the floor the nearest rows still come, each saying it is not relevant.
        assert all(not h.relevant for h in memory.search(query, user_id="ana", now=NOW))
    for query in ("What did Ana make at pottery?", "food allergies", "Where is Bo's brother from?"):
        hits = memory.search(query, user_id="ana", now=NOW, floor=True)
        assert hits and all(h.relevant for h in hits)


def test_absolute_parts_mean_the_same_for_every_query(memory):
    hits = memory.search("blue bowl keys", user_id="ana", kind="fact", limit=3, now=NOW)
    best = hits[0]
    assert best.content == "Ana: A small blue bowl for my keys."
    assert best.parts["coverage"] == 1.0  # every word asked is its own
    half = memory.search("pottery zanzibar", user_id="ana", kind="fact", limit=1, now=NOW)[0]
    assert half.parts["fulltext"] == 1.0  # the best in scope, however little it holds
    assert 0 < half.parts["coverage"] < 0.6  # the unseen word is most of what was asked
    weights = Weights()
    assert best.score == sum(getattr(weights, name) * best.parts[name] for name in weights.__dataclass_fields__)


def test_chance_grows_with_the_memory():
    assert chance_cosine(1) == pytest.approx(0.204, abs=0.001)
    assert chance_cosine(1) < chance_cosine(5) < chance_cosine(550) < chance_cosine(100_000) < 0.6
    assert answered(0.30, 5) and not answered(0.30, 550)


def test_the_readme_example_recalls_and_nonsense_recalls_nothing(engine):
    engine.sync()
    manager = MemoryManager(engine)
    asyncio.run(manager.add_memory("Likes green tea.", user_id="ana", category="preference"))
    recall = asyncio.run(manager.retrieve_relevant_memories("what does she drink?", user_id="ana"))
    assert "Likes green tea." in recall
    for query in ("Tuesday", "What is the capital of Australia?", "zorblat quimfex"):
        assert asyncio.run(manager.retrieve_relevant_memories(query, user_id="ana")) == ""


def test_time_resolved_rows_equal_a_rebuild(tmp_path, embedder):
    root = syncd.init(tmp_path / "home").home
    write(root, LOG, CONVERSATION)
    with syncd.open(root, embedder=embedder) as engine:
        engine.sync()
        # An edit next to a fact that says "yesterday", and one that adds a relative date.
        text = CONVERSATION.replace("What did you make?", "What did you make last weekend?")
        write(root, LOG, text + "- [dialog] Bo: Three weeks ago I was in Porto too.\n")
        engine.sync()
        assert_matches_rebuild(engine)


DAYS = {
    "memory/users/cy/2023-05-01.md": """# 2023-05-01

## 10:00 session:s1
- [dialog] Cy: We had a picnic by the river with the kids.
- [dialog] Cy: Lyon is such a lovely city to go to.
""",
    "memory/users/cy/2023-05-20.md": """# 2023-05-20

## 10:00 session:s2
- [dialog] Cy: We had a picnic in the park with friends.
- [dialog] Cy: I went to Lyon last week, it was great.
""",
}
TIME_QUERIES = [
    "What did Cy do on 20 May 2023?",
    "When did Cy go to Lyon?",
    "What did Cy do in May 2023?",
    "Where was Cy in the week before 20 May 2023?",
    "picnic with the kids",
    "Lyon",
]


@pytest.fixture(scope="module")
def days(tmp_path_factory, embedder):
    root = syncd.init(tmp_path_factory.mktemp("days") / "home").home
    for rel, text in DAYS.items():
        write(root, rel, text)
    engine = syncd.open(root, embedder=embedder)
    engine.sync()
    yield engine
    engine.close()


def test_a_day_the_question_names_favours_what_was_said_that_day(days):
    hits = days.search("What did Cy do on 20 May 2023?", user_id="cy", kind="fact", limit=4, now=NOW)
    time = {h.content: h.parts["time"] for h in hits}
    assert time["Cy: We had a picnic in the park with friends."] == 1.0
    assert time["Cy: We had a picnic by the river with the kids."] == 0.0
    assert hits[0].content.startswith("Cy: We had a picnic in the park")
    # "last week" said on 20 May means 8-14 May: inside a question about May, wholly.
    may = days.search("What did Cy do in May 2023?", user_id="cy", kind="fact", limit=4, now=NOW)
    assert all(h.parts["time"] == 1.0 for h in may)
    week = days.search("Where was Cy in the week before 20 May 2023?", user_id="cy", kind="fact", limit=4, now=NOW)
    assert {h.content: h.parts["time"] for h in week}["Cy: I went to Lyon last week, it was great."] == 1.0


def test_a_day_named_without_its_year_is_the_latest_such_day(days):
    """ "on May 20th" asked the next day is the day before: what was said then is favoured."""
    after = dt.datetime(2023, 5, 21, 12, tzinfo=dt.UTC)
    hits = days.search("What did Cy do on May 20th?", user_id="cy", kind="fact", limit=4, now=after)
    time = {h.content: h.parts["time"] for h in hits}
    assert time["Cy: We had a picnic in the park with friends."] == 1.0
    assert time["Cy: We had a picnic by the river with the kids."] == 0.0
    assert hits[0].content.startswith("Cy: We had a picnic in the park")


def test_a_question_asking_when_favours_what_says_a_time(days):
    hits = days.search("When did Cy go to Lyon?", user_id="cy", kind="fact", limit=4, now=NOW)
    time = {h.content: h.parts["time"] for h in hits}
    assert time["Cy: I went to Lyon last week, it was great."] == 0.5
    assert time["Cy: Lyon is such a lovely city to go to."] == 0.0
    # A question asking nothing of time leaves the part at 0 for every row.
    assert all(h.parts["time"] == 0.0 for h in days.search("Lyon", user_id="cy", limit=4, now=NOW))


def test_without_the_time_weight_time_changes_nothing(days, embedder):
    plain = days.settings.model_copy(update={"search_weight_time": 0.0})
    with syncd.open(days.home.root, settings=plain, embedder=embedder, read_only=True) as engine:
        hits = engine.search("When did Cy go to Lyon?", user_id="cy", kind="fact", limit=4, now=NOW)
        assert all(h.parts["time"] == 0.0 for h in hits)
    weighted = {
        h.content: h.score for h in days.search("When did Cy go to Lyon?", user_id="cy", kind="fact", limit=4, now=NOW)
    }
    plain_scores = {h.content: h.score for h in hits}
    said = "Cy: I went to Lyon last week, it was great."
    assert weighted[said] == pytest.approx(plain_scores[said] + 0.15 * 0.5)
    assert (
        weighted["Cy: Lyon is such a lovely city to go to."] == plain_scores["Cy: Lyon is such a lovely city to go to."]
    )


@settings(max_examples=examples(30), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(query=st.sampled_from(TIME_QUERIES), limit=st.integers(1, 4))
def test_the_best_k_are_the_first_k_of_a_longer_search(days, query, limit):
    """The time part is read only for rows that could reach the best ``limit`` (search.py): the
    hits are exactly those of a search that reads it for every row (a limit past every row)."""
    everything = days.search(query, user_id="cy", limit=50, now=NOW)
    assert days.search(query, user_id="cy", limit=limit, now=NOW) == everything[:limit]


def test_a_day_a_memory_names_without_its_year_is_found_by_a_question_naming_it(tmp_path, embedder):
    """Said on 17 August, "on the 15th" is 15 August: inside a range the question names."""
    root = syncd.init(tmp_path / "home").home
    write(
        root,
        "memory/users/jo/2023-08-17.md",
        "# 2023-08-17\n\n## 10:00 session:s1\n"
        "- [dialog] Jo: I met back up with my teammates on the 15th after my trip.\n"
        "- [dialog] Jo: The atmosphere with my teammates was electric.\n",
    )
    asked = dt.datetime(2023, 8, 18, 12, tzinfo=dt.UTC)
    with syncd.open(root, embedder=embedder) as engine:
        engine.sync()
        hits = engine.search("Where was Jo between August 11 and August 15 2023?", user_id="jo", limit=2, now=asked)
        when = engine.search("When did Jo meet his teammates?", user_id="jo", limit=2, now=asked)
    time = {h.content: h.parts["time"] for h in hits}
    assert time == {
        "Jo: I met back up with my teammates on the 15th after my trip.": 1.0,
        "Jo: The atmosphere with my teammates was electric.": 0.0,
    }
    assert {h.content: h.parts["time"] for h in when}[
        "Jo: I met back up with my teammates on the 15th after my trip."
    ] == 0.5
