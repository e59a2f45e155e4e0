"""MemoryManager: remembering turns (litellm mock_response through the real call path), recall,
core blocks and their scopes, deletes, hostile ids, and working beside a daemon."""

from __future__ import annotations

import asyncio
import json

import git
import pytest

import syncd
from syncd.config import Settings
from syncd.errors import BlockLimitError, ExtractionError, InvalidIdError, InvalidInputError
from syncd.formats import derive_fact_id, parse_daily_log
from syncd.memory import MemoryManager, strip_injected, wrap_injected
from syncd.memory.prompts import PROMPT_VERSION

from .daemon_helpers import running_daemon
from .helpers import run_concurrently

run = asyncio.run

NO_FACTS = json.dumps({"facts": []})


def reply(*facts: tuple[str, str, float]) -> str:
    return json.dumps(
        {"facts": [{"content": c, "category": cat, "importance": imp, "tags": ["t"]} for c, cat, imp in facts]}
    )


def make_manager(engine, **settings) -> MemoryManager:
    knobs = {"llm_model": "gpt-4o-mini", "core_refresh_importance": 0.95} | settings
    return MemoryManager(
        engine,
        settings=Settings(**knobs),
        job_llm_options={"extract": {"mock_response": NO_FACTS}, "summarise": {"mock_response": "- Nothing yet."}},
    )


@pytest.fixture
def manager(engine):
    return make_manager(engine)


def set_reply(manager: MemoryManager, text: str, job: str = "extract") -> None:
    manager.job_llm_options[job]["mock_response"] = text


def commits(home) -> list[git.Commit]:
    return list(git.Repo(home).iter_commits())


def daily_logs(home, user: str) -> list:
    folder = home / "memory" / "users" / user
    return sorted(folder.glob("????-??-??.md")) if folder.is_dir() else []


TURN = {
    "user_message": "I moved to Lisbon last month and I'm learning Portuguese.",
    "steps": [{"tool": "weather", "args": {"city": "Lisbon"}}],
    "response": "Welcome to Lisbon! Want some Portuguese practice?",
}


def test_a_turn_lands_in_the_users_log_in_git_and_in_search(manager, home):
    set_reply(
        manager, reply(("Lives in Lisbon since last month.", "personal", 0.7), ("Is learning Portuguese.", "goal", 0.6))
    )
    facts = run(manager.process_conversation_turn_for_memories(TURN, "c1", "alice", session_id="s1", transcript_line=7))
    assert [f.content for f in facts] == ["Lives in Lisbon since last month.", "Is learning Portuguese."]

    [path] = daily_logs(home, "alice")
    assert daily_logs(home, "bob") == []
    log = parse_daily_log(path.read_text())
    [section] = log.sections
    assert (section.chat, section.session) == ("c1", "s1")
    written = [lf.fact for lf in log.facts()]
    assert [f.id for f in written] == [f.id for f in facts]
    for fact in written:
        assert (fact.source_session, fact.source_line) == ("s1", 7)
        assert dict(fact.extra) == {"model": "gpt-4o-mini", "pv": PROMPT_VERSION}
        assert fact.timestamp

    head = commits(home)[0]
    assert head.author.name == "syncd-agent"
    assert head.stats.files.keys() == {path.relative_to(home).as_posix()}
    trailers = head.message
    for line in (
        "Syncd-User: alice",
        "Syncd-Chat: c1",
        "Syncd-Session: s1",
        "Syncd-Transcript-Line: 7",
        "Syncd-Model: gpt-4o-mini",
        f"Syncd-Prompt-Version: {PROMPT_VERSION}",
    ):
        assert line in trailers

    hits = run(manager.search_memories("where does the user live", user_id="alice"))
    assert hits[0].id == facts[0].id and hits[0].path.endswith(path.name)
    assert all(h.user_id in (None, "alice") for h in hits)
    assert not [h for h in run(manager.search_memories("Lisbon", user_id="bob")) if h.kind == "fact"]
    recall = run(manager.retrieve_relevant_memories("Lisbon", "c1", "alice", limit=2))
    assert recall.splitlines()[1] == f"- [personal] Lives in Lisbon since last month. ({facts[0].timestamp[:10]})"
    assert strip_injected("Q: " + recall + " A") == "Q:  A"

    # The same turn again: nothing new, so no write and no commit.
    before = len(commits(home))
    assert run(manager.process_conversation_turn_for_memories(TURN, "c1", "alice", session_id="s1")) == []
    # Restatements (the same words in another case, without the final stop) are not new either.
    set_reply(manager, reply(("lives in Lisbon since last month", "personal", 0.7)))
    assert run(manager.process_conversation_turn_for_memories(TURN, "c1", "alice")) == []
    assert len(commits(home)) == before


