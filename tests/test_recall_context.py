"""Conversation context: a daily-log section is a conversation, and a fact is found through it."""

from __future__ import annotations

import pytest

import syncd
from syncd.index.records import NEIGHBOURS
from syncd.index.rows import parse_file

from .helpers import write

LOG = "memory/users/ana/2026-03-14.md"

CONVERSATION = """# 2026-03-14

## 19:05 chat:c1 session:s1
- [dialog] Ana: Which city did you fly to for your sister's wedding?
- [dialog] Bo: Porto, and it rained the whole weekend.
- [dialog] Ana: Oh no! Did you at least get to try the pastries?
- [dialog] Bo: Every morning, the custard tarts were worth the trip.

## 21:40 chat:c1 session:s2
- [dialog] Bo: The city council closed the park this weekend.
- [dialog] Ana: It rained in Berlin all week.
- [dialog] Bo: I adopted a kitten named Pixel.
- [dialog] Ana: My neighbour plays the trumpet at night.
- [dialog] Bo: We watched a film about a lighthouse.
- [dialog] Bo: My sister started a new job in Madrid.
- [dialog] Ana: Weddings are so expensive these days.
"""


def _rows(text: str, rel: str = LOG) -> dict:
    return {row.text: row for row in parse_file(rel, text.encode()) if row.kind == "fact"}


def test_a_facts_window_is_its_neighbours_in_its_section_and_the_date() -> None:
    rows = _rows(CONVERSATION)
    answer = rows["Bo: Porto, and it rained the whole weekend."]
    assert answer.heading == "19:05 chat:c1 session:s1"
    assert answer.embed_text == answer.text  # the vector is the fact's own
    # Its date words first, then (after the NEIGHBOURS mark) the words said around it: full text
    # finds it by them as part of its passage, never as its own words (fulltext.py).
    assert answer.context == (
        "Saturday 14 March 2026\n"
        f"{NEIGHBOURS}\n"
        "Ana: Which city did you fly to for your sister's wedding?\n"
        "Ana: Oh no! Did you at least get to try the pastries?"
    )
    assert "wedding" in answer.search_text and "Saturday" in answer.search_text
    # The last fact of a section has only the one before it: the next section is another talk.
    last = rows["Bo: Every morning, the custard tarts were worth the trip."]
    assert (
        last.context == f"Saturday 14 March 2026\n{NEIGHBOURS}\nAna: Oh no! Did you at least get to try the pastries?"
    )
    assert "council" not in last.search_text


def test_facts_written_one_call_at_a_time_have_no_neighbours() -> None:
    # What add_memory writes: one section per call, so each fact is a conversation of its own.
    text = (
        "# 2026-03-14\n\n## 09:00 chat:c1 session:s1\n- [preference] Likes green tea.\n\n"
        "## 09:01 chat:c1 session:s1\n- [context] Is moving to Lyon in May.\n"
    )
    rows = _rows(text)
    assert rows["Likes green tea."].context == "Saturday 14 March 2026"
    assert rows["Is moving to Lyon in May."].context == "Saturday 14 March 2026"


def test_hand_written_facts_outside_any_section_are_one_conversation() -> None:
    text = "- [note] Bought a road bike.\nSome prose.\n- [note] It is blue.\n"
    rows = _rows(text, "memory/users/ana/2026-02-30.md")  # not a real date: no date words
    assert rows["It is blue."].context == f"{NEIGHBOURS}\nBought a road bike."
    assert rows["Bought a road bike."].heading == ""


def test_a_terse_answer_is_found_through_the_turn_before_it(tmp_path, embedder) -> None:
    root = syncd.init(tmp_path / "home").home
    write(root, LOG, CONVERSATION)
    with syncd.open(root, embedder=embedder) as engine:
        engine.sync()
        hits = engine.search("Which city was the wedding of Bo's sister in?", user_id="ana", kind="fact", limit=2)
        assert "Bo: Porto, and it rained the whole weekend." in [h.content for h in hits]
        answer = next(h for h in hits if h.content.startswith("Bo: Porto"))
        assert answer.parts["context"] > 0
        weights = engine_weights(engine)
        assert answer.score == sum(getattr(weights, name) * answer.parts[name] for name in weights.__dataclass_fields__)


def engine_weights(engine):
    from syncd.index.search import Weights

    return Weights.from_settings(engine.settings)


