"""Agent tools: ``memory_search`` and ``memory_block_update`` (seed API), and ``memory_add``.

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
import inspect
import logging
from collections.abc import Callable, Coroutine
from typing import Any, ClassVar, TypeVar

from pydantic import ValidationError

from ..api.schemas import AddInput, BlockUpdateInput, Input, SearchInput, describe_invalid, tool_inputs
from ..errors import InvalidInputError, SyncdError
from ..home import check_text, validate_id
from .blocks import CoreBlock
from .manager import EPHEMERAL_LOOP, MemoryManager

__all__ = ["MemoryAddTool", "MemoryBlockUpdateTool", "MemorySearchTool", "format_hits", "run_sync", "update_block"]

log = logging.getLogger(__name__)

T = TypeVar("T")
InputT = TypeVar("InputT", bound=Input)

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
        # Arguments the tool does not take (an agent passing user_id, or none at all) are the
        # agent's mistake to mend, said as the answer: a TypeError here ended the agent's step.
        try:
            inspect.signature(self.forward).bind(*args, **kwargs)
        except TypeError as exc:
            return f"Error: {exc}; {self.name} takes {', '.join(self.inputs)}."
        return self.forward(*args, **kwargs)

    def _validated(self, model: type[InputT], **arguments: Any) -> InputT:
        """The agent's arguments checked by the tool's shared input model (the same the REST API
        and the MCP tools use), with this tool's conversation filled in."""
        try:
            return model.model_validate({**arguments, "user_id": self.user_id, "chat_id": self.chat_id})
        except ValidationError as exc:
            raise ValueError(describe_invalid(exc)) from None

    def _answer(self, make: Callable[[], Coroutine[Any, Any, str]]) -> str:
        """Run the tool's coroutine; whatever goes wrong becomes the answer, never an exception.
        This is the seam between syncd and the agent framework, so it is the one broad catch."""
        try:
            return run_sync(self.memory_manager, make, self.timeout_s)
        except (SyncdError, ValueError, TypeError) as exc:  # the tool's own or the agent's arguments
            return f"Error: {exc}"
        except TimeoutError:
            return f"Error: the memory did not answer within {self.timeout_s:.0f} s; try again."
        except Exception as exc:
            log.exception("memory tool %s failed", self.name)
            return f"Error: {self.name} failed ({type(exc).__name__}: {exc}); the details are in the log."

    @abc.abstractmethod
    def forward(self, *args: Any, **kwargs: Any) -> str:
        """Run the tool and return its answer for the agent."""


async def update_block(manager: MemoryManager, request: BlockUpdateInput, user_id: str) -> CoreBlock:
    """Replace, append to or search-replace one core block of ``user_id`` (their chat's block
    when ``request.chat_id`` is given and the label is chat-scoped or the chat is named for it).
    Append and search_replace edit the text that is there when the write lands (not the text
    read earlier), so concurrent edits all apply. Raises InvalidInputError (nothing written)
    when search_replace finds its passage not exactly once at that moment, or the content holds
    control characters. Shared by the agent tool, the REST API and the MCP tools."""
    label, chat = request.label, request.chat_id
    if label not in CHAT_SCOPED_LABELS:
        chat = None
    # An agent edits its user's blocks (or its chat's); the global ones are a person's to edit.
    scope = "chat" if chat is not None else "user"
    content = check_text(f"block {label!r}", request.content, multiline=True)
    if request.operation == "replace":
        return await manager.update_memory_block(label, content, chat, user_id, scope=scope)
    if request.operation == "append":

        def edit(current: str) -> str:
            return f"{current}\n{content}" if current else content

    else:
        old = request.old_content
        if not old:
            raise InvalidInputError("search_replace needs old_content, the exact passage to replace.")

        def edit(current: str) -> str:
            count = current.count(old)
            if count != 1:
                where = "not found" if count == 0 else f"found {count} times; give a longer passage"
                raise InvalidInputError(f"old_content {where} in block {label!r}.")
            return current.replace(old, content, 1)

    return await manager.edit_memory_block(label, edit, chat, user_id, scope=scope)