def test_injected_memory_and_the_system_prompt_are_not_extracted(manager, home):
    run(manager.update_memory_block("user", "Favourite colour is teal.", user_id="alice"))
    core = run(manager.format_core_memory_for_context("c1", "alice"))
    recalled = wrap_injected("recall", "- [preference] Drinks oolong every morning. (2026-11-01)")
    turn = {
        "system_prompt": "You are Ada, a cheerful assistant.\n" + core,
        "user_message": recalled + "\nI just started learning Rust.",
        "response": "Rust is a great choice!",
    }
    # A careless model repeats the injected memory and the persona; only the new fact may stay.
    set_reply(
        manager,
        reply(
            ("Favourite colour is teal.", "preference", 0.5),
            ("Drinks oolong every morning.", "preference", 0.5),
            ("You are Ada, a cheerful assistant.", "context", 0.5),
            ("Is learning Rust.", "goal", 0.6),
        ),
    )
    facts = run(manager.process_conversation_turn_for_memories(turn, "c1", "alice"))
    assert [f.content for f in facts] == ["Is learning Rust."]
    text = daily_logs(home, "alice")[0].read_text()
    assert "teal" not in text and "oolong" not in text and "Ada" not in text


@pytest.mark.parametrize(
    "bad",
    [
        "Sure! Here are the facts: Lives in Lisbon.",
        json.dumps({"facts": [{"content": "Lives in Lisbon.", "category": "personal"}]}),
        json.dumps({"facts": [{"content": "x" * 50, "category": "personal", "importance": 0.5}] * 2000}),
        json.dumps({"facts": [{"content": "Lives in Lisbon.", "category": "personal", "importance": "high"}]}),
    ],
)
def test_malformed_llm_output_writes_nothing(engine, home, bad):
    manager = make_manager(engine)
    set_reply(manager, bad)
    before = len(commits(home))
    with pytest.raises(ExtractionError, match="LLM reply"):
        run(manager.process_conversation_turn_for_memories(TURN, "c1", "alice"))
    assert daily_logs(home, "alice") == []
    assert len(commits(home)) == before


def test_without_an_llm_extraction_says_so_and_the_rest_works(engine, home):
    manager = MemoryManager(engine)
    with pytest.raises(ExtractionError, match="no LLM configured"):
        run(manager.process_conversation_turn_for_memories(TURN, "c1", "alice"))
    # Important enough to trigger a summary refresh, which cannot run: the fact is still kept.
    fact = run(manager.add_memory("Allergic to peanuts.", "alice", category="personal", importance=0.99))
    assert run(manager.search_memories("peanut allergy", user_id="alice"))[0].id == fact.id
    assert run(manager.add_memory("allergic to peanuts", "alice")) is None  # a duplicate


def test_important_facts_refresh_the_facts_block_and_memory_md(manager, home):
    rel = "memory/users/alice/MEMORY.md"
    manager.engine.write_file(rel, b"# Alice\n\nNotes I wrote myself.\n")
    summary = "- Lives in Lisbon.\n- Learning Portuguese."
    set_reply(manager, summary, job="summarise")
    set_reply(manager, reply(("Lives in Lisbon since last month.", "personal", 0.97)))
    run(manager.process_conversation_turn_for_memories(TURN, "c1", "alice"))
    assert run(manager.get_core_memory("c1", "alice"))["facts"] == summary
    memory_md = (home / rel).read_text()
    assert memory_md.startswith("# Alice\n\nNotes I wrote myself.\n\n")
    assert summary in memory_md
    # A second refresh replaces the managed section and leaves the person's text alone.
    set_reply(manager, "* Lives in Lisbon.\n* Speaks some Portuguese.", job="summarise")
    assert run(manager.refresh_core_memory_facts("alice")) == "- Lives in Lisbon.\n- Speaks some Portuguese.\n"
    memory_md = (home / rel).read_text()
    assert memory_md.count("## Key facts") == 1 and "Learning Portuguese" not in memory_md
    assert memory_md.startswith("# Alice\n\nNotes I wrote myself.\n\n")