QUESTIONS = """# 2026-03-15

## 10:00 chat:c2 session:s3
- [dialog] Bo: Did you see the cake I baked for the party? [image: a chocolate cake on a plate]
- [dialog] Ana: Yes, it looked delicious.
- [dialog] Bo: Here is the garden after the party. [image: a rose bush, or is it a tree?]
- [dialog] Ana: The roses are lovely.
"""


def test_a_question_gives_part_of_its_relevance_to_its_reply(tmp_path, embedder) -> None:
    """A question asked in a conversation holds no answer, its reply does: the question keeps 0.8
    of its own relevance (its question part takes the rest back), and its reply's context is
    three quarters of the question's relevance where another neighbour passes on half."""
    root = syncd.init(tmp_path / "home").home
    write(root, LOG, CONVERSATION)
    write(root, "memory/users/ana/2026-03-15.md", QUESTIONS)
    with syncd.open(root, embedder=embedder) as engine:
        engine.sync()
        weights = engine_weights(engine)
        hits = engine.search("Which city did Bo fly to for the wedding?", user_id="ana", kind="fact", limit=20)
        cake = engine.search("What did Bo bake for the party?", user_id="ana", kind="fact", limit=20)

    def own(hit) -> float:
        return weights.semantic * hit.parts["semantic"] + weights.fulltext * hit.parts["fulltext"]

    found = {h.content: h for h in hits}
    question = found["Ana: Which city did you fly to for your sister's wedding?"]
    reply = found["Bo: Porto, and it rained the whole weekend."]
    assert question.parts["question"] == pytest.approx(-own(question))
    assert question.parts["question"] < 0
    assert reply.parts["question"] == 0
    # Its context part is 1.5 times the question's relevance: weighted 0.5, three quarters of it.
    assert reply.parts["context"] == pytest.approx(1.5 * own(question))
    assert weights.context * reply.parts["context"] == pytest.approx(0.75 * own(question))
    # A trailing bracketed note (an image's caption) is set aside: what is left says whether it asks.
    asks = {h.content.split(" [")[0]: h.parts["question"] < 0 for h in cake}
    assert asks["Bo: Did you see the cake I baked for the party?"]
    assert not asks["Bo: Here is the garden after the party."]
    assert not asks["Ana: Yes, it looked delicious."]


# Two facts one agent call wrote together, about different things (their cosine is 0.07 under the
# bundled model), and the same two facts written one call at a time.
TOGETHER = """# 2026-03-16

## 08:10 chat:c1 session:s4
- [technical] Deploys his side project with Docker on a small VPS.
- [preference] Drinks three espressos a day and likes dark roast coffee.
"""
APART = """# 2026-03-16

## 08:10 chat:c1 session:s4
- [technical] Deploys his side project with Docker on a small VPS.

## 08:11 chat:c1 session:s4
- [preference] Drinks three espressos a day and likes dark roast coffee.
"""


def test_a_neighbour_about_something_else_lends_neither_its_words_nor_its_relevance(tmp_path, embedder) -> None:
    """A neighbour's words and relevance count as far as it belongs with the fact: not at all for
    a fact about something else, which then scores as it would alone in its section. (Before,
    a query for coffee found the Docker fact through its neighbour's word and relevance both.)"""
    from syncd.index import search  # white-box: the premise is that the pair lies below the tie

    root = syncd.init(tmp_path / "home").home
    write(root, "memory/users/ana/2026-03-16.md", TOGETHER)
    write(root, "memory/users/bo/2026-03-16.md", APART)
    docker = "Deploys his side project with Docker on a small VPS."
    coffee = "Drinks three espressos a day and likes dark roast coffee."
    vectors = embedder.embed([docker, coffee])
    assert float(vectors[0] @ vectors[1]) < search._TIED_BELOW
    with syncd.open(root, embedder=embedder) as engine:
        engine.sync()
        together = {h.content: h for h in engine.search("coffee", user_id="ana", kind="fact", limit=5)}
        apart = {h.content: h for h in engine.search("coffee", user_id="bo", kind="fact", limit=5)}
    assert together[coffee].parts["coverage"] == 1.0
    assert (docker in together) == (docker in apart)
    if docker in together:
        assert together[docker].parts["fulltext"] == 0.0
        assert together[docker].parts["context"] == 0.0
        # Part by part as alone (recency moves with the clock between the two searches).
        for part in ("semantic", "fulltext", "context", "importance", "question", "time"):
            assert together[docker].parts[part] == apart[docker].parts[part], part
        assert together[docker].score == pytest.approx(apart[docker].score)
    # While it says "coffee" itself, for its passage holds its own words at full weight.
    assert together[coffee].parts["fulltext"] > 0.9
