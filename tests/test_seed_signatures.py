"""The seed's API, pinned: every public method of every seed name, its parameters in order and
whether it is a coroutine function (issue 24 item 10).

Code ported from the original design calls these as the original declares them. A method that is
plain there but a coroutine here, called without ``await``, returns a coroutine nobody runs:
nothing is written and no error is raised. So the sync/async split matters as much as the order.
"""

from __future__ import annotations

import inspect

import pytest

from syncd.memory import (
    LanceDBMemoryStore,
    MarkdownMemoryStore,
    MemoryBlockUpdateTool,
    MemoryManager,
    MemorySearchTool,
    PostgresMemoryStore,
)
from syncd.session import (
    ContextCompressor,
    MarkdownIndexer,
    SessionLifecycle,
    SessionPolicy,
    StateMirror,
    TranscriptIndexer,
    TranscriptManager,
)

SYNC, ASYNC = "sync", "async"

# The seed's store API (issue 27): the same async methods on both backends, with the parameters
# the original declared; only the constructors say where the index lives.
SEED_STORE: dict[str, tuple[str, str]] = {
    "connect": (ASYNC, ""),
    "close": (ASYNC, ""),
    "get_all_memory_blocks": (ASYNC, "chat_id=, user_id="),
    "set_memory_block": (ASYNC, "label, content, chat_id=, user_id="),
    "add_memory": (ASYNC, "content, embedding, user_id, chat_id=, metadata=, importance=, *, dedup="),
    "semantic_search": (ASYNC, "query_embedding, user_id, limit=, chat_id="),
    "hybrid_search": (
        ASYNC,
        (
            "query_embedding, query_text, user_id, limit=, chat_id=, semantic_weight=, fts_weight=, "
            "recency_boost=, importance_boost="
        ),
    ),
    "get_statistics": (ASYNC, "user_id="),
}

