"""Isolation by path: whatever is under ``memory/users/<user>/`` is that user's or nobody's.

Scope comes from the path alone, so a file whose path holds an odd name (a block label with a
capital, a chat folder with a space, a user folder that is not a valid id) must never fall back to
being global memory, which every user's search and prompt would see.
"""

from __future__ import annotations

import asyncio
import itertools
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import syncd
from syncd.cli import main
from syncd.config import Settings
from syncd.home.layout import classify_path, is_indexable, validate_id
from syncd.memory import MemoryManager

from .helpers import write
from .strategies import odd_segments, safe_ids, user_folder_paths

OTHER = "bob"
# Owners: valid ids (ana and look-alikes of bob) and anything a folder can be called.
OWNERS = st.one_of(
    st.sampled_from(["ana", "Bob", "bob.x", "josé", "ana b", "Ana B", ".bob", "bob..", "-bob"]),
    safe_ids,
    odd_segments(),
).filter(lambda u: u != OTHER)


def _valid(user: str) -> bool:
    try:
        validate_id("user", user)
    except ValueError:
        return False
    return True


# ------------------------------------------------------------------------------ the pure rule


@pytest.mark.parametrize(
    ("path", "user", "chat", "kind"),
    [
        ("memory/users/ana/core/Medical.md", "ana", None, "note"),
        ("memory/users/ana/chats/bad chat/core/context.md", "ana", None, "note"),
        ("memory/users/ana/chats/c1/core/Bad Label.md", "ana", "c1", "note"),
        ("memory/users/ana/chats/c1/notes.md", "ana", "c1", "note"),
        ("memory/users/ana/deep/er/x.md", "ana", None, "note"),
        ("memory/users/ana/chats/c1/core/context.md", "ana", "c1", "block"),
    ],
)
def test_an_odd_name_inside_a_users_folder_keeps_the_file_that_users(path, user, chat, kind):
    scope = classify_path(path)
    assert (scope.user, scope.chat, scope.kind, scope.error) == (user, chat, kind, None)


@pytest.mark.parametrize(
    "path",
    [
        "memory/users/josé/2026-11-22.md",
        "memory/users/ana b/MEMORY.md",
        "memory/users/..evil/MEMORY.md",
        "memory/users/README.md",
        "sessions/transcripts/bad id.jsonl",
        "sessions/transcripts/sub/s1.jsonl",
        "sessions/notes.md",
    ],
)
def test_a_file_whose_owner_is_not_a_valid_id_is_nobodys(path):
    scope = classify_path(path)
    assert scope.user is None and scope.error


@settings(max_examples=500)
@given(case=user_folder_paths(OWNERS | st.just("ana")))
def test_classify_path_never_makes_a_users_file_global(case):
    user, path = case
    scope = classify_path(path)
    if _valid(user):
        assert scope.user == user and scope.error is None, (path, scope)
    else:
        assert scope.user is None and scope.error, (path, scope)


# ------------------------------------------------------------------------------ through the index


@pytest.fixture(scope="module")
def shared(tmp_path_factory, embedder):
    root = syncd.init(tmp_path_factory.mktemp("isolation") / "home").home
    write(
        root,
        f"memory/users/{OTHER}/2026-11-22.md",
        "# 2026-11-22\n\n## 10:00 chat:c1 session:s1\n- [preference] bob drinks coffee.\n",
    )
    engine = syncd.open(root, embedder=embedder)
    engine.sync()
    manager = MemoryManager(engine, settings=Settings(llm_model="gpt-4o-mini"))
    yield engine, manager
    engine.close()


_MARKERS = itertools.count()


def _recall(manager: MemoryManager, query: str, user: str) -> str:
    return asyncio.run(manager.retrieve_relevant_memories(query, user_id=user, limit=20))


@settings(max_examples=25)
@given(case=user_folder_paths(OWNERS), words=st.text(st.characters(exclude_categories=("Cs",)), max_size=30))
def test_nothing_under_a_users_folder_reaches_another_users_query(shared, case, words):
    engine, manager = shared
    user, rel = case
    marker = f"zqx{next(_MARKERS)}marker"
    text = " ".join(f"{marker} {words}".split())
    path = write(engine.home.root, rel, f"# {marker}\n\n- [preference] {text}\n\n{text}\n")
    try:
        engine.sync()
        own = [r for r in engine.index.all_rows().to_pylist() if r["path"] == rel]
        if _valid(user):
            assert all(r["user"] == user for r in own), own
        else:
            assert own == []
            assert not is_indexable(rel) or engine.index.files()[rel].error
        for query in (text, marker):
            hits = engine.search(query, user_id=OTHER, limit=50)
            assert not [h for h in hits if h.path.startswith(f"memory/users/{user}/")], (rel, hits)
            assert marker not in _recall(manager, query, OTHER)
    finally:
        path.unlink()
        engine.sync()


def test_the_reported_paths_never_reach_bob_and_bad_owners_are_shown_by_status(tmp_path, embedder, capsys):
    root = syncd.init(tmp_path / "home").home
    leaky = {
        "memory/users/ana/core/Medical.md": "Ana takes insulin for diabetes.\n",
        "memory/users/ana/chats/bad chat/core/context.md": "Ana is planning a surprise divorce.\n",
        "memory/users/josé/2026-11-22.md": "# 2026-11-22\n\n- [health] José has an insulin pump.\n",
        "memory/users/ana b/MEMORY.md": "Ana B keeps her insulin in the fridge.\n",
    }
    for rel, text in leaky.items():
        write(root, rel, text)
    write(root, "memory/users/bob/2026-11-22.md", "# 2026-11-22\n\n- [preference] Bob likes tea.\n")
    with syncd.open(root, embedder=embedder) as engine:
        engine.sync()
        manager = MemoryManager(engine, settings=Settings(llm_model="gpt-4o-mini"))
        for query in ("insulin diabetes", "divorce", "fridge"):
            assert not [h for h in engine.search(query, user_id="bob", limit=50) if h.path in leaky]
            assert not any(w in _recall(manager, query, "bob") for w in ("insulin", "divorce", "fridge"))
        # Still ana's own.
        assert {h.path for h in engine.search("insulin diabetes", user_id="ana", limit=50)} >= {
            "memory/users/ana/core/Medical.md"
        }
    assert main(["status", "--home", str(root), "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert {"memory/users/josé/2026-11-22.md", "memory/users/ana b/MEMORY.md"} <= status["errors"].keys()
    assert "invalid user id" in status["errors"]["memory/users/josé/2026-11-22.md"]
    assert not status["healthy"]
