"""What the memory layer needs from the engine, and nothing more.

syncd.memory talks to this protocol only, never to the index, the row cache or the committer, so
the engine can change its insides (and tests can see the seam) without touching memory. The
engine never imports memory; ``MemoryManager(home)`` opens an engine through ``syncd.engine.facade``, a
one-way dependency.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    import numpy as np

    from ..config import Settings
    from ..history.intents import Intent
    from ..home import Home
    from ..index.search import Hit

__all__ = ["MemoryBackend", "ChangeScope"]


class ChangeScope(AbstractContextManager, AbstractAsyncContextManager, Protocol):
    """``with`` / ``async with``: the writes inside become one apply and one commit."""

    def adopt(self, intent: Intent | None) -> Intent | None:
        """Give a group opened without an intent the one its writes record (before the first)."""


@runtime_checkable
class MemoryBackend(Protocol):
    """One memory home as the memory layer sees it (``syncd.engine.facade.Engine`` implements it)."""

    home: Home
    settings: Settings
    read_only: bool

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit vectors, one row per text."""

    def search(
        self,
        query: str,
        *,
        user_id: str | None = None,
        chat_id: str | None = None,
        limit: int = 10,
        kind: str | None = None,
        now: dt.datetime | None = None,
        text: bool = True,
        min_cosine: float | None = None,
        memory_only: bool = False,
    ) -> list[Hit]:
        """Scoped hybrid search (``text=False``: by meaning only; ``min_cosine``: the relevance
        floor for rows sharing no word with the query; ``memory_only``: no wiki pages)."""

    def search_by_vector(
        self,
        vector: Sequence[float] | np.ndarray,
        text: str = "",
        *,
        user_id: str,
        chat_id: str | None = None,
        limit: int = 10,
        kind: str | None = "fact",
        weights: Mapping[str, float] | None = None,
        now: dt.datetime | None = None,
    ) -> list[Hit]:
        """Scoped hybrid search of the memory with the caller's own query vector (of this
        home's model) and optional words, ranked with ``weights`` (the seed's store API)."""

    def counts(self, *, user_id: str | None = None) -> dict[str, int]:
        """Rows in the index: files, facts and chunks; with ``user_id``, the facts and chunks
        that user's searches reach."""

    def nearest_facts(self, vector: np.ndarray, *, user_id: str, limit: int) -> list[tuple[float, dict[str, Any]]]:
        """``(cosine, row)`` of the user's facts nearest to ``vector``, best first (a row with the
        fact's ``id``, ``text``, ``path`` and ``line``)."""

    def find_fact(self, fact_id: str) -> list[dict[str, Any]]:
        """Rows (with ``path`` and ``user``) of the fact with this id."""

    def write_file(self, rel: str, data: bytes, expected_sha: Any = ..., intent: Intent | None = None) -> str:
        """Atomic, compare-and-swap write; indexed and committed with its group. Returns the sha."""

    def changes(self, intent: Intent | None = None) -> ChangeScope:
        """Group writes under one intent: one apply, one commit."""

    def in_change_group(self) -> bool:
        """Whether the caller runs inside a change group (see :meth:`changes`)."""

    def close(self) -> None:
        """Let go of what the backend holds."""
