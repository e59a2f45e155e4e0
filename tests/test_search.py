"""Hybrid search: scoping that no id or query can break, score parts, sources, the CLI."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import syncd
from syncd.cli import main
from syncd.errors import IndexError_, InvalidIdError

from .helpers import write
from .strategies import HOSTILE_TEXT

QUERY = HOSTILE_TEXT.filter(str.strip)  # an empty query is an error, tested on its own
SAFE_ID = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._@+-]{0,20}", fullmatch=True).filter(lambda s: ".." not in s)


def _log(facts: list[str], chat: str) -> str:
    return f"# 2026-11-22\n\n## 10:00 chat:{chat} session:s1\n" + "".join(f"- [preference] {f}\n" for f in facts)


@pytest.fixture(scope="module")
def populated(tmp_path_factory, embedder):
    """Three users whose ids look like each other and like SQL, with overlapping facts."""
    root = syncd.init(tmp_path_factory.mktemp("scoping")).home
    users = {"ana": "c1", "ana.b": "c1", "o'brien": None, "bob": "c2"}
    for user, chat in users.items():
        if user == "o'brien":
            continue  # not a valid id: it can never be a user folder that search scopes to
        write(
            root,
            f"memory/users/{user}/2026-11-22.md",
            _log([f"{user} likes green tea.", f"{user} is allergic to peanuts.", "Shared sentence about tea."], chat),
        )
        write(root, f"memory/users/{user}/chats/{chat}/core/context.md", f"{user} is planning a trip.\n")
    write(root, "vault/Tea.md", "# Tea\n\nGreen tea is steeped at 80 degrees.\n")
    engine = syncd.open(root, embedder=embedder)
    engine.sync()
    yield engine
    engine.close()


@settings(max_examples=40)
@given(user=st.sampled_from(["ana", "ana.b", "bob"]) | SAFE_ID, query=QUERY)
def test_a_user_scoped_query_never_returns_another_users_rows(populated, user, query):
    for hit in populated.search(query, user_id=user, limit=20):
        assert hit.user_id in (user, None), (user, query, hit)


@settings(max_examples=20)
@given(query=QUERY)
def test_a_chat_scoped_query_sees_only_that_chat_and_user_level_rows(populated, query):
    for hit in populated.search(query, user_id="ana", chat_id="c1", limit=20):
        assert hit.user_id in ("ana", None)
        assert hit.chat_id in ("c1", None)


@pytest.mark.parametrize("bad", ["ana' OR '1'='1", "../bob", "", "a/b", "bob\x00", "x" * 200])
def test_hostile_scope_ids_are_refused(populated, bad):
    with pytest.raises(InvalidIdError):
        populated.search("tea", user_id=bad)
    with pytest.raises(InvalidIdError):
        populated.search("tea", user_id="ana", chat_id=bad)


@pytest.mark.parametrize("kind", ["facts", "banana", "fact' OR 1=1 --"])
def test_an_unknown_kind_is_refused(populated, kind):
    with pytest.raises(ValueError, match="unknown kind"):
        populated.search("tea", kind=kind)


def test_hits_carry_their_source_and_score_parts(populated):
    hits = populated.search("peanut allergy", user_id="bob", limit=3)
    top = hits[0]
    assert top.content == "bob is allergic to peanuts."
    assert (top.path, top.line, top.kind, top.category) == ("memory/users/bob/2026-11-22.md", 5, "fact", "preference")
    assert top.user_id == "bob" and top.chat_id == "c2" and top.session_id == "s1"
    # The weighted parts the score adds up, and beside them the absolute ones (same value, same
    # meaning for any query): raw BM25, the query's idf-weighted coverage, its rare words' part and
    # how new the row is (which the recency part weighs by the row's relevance).
    assert set(top.parts) == {
        "semantic",
        "fulltext",
        "context",
        "importance",
        "recency",
        "question",
        "speaker",
        "time",
        "bm25",
        "coverage",
        "rare",
        "fresh",
    }
    assert top.parts["bm25"] > 0 and 0 < top.parts["coverage"] <= 1 and top.relevant
    expected = (
        0.7 * top.parts["semantic"]
        + 0.3 * top.parts["fulltext"]
        + 0.5 * top.parts["context"]
        + 0.2 * top.parts["importance"]
        + 0.1 * top.parts["recency"]
        + 0.2 * top.parts["question"]
        + 0.1 * top.parts["speaker"]
        + 0.15 * top.parts["time"]
    )
    assert top.score == expected  # summed in the same order: the parts add up exactly
    assert top.parts["context"] > 0  # its section's other facts say something about the query too
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_kind_filter_and_full_text_only_matches(populated):
    facts = populated.search("tea", user_id="ana", kind="fact", limit=20)
    assert facts and all(h.kind == "fact" for h in facts)
    chunks = populated.search("steeped degrees", kind="chunk", limit=5)
    assert chunks[0].path == "vault/Tea.md" and chunks[0].parts["fulltext"] > 0


def test_recency_boost_prefers_newer_facts(populated):
    now = dt.datetime(2026, 11, 22, 12, tzinfo=dt.UTC)
    hit = populated.search("green tea", user_id="ana", limit=1, now=now)[0]
    later = populated.search("green tea", user_id="ana", limit=1, now=now + dt.timedelta(days=60))[0]
    assert hit.parts["recency"] > later.parts["recency"] > 0


def test_cli_search_json_and_status(populated, capsys):
    home = str(populated.home.root)
    assert main(["search", "peanuts", "--home", home, "--user", "ana", "--json", "--limit", "2"]) == 0
    hits = json.loads(capsys.readouterr().out)
    assert hits[0]["content"] == "ana is allergic to peanuts." and all(h["user_id"] in ("ana", None) for h in hits)
    assert main(["status", "--home", home, "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert status["fresh"] and status["facts"] == 9
    assert main(["search", "tea", "--home", home, "--user", "../bob"]) == 1
    assert "invalid user id" in capsys.readouterr().err


def test_a_reader_never_ranks_by_another_model_s_vectors_of_the_same_size(home, embedder):
    """The embedded index, its meta.json naming another model of the same size: a read-only
    engine ranked the query by vectors of another meaning, silently."""
    write(home, "memory/users/ana/2026-11-28.md", "# 2026-11-28\n\n## 10:00\n\n- [fact] Green tea in the morning.\n")
    with syncd.open(home, embedder=embedder) as engine:
        engine.sync()
    meta = home / ".syncd" / "index" / "meta.json"
    meta.write_text(json.dumps(json.loads(meta.read_text()) | {"model_id": "BAAI/bge-small-en-v1.5"}))
    with syncd.open(home, read_only=True, embedder=embedder) as reader:
        with pytest.raises(IndexError_, match=r"another model \(BAAI/bge-small-en-v1.5, 384 dimensions\)"):
            reader.search("green tea", user_id="ana")
        # What is true: which model built it, which one is configured, and the two ways on (it
        # said to run `syncd sync`, which rebuilds the index for whatever model the runner has).
        with pytest.raises(IndexError_) as refused:
            reader.search_by_vector(embedder.embed_query("green tea"), user_id="ana")
    message = str(refused.value)
    assert f"than the one this process is configured with ({embedder.model_id})" in message, message
    assert "SYNCD_EMBED_MODEL" in message and "run `syncd reindex` to rebuild the index with this one" in message
    assert "syncd sync" not in message