def test_a_summary_quoting_the_sections_markers_is_replaced_whole_next_time(manager, home):
    """A summary line holding ``<!-- syncd:facts:end -->`` (the LLM quoting a fact) ended the managed
    section there the next time: the rest of the old summary and a stray marker stayed in MEMORY.md,
    outside the section, as if the person had written them, for good."""
    rel = "memory/users/alice/MEMORY.md"
    manager.engine.write_file(rel, b"# Alice\n\nNotes I wrote myself.\n")
    run(manager.add_memory("Writes <!-- syncd:facts:end --> in her notes.", "alice", importance=0.5))
    set_reply(manager, "- Writes <!-- syncd:facts:end --> in her notes.\n- Lives in Lisbon.", job="summarise")
    run(manager.refresh_core_memory_facts("alice"))
    set_reply(manager, "- Lives in Porto.", job="summarise")
    run(manager.refresh_core_memory_facts("alice"))
    memory_md = (home / rel).read_text()
    assert memory_md == (
        "# Alice\n\nNotes I wrote myself.\n\n<!-- syncd:facts:begin -->\n## Key facts\n\n- Lives in Porto.\n"
        "<!-- syncd:facts:end -->\n"
    )


def test_blocks_resolve_chat_over_user_over_global(manager, home):
    run(manager.update_memory_block("persona", "Global persona.", scope="global"))
    run(manager.update_memory_block("persona", "Alice's persona.", user_id="alice"))
    run(manager.update_memory_block("persona", "Persona for chat c1.", chat_id="c1", user_id="alice"))
    assert run(manager.get_core_memory("c1", "alice"))["persona"] == "Persona for chat c1."
    assert run(manager.get_core_memory("c2", "alice"))["persona"] == "Alice's persona."
    core = run(manager.get_core_memory("c1", "bob"))
    assert core["persona"] == "Global persona."
    assert set(core) >= {"persona", "user", "facts", "context"} and core["context"]  # defaults fill gaps
    assert (home / "memory/users/alice/chats/c1/core/persona.md").read_text() == "Persona for chat c1.\n"
    context = run(manager.format_core_memory_for_context("c1", "alice"))
    assert str(home) in context and "Persona for chat c1." in context
    assert context.startswith("<syncd-memory") and context.endswith("</syncd-memory>")


def test_a_block_over_its_limit_is_refused(engine, home):
    manager = make_manager(engine, block_char_limit=100)
    run(manager.update_memory_block("user", "Short.", user_id="alice"))
    before = len(commits(home))
    with pytest.raises(BlockLimitError) as err:
        run(manager.update_memory_block("user", "x" * 101, user_id="alice"))
    assert (err.value.size, err.value.limit) == (101, 100)
    assert (home / "memory/users/alice/core/user.md").read_text() == "Short.\n"
    assert len(commits(home)) == before
    # A person may give one block a larger limit in its frontmatter; it is kept on rewrite.
    manager.engine.write_file("memory/users/alice/core/user.md", b"---\nlimit: 300\n---\nShort.\n")
    run(manager.update_memory_block("user", "y" * 250, user_id="alice"))
    assert (home / "memory/users/alice/core/user.md").read_text() == "---\nlimit: 300\n---\n" + "y" * 250 + "\n"


HOSTILE = ["../bob", "a/b", "", ".hidden", "a..b", "x\x00y", "a b", "a\\b", "*", "x" * 200, 7]


def test_hostile_ids_are_refused_and_nothing_is_written(manager, home):
    set_reply(manager, reply(("Lives in Lisbon.", "personal", 0.5)))
    before = len(commits(home))
    for bad in HOSTILE:
        calls = [
            manager.add_memory("Lives in Lisbon.", bad),
            manager.add_memory("Lives in Lisbon.", "alice", bad),
            manager.process_conversation_turn_for_memories(TURN, "c1", bad),
            manager.process_conversation_turn_for_memories(TURN, bad, "alice"),
            manager.process_conversation_turn_for_memories(TURN, "c1", "alice", session_id=bad),
            manager.update_memory_block("user", "x", "c1", bad),
            manager.update_memory_block("context", "x", bad, "alice"),
            manager.search_memories("x", user_id=bad),
            manager.get_core_memory(bad, "alice"),
            manager.delete_memory("m-1", bad),
            manager.delete_memory(bad, "alice"),
            manager.get_memory_stats(bad),
        ]
        for call in calls:
            with pytest.raises(InvalidIdError):
                run(call)
    with pytest.raises(InvalidIdError):
        run(manager.update_memory_block("../persona", "x", user_id="alice"))
    assert len(commits(home)) == before
    assert list((home / "memory" / "users").iterdir()) == [home / "memory/users/.gitkeep"]
    assert git.Repo(home).is_dirty(untracked_files=True) is False


