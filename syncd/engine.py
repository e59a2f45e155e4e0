"""The Engine: one home, its index, its embedder. ``syncd.open(home)`` returns one.

A writable engine holds the home's single-writer lock for its lifetime. A read-only one holds no
lock and sees other writers' changes as they land; its own writes (``write_file``, ``changes``)
are handed to the daemon when one holds the home (written to disk, the daemon indexes and commits
them, we wait for it), and otherwise made under the home lock taken for just that change (waiting
up to ``Settings.lock_wait_s`` for another process to let go of it).

Writes are grouped: ``with engine.changes(intent): ...`` indexes its writes in one apply and
commits them once (see changes.py). A commit that git refuses (the user's own git command holds
``index.lock``, a merge is under way) never fails a write that is saved: it is deferred, logged,
and retried with this engine's next commit (or by the daemon, or the next ``syncd sync``).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import numpy as np

from .changes import ChangeGroup, CommitQueue, Hold, current_group
from .config import Settings
from .errors import (
    ConfigError,
    ConflictError,
    GitBusyError,
    HistoryError,
    IndexError_,
    QueryError,
    LockedError,
    StorageError,
    SyncdError,
)
from .history.git import blob_at_head, check_tree_writable, operation_in_progress
from .history.intents import Intent, record_intent
from .home import (
    DAEMON_ROLE,
    Home,
    HomeLock,
    atomic_write,
    blob_sha,
    durable_append,
    file_blob_sha,
    find_home,
    read_regular,
)
from .index.embed import Embedder, load_embedder
from .index.embed_cache import CachedEmbedder, EmbeddingCache
from .index.rowcache import ScopeMask
from .index.rows import TranscriptChunking
from .index.search import Hit, Weights, hybrid_search
from .index.store import Index
from .index.tokens import TokenSpanner
from .layout import classify_path
from .status import Status, build_status
from .sync.apply import Progress, SyncReport, sync
from .wiki.store import SyncedPages

__all__ = ["Engine", "open_engine", "Status"]

log = logging.getLogger(__name__)

_ANY = object()
_POLL_S = 0.02


class Engine:
    """Sync, search and status over one memory home; the backend of ``syncd.memory``."""

    def __init__(self, home: Home, settings: Settings, read_only: bool = False, embedder: Embedder | None = None):
        self.home = home
        self.settings = settings
        self.read_only = read_only
        home.require()
        self._lock: HomeLock | None = None
        # One change group at a time per engine: two interleaved groups would commit each
        # other's writes under one message.
        self._turn = threading.Lock()
        # Commits are made one at a time (two at once would race for HEAD); the groups of this
        # engine queue theirs, so writers arriving together share one commit pass.
        self._committing = threading.Lock()
        self._commits = CommitQueue(self._index_pass, self._commit_pass, self._settle_pass)
        # Written, not indexed yet (the set has its own lock: writers add to it while a pass
        # indexes); the index itself is written by one thread at a time.
        self._unindexed: set[str] = set()
        self._unindexed_lock = threading.Lock()
        self._indexing = threading.RLock()
        # What each file looked like (inode, size, mtime) right after this engine wrote it: a
        # watcher's event for a file still so is our own write, which our pass indexes.
        self._written_stat: dict[str, tuple[int, int, int]] = {}
        self._deferred: set[str] = set()
        if not read_only:
            self._lock = home.lock().acquire("syncd engine")
        try:
            inner = embedder or load_embedder(settings, cache_dir=home.state_dir / "models")
            self._cache = EmbeddingCache(home.state_dir / "embed_cache.sqlite")
            self.embedder = CachedEmbedder(inner, self._cache)
            # Without the lifetime lock, others write this index too: re-check it on every read.
            self.index = Index(home.state_dir / "index", inner.dim, inner.model_id, shared=read_only)
            # The wiki's link graph follows every batch the index applies (syncd/wiki/store.py).
            self._graph = SyncedPages(home.root)
            self._transcripts = _transcript_chunking(settings, inner)
        except BaseException:
            self.close()
            raise

    # -- lifecycle -------------------------------------------------------------------------------

    def close(self) -> None:
        index = getattr(self, "index", None)  # absent when opening failed before it
        if index is not None and self._lock is not None:
            index.close()
        if self._deferred and self._lock is not None:
            self._commit_quietly(())
        if self._deferred:
            log.warning("%d saved change(s) are not committed yet (git was busy); the daemon or the "
                        "next `syncd sync` commits them", len(self._deferred))
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def declare_daemon(self) -> None:
        """This engine now serves as the home's daemon: other processes hand it their writes."""
        self._require_writer()
        self._lock.relabel(DAEMON_ROLE)

    def exclusive(self) -> threading.Lock:
        """This engine's write turn, as a context manager: a change group holds it from start to
        end, and a daemon takes it around each of its steps (a batch, a reconcile, a commit), so
        that nothing of its own interleaves with a group of the same engine written from another
        thread (``syncd serve`` writes through the daemon's engine)."""
        return self._turn

    def committing(self) -> threading.Lock:
        """The lock every commit of this engine's home takes (the daemon's too): one at a time."""
        return self._committing

    def written_as_is(self, rel: str) -> bool:
        """Whether ``rel`` is still exactly as this engine last wrote it (same inode, size and
        modification time): a watcher need not index it again, this engine's own pass does."""
        seen = self._written_stat.get(rel)
        if seen is None:
            return False
        try:
            st = os.lstat(self.home.root / rel)
        except OSError:
            return False
        return (st.st_ino, st.st_size, st.st_mtime_ns) == seen

    def queued_for_commit(self) -> set[str]:
        """Paths of this engine's change groups that wait for (or are in) their commit pass: a
        committer beside it leaves them alone, or it could split a turn across two commits.
        Complete when read under :meth:`exclusive` (a group queues its paths before letting go)."""
        return self._commits.paths()

    def _require_writer(self) -> None:
        if self.read_only:
            raise IndexError_("this engine was opened read-only; open it with read_only=False to write")

    # -- operations ------------------------------------------------------------------------------

    def sync(self, paths: list[str] | None = None, progress: Progress | None = None) -> SyncReport:
        """Index what changed on disk (everything, or only ``paths``); retry deferred commits."""
        self._require_writer()
        report = self._sync(paths, progress)
        self.index.persist()  # index writes the engine's own passes left pending, too
        if self._deferred:
            self._commit_quietly(())
        return report

    def _sync(self, paths: list[str] | None, progress: Progress | None = None, defer: bool = False) -> SyncReport:
        """``defer``: leave the index's table writes to its background writer (Index.apply)."""
        with self._indexing:
            return self._sync_now(paths, progress, defer)

    def _sync_now(self, paths: list[str] | None, progress: Progress | None, defer: bool = False) -> SyncReport:
        self.home.require_readable()
        if not self.index.compatible():
            log.warning("the index was built with another model; rebuilding it")
            return self._reindex(progress)
        meta = self.index.meta()
        if meta and meta.get("transcripts") != self._transcript_mode:
            # Transcript rows depend on a setting, not only on the files: a changed setting
            # changes every transcript's rows while no file changed.
            log.warning("transcript indexing is now %s; rebuilding the index", self._transcript_mode or "off")
            return self._reindex(progress)
        report = sync(self.home, self.index, self.embedder, self.settings.max_file_bytes, paths, progress,
                      on_applied=self._graph, transcripts=self._transcripts, defer=defer)
        self.index.write_meta(transcripts=self._transcript_mode)
        return report

    def reindex(self, progress: Progress | None = None) -> SyncReport:
        """Rebuild the index from the markdown (embeddings come from the cache). The new index is
        built aside and swapped in at the end, so a failure or a crash leaves the old one whole."""
        self._require_writer()
        return self._reindex(progress)

    def _reindex(self, progress: Progress | None) -> SyncReport:
        with self._indexing:
            return self._reindex_now(progress)

    def _reindex_now(self, progress: Progress | None) -> SyncReport:
        self.home.require_readable()
        self._graph.reset()
        with self.index.rebuilding() as aside:
            report = sync(self.home, aside, self.embedder, self.settings.max_file_bytes, None, progress,
                          on_applied=self._graph, transcripts=self._transcripts)
        self.index.write_meta(transcripts=self._transcript_mode)
        return report

    @property
    def _transcript_mode(self) -> str | None:
        """How transcripts are chunked, as the index's meta records it (None: not indexed)."""
        chunking = self._transcripts
        return None if chunking is None else f"{chunking.size}/{chunking.overlap}"

    # -- writes through markdown -------------------------------------------------------------------

    def changes(self, intent: Intent | None = None) -> ChangeGroup:
        """Group the writes of one change (an agent turn) into one apply and one commit:
        ``with engine.changes(intent): engine.write_file(...); ...`` (or ``async with``). Inside
        a group, every write records the group's intent; a nested group joins the outer one."""
        return ChangeGroup(self, intent)

    def write_file(self, rel: str, data: bytes, expected_sha: str | None | object = _ANY, intent: Intent | None = None) -> str:
        """Write one file of the home atomically (compare-and-swap when ``expected_sha`` is given:
        a blob sha, or None for "must not exist") and leave its provenance for the committer.
        Outside a group it is a group of one: indexed and committed (or handed to the daemon and
        waited for) before returning. Returns the new sha.

        Whether the file was saved is always known from what is raised: ``GitBusyError`` (the
        user's merge, rebase or unmerged paths are under way: see ``history.git.check_tree_writable``),
        ``StorageError`` with ``saved=False`` (the disk refused) or ``ConflictError`` (the file
        changed meanwhile) come before anything is written. Once written, a failure to index it is
        ``StorageError`` with ``saved=True`` (the next sync catches up); a commit git refuses is
        deferred with a warning and retried, never raised (see ``deferred_commits``)."""
        check_tree_writable(self.home.root)
        path = self.home.root / rel
        sha = blob_sha(data)
        if expected_sha is _ANY:
            return self._place(path, sha, intent, lambda: atomic_write(path, data))
        return self._place(path, sha, intent, lambda: atomic_write(path, data, expected_sha=expected_sha))

    def append_file(self, rel: str, data: bytes, expected_size: int, intent: Intent | None = None) -> str:
        """Append ``data`` to one file of the home (created if absent) with a durable append that
        never rewrites a byte already there, and join the current group like :meth:`write_file`.
        ``expected_size`` is the size the caller last read: if the file is not that size any more
        (someone else appended), ConflictError is raised and nothing is written. Returns the sha
        of the whole file after the append."""
        check_tree_writable(self.home.root)
        path = self.home.root / rel
        current = read_regular(self.home.root, self.home.rel(path)) or b""
        if len(current) != expected_size:
            raise ConflictError(path, f"size {expected_size}", f"size {len(current)}")
        sha = blob_sha(current + data)
        return self._place(path, sha, intent, lambda: durable_append(path, data, expected_size=expected_size))

    def _place(self, path: Path, sha: str, intent: Intent | None, put) -> str:
        """Write through ``put()`` inside a group (or a group of one): claim the path, record the
        intent for the content ``sha`` it will hold, write, then index or wait for the daemon."""
        with self.changes(intent) as group:
            rel = self.home.rel(path)
            recorded = group.adopt(intent)
            if group.hold is not None:
                group.hold.add(rel)
            if group.mode == "own":
                # Another group's version of this file waits for its commit: let it have it.
                self._commits.wait_for_path(rel)
            if recorded is not None:
                record_intent(self.home, rel, sha, recorded)
            put()
            group.written[rel] = sha
            with contextlib.suppress(OSError):
                st = os.lstat(path)
                self._written_stat[rel] = (st.st_ino, st.st_size, st.st_mtime_ns)
            if group.mode == "handoff":
                # The daemon indexes it; waiting here lets the rest of the group read it back.
                if not self._wait_for_file(rel, sha, lambda: self._indexed_sha(rel)):
                    log.warning("%s was written but not indexed within %.0f s; is the daemon running?",
                                rel, self.settings.lock_wait_s)
            else:
                with self._unindexed_lock:
                    self._unindexed.add(rel)
        return sha

    def _begin_group(self, group: ChangeGroup) -> None:
        self._turn.acquire()
        try:
            if self._lock is not None:
                group.mode = "own"
            else:
                group.lock = self._borrow_lock()
                group.mode = "borrowed" if group.lock is not None else "handoff"
                if group.mode == "handoff":
                    group.hold = Hold.open(self.home)
            if self._deferred and group.mode != "handoff":
                # Before this group touches the same files: a deferred write keeps its own commit.
                self._commit_quietly(())
        except BaseException:
            self._turn.release()
            raise

    def _try_begin_group(self, group: ChangeGroup) -> bool:
        """Begin without blocking, or return False: the writer's turn is free, nothing waits."""
        if self._lock is None or self._deferred or not self._turn.acquire(blocking=False):
            return False
        group.mode = "own"
        return True

    def _borrow_lock(self) -> HomeLock | None:
        """The home lock for one change, or None when a daemon holds it (it takes our writes).
        Another process's engine lets go between its changes, so we wait for it, bounded."""
        lock = self.home.lock()
        deadline = time.monotonic() + self.settings.lock_wait_s
        while True:
            try:
                return lock.acquire("syncd change")
            except LockedError as exc:
                if lock.held_by_daemon():
                    return None
                if time.monotonic() >= deadline:
                    raise LockedError(
                        lock.path, f"{exc.holder}, which did not let go within {self.settings.lock_wait_s:.0f} s"
                    ) from None
            time.sleep(_POLL_S)

    def _end_group(self, group: ChangeGroup) -> None:
        ticket = None
        try:
            if group.mode == "handoff":
                group.hold.release()
                self._wait_committed(group.written)
            elif group.mode == "own":
                if group.written or self._deferred:
                    # Indexed and committed by the queue (group commit), once this group has let
                    # go of the writer's turn: the next group writes while this one's is done.
                    ticket = self._commits.add(group.written)
            else:
                # A borrowed home lock: indexed and committed before it is given back.
                self._index_and_commit(set(group.written))
        finally:
            try:
                self._release_group(group)
            finally:
                if ticket is not None:  # a queued ticket is always waited for: its pass must run
                    self._commits.wait(ticket)

    def _index_and_commit(self, paths: set[str]) -> None:
        """Index ``paths`` (those not indexed yet), then commit them. A failure to index is
        StorageError with ``saved=True``; the commit is made all the same."""
        try:
            receipt = self._index_pass(paths)
        finally:
            self._commit_pass(paths)
        self._settle_pass(receipt)

    def _index_pass(self, paths: set[str]) -> tuple[set[str], int]:
        """The commit queue's index stage: index ``paths`` (those not indexed yet), searchable at
        once; the index writes its tables behind. Returns what ``_settle_pass`` waits for."""
        try:
            self._flush_index(only=paths.__contains__)
        except Exception as exc:
            raise _not_indexed(paths, exc) from exc
        return paths, self.index.applied

    def _settle_pass(self, receipt: tuple[set[str], int]) -> None:
        """After the commit: wait until the index tables hold the batch (written beside the
        commit), raising the failure to write them as the batch's own."""
        paths, applied = receipt
        try:
            self.index.wait_written(applied)
        except SyncdError as exc:
            raise _not_indexed(paths, exc) from exc

    def _commit_pass(self, paths: set[str]) -> None:
        """The commit queue's commit stage: commit ``paths`` and any deferred commit."""
        if paths or self._deferred:
            self._commit_quietly(paths)
            # The commit rewrote git's index file: asking now whether it holds unmerged paths
            # (remembered per index version) spares the next writer that git process, which
            # it would otherwise run while holding the writer's turn.
            with contextlib.suppress(SyncdError):
                operation_in_progress(self.home.root)

    def _release_group(self, group: ChangeGroup) -> None:
        """Let go of what ``_begin_group`` took (alone: a group cancelled before it began)."""
        if group.hold is not None:
            group.hold.release()
        if group.lock is not None:
            group.lock.release()
        self._turn.release()

    def _flush_index(self, only: Callable[[str], bool] | None = None) -> None:
        """Index what this engine wrote but has not indexed yet (read-your-writes in a group);
        with ``only``, just the paths it accepts. A path being indexed here is not written again
        meanwhile: a queued one waits for its pass, an unqueued one is the calling group's own."""
        def wanted() -> list[str]:
            with self._unindexed_lock:
                return sorted(p for p in self._unindexed if only is None or only(p))

        # Looked at before waiting for the index: a read for one user must not wait for a pass
        # that is indexing other users' files.
        if not wanted():
            return
        with self._indexing:
            paths = wanted()  # a pass may have indexed some meanwhile
            if paths:
                # Searchable once in memory; the tables are written behind (Index.apply), so a
                # stream of writes pays LanceDB's per-write cost once per batch, not per pass.
                self._sync(paths, defer=True)
                with self._unindexed_lock:
                    self._unindexed.difference_update(paths)

    def _indexed_sha(self, rel: str) -> str | None:
        record = self.index.files([rel]).get(rel)
        return record.sha if record else None

    def _wait_for_file(self, rel: str, sha: str, reached) -> bool:
        """Wait until ``reached()`` equals ``sha`` or the file no longer holds ``sha`` (someone
        changed it again: whoever indexes and commits handles their version)."""
        deadline = time.monotonic() + self.settings.lock_wait_s
        while reached() != sha:
            if file_blob_sha(self.home.root / rel) != sha:
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(_POLL_S)
        return True

    def _wait_committed(self, written: dict[str, str]) -> None:
        """Wait until HEAD holds our writes, so our next write cannot fold into the same commit.
        Late is a warning, not a failure: the write is saved and its intent recorded, whoever
        commits it attributes it right."""
        for rel, sha in written.items():
            if not self._wait_for_file(rel, sha, lambda: blob_at_head(self.home.root, rel)):
                log.warning("%s was indexed but not committed within %.0f s", rel, self.settings.lock_wait_s)

    # -- commits ---------------------------------------------------------------------------------

    def commit(self, paths: Iterable[str] | None = None) -> list[str]:
        """Commit indexed changes of ``paths`` (default: everything git sees as changed), one
        commit per intent, so one agent turn is one revertible commit. Returns the new shas.
        Raises GitBusyError while the user's own git operation is under way, HistoryError when
        git fails otherwise."""
        self._require_writer()
        return self._commit(None if paths is None else set(paths))

    def _commit(self, paths: set[str] | None) -> list[str]:
        from .history.committer import commit_changes

        with self._committing:
            wanted = None if paths is None else sorted(paths | self._deferred)
            # commit_changes refuses by itself (GitBusyError) while the user's git work is under way.
            shas = commit_changes(self.home, self.settings, wanted)
            self._deferred.clear()
            return shas

    def _commit_quietly(self, paths: Iterable[str]) -> list[str]:
        """Commit after a saved write: a refusal defers the commit and warns, never raises."""
        paths = set(paths)
        try:
            return self._commit(paths)
        except (GitBusyError, HistoryError) as exc:
            with self._committing:
                self._deferred |= paths
            log.warning("saved and indexed, not committed yet (%d file(s); retried with the next "
                        "commit): %s", len(self._deferred), exc)
            return []

    @property
    def deferred_commits(self) -> list[str]:
        """Paths written and indexed whose commit git refused so far (retried on the next one)."""
        return sorted(self._deferred)

    def wait_indexed(self, rel: str, sha: str | None, timeout: float = 10.0) -> bool:
        """Block until the index reflects ``rel`` at ``sha`` (None: until it is gone from it)."""
        deadline = time.monotonic() + timeout
        while True:
            if self._indexed_sha(rel) == sha:
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.01)

    # -- reading ---------------------------------------------------------------------------------

    def _fresh(self, user_id: str | None = None) -> None:
        """Inside a group, reads see the writes made so far: the group's own and those of groups
        queued for their pass. A read for one user leaves other users' files to their pass (it
        cannot see them anyway), so concurrent writers of different users still share passes."""
        if self._unindexed and current_group(self) is not None:
            self._flush_index(None if user_id is None else lambda rel: classify_path(rel).user in (None, user_id))

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
        """Best ``limit`` hits for ``query`` within the user's (and chat's) scope, ranked with the
        settings' weights (``text=False``: by meaning only, no full-text part). ``min_cosine``
        drops rows that share no word with the query and are less close in meaning than that;
        ``memory_only`` leaves the wiki out. Raises QueryError for an empty query: "nothing"
        matches nothing, and an agent that sent one has a bug worth seeing."""
        if not isinstance(query, str) or not query.strip():
            raise QueryError(query, "the search query is empty: say what to look for")
        self._fresh(user_id)
        return hybrid_search(
            self.index,
            lambda: self.embedder.embed_query(query),
            query if text else "",
            user_id,
            chat_id,
            limit,
            kind,
            weights=Weights.from_settings(self.settings),
            now=now,
            min_cosine=min_cosine,
            memory_only=memory_only,
        )

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit vectors of ``texts`` (through the embedding cache)."""
        return self.embedder.embed(list(texts))

    def nearest_facts(self, vector: np.ndarray, *, user_id: str, limit: int) -> list[tuple[float, str]]:
        """``(cosine, text)`` of the facts in the user's memory nearest to ``vector``, best first."""
        self._fresh(user_id)
        with self.index.reading() as rows:
            near = rows.search(vector, ScopeMask(user=user_id, kind="fact"), limit)
            payloads = rows.payloads([(path, fid) for path, fid, _ in near])
            return [(score, payloads[(path, fid)]["text"]) for path, fid, score in near if (path, fid) in payloads]

    def find_fact(self, fact_id: str) -> list[dict]:
        """Index rows (path, user, ...) of the fact with this id, wherever it is."""
        self._fresh()
        return self.index.find_fact(fact_id)

    def status(self) -> Status:
        return build_status(
            self.home,
            self.index.files(),
            self.index.counts(),
            self.index.model_id,
            self.index.compatible(),
            self.index.meta(),
            self.settings.max_file_bytes,
        )


def _not_indexed(paths: set[str], exc: Exception) -> StorageError:
    """A write saved (and committed) whose index write failed: StorageError with ``saved``."""
    return StorageError(
        f"{len(paths)} file(s) were saved but not indexed: {exc}" + ("" if isinstance(exc, StorageError) else "; the next sync indexes them"),
        None,
        saved=True,
    )


def _transcript_chunking(settings: Settings, embedder: Embedder) -> TranscriptChunking | None:
    if not settings.transcript_indexing_enabled:
        return None
    if settings.transcript_chunk_overlap >= settings.transcript_chunk_tokens:
        raise ConfigError("transcript_chunk_overlap must be smaller than transcript_chunk_tokens")
    return TranscriptChunking(TokenSpanner(embedder), settings.transcript_chunk_tokens, settings.transcript_chunk_overlap)


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
