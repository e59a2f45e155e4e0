"""Agent tools: called synchronously from worker threads while the manager's loop runs elsewhere."""

from __future__ import annotations

import asyncio
import threading

import pytest

from syncd.config import Settings
from syncd.errors import InvalidIdError
from syncd.memory import MemoryAddTool, MemoryBlockUpdateTool, MemoryManager, MemorySearchTool


class RecordingManager(MemoryManager):
    """Notes which loop and thread each search ran on."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.ran_on: list[tuple[asyncio.AbstractEventLoop, threading.Thread]] = []

    async def search_memories(self, *args, **kwargs):
        self.ran_on.append((asyncio.get_running_loop(), threading.current_thread()))
        return await super().search_memories(*args, **kwargs)


@pytest.fixture
def manager(engine):
    return RecordingManager(engine, settings=Settings(block_char_limit=120))


def test_tools_from_a_worker_thread_run_on_the_managers_loop(manager, home):
    search, update = MemorySearchTool(manager), MemoryBlockUpdateTool(manager)
    search.set_context("c1", "alice")
    update.set_context("c1", "alice")

    def agent_step() -> list[str]:
        return [
            update.forward("user", "Name: Alice."),
            update.forward("user", "Lives in Oslo.", operation="append"),
            update.forward("user", "Bergen", operation="search_replace", old_content="Oslo"),
            update.forward("context", "Planning a trip."),
            update.forward("user", "z" * 500, operation="append"),
            update.forward("user", "x", operation="search_replace", old_content="Paris"),
            update.forward("user", "x", operation="shout"),
            search.forward("trip planning"),
        ]

    async def main():
        await manager.get_core_memory("c1", "alice")  # the agent's loop, as a real agent would
        answers = await asyncio.to_thread(agent_step)
        return answers, asyncio.get_running_loop()

    answers, main_loop = asyncio.run(main())
    assert answers[0].startswith("Updated block 'user' (user scope")
    assert answers[3].startswith("Updated block 'context' (chat scope")
    assert "over its limit" in answers[4] and answers[4].startswith("Error:")
    assert "not found" in answers[5] and answers[6].startswith("Error: operation:")
    assert "Planning a trip." in answers[7]
    assert manager.ran_on == [(main_loop, threading.main_thread())]
    assert (home / "memory/users/alice/core/user.md").read_text() == "Name: Alice.\nLives in Bergen.\n"
    assert (home / "memory/users/alice/chats/c1/core/context.md").read_text() == "Planning a trip.\n"


def test_tools_without_a_running_loop_and_from_inside_one(manager):
    search = MemorySearchTool(manager)
    search.set_context(None, "alice")
    assert not search.forward("anything").startswith("Error")  # plain thread, no loop anywhere

    async def inside():
        await manager.get_core_memory(None, "alice")
        return search.forward("anything")  # a sync call on the loop's own thread must not deadlock

    assert not asyncio.run(inside()).startswith("Error")
    with pytest.raises(InvalidIdError):
        search.set_context("../c", "alice")


def test_arguments_a_tool_does_not_take_are_its_answer_not_an_exception(manager, home):
    """A clumsy agent's call (another user's id, no content, too many arguments) raised TypeError
    out of the tool, ending the agent's step, where every other mistake is the tool's answer."""
    add = MemoryAddTool(manager)
    add.set_context(None, "alice")
    answer = add(content="Likes kites.", user_id="bob")
    assert answer == (
        "Error: got an unexpected keyword argument 'user_id'; memory_add takes content, category, importance, tags."
    )
    assert add().startswith("Error: missing a required argument: 'content'")
    assert add("a", "context", 0.5, [], "extra").startswith("Error: too many positional arguments")
    block = MemoryBlockUpdateTool(manager)
    block.set_context(None, "alice")
    assert block(label="user").startswith("Error: missing a required argument: 'content'")
    assert not (home / "memory/users/bob").exists() and not (home / "memory/users/alice").exists()
    assert add(content="Likes kites.").startswith("Remembered")
