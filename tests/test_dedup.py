"""Corrections are never lost (issue 25, item 0): the dedup rule's laws (hypothesis), the labelled
pairs, and the reported reproductions through MemoryManager, the REST API of a real server, MCP
over streamable HTTP and the agent tool; a duplicate names the fact it restates."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

import syncd
from syncd.formats import parse_daily_log
from syncd.memory import MemoryAddTool, MemoryManager
from syncd.memory.dedup import _NEGATIONS, dedup_key, restates  # white-box: see _WORD

from .daemon_helpers import git, isolate_git_identity
from .server_helpers import mcp_over_http, served_in_thread

run = asyncio.run

PAIRS = Path(__file__).resolve().parents[1] / "benchmarks" / "data" / "dedup_pairs.jsonl"

# -- the rule's laws ---------------------------------------------------------------------------

# Letters of a few scripts, digits and punctuation: text as facts are written.
_CHARS = st.characters(categories=("Lu", "Ll", "Nd", "Po", "Pd", "Zs"), max_codepoint=0x024F)
_TEXT = st.text(_CHARS, max_size=60)
# Plain words: none of the words the rule sets aside or spells another way (articles, pronouns,
# "is", number and month words...), so replacing one changes what the text says.
# White-box: the rule's own negation words, which a replacement must not draw (dedup's unit law).
_WORD = st.text(st.characters(categories=("Ll",), max_codepoint=0x7A), min_size=3, max_size=9).filter(
    lambda w: dedup_key(w) == (w,) and w not in _NEGATIONS
)
_WORDS = st.lists(_WORD, min_size=1, max_size=8)
_SPACE = st.text(st.sampled_from(" \t\n"), min_size=1, max_size=3)


@given(_TEXT)
def test_a_text_restates_itself(text):
    assert restates(text, text)


@given(
    _TEXT, st.lists(_SPACE, min_size=40, max_size=40), st.sampled_from([str.upper, str.lower, str.title, str.swapcase])
)
def test_case_and_whitespace_never_make_a_new_fact(text, spaces, case):
    words = text.split()
    variant = spaces[0] + "".join(w + spaces[(i + 1) % len(spaces)] for i, w in enumerate(words))
    assert restates(case(variant), text)
    assert restates(text, case(variant))


@given(_TEXT, _TEXT)
def test_the_rule_is_symmetric(a, b):
    assert restates(a, b) == restates(b, a)


@given(_WORDS, _WORDS, st.integers(0, 10**6), st.integers(0, 10**6), st.booleans())
def test_changing_a_number_never_makes_a_duplicate(before, after, n, m, decimal):
    assume(n != m)
    number = (lambda v: f"{v / 100:.2f}") if decimal else str
    old = " ".join([*before, number(n), *after]) + "."
    new = " ".join([*before, number(m), *after]) + "."
    assert not restates(new, old)


@given(_WORDS, st.integers(0, 8), st.sampled_from(["not", "never", "no", "doesn't", "isn't", "cannot", "without"]))
def test_adding_a_negation_never_makes_a_duplicate(words, at, negation):
    at = min(at, len(words))
    negated = [*words[:at], negation, *words[at:]]
    old, new = " ".join(words) + ".", " ".join(negated) + "."
    assert not restates(new, old) and not restates(old, new)


@given(_WORDS, st.integers(0, 8), _WORD)
def test_replacing_a_word_never_makes_a_duplicate(words, at, other):
    at = min(at, len(words) - 1)
    assume(other != words[at])
    changed = [*words[:at], other, *words[at + 1 :]]
    assert not restates(" ".join(changed), " ".join(words))


@given(_WORDS, _WORDS, _WORDS, st.lists(_WORD, min_size=3, max_size=3, unique=True))
def test_one_phrase_may_move_but_two_words_never_trade_places(a, b, around, pqr):
    # "moved to Lyon in 2019" is "in 2019 moved to Lyon"; "Ana loves Bob" is not "Bob loves Ana".
    assert restates(" ".join(a + b), " ".join(b + a))
    p, q, r = pqr
    # Three distinct words, none of them beside: a moved phrase keeps their cyclic order, a swap turns it.
    assume(not set(pqr) & set(around))
    assert not restates(" ".join([*around, p, q, r, *around]), " ".join([*around, r, q, p, *around]))


def test_every_correction_of_the_labelled_pairs_is_a_new_fact():
    pairs = [json.loads(line) for line in PAIRS.read_text(encoding="utf-8").splitlines() if line.strip()]
    assert len(pairs) >= 300 and {p["duplicate"] for p in pairs} == {True, False}
    dropped = [(p["old"], p["new"]) for p in pairs if not p["duplicate"] and restates(p["new"], p["old"])]
    assert dropped == []
    # Restatements in other words ("paraphrase") are stored twice rather than guessed at.
    spelled = [p for p in pairs if p["duplicate"] and p["kind"] != "paraphrase"]
    assert sum(restates(p["new"], p["old"]) for p in spelled) / len(spelled) > 0.95


# -- through MemoryManager ---------------------------------------------------------------------

CORRECTIONS = [
    ("Is allergic to peanuts.", "Is not allergic to peanuts."),
    ("Her flight to Tokyo is on March 3.", "Her flight to Tokyo is on March 5."),
    ("Her daughter is 5 years old.", "Her daughter is 6 years old."),
]


def _line_of(home: Path, known) -> str:
    return (home / known.path).read_text(encoding="utf-8").splitlines()[known.line - 1]


def test_corrections_are_stored_and_a_restatement_names_what_it_restates(engine, home):
    manager = MemoryManager(engine)
    for old, new in CORRECTIONS:
        first = run(manager.add_memory(old, user_id="ana"))
        second = run(manager.add_memory(new, user_id="ana"))
        assert first is not None and second is not None and first.id != second.id, (old, new)
    lighthouses = [run(manager.add_memory(f"Shutdown test fact number {n} about lighthouses.", user_id="ana"))
                   for n in range(1, 13)]  # fmt: skip
    assert all(fact is not None for fact in lighthouses)
    texts = [f.fact.content for f in manager.store(user_id="ana").iter_facts()]
    assert len(texts) == 2 * len(CORRECTIONS) + 12 == len(set(texts))

    # A restatement is not written; the answer names the fact it restates, where it is.
    before = git(home, "rev-parse", "HEAD")
    outcome = run(manager.remember("She's allergic to peanuts!", user_id="ana"))
    assert outcome.duplicate and outcome.fact is None
    known = outcome.duplicate_of
    assert known.content == "Is allergic to peanuts." and known.id in _line_of(home, known)
    assert run(manager.add_memory("her daughter is six years old", user_id="ana")) is None
    assert git(home, "rev-parse", "HEAD") == before  # nothing written, nothing committed
    # dedup=False writes it all the same.
    assert run(manager.add_memory("She's allergic to peanuts!", user_id="ana", dedup=False)) is not None
    # Another user's memory is not "already remembered".
    assert run(manager.add_memory("Is allergic to peanuts.", user_id="bob")) is not None


def test_a_turn_keeps_its_corrections_and_drops_its_restatements(engine, home):
    from .test_memory_manager import make_manager, reply, set_reply

    manager = make_manager(engine)
    assert run(manager.add_memory("Runs 5 km every morning.", user_id="ana")) is not None
    set_reply(manager, reply(
        ("Runs 5 km every morning.", "goal", 0.5),       # said before
        ("Runs 10 km every morning.", "goal", 0.5),      # a correction
        ("She runs 10 km every morning.", "goal", 0.5),  # the correction again, in the same turn
        ("Is not training for a marathon.", "goal", 0.5),
    ))  # fmt: skip
    facts = run(manager.process_conversation_turn_for_memories({"user_message": "I run 10k now."}, "c1", "ana"))
    assert [f.content for f in facts] == ["Runs 10 km every morning.", "Is not training for a marathon."]
    logs = sorted((home / "memory/users/ana").glob("????-??-??.md"))
    written = [f.fact.content for log in logs for f in parse_daily_log(log.read_text()).facts()]
    assert written.count("Runs 5 km every morning.") == 1 and "Runs 10 km every morning." in written


def test_the_agent_tool_says_which_fact_it_already_has(engine):
    manager = MemoryManager(engine)
    tool = MemoryAddTool(manager)
    tool.set_context("c1", "ana")
    added = tool.forward("Keeps bees on the roof.", category="hobby")
    assert added.startswith("Remembered (id ")
    fact_id = added.removeprefix("Remembered (id ").removesuffix(").")
    again = tool.forward("She keeps bees on the roof")
    assert "Already remembered as 'Keeps bees on the roof.'" in again and fact_id in again
    assert tool.forward("Keeps no bees on the roof.").startswith("Remembered (id ")
    assert tool.forward("x", category="Not A Word").startswith("Error: category")


# -- through the servers -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def server(tmp_path_factory, embedder):
    mp = pytest.MonkeyPatch()
    isolate_git_identity(tmp_path_factory.mktemp("git"), mp)
    home = syncd.init(tmp_path_factory.mktemp("dedup") / "home").home
    try:
        with served_in_thread(home, embedder) as served:
            yield served
    finally:
        mp.undo()


def test_rest_stores_corrections_and_names_the_duplicate(server):
    with server.client(server.admin) as client:

        def add(content: str, **extra) -> dict:
            response = client.post("/memory/archival", json={"content": content, "user_id": "ana", **extra})
            assert response.status_code == 200, response.text
            return response.json()

        stored = [add(f"Shutdown test fact number {n} about lighthouses.") for n in range(1, 13)]
        assert [a["duplicate"] for a in stored] == [False] * 12
        first = add("Is allergic to peanuts.")
        assert add("Is not allergic to peanuts.")["duplicate"] is False
        again = add("She is allergic to peanuts.")
        assert again["fact"] is None and again["duplicate"] is True
        known = again["duplicate_of"]
        assert {k: known[k] for k in ("id", "content")} == {
            "id": first["fact"]["id"],
            "content": "Is allergic to peanuts.",
        }
        line = (server.home / known["path"]).read_text().splitlines()[known["line"] - 1]
        assert f"id:{known['id']}" in line

        # The agent turns it into an update: the line changes in place, the old text stays in git.
        response = client.patch(
            f"/memory/archival/{known['id']}", json={"content": "Is allergic to peanuts and cashews.", "user_id": "ana"}
        )
        assert response.status_code == 200, response.text
        assert (
            response.json()["id"] == known["id"] and response.json()["content"] == "Is allergic to peanuts and cashews."
        )
        assert "Is allergic to peanuts and cashews." in (server.home / known["path"]).read_text()
        history = git(server.home, "log", "-p", "--format=%s", "--", known["path"])
        assert "-- [context] Is allergic to peanuts. " in history and f"Edit fact {known['id']}" in history
        missing = client.patch("/memory/archival/m-0000000000000000", json={"content": "x", "user_id": "ana"})
        assert missing.status_code == 404 and missing.json()["error"]["type"] == "NotFoundError"


def test_mcp_add_names_the_duplicate_and_update_changes_it(server):
    async def main():
        async with mcp_over_http(server, server.admin) as client:

            async def call(name, **arguments):
                result = await client.call_tool(name, arguments)
                assert not result.is_error, result.content[0].text
                return json.loads(result.content[0].text)

            first = await call("memory_add", content="Her flight to Tokyo is on March 3.", user_id="mia")
            second = await call("memory_add", content="Her flight to Tokyo is on March 5.", user_id="mia")
            assert not first["duplicate"] and not second["duplicate"]
            again = await call("memory_add", content="her flight to tokyo is on march 5", user_id="mia")
            assert again["duplicate"] and again["duplicate_of"]["id"] == second["fact"]["id"]
            assert again["duplicate_of"]["content"] == "Her flight to Tokyo is on March 5."
            updated = await call(
                "memory_update",
                memory_id=first["fact"]["id"],
                user_id="mia",
                content="Her flight to Tokyo was moved to March 5; the March 3 one is cancelled.",
            )
            assert updated["id"] == first["fact"]["id"] and "cancelled" in updated["content"]

    run(main())