# THE SEED'S API CONTRACT. Each entry: (sync or async, the parameters in order as
# ``inspect.signature`` gives them, without ``self``: ``x=`` has a default, a lone ``*`` starts
# the keyword-only ones). Changing a row (renaming, reordering or removing a parameter, making
# one required, or turning a plain method into a coroutine or back) is a BREAKING CHANGE for code
# written against the original design: do it only on purpose, with a note in the changelog. A
# new keyword-only parameter with a default, or a new method, is not breaking: add its row.
# Fixed by the original, whatever the rest says: StateMirror.mirror_state, StateMirror.read_state
# and TranscriptManager.transcript_exists are plain methods; append_turn and read_transcript are
# coroutines.
SEED_API: dict[type, dict[str, tuple[str, str]]] = {
    MemoryManager: {
        "__init__": (
            SYNC,
            "home_or_engine=, settings=, *, embedder=, llm_options=, job_llm_options=, default_user_id=, author=, clock=",
        ),
        "add_memory": (ASYNC, "content, user_id=, chat_id=, *, category=, importance=, tags=, session_id=, dedup="),
        "close": (SYNC, ""),
        "core_blocks": (SYNC, "*, chat_id=, user_id=, at="),
        "delete_memory": (ASYNC, "memory_id, user_id=, *, expected="),
        "edit_memory_block": (ASYNC, "label, edit, chat_id=, user_id=, *, scope="),
        "format_core_memory_for_context": (ASYNC, "chat_id=, user_id="),
        "get_core_memory": (ASYNC, "chat_id=, user_id=, at="),
        "extract_turn": (ASYNC, "turn"),
        "get_memory_stats": (ASYNC, "user_id="),
        "key_facts_after": (ASYNC, "ahead"),
        "key_facts_ahead": (ASYNC, "facts, user_id=, *, dedup="),
        "process_conversation_turn_for_memories": (ASYNC, "turn, chat_id=, user_id=, *, session_id=, transcript_line="),
        "refresh_core_memory_facts": (ASYNC, "user_id="),
        "remember_extracted": (
            ASYNC,
            "extracted, chat_id=, user_id=, *, session_id=, transcript_line=, turn_ref=, key_facts=",
        ),
        "remember": (ASYNC, "content, user_id=, chat_id=, *, category=, importance=, tags=, session_id=, dedup="),
        "retrieve_relevant_memories": (ASYNC, "query, chat_id=, user_id=, limit="),
        "search_memories": (ASYNC, "query, limit=, chat_id=, user_id=, use_hybrid=, kind=, include_wiki=, at="),
        "store": (SYNC, "*, user_id="),
        "update_memory": (ASYNC, "memory_id, user_id=, *, content=, category=, importance=, tags=, expected="),
        "change_memory": (ASYNC, "memory_id, user_id=, *, content=, category=, importance=, tags=, expected="),
        "update_memory_block": (ASYNC, "label, content, chat_id=, user_id=, *, scope=, expected="),
        "users": (SYNC, ""),
    },
    MarkdownMemoryStore: {
        "__init__": (SYNC, "engine, user_id, *, writer=, clock=, author="),
        "append_daily_log": (SYNC, "chat_id, facts, date=, *, session_id=, intent="),
        "daily_log_rel": (SYNC, "date"),
        "delete_fact": (SYNC, "fact_id, *, hint_paths=, intent=, expected="),
        "find_fact": (SYNC, "fact_id, hint_paths="),
        "get_recent_logs": (SYNC, "days="),
        "iter_facts": (SYNC, ""),
        "list_daily_logs": (SYNC, ""),
        "read_daily_log": (SYNC, "date"),
        "read_memory_file": (SYNC, ""),
        "replace_fact": (SYNC, "fact_id, new_fact, *, hint_paths=, intent=, expected="),
        "write_memory_file": (SYNC, "content, *, intent="),
    },
    PostgresMemoryStore: {"__init__": (SYNC, "home, url, settings=, *, schema=, embedder="), **SEED_STORE},
    LanceDBMemoryStore: {"__init__": (SYNC, "home, settings=, *, embedder="), **SEED_STORE},
    MarkdownIndexer: {
        "__init__": (SYNC, "engine"),
        "reindex_from_markdown": (SYNC, ""),
    },
    TranscriptIndexer: {
        "__init__": (SYNC, "engine"),
        "index_session": (SYNC, "session_id, user_id"),
        "search_transcripts": (SYNC, "query, user_id, limit=, session_id="),
    },
    TranscriptManager: {
        "__init__": (SYNC, "home_or_engine=, user_id=, *, settings=, embedder=, author="),
        "append_entries": (SYNC, "session_id, entries, *, user_id=, intent="),
        "append_turn": (ASYNC, "session_id, role, content, actions=, metadata=, *, user_id=, ts="),
        "close": (SYNC, ""),
        "next_line": (SYNC, "session_id, *, user_id="),
        "read_transcript": (ASYNC, "session_id, last_n=, *, user_id="),
        "transcript_exists": (SYNC, "session_id, *, user_id="),
    },
    StateMirror: {
        "__init__": (SYNC, "home_or_engine=, user_id=, *, settings=, embedder=, author="),
        "close": (SYNC, ""),
        "mirror_state": (SYNC, "session_id, state_bytes, *, user_id=, allow_pickle="),
        "read_state": (SYNC, "session_id, *, user_id="),
        "to_state": (SYNC, "state, *, allow_pickle="),
        "write_state": (SYNC, "session_id, state, *, user_id=, allow_pickle=, intent="),
    },
    SessionPolicy: {
        "__init__": (SYNC, "daily_reset_hour=, idle_timeout_minutes=, max_turns="),
        "from_settings": (SYNC, "settings"),
    },
    SessionLifecycle: {
        "__init__": (SYNC, "policy=, clock="),
        "get_session_key": (SYNC, "platform, sender_id, thread_id="),
        "now": (SYNC, ""),
        "should_reset": (SYNC, "last_active_at, turn_count, created_at, now="),
    },
    ContextCompressor: {
        "__init__": (
            SYNC,
            "memory, *, user_id=, chat_id=, session_id=, max_context_tokens=, keep_last_steps=, token_counter=",
        ),
        "compress_context": (ASYNC, "agent, *, session_id=, user_id=, chat_id=, now="),
        "context_tokens": (SYNC, "steps"),
    },
    MemorySearchTool: {
        "__init__": (SYNC, "memory_manager, timeout_s="),
        "forward": (SYNC, "query, limit="),
        "set_context": (SYNC, "chat_id, user_id"),
    },
    MemoryBlockUpdateTool: {
        "__init__": (SYNC, "memory_manager, timeout_s="),
        "forward": (SYNC, "label, content, operation=, old_content="),
        "set_context": (SYNC, "chat_id, user_id"),
    },
}


