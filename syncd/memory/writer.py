"""The one way syncd.memory changes a file: read, transform, compare-and-swap through the engine.

Every change goes through :meth:`syncd.engine.Engine.write_file` with the sha we read, so a person
saving the same file in an editor between our read and our write is never clobbered: we re-read
and re-apply our change on top of theirs. Writes of one writer are serialised (the engine indexes
and commits inside ``write_file``, and git allows one commit at a time). With a daemon holding the
home's writer lock our engine is read-only: the daemon indexes and commits, and we wait until the
index reflects our write (so the caller can read it back) and the daemon has committed it (so the
next write cannot fold into the same commit).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from ..engine import Engine
from ..errors import ConflictError
from ..history.intents import Intent, peek_intent
from ..home import blob_sha, file_blob_sha

__all__ = ["MarkdownWriter", "Change"]

log = logging.getLogger(__name__)

# Given the file's current bytes (None: absent), the new bytes, or None to leave it alone.
Change = Callable[[bytes | None], bytes | None]

_CAS_ATTEMPTS = 5


class MarkdownWriter:
    """Serialised compare-and-swap writes through one engine, read-your-writes on return."""

    def __init__(self, engine: Engine, index_timeout_s: float = 30.0):
        self.engine = engine
        self.index_timeout_s = index_timeout_s
        self._lock = threading.Lock()

    def read(self, rel: str) -> bytes | None:
        try:
            return (self.engine.home.root / rel).read_bytes()
        except FileNotFoundError:
            return None

    def update(self, rel: str, change: Change, intent: Intent) -> str | None:
        """Apply ``change`` to ``rel``; return the new blob sha, or None if nothing changed.

        Raises ConflictError only if the file keeps changing under us ``_CAS_ATTEMPTS`` times.
        """
        with self._lock:
            for attempt in range(_CAS_ATTEMPTS):
                current = self.read(rel)
                new = change(current)
                if new is None or new == current:
                    return None
                expected = None if current is None else blob_sha(current)
                try:
                    sha = self.engine.write_file(rel, new, expected_sha=expected, intent=intent)
                except ConflictError as exc:
                    log.info("%s changed while we wrote it (attempt %d); re-reading", rel, attempt + 1)
                    last = exc
                    continue
                break
            else:
                raise last
            if self.engine.read_only:
                # Still holding the lock: our next write to this file must not land before the
                # daemon has committed this one, or the two would merge into one commit and this
                # write's intent (its author, its turn) would be lost.
                self._wait_for_daemon(rel, sha)
        return sha

    def _wait_for_daemon(self, rel: str, sha: str) -> None:
        # Late is worth a warning, not a failure: the file is written and its intent recorded, so
        # whoever holds the lock will index and commit it; only read-your-writes suffers.
        home = self.engine.home
        if not self.engine.wait_indexed(rel, sha, timeout=self.index_timeout_s):
            log.warning("%s was written but not indexed within %.0f s; is the daemon running?", rel, self.index_timeout_s)
            return
        deadline = time.monotonic() + self.index_timeout_s
        while peek_intent(home, rel, sha) is not None:  # the committer removes it when it commits
            if file_blob_sha(home.root / rel) != sha:
                return  # changed again by someone else: the daemon commits their version
            if time.monotonic() >= deadline:
                log.warning("%s was indexed but not committed within %.0f s", rel, self.index_timeout_s)
                return
            time.sleep(0.02)
