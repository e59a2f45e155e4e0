"""Agent tools (seed API): ``memory_search`` and ``memory_block_update``.

Agent frameworks call tools synchronously, often from a worker thread, while the agent's event
loop (the one the MemoryManager is awaited on) runs in another thread. A tool therefore schedules
the manager's coroutine onto that loop and waits for it; with no such loop it runs the coroutine
on a throwaway loop of its own. Errors come back as the tool's answer (``Error: ...``) rather than
as an exception that would end the agent's step: those it can act on (a block over its limit, a
bad label) say what to do; anything else is logged and named, never raised as a foreign error.
"""

from __future__ import annotations

import abc
import asyncio
import concurrent.futures
import logging
from collections.abc import Callable, Coroutine
from typing import Any, ClassVar, TypeVar

from ..errors import SyncdError
from ..layout import validate_id
from .manager import EPHEMERAL_LOOP, MemoryManager

__all__ = ["MemorySearchTool", "MemoryBlockUpdateTool", "run_sync"]

log = logging.getLogger(__name__)

T = TypeVar("T")

# Labels that describe one conversation rather than the person: written at chat scope.
CHAT_SCOPED_LABELS = frozenset({"context"})


def _run_ephemeral(make: Callable[[], Coroutine[Any, Any, T]]) -> T:
    token = EPHEMERAL_LOOP.set(True)
    try:
        return asyncio.run(make())
    finally:
        EPHEMERAL_LOOP.reset(token)


def run_sync(manager: MemoryManager, make: Callable[[], Coroutine[Any, Any, T]], timeout: float | None = None) -> T:
    """Run ``make()`` to completion from synchronous code, on the manager's loop when it runs in
    another thread. ``make`` builds the coroutine only where it will run."""
    loop = manager.loop
    try:
        current = asyncio.get_running_loop()
    except RuntimeError:
        current = None
    if loop is not None and loop.is_running() and loop is not current:
        return asyncio.run_coroutine_threadsafe(make(), loop).result(timeout)
    if current is None:
        return _run_ephemeral(make)
    # Called synchronously from inside a running loop: blocking it on itself would deadlock, so
    # the coroutine runs on a loop of its own in a helper thread.
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="syncd-tool") as pool:
        return pool.submit(_run_ephemeral, make).result(timeout)


class _MemoryTool(abc.ABC):
    """Shared context handling: which chat and user the agent is serving."""

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    inputs: ClassVar[dict[str, dict[str, Any]]] = {}
    output_type: ClassVar[str] = "string"

    def __init__(self, memory_manager: MemoryManager, timeout_s: float | None = 120.0):
        self.memory_manager = memory_manager
        self.timeout_s = timeout_s
        self.chat_id: str | None = None
        self.user_id: str | None = None

    def set_context(self, chat_id: str | None, user_id: str | None) -> None:
        """Bind the tool to a conversation; ids are validated now, not at the first call."""
        self.chat_id = None if chat_id is None else validate_id("chat", chat_id)
        self.user_id = None if user_id is None else validate_id("user", user_id)

    def __call__(self, *args: Any, **kwargs: Any) -> str:
        return self.forward(*args, **kwargs)

    def _answer(self, make: Callable[[], Coroutine[Any, Any, str]]) -> str:
        """Run the tool's coroutine; whatever goes wrong becomes the answer, never an exception.
        This is the seam between syncd and the agent framework, so it is the one broad catch."""
        try:
            return run_sync(self.memory_manager, make, self.timeout_s)
        except (SyncdError, ValueError, TypeError) as exc:  # the tool's own or the agent's arguments
            return f"Error: {exc}"
        except TimeoutError:
            return f"Error: the memory did not answer within {self.timeout_s:.0f} s; try again."
        except Exception as exc:  # noqa: BLE001 - see the docstring
            log.exception("memory tool %s failed", self.name)
            return f"Error: {self.name} failed ({type(exc).__name__}: {exc}); the details are in the log."

    @abc.abstractmethod
    def forward(self, *args: Any, **kwargs: Any) -> str:
        """Run the tool and return its answer for the agent."""


class MemorySearchTool(_MemoryTool):
    name = "memory_search"
    description = (
        "Search your long-term memory of this user (remembered facts, their MEMORY.md and core "
        "blocks) and get one line per relevant memory with its id and source; an unrelated query "
        "finds nothing. The wiki is searched with the notebook skills, not here."
    )
    inputs: ClassVar[dict[str, dict[str, Any]]] = {
        "query": {"type": "string", "description": "What to look for, in plain words."},
        "limit": {"type": "integer", "description": "How many memories to return (default 5).", "nullable": True},
    }

    def forward(self, query: str, limit: int | None = 5) -> str:
        return self._answer(lambda: self._search(query, limit))

    async def _search(self, query: str, limit: int | None) -> str:
        hits = await self.memory_manager.search_memories(str(query), int(limit or 5), self.chat_id, self.user_id)
        if not hits:
            return "No memories found."
        lines = []
        for hit in hits:
            category = f"[{hit.category}] " if hit.category else ""
            text = " ".join(hit.content.split())
            lines.append(f"- {category}{text} (id {hit.id}, {hit.path}:{hit.line}, score {hit.score:.2f})")
        return "\n".join(lines)


class MemoryBlockUpdateTool(_MemoryTool):
    name = "memory_block_update"
    description = (
        "Update one of your core memory blocks, which you always see: persona (who you are), user "
        "(who the user is), facts (key facts) or context (this conversation). Operations: replace "
        "the whole text, append a line, or search_replace one passage (old_content) by content."
    )
    inputs: ClassVar[dict[str, dict[str, Any]]] = {
        "label": {"type": "string", "description": "Block label: persona, user, facts or context."},
        "content": {"type": "string", "description": "New text (replace), text to add (append), or the replacement (search_replace)."},
        "operation": {"type": "string", "description": "replace, append or search_replace (default replace).", "nullable": True},
        "old_content": {"type": "string", "description": "For search_replace: the exact passage to replace.", "nullable": True},
    }

    async def _update(self, label: str, content: str, operation: str, old_content: str | None) -> str:
        manager = self.memory_manager
        chat = self.chat_id if label in CHAT_SCOPED_LABELS else None
        if operation == "replace":
            new = content
        else:
            blocks = await asyncio.to_thread(lambda: manager.core_blocks(chat_id=chat, user_id=self.user_id))
            block = blocks.get(label)
            current = block.content if block is not None and block.scope != "default" else ""
            if operation == "append":
                new = f"{current}\n{content}" if current else content
            elif operation == "search_replace":
                if not old_content:
                    return "Error: search_replace needs old_content, the exact passage to replace."
                count = current.count(old_content)
                if count != 1:
                    where = "not found" if count == 0 else f"found {count} times; give a longer passage"
                    return f"Error: old_content {where} in block {label!r}."
                new = current.replace(old_content, content, 1)
            else:
                return f"Error: unknown operation {operation!r}; use replace, append or search_replace."
        # An agent edits its user's blocks (or its chat's); the global ones are a person's to edit.
        scope = "chat" if chat is not None else "user"
        block = await manager.update_memory_block(label, new, chat, self.user_id, scope=scope)
        return f"Updated block {label!r} ({block.scope} scope, {len(block.content)}/{block.limit} characters)."

    def forward(self, label: str, content: str, operation: str | None = "replace", old_content: str | None = None) -> str:
        return self._answer(lambda: self._update(label, content, operation or "replace", old_content))
