"""The memory layer agents call: the seed API over markdown, LLM fact extraction, agent tools.

``MemoryManager(home)`` opens a home on its own, beside a daemon or another process or alone;
``MemoryManager(syncd.open(home))`` shares an engine. The layer talks to the engine only through
:class:`~syncd.memory.backend.MemoryBackend`; the engine never imports it.
"""

from __future__ import annotations

from .blocks import CORE_LABELS, DEFAULT_BLOCKS, CoreBlock
from .extraction import NO_LLM_MESSAGE, ConversationTurn, strip_injected, wrap_injected
from .manager import MemoryManager
from .prompts import PROMPT_VERSION
from .seed_store import LanceDBMemoryStore, PostgresMemoryStore
from .store import DailyLogFile, MarkdownMemoryStore, StoredFact
from .tools import MemoryAddTool, MemoryBlockUpdateTool, MemorySearchTool

__all__ = [
    "MemoryManager",
    "MarkdownMemoryStore",
    "PostgresMemoryStore",
    "LanceDBMemoryStore",
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
]