def format_hits(hits) -> str:
    """Search hits as the lines an agent reads: one per memory, with its id and source."""
    if not hits:
        return "No memories found."
    lines = []
    for hit in hits:
        category = f"[{hit.category}] " if hit.category else ""
        text = " ".join(hit.content.split())
        lines.append(f"- {category}{text} (id {hit.id}, {hit.path}:{hit.line}, score {hit.score:.2f})")
    return "\n".join(lines)


class MemorySearchTool(_MemoryTool):
    name = "memory_search"
    description = (
        "Search your long-term memory of this user (remembered facts, their MEMORY.md and core "
        "blocks) and get one line per relevant memory with its id and source; an unrelated query "
        "finds nothing. The wiki is searched with the notebook skills, not here."
    )
    inputs: ClassVar[dict[str, dict[str, Any]]] = tool_inputs(SearchInput, skip=("user_id", "chat_id", "include_wiki"))

    def forward(self, query: str, limit: int | None = 5) -> str:
        return self._answer(lambda: self._search(query, limit))

    async def _search(self, query: str, limit: int | None) -> str:
        request = self._validated(SearchInput, query=query, limit=5 if limit is None else limit)
        hits = await self.memory_manager.search_memories(request.query, request.limit, request.chat_id, request.user_id)
        return format_hits(hits)


class MemoryAddTool(_MemoryTool):
    name = "memory_add"
    description = (
        "Remember one fact about this user, as one short sentence (facts from the conversation are "
        "also extracted for you after each turn). A correction of something remembered (another "
        "number, date, name, a negation) is remembered as a new fact; a fact that only restates "
        "one already remembered is not written again, and the answer names that fact and its id."
    )
    inputs: ClassVar[dict[str, dict[str, Any]]] = tool_inputs(
        AddInput, skip=("user_id", "chat_id", "session_id", "dedup")
    )

    async def _add(self, **arguments: Any) -> str:
        request = self._validated(AddInput, **arguments)
        outcome = await self.memory_manager.remember(
            request.content, request.user_id, request.chat_id,
            category=request.category, importance=request.importance, tags=request.tags,
        )  # fmt: skip
        if outcome.fact is not None:
            return f"Remembered (id {outcome.fact.id})."
        known = outcome.duplicate_of
        if known is None:
            return "Already remembered; nothing was written."
        return (
            f"Already remembered as {known.content!r} (id {known.id}, {known.path}:{known.line}); nothing was "
            "written. If that fact is wrong or out of date, have it changed by its id instead."
        )

    def forward(
        self, content: str, category: str | None = "context", importance: float | None = 0.5, tags: list | None = None
    ) -> str:
        arguments = {
            "content": content,
            "category": category or "context",
            "importance": 0.5 if importance is None else importance,
            "tags": tags or [],
        }
        return self._answer(lambda: self._add(**arguments))


class MemoryBlockUpdateTool(_MemoryTool):
    name = "memory_block_update"
    description = (
        "Update one of your core memory blocks, which you always see: persona (who you are), user "
        "(who the user is), facts (key facts) or context (this conversation). Operations: replace "
        "the whole text, append a line, or search_replace one passage (old_content) by content."
    )
    inputs: ClassVar[dict[str, dict[str, Any]]] = tool_inputs(BlockUpdateInput)

    async def _update(self, **arguments: Any) -> str:
        request = self._validated(BlockUpdateInput, **arguments)
        user = self.memory_manager._user(request.user_id)
        block = await update_block(self.memory_manager, request, user)
        return f"Updated block {request.label!r} ({block.scope} scope, {len(block.content)}/{block.limit} characters)."

    def forward(
        self, label: str, content: str, operation: str | None = "replace", old_content: str | None = None
    ) -> str:
        arguments = {
            "label": label,
            "content": content,
            "operation": operation or "replace",
            "old_content": old_content,
        }
        return self._answer(lambda: self._update(**arguments))