def test_tags_given_as_one_string_are_refused_not_spelled_out(manager, home):
    """``tags="tea"`` (one string where a list goes) tagged the fact `t e a`, one tag a letter."""
    fact = run(manager.add_memory("Likes green tea.", "alice", tags=["drinks"], dedup=False))
    before = len(commits(home))
    with pytest.raises(InvalidInputError, match="not one string"):
        run(manager.add_memory("Likes oolong.", "alice", tags="tea", dedup=False))
    with pytest.raises(InvalidInputError, match="not one string"):
        run(manager.update_memory(fact.id, "alice", tags="tea"))
    assert len(commits(home)) == before
    assert manager.store(user_id="alice").find_fact(fact.id).fact.tags == ("drinks",)


def test_a_fact_over_the_length_limit_is_refused_by_every_python_entry_point(manager, home, embedder, tmp_path):
    """REST and MCP refused a fact over 10,000 characters (their schemas), while add_memory in
    Python wrote a 50,000-character fact line and committed it. One rule (FACT_CONTENT_MAX),
    one clear error naming the limit, nothing written; a fact at the limit is kept."""
    from syncd.formats import Fact
    from syncd.home import FACT_CONTENT_MAX
    from syncd.memory import LanceDBMemoryStore

    limit = f"over the limit of {FACT_CONTENT_MAX}"
    at_limit = "x" * FACT_CONTENT_MAX
    fact = run(manager.add_memory(at_limit, "alice", dedup=False))
    before = len(commits(home))
    over = "x" * (FACT_CONTENT_MAX + 1)
    with pytest.raises(InvalidInputError, match=limit):
        run(manager.add_memory(over, "alice", dedup=False))
    with pytest.raises(InvalidInputError, match=limit):
        run(manager.update_memory(fact.id, "alice", content=over))
    with pytest.raises(InvalidInputError, match=limit):
        manager.store(user_id="alice").append_daily_log(None, [Fact(content=over, category="context")])
    assert len(commits(home)) == before
    assert over not in "".join(path.read_text() for path in daily_logs(home, "alice"))

    async def seed() -> None:  # the seed's store, on a home of its own
        async with LanceDBMemoryStore(tmp_path / "seed", embedder=embedder) as store:
            head = commits(store.manager.home.root)[0].hexsha
            with pytest.raises(InvalidInputError, match=limit):
                await store.add_memory(over, None, "alice")
            assert commits(store.manager.home.root)[0].hexsha == head

    run(seed())


def test_delete_removes_exactly_one_line_and_commits(manager, home):
    keep = run(manager.add_memory("Plays the cello.", "alice", category="personal"))
    gone = run(manager.add_memory("Owns a grey cat named Miso.", "alice", category="personal"))
    [path] = daily_logs(home, "alice")
    before_lines = path.read_text().splitlines(keepends=True)
    head = commits(home)[0].hexsha
    assert run(manager.delete_memory(gone.id, "bob")) is False  # not bob's to delete
    assert run(manager.delete_memory(gone.id, "alice")) is True
    after_lines = path.read_text().splitlines(keepends=True)
    assert [line for line in before_lines if line not in after_lines] == [
        line for line in before_lines if gone.id in line
    ]
    assert len(after_lines) == len(before_lines) - 1
    latest = commits(home)[0]
    assert latest.parents[0].hexsha == head and "Forget" in latest.summary
    assert gone.id not in {h.id for h in run(manager.search_memories("cat named Miso", user_id="alice"))}
    assert keep.id in {h.id for h in run(manager.search_memories("cello", user_id="alice"))}
    assert run(manager.delete_memory(gone.id, "alice")) is False


def test_a_hand_written_fact_is_deleted_by_its_derived_id(manager, home):
    rel = "memory/users/alice/2026-01-05.md"
    text = "# 2026-01-05\n\nSome prose.\n- [preference] Likes tea.\n- [preference] Likes jazz.\n"
    manager.engine.write_file(rel, text.encode())
    fact_id = derive_fact_id(rel, "Likes tea.", 0)
    assert fact_id in {h.id for h in run(manager.search_memories("tea", user_id="alice"))}
    assert run(manager.delete_memory(fact_id, "alice")) is True
    assert (home / rel).read_text() == "# 2026-01-05\n\nSome prose.\n- [preference] Likes jazz.\n"
    assert "Forget" in commits(home)[0].summary


def test_stats_count_the_markdown(manager):
    run(manager.add_memory("Plays the cello.", "alice", category="personal"))
    run(manager.add_memory("Wants to run a marathon.", "alice", category="goal"))
    stats = run(manager.get_memory_stats("alice"))
    assert stats["facts"] == 2 and stats["daily_logs"] == 1
    assert stats["categories"] == {"goal": 1, "personal": 1}
    assert stats["blocks"]["persona"] == "default"


