"""Text with control characters (issue 23): a NUL in a fact once answered 500 after the fact was
saved (git refuses it in the commit message). Now every write path (the Python API, REST, MCP,
the agent tool) refuses a control character other than tab (and newline where the text may span
lines) with InvalidInputError before anything is written; anything else is stored and reads back."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
from pathlib import Path

import anyio
import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

import syncd
from syncd.api.schemas import BlockUpdateInput
from syncd.config import Settings
from syncd.errors import ExtractionError, InvalidInputError
from syncd.memory import MemoryBlockUpdateTool, MemoryManager
from syncd.memory.tools import update_block

from .daemon_helpers import git, isolate_git_identity
from .server_helpers import mcp_over_http, served_in_thread

# A lone surrogate (JSON's "\\ud800") is no character either: once a UnicodeEncodeError as the file
# was written, a foreign error from deep inside the write.
CONTROL = ["a\x00b", "a\x1bb", "\x7f"]
BAD = [*CONTROL, "a\ud800b", "\udfff"]
REFUSED = "control character|lone surrogate"

run = asyncio.run


@pytest.fixture(autouse=True)
def _git_identity(tmp_path, monkeypatch):
    isolate_git_identity(tmp_path, monkeypatch)


def _state(home: Path) -> tuple[str, dict[str, bytes]]:
    """HEAD and every byte of the memory tree: what "nothing was written" compares."""
    paths = sorted(p for p in (home / "memory").rglob("*") if p.is_file())
    files = {p.relative_to(home).as_posix(): p.read_bytes() for p in paths}
    return git(home, "rev-parse", "HEAD").strip(), files


@pytest.fixture
def manager(engine):
    return MemoryManager(engine)


@pytest.fixture
def seeded(manager, home):
    """Ana with a fact, a block and a MEMORY.md, all committed."""
    fact = run(manager.add_memory("Likes green tea.", "ana", category="preference"))
    run(manager.update_memory_block("user", "Name: Ana.", user_id="ana"))
    manager.store(user_id="ana").write_memory_file("# Memory of ana\n\nLikes tea.\n")
    return fact


def _refused(make) -> None:
    with pytest.raises(InvalidInputError, match=REFUSED):
        make()


@pytest.mark.parametrize("bad", BAD)
def test_the_python_api_refuses_control_characters_before_writing(manager, home, seeded, bad):
    store = manager.store(user_id="ana")
    before = _state(home)
    _refused(lambda: run(manager.add_memory(bad, "ana")))
    _refused(lambda: run(manager.add_memory(f"Likes {bad} tea.", "ana", dedup=False)))
    _refused(lambda: run(manager.update_memory(seeded.id, "ana", content=f"Likes {bad}.")))
    _refused(lambda: run(manager.update_memory_block("user", f"Name: {bad}", user_id="ana")))
    _refused(lambda: run(manager.edit_memory_block("user", lambda text: text + bad, user_id="ana")))
    # Unvalidated (model_construct): the input model refuses a lone surrogate itself, and
    # update_block must refuse what a caller of its own hands it all the same.
    for request in (
        BlockUpdateInput.model_construct(label="user", content=bad, user_id="ana"),
        BlockUpdateInput.model_construct(label="user", content=bad, operation="append", user_id="ana"),
        BlockUpdateInput.model_construct(
            label="user", content=bad, operation="search_replace", old_content="Ana", user_id="ana"
        ),
    ):
        _refused(lambda request=request: run(update_block(manager, request, "ana")))
    _refused(lambda: store.append_daily_log(None, [bad]))
    _refused(lambda: store.replace_fact(seeded.id, dataclasses.replace(seeded, content=f"x{bad}y")))
    _refused(lambda: store.write_memory_file(f"# Memory\n{bad}\n"))
    _refused(lambda: store.write_memory_file(lambda text: text + bad))
    tool = MemoryBlockUpdateTool(manager)
    tool.set_context(None, "ana")
    assert re.search(REFUSED, tool.forward("user", bad, operation="append"))
    assert _state(home) == before


def test_a_persons_own_control_characters_do_not_block_an_edit_elsewhere(manager, home):
    """A control character a person typed into a file is theirs: edits that add none are made,
    and the character is kept as it was."""
    block = home / "memory/users/ana/core/user.md"
    block.parent.mkdir(parents=True)
    block.write_text("Name: Ana \x1b[1m.\n")
    request = BlockUpdateInput(label="user", content="Lives in Porto.", operation="append", user_id="ana")
    assert run(update_block(manager, request, "ana")).content == "Name: Ana \x1b[1m.\nLives in Porto."
    store = manager.store(user_id="ana")
    (home / store.memory_file_rel).write_text("# Ana\x07\n")
    store.write_memory_file(lambda text: text + "Likes tea.\n")
    assert (home / store.memory_file_rel).read_text() == "# Ana\x07\nLikes tea.\n"


def test_an_llm_reply_with_a_control_character_is_an_extraction_error(engine, home):
    reply = {"facts": [{"content": "Uses the \x00 key.", "category": "context", "importance": 0.5}]}
    options = {"extract": {"mock_response": json.dumps(reply)}}
    manager = MemoryManager(engine, Settings(llm_model="gpt-4o-mini"), job_llm_options=options)
    before = _state(home)
    with pytest.raises(ExtractionError, match="control character"):
        run(manager.process_conversation_turn_for_memories("I use the weird key.", user_id="ana"))
    assert _state(home) == before


# Text with control characters mixed among letters, spaces, tabs, newlines and any other text.
# A list joined, not st.text: st.text drops the lone surrogates from such a mix of alphabets.
_texts = st.lists(
    st.one_of(
        st.characters(categories=["Cc"]),
        st.characters(categories=["Cs"]),
        st.sampled_from("ab .\t\n"),
        st.characters(exclude_categories=["Cs"]),
    ),
    min_size=1,
    max_size=16,
).map("".join)


@hsettings(max_examples=40)
@given(text=_texts)
def test_any_text_is_refused_before_writing_or_stored_exactly(manager, home, text):
    store = manager.store(user_id="ana")
    before = _state(home)
    try:
        fact = run(manager.add_memory(text, "ana", dedup=False))
    except InvalidInputError:
        assert _state(home) == before
    else:
        # A fact is one line: whitespace (tabs and newlines too) folds into single spaces.
        assert fact.content == " ".join(text.split())
        assert store.find_fact(fact.id).fact.content == fact.content
        assert fact.content in git(home, "show", f"HEAD:{store.daily_log_rel(fact.timestamp[:10])}")
    before = _state(home)
    content = f"Note: {text}"  # a block's text never starts a frontmatter this way
    try:
        block = run(manager.update_memory_block("notes", content, user_id="ana"))
    except InvalidInputError:
        assert _state(home) == before
    else:
        assert block.content == content.strip() == manager.core_blocks(user_id="ana")["notes"].content


@pytest.fixture(scope="module")
def server(tmp_path_factory, embedder):
    mp = pytest.MonkeyPatch()
    isolate_git_identity(tmp_path_factory.mktemp("git"), mp)
    home = syncd.init(tmp_path_factory.mktemp("ctl") / "home").home
    try:
        with served_in_thread(home, embedder) as served:
            yield served
    finally:
        mp.undo()


def _send(client, method: str, url: str, body: dict):
    """A JSON request as any client may send it: ``\\ud800`` escapes are valid JSON (httpx's own
    encoder, UTF-8 throughout, cannot send a lone surrogate at all)."""
    return client.request(method, url, content=json.dumps(body), headers={"content-type": "application/json"})


def test_rest_and_mcp_refuse_control_characters_with_a_4xx_and_write_nothing(server):
    with server.client(server.admin) as admin:
        added = admin.post("/memory/archival", json={"content": "Likes green tea.", "user_id": "ana"})
        assert added.status_code == 200, added.text
        before = _state(server.home)
        append = {"label": "user", "operation": "append", "user_id": "ana"}
        for bad in BAD:
            for response in (
                _send(admin, "POST", "/memory/archival", {"content": bad, "user_id": "ana"}),
                _send(
                    admin,
                    "POST",
                    "/memory/archival",
                    {"content": f"Likes {bad} tea.", "user_id": "ana", "dedup": False},
                ),
                _send(admin, "PUT", "/memory/core", {"label": "user", "content": bad, "user_id": "ana"}),
                _send(admin, "PUT", "/memory/core", {**append, "content": bad}),
            ):
                assert response.status_code == 422, response.text
                assert re.search(REFUSED, response.json()["error"]["message"])
        assert _state(server.home) == before

    async def over_mcp() -> list[tuple[bool, str]]:
        answers = []
        async with mcp_over_http(server, server.admin) as mcp:
            for bad in CONTROL:  # the MCP client, UTF-8 throughout, cannot send a lone surrogate
                for name, arguments in (
                    ("memory_add", {"content": bad}),
                    ("core_memory_append", {"label": "user", "content": bad}),
                    ("core_memory_replace", {"label": "user", "content": bad}),
                ):
                    result = await mcp.call_tool(name, {**arguments, "user_id": "ana"})
                    answers.append((result.is_error, result.content[0].text))
        return answers

    for is_error, text in anyio.run(over_mcp):
        assert is_error and re.search(REFUSED, text), text
    assert _state(server.home) == before