class _HasDefault:
    def __repr__(self) -> str:
        return ""  # ``x=``: a default, whatever its value


def _parameters(function) -> str:
    """``function``'s parameters as the table writes them: Python's own rendering (``*``, ``/``,
    ``*args``), without annotations, default values or a leading ``self``."""
    signature = inspect.signature(function)
    parameters = [
        p.replace(annotation=p.empty, default=p.empty if p.default is p.empty else _HasDefault())
        for p in signature.parameters.values()
    ]
    if parameters and parameters[0].name == "self":
        parameters = parameters[1:]
    return str(signature.replace(parameters=parameters, return_annotation=signature.empty))[1:-1]


def _public_methods(cls: type) -> set[str]:
    """The public callables of ``cls`` (functions, class and static methods, inherited ones too),
    plus ``__init__``; attributes and properties are not methods."""
    names = set()
    for name in dir(cls):
        if name.startswith("_") and name != "__init__":
            continue
        raw = inspect.getattr_static(cls, name)
        if isinstance(raw, (staticmethod, classmethod)) or inspect.isfunction(raw):
            names.add(name)
    return names


ROWS = [(cls, name, row) for cls, methods in SEED_API.items() for name, row in methods.items()]


@pytest.mark.parametrize(("cls", "name", "row"), ROWS, ids=[f"{c.__name__}.{n}" for c, n, _ in ROWS])
def test_each_seed_method_keeps_its_parameters_and_its_sync_async_split(cls, name, row):
    kind, parameters = row
    function = getattr(cls, name, None)
    assert function is not None, f"{cls.__name__}.{name} is gone"
    actual = (ASYNC if inspect.iscoroutinefunction(function) else SYNC, _parameters(function))
    assert actual == (kind, parameters), f"{cls.__name__}.{name}: the seed's contract says {row}"


@pytest.mark.parametrize("cls", list(SEED_API), ids=[c.__name__ for c in SEED_API])
def test_every_public_method_of_a_seed_name_is_in_the_table(cls):
    # A new method is not a breaking change, but its sync/async choice is decided once, here.
    missing = sorted(_public_methods(cls) - set(SEED_API[cls]))
    assert not missing, f"add {cls.__name__}.{missing} to SEED_API (sync or async, its parameters)"


def test_the_methods_the_issue_names_have_the_originals_split():
    # Spelled out beside the table, so a row edited by mistake still fails here.
    for plain in (StateMirror.mirror_state, StateMirror.read_state, TranscriptManager.transcript_exists):
        assert not inspect.iscoroutinefunction(plain), plain.__qualname__
    for coroutine in (TranscriptManager.append_turn, TranscriptManager.read_transcript):
        assert inspect.iscoroutinefunction(coroutine), coroutine.__qualname__
    assert _parameters(StateMirror.mirror_state).startswith("session_id, state_bytes")
    assert _parameters(StateMirror.read_state).startswith("session_id")
    assert _parameters(TranscriptManager.transcript_exists).startswith("session_id")