def test_a_manager_shares_an_open_engine(home, embedder):
    with syncd.open(home, embedder=embedder) as eng:
        memory = MemoryManager(eng)
        assert memory.engine is eng
        fact = run(memory.add_memory("Keeps bees on the roof.", "alice"))
        assert run(memory.search_memories("beekeeping", user_id="alice"))[0].id == fact.id
        memory.close()  # not its engine: still open
        assert eng.search("beekeeping", user_id="alice")[0].id == fact.id


def test_beside_a_daemon_writes_are_indexed_before_returning(home, embedder):
    """A real daemon (on a thread) holds the home; the manager hands its writes to it."""
    with running_daemon(home, embedder, commit_quiet_ms=50, debounce_ms=20):
        with MemoryManager(home, Settings(), embedder=embedder) as manager:
            assert manager.engine.read_only
            fact = run(manager.add_memory("Grows tomatoes on the balcony.", "alice"))
            assert run(manager.search_memories("tomato plants", user_id="alice"))[0].id == fact.id
            assert run(manager.delete_memory(fact.id, "alice")) is True
            assert fact.id not in {h.id for h in run(manager.search_memories("tomato", user_id="alice"))}
    # Each write waited for its own commit, so the add and the delete did not fold into one.
    assert [c.summary for c in commits(home)][:2] == [
        f"Forget fact {fact.id}",
        "Remember: Grows tomatoes on the balcony.",
    ]


def test_the_public_api_is_pinned():
    import syncd.memory

    assert sorted(syncd.memory.__all__) == sorted(
        [
            "MemoryManager",
            "MarkdownMemoryStore",
            "MemorySearchTool",
            "MemoryBlockUpdateTool",
            "MemoryAddTool",
            "ConversationTurn",
            "CoreBlock",
            "DailyLogFile",
            "StoredFact",
            "CORE_LABELS",
            "DEFAULT_BLOCKS",
            "PROMPT_VERSION",
            "NO_LLM_MESSAGE",
            "wrap_injected",
            "strip_injected",
            "LanceDBMemoryStore",
            "PostgresMemoryStore",
        ]
    )
    assert all(hasattr(syncd.memory, name) for name in syncd.memory.__all__)


def test_concurrent_writers_neither_collide_nor_duplicate(manager, home):
    own = ["Plays the cello.", "Keeps bees on the roof.", "Speaks fluent Finnish.", "Collects vintage maps."]
    results: dict[int, list] = {}

    def writer(k: int) -> None:
        results[k] = [
            run(manager.add_memory(own[k], "alice", category="personal")),
            run(manager.add_memory("Was born in Tromsø.", "alice", category="personal")),
        ]

    run_concurrently(writer, 4)
    assert all(results[k][0] is not None for k in range(4))
    assert sum(results[k][1] is not None for k in range(4)) == 1  # the shared fact, once
    [path] = daily_logs(home, "alice")
    assert path.read_text().count("Tromsø") == 1
    assert not git.Repo(home).is_dirty(untracked_files=True)
    for k in range(4):
        assert run(manager.search_memories(own[k], 1, user_id="alice"))[0].id == results[k][0].id


def test_one_users_deduplication_never_holds_up_another_users_add(manager, engine, monkeypatch):
    """Screening a new fact against the user's facts (a search) runs beside other writers, not in
    the writer's turn: while alice's screening is stuck, bob's add is written and acknowledged."""
    import threading

    entered, release = threading.Event(), threading.Event()
    nearest = engine.nearest_facts

    def stuck_for_alice(vector, *, user_id, limit):
        if user_id == "alice":
            entered.set()
            release.wait(60)
        return nearest(vector, user_id=user_id, limit=limit)

    monkeypatch.setattr(engine, "nearest_facts", stuck_for_alice)
    added: dict[str, object] = {}
    alice = threading.Thread(target=lambda: added.update(alice=run(manager.add_memory("Grows tomatoes.", "alice"))))
    bob = threading.Thread(target=lambda: added.update(bob=run(manager.add_memory("Repairs old clocks.", "bob"))))
    alice.start()
    try:
        assert entered.wait(60)
        bob.start()
        bob.join(30)
        assert not bob.is_alive() and added.get("bob") is not None, "bob's add waited for alice's screening"
    finally:
        release.set()
        alice.join(60)
        bob.join(60)
    assert added.get("alice") is not None
    assert not git.Repo(manager.home.root).is_dirty(untracked_files=True)
