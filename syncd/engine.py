"""The Engine: one home, its index, its embedder. ``syncd.open(home)`` returns one.

A writable engine holds the home's single-writer lock for its lifetime; a read-only one never
writes and sees a writer's changes as they land.
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from .config import Settings
from .errors import HomeError, IndexError_, QueryError
from .history.git import uncommitted_paths
from .history.intents import Intent, record_intent
from .home import Home, HomeLock, atomic_write, blob_sha, find_home
from .index.embed import Embedder, load_embedder
from .index.embed_cache import CachedEmbedder, EmbeddingCache
from .index.search import Hit, Weights, hybrid_search
from .index.store import Index
from .sync.apply import Progress, SyncReport, sync
from .sync.plan import plan_sync
from .sync.scan import scan_disk

__all__ = ["Engine", "open_engine", "Status"]

log = logging.getLogger(__name__)

_ANY = object()


@dataclass
class Status:
    """What the index reflects, exactly: counts, and every file that is stale or in error."""

    home: str
    model_id: str
    files: int
    facts: int
    chunks: int
    stale: dict[str, list[str]] = field(default_factory=dict)  # new/changed/moved/deleted paths
    errors: dict[str, str] = field(default_factory=dict)
    compatible: bool = True
    aligned_commit: str | None = None
    # Indexed (or deleted) files whose change git has not committed yet: the daemon's next commit.
    uncommitted: list[str] = field(default_factory=list)

    @property
    def fresh(self) -> bool:
        return self.compatible and not any(self.stale.values())

    def to_dict(self) -> dict:
        out = dict(self.__dict__)
        out["fresh"] = self.fresh
        return out


class Engine:
    """Sync, search and status over one memory home."""

    def __init__(self, home: Home, settings: Settings, read_only: bool = False, embedder: Embedder | None = None):
        self.home = home
        self.settings = settings
        self.read_only = read_only
        if not (home.root / "memory").is_dir() and not home.state_dir.is_dir():
            raise HomeError(f"{home.root} is not a syncd home; run `syncd init {home.root}` first")
        self._lock: HomeLock | None = None
        if not read_only:
            self._lock = home.lock().acquire("syncd engine")
        try:
            inner = embedder or load_embedder(settings, cache_dir=home.state_dir / "models")
            self._cache = EmbeddingCache(home.state_dir / "embed_cache.sqlite")
            self.embedder = CachedEmbedder(inner, self._cache)
            self.index = Index(home.state_dir / "index", inner.dim, inner.model_id, read_only=read_only)
        except BaseException:
            self.close()
            raise

    # -- lifecycle -------------------------------------------------------------------------------

    def close(self) -> None:
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @functools.cached_property
    def memory(self):
        """The seed memory API over this engine (a ``syncd.memory.MemoryManager``), made on first use."""
        from .memory import MemoryManager

        return MemoryManager(self)

    def _require_writer(self) -> None:
        if self.read_only:
            raise IndexError_("this engine was opened read-only; open it with read_only=False to write")

    # -- operations ------------------------------------------------------------------------------

    def _check_home(self) -> None:
        """An unreadable home must never read as "every file was deleted"."""
        root = self.home.root
        if not root.is_dir() or not os.access(root, os.R_OK | os.X_OK):
            raise HomeError(f"cannot read the home {root}; refusing to touch the index")

    def sync(self, paths: list[str] | None = None, progress: Progress | None = None) -> SyncReport:
        """Index what changed on disk (everything, or only ``paths``)."""
        self._require_writer()
        self._check_home()
        if not self.index.compatible():
            log.warning("the index was built with another model; rebuilding it")
            return self.reindex(progress=progress)
        report = sync(self.home, self.index, self.embedder, self.settings.max_file_bytes, paths, progress)
        self.index.write_meta()
        return report

    def reindex(self, progress: Progress | None = None) -> SyncReport:
        """Drop the index and rebuild it from the markdown (embeddings come from the cache)."""
        self._require_writer()
        self._check_home()
        self.index.drop_all()
        report = sync(self.home, self.index, self.embedder, self.settings.max_file_bytes, None, progress)
        self.index.optimize()
        self.index.write_meta()
        return report

    # -- writes through markdown -------------------------------------------------------------------

    def write_file(self, rel: str, data: bytes, expected_sha: str | None | object = _ANY, intent: Intent | None = None) -> str:
        """Write one file of the home atomically (compare-and-swap when ``expected_sha`` is given:
        a blob sha, or None for "must not exist"), leave its provenance for the committer, and,
        when this engine is the writer, index and commit it before returning. Returns the new sha.

        With a daemon holding the lock, open the engine read-only, write, then ``wait_indexed``.
        """
        path = self.home.root / rel
        rel = self.home.rel(path)
        sha = blob_sha(data)
        if intent is not None:
            record_intent(self.home, rel, sha, intent)
        if expected_sha is _ANY:
            atomic_write(path, data)
        else:
            atomic_write(path, data, expected_sha=expected_sha)
        if not self.read_only:
            self.sync([rel])
            self.commit([rel])
        return sha

    def commit(self, paths: list[str] | None = None) -> list[str]:
        """Commit indexed changes of ``paths`` (default: everything git sees as changed), one
        commit per intent, so one agent turn is one revertible commit. Returns the new shas."""
        from .history.committer import commit_changes

        self._require_writer()
        return commit_changes(self.home, self.settings, paths)

    def wait_indexed(self, rel: str, sha: str | None, timeout: float = 10.0) -> bool:
        """Block until the index reflects ``rel`` at ``sha`` (None: until it is gone from it)."""
        deadline = time.monotonic() + timeout
        while True:
            record = self.index.files().get(rel)
            if (record.sha if record else None) == sha:
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.01)

    def search(
        self,
        query: str,
        user_id: str | None = None,
        chat_id: str | None = None,
        limit: int = 10,
        kind: str | None = None,
        now: dt.datetime | None = None,
    ) -> list[Hit]:
        """Best ``limit`` hits for ``query`` within the user's (and chat's) scope, ranked with the
        settings' weights. Raises QueryError for an empty query: "nothing" matches nothing, and
        an agent that sent one has a bug worth seeing."""
        if not isinstance(query, str) or not query.strip():
            raise QueryError(query, "the search query is empty: say what to look for")
        return hybrid_search(
            self.index,
            lambda: self.embedder.embed_query(query),
            query,
            user_id,
            chat_id,
            limit,
            kind,
            weights=Weights.from_settings(self.settings),
            now=now,
        )

    def status(self) -> Status:
        known = self.index.files()
        scan = scan_disk(self.home, known, self.settings.max_file_bytes)
        plan = plan_sync(scan.files, known, scan.unreadable_dirs)
        counts = self.index.counts()
        stale = {*plan.new, *plan.changed, *plan.deleted, *(p for pair in plan.moved for p in pair)}
        return Status(
            home=str(self.home.root),
            model_id=self.index.model_id,
            files=counts["files"],
            facts=counts["facts"],
            chunks=counts["chunks"],
            stale={
                "new": list(plan.new),
                "changed": list(plan.changed),
                "moved": [f"{a} -> {b}" for a, b in plan.moved],
                "deleted": list(plan.deleted),
            },
            errors={p: r.error for p, r in known.items() if r.error},
            compatible=self.index.compatible(),
            aligned_commit=self.index.meta().get("aligned_commit"),
            uncommitted=[p for p in uncommitted_paths(self.home.root) if p not in stale],
        )


def open_engine(
    home: Path | str | None = None,
    read_only: bool = False,
    settings: Settings | None = None,
    embedder: Embedder | None = None,
) -> Engine:
    """Open the home at ``home`` (default: settings.home, then the nearest enclosing home)."""
    settings = settings or Settings()
    root = Path(home) if home is not None else settings.home or find_home()
    return Engine(Home(root), settings, read_only=read_only, embedder=embedder)
