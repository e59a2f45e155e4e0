"""The relevance floor on a conversation (issue 25 item 3): a query of everyday words or of
made-up ones gets "nothing relevant", while a question about something said gets its turn, through
the public search (MemoryManager, as REST and MCP call it) with the bundled model and a real index."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given
from hypothesis import strategies as st

import syncd
from syncd.index.search import answered, chance_cosine
from syncd.memory import MemoryManager

from .helpers import write

# Two friends talking over three evenings: short chatty turns, the kind every query of everyday
# words lies close to, and a few things worth remembering.
EVENINGS = {
    "2024-03-04": [
        "Mia: Hey Leo, how was your day?",
        "Leo: Pretty good, thanks! Busy at work as usual.",
        "Mia: Same here. I finally finished the quarterly report.",
        "Leo: Nice! That must be a relief.",
        "Mia: It really is. Any plans for the weekend?",
        "Leo: I'm driving to the coast to see my grandmother in Brighton.",
        "Mia: That sounds lovely. Say hi from me!",
        "Leo: Will do. What about you?",
        "Mia: I signed up for a ceramics workshop on Saturday morning.",
        "Leo: Cool, I didn't know you were into that.",
        "Mia: It's new for me too, a friend talked me into it.",
        "Leo: Send me a picture of whatever you make!",
        "Mia: Haha, sure, if it doesn't collapse.",
        "Leo: See you later!",
    ],
    "2024-03-11": [
        "Leo: Hi Mia! How did the workshop go?",
        "Mia: So much fun! I made a lopsided mug with a blue glaze.",
        "Leo: A lopsided mug has character.",
        "Mia: That's what I told myself, lol.",
        "Leo: Brighton was great, my grandmother baked her famous rhubarb crumble.",
        "Mia: Yum, I love rhubarb.",
        "Leo: She gave me the recipe, I'll share it.",
        "Mia: Yes please! How is she doing?",
        "Leo: She's fine, still swimming in the sea every morning at eighty-two.",
        "Mia: Wow, that's amazing.",
        "Leo: I know, right? She says the cold water keeps her young.",
        "Mia: Maybe I should try it.",
        "Leo: Only if you bring a towel and a thermos of tea.",
        "Mia: Deal. Talk soon!",
    ],
    "2024-03-18": [
        "Mia: Guess what, I adopted a puppy!",
        "Leo: No way! What's its name?",
        "Mia: Biscuit. He's a beagle, three months old.",
        "Leo: Biscuit the beagle, I love it.",
        "Mia: He chewed one of my shoes already.",
        "Leo: Classic puppy move.",
        "Mia: I'm taking him to obedience classes on Thursdays.",
        "Leo: Good idea. How's work?",
        "Mia: Hectic, we're moving offices next month.",
        "Leo: Ugh, moving is the worst.",
        "Mia: At least the new office is closer to home.",
        "Leo: That's something.",
        "Mia: Yeah. Anyway, I should go walk Biscuit.",
        "Leo: Have fun, bye!",
    ],
}


def _log(day: str, turns: list[str]) -> str:
    body = "".join(f"- [dialog] {turn}\n" for turn in turns)
    return f"# {day}\n\n## 19:00 session:s{day.replace('-', '')}\n{body}"


@pytest.fixture(scope="module")
def manager(tmp_path_factory, embedder):
    root = syncd.init(tmp_path_factory.mktemp("floor") / "home").home
    for day, turns in EVENINGS.items():
        write(root, f"memory/users/mia/{day}.md", _log(day, turns))
    engine = syncd.open(root, embedder=embedder)
    engine.sync()
    yield MemoryManager(engine)
    engine.close()


def _search(manager: MemoryManager, query: str) -> list:
    return asyncio.run(manager.search_memories(query, user_id="mia"))


# Still answered, and why (strict: each fails the run once it is not): a chatty query lies close
# in meaning to a chatty turn, by the model's measure, further than chance for 42 rows allows (0.34).
def _close(turn: str, cosine: float) -> pytest.MarkDecorator:
    return pytest.mark.xfail(strict=True, reason=f"cosine {cosine} to {turn!r}")


@pytest.mark.parametrize(
    "query",
    [
        pytest.param("What is new?", marks=_close("Mia: It's new for me too, a friend talked me into it.", 0.48)),
        "people",
        pytest.param("Anything on Monday?", marks=_close("Mia: It really is. Any plans for the weekend?", 0.42)),
        "hello world",
        "Tell me more.",
        pytest.param("something else", marks=_close("Leo: That's something.", 0.35)),
        "ok thanks",
        "What time is it?",
        pytest.param("Is it Friday yet?", marks=_close("Mia: It really is. Any plans for the weekend?", 0.51)),
        "this year",
    ],
)
def test_everyday_words_alone_find_nothing(manager, query):
    assert _search(manager, query) == []
    assert asyncio.run(manager.retrieve_relevant_memories(query, user_id="mia")) == ""


@pytest.mark.parametrize("query", ["rana xucoxu foxo?", "buto suse?", "depabu navo gajogi pitu", "qona"])
def test_made_up_words_find_nothing(manager, query):
    assert _search(manager, query) == []


@pytest.mark.parametrize(
    ("query", "said"),
    [
        ("What is the name of Mia's dog?", "Mia: Biscuit. He's a beagle, three months old."),
        ("What did Mia make at the ceramics workshop?", "Mia: So much fun! I made a lopsided mug with a blue glaze."),
        ("Where does Leo's grandmother live?", "Leo: I'm driving to the coast to see my grandmother in Brighton."),
        (
            "What dessert did the grandmother bake?",
            "Leo: Brighton was great, my grandmother baked her famous rhubarb crumble.",
        ),
        ("Does Leo's grandmother swim?", "Leo: She's fine, still swimming in the sea every morning at eighty-two."),
        ("Is Mia's office moving?", "Mia: Hectic, we're moving offices next month."),
    ],
)
def test_a_question_about_what_was_said_finds_it(manager, query, said):
    hits = _search(manager, query)
    assert said in [h.content for h in hits], [h.content for h in hits]
    assert all(h.relevant for h in hits)


def test_every_turn_is_found_by_its_own_words(manager):
    """The floor never hides what was said: each turn, asked in its own words (without the
    speaker's name), is among the hits, and they are relevant."""
    for turns in EVENINGS.values():
        for turn in turns:
            hits = _search(manager, turn.split(": ", 1)[1])
            assert turn in [h.content for h in hits], turn
            assert all(h.relevant for h in hits)


FIVE_FACTS = [
    "Likes green tea.",
    "Is allergic to peanuts.",
    "Works as a nurse at the hospital in Lyon.",
    "Has a cat called Miso.",
    "Wants to run a half marathon in spring.",
]


@pytest.fixture(scope="module")
def five(tmp_path_factory, embedder):
    """A new user's memory: five facts, each remembered on its own (as add_memory writes them)."""
    root = syncd.init(tmp_path_factory.mktemp("five") / "home").home
    engine = syncd.open(root, embedder=embedder)
    engine.sync()
    manager = MemoryManager(engine)
    for fact in FIVE_FACTS:
        asyncio.run(manager.add_memory(fact, user_id="ana", dedup=False))
    yield manager
    engine.close()


@pytest.mark.parametrize(
    "query",
    [
        "raduxi putusa",
        "rupu?",
        "sukufi lulili",
        "komanilo xame giwopudu tojemuco?",
        pytest.param("rana xucoxu foxo?", marks=_close("Has a cat called Miso.", 0.40)),
    ],
)
def test_made_up_words_find_nothing_in_five_facts(five, query):
    """The best of five unrelated rows lies under 0.27 19 times in 20: made-up words, which lie
    0.25-0.26 from the cat, found it with the floor at 0.25."""
    assert asyncio.run(five.search_memories(query, user_id="ana")) == []


def test_five_facts_still_answer_a_paraphrase(five):
    recall = asyncio.run(five.retrieve_relevant_memories("what does she drink?", user_id="ana"))
    assert "Likes green tea." in recall  # cosine 0.285
    assert "Has a cat called Miso." in [h.content for h in asyncio.run(five.search_memories("pets", user_id="ana"))]


@given(st.floats(-1, 1.5), st.integers(1, 10**6), st.integers(1, 10**6))
def test_more_rows_never_make_a_query_answered(best, rows, more):
    """The best of more unrelated rows lies closer by chance: what a memory does not answer, a
    larger one with the same best row does not answer either."""
    assert chance_cosine(rows) <= chance_cosine(rows + more)
    if not answered(best, rows):
        assert not answered(best, rows + more)
