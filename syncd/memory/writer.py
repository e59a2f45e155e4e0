"""The one way syncd.memory changes a file: read, transform, compare-and-swap through the backend.

Every change goes through :meth:`MemoryBackend.write_file` with the sha we read, so a person
saving the same file in an editor between our read and our write is never clobbered: we re-read
and re-apply our change on top of theirs. Serialising writes, indexing, committing and waiting for
a daemon are the backend's business (each write is a change group of its own, or joins the one
the caller opened).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from ..errors import ConflictError
from ..history.intents import Intent
from ..home import blob_sha, read_memory_file
from .backend import MemoryBackend

__all__ = ["MarkdownWriter", "Change"]

log = logging.getLogger(__name__)

# Given the file's current bytes (None: absent), the new bytes, or None to leave it alone.
Change = Callable[[bytes | None], bytes | None]

_CAS_ATTEMPTS = 5


class MarkdownWriter:
    """Compare-and-swap writes through one backend, read-your-writes on return."""

    def __init__(self, engine: MemoryBackend):
        self.engine = engine

    def read(self, rel: str) -> bytes | None:
        """The file's bytes, None when absent; ParseError, before anything is written, when a
        symbolic link or a folder sits there (never followed, never replaced)."""
        return read_memory_file(self.engine.home.root, rel)

    def update(self, rel: str, change: Change, intent: Intent) -> str | None:
        """Apply ``change`` to ``rel``; return the new blob sha, or None if nothing changed.

        Raises ConflictError only if the file keeps changing under us ``_CAS_ATTEMPTS`` times.
        """
        last: ConflictError | None = None
        for attempt in range(_CAS_ATTEMPTS):
            current = self.read(rel)
            new = change(current)
            if new is None or new == current:
                return None
            expected = None if current is None else blob_sha(current)
            try:
                return self.engine.write_file(rel, new, expected_sha=expected, intent=intent)
            except ConflictError as exc:
                log.info("%s changed while we wrote it (attempt %d); re-reading", rel, attempt + 1)
                last = exc
        assert last is not None  # _CAS_ATTEMPTS >= 1: the loop ran and every attempt conflicted
        raise last
