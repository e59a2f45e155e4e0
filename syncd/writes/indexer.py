"""What the write path needs of the index: the port the engine fills (Engine's "what the write
path needs of the index" section), so that syncd.writes never imports the index or the engine."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

__all__ = ["Indexer"]


class Indexer(Protocol):
    """What the write path needs of the index (the engine provides it)."""

    def index_paths(self, wanted: Callable[[], list[str]]) -> list[str]:
        """Under the index's own lock, bring it in step with the files ``wanted()`` names (asked
        once that lock is held) as they are on disk, searchable at once; returns those paths."""

    def index_applied(self) -> int:
        """A receipt: how many applies the index has taken so far."""

    def wait_index_written(self, applied: int) -> None:
        """Wait until the index's tables hold every apply up to ``applied`` (raises its failure)."""

    def indexed_sha(self, rel: str) -> str | None:
        """The sha the index reflects for ``rel`` (None: not in it)."""

    def check_borrowed_index(self) -> None:
        """Raise (IndexError_) if this process may not write the index it borrows the home for:
        checked before a borrowed change writes anything, so a refusal leaves every file as is."""
