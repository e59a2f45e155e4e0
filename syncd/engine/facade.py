"""The Engine: one home, its index, its embedder. ``syncd.open(home)`` returns one.

A writable engine holds the home's single-writer lock for its lifetime. A read-only one holds no
lock and sees other writers' changes as they land; its own writes (``write_file``, ``changes``)
are handed to the daemon when one holds the home (written to disk, the daemon indexes and commits
them, we wait for it), and otherwise made under the home lock taken for just that change (waiting
up to ``Settings.lock_wait_s`` for another process to let go of it).

Writes are grouped: ``with engine.changes(intent): ...`` indexes its writes in one apply and
commits them once (see syncd/writes/). **An acknowledgement is a commit**: a group
returns only once a commit on the branch holds exactly the bytes it wrote. A group that fails
(an exception inside it, git busy past ``Settings.lock_wait_s``, the user's git command taking its
change out of the tree before the commit) puts its files back as they were (writes/journal.py)
and raises, so nothing unacknowledged is half-kept and nothing acknowledged is lost.

Locks of a writable engine, outermost first (syncd/writes/__init__.py says what each protects):
  ``WritePath._turn``  one change group at a time (its writes, in order); the daemon's steps too
  ``_indexing``        one index apply at a time (re-entrant: a reindex inside a sync)
  the commit queue's condition: the queue, one commit pass at a time, short sections over sets
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from ..config import Settings
from ..embedding.fastembed_backend import Embedder, load_embedder
from ..errors import (
    ConfigError,
    IndexError_,
    InvalidInputError,
)
from ..history.git import head_sha, user_identity
from ..history.intents import Intent
from ..home import (
    DAEMON_ROLES,
    Home,
    HomeLock,
    check_query,
    classify_path,
    find_home,
)
from ..index.backend import IndexBackend, home_index, open_index
from ..index.damage import open_or_remove_damaged
from ..index.embed_cache import CachedEmbedder, EmbeddingCache
from ..index.records import FileRecord, FileUpdate, model_mismatch
from ..index.rows import TranscriptChunking
from ..index.tokens import TokenSpanner
from ..sync.apply import Progress, SyncReport, sync
from ..writes.groups import ChangeGroup, current_group
from ..writes.scheduler import WritePath
from ..writes.turn import FairLock
from .index_holder import claim_schema
from .status import Status, build_status, count_stale, incompatibility, missing_status

if TYPE_CHECKING:
    # numpy and the in-memory rows (numpy) are imported by the methods that search or embed: a
    # process that only syncs, and finds nothing changed, never needs them (issue 30).
    import numpy as np

    from ..index.search import Hit

__all__ = ["Engine", "IndexFollower", "Status", "open_engine"]


class IndexFollower(Protocol):
    """Something kept in step with the index by the same parses (see Engine.follow_index). A
    failure in it must cost only its own freshness: it logs, it never raises."""

    def __call__(self, updates: Sequence[FileUpdate]) -> None: ...

    def reset(self) -> None: ...


log = logging.getLogger(__name__)

_ANY = object()
_POLL_S = 0.02


class Engine:
    """Sync, search and status over one memory home; the backend of ``syncd.memory``."""

    def __init__(self, home: Home, settings: Settings, read_only: bool = False, embedder: Embedder | None = None,
                 index: IndexBackend | None = None, looks_only: bool = False,
                 rebuild_damaged: bool = False):  # fmt: skip
        """``index``: the rows to read instead of the home's own index (read-only engines only:
        a past revision's frozen index, syncd.engine.asof). ``looks_only``: an engine that only
        reads (``syncd search``, ``status``, a read-only server), which never makes the home's
        PostgreSQL schema; a read-only engine whose changes borrow the home's lock (an agent's)
        makes it on its first use of a new home, as the writer would. ``rebuild_damaged`` (a
        writer about to rebuild the index, ``syncd reindex``): LanceDB tables that cannot be read
        are removed, holding the home's lock, and the engine starts from an empty index."""
        self.home = home
        self.settings = settings
        self.read_only = read_only
        home.require()
        self._lock: HomeLock | None = None
        # The index is written by one thread at a time (re-entrant: a reindex inside a sync).
        self._indexing = threading.RLock()
        if not read_only:
            # Agents writing with no daemon hold the lock a change at a time: their changes
            # under way are waited out (up to lock_wait_s), and none begins meanwhile.
            self._lock = home.lock().acquire_waiting("syncd engine", settings.lock_wait_s)
        self.writes = WritePath(home, settings, self, self._lock)
        try:
            inner = embedder or load_embedder(settings, cache_dir=home.state_dir / "models")
            self._cache = EmbeddingCache(home.state_dir / "embed_cache.sqlite")
            self.embedder = CachedEmbedder(inner, self._cache)
            # Without the lifetime lock, others write this index too: re-check it on every read.
            # An index handed in (a past revision's) is its giver's to close.
            self._owns_index = index is None
            if index is None:
                location = home_index(home.root, settings)
                if location is None and not read_only:
                    home.require_writable_state()

                def opened() -> IndexBackend:
                    return open_index(home.state_dir, inner.dim, inner.model_id, shared=read_only, location=location,
                                      ann_min_rows=settings.vector_index_min_rows, looks_only=looks_only)  # fmt: skip

                index = open_or_remove_damaged(opened, home.state_dir, rebuild_damaged and self._lock is not None)
            self.index = index
            if not read_only and self._owns_index:
                claim_schema(home.root, index)
            # Parts above the engine that keep something derived from the same parses (the
            # wiki's link graph) follow every batch the index applies: follow_index.
            self._followers: list[IndexFollower] = []
            self._transcripts = _transcript_chunking(settings, inner)
            if self._lock is not None:
                # A turn whose process died before its commit is undone before anything else.
                restored = self.writes.recover()
                if restored:
                    self._sync(restored)
        except BaseException:
            self.close()
            raise

    # -- lifecycle -------------------------------------------------------------------------------

    def close(self) -> None:
        index = getattr(self, "index", None)  # absent when opening failed before it
        if index is not None and getattr(self, "_owns_index", False):
            # A read-only engine's too: a PostgreSQL index holds connections until it is closed.
            index.close()
        cache = getattr(self, "_cache", None)
        if cache is not None:
            # Its connection would keep the cache's -wal and -shm files until the process ends.
            cache.close()
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def declare_daemon(self, role: str = DAEMON_ROLES[0]) -> None:
        """This engine now serves as the home's daemon, run by ``role`` (one of DAEMON_ROLES: the
        command a person sees named in a lock error): other processes hand it their writes."""
        self._require_writer()
        assert self._lock is not None  # a writer holds the home's lock until it is closed
        if role not in DAEMON_ROLES:
            raise ValueError(f"not a daemon's role: {role!r}")
        self._lock.relabel(role)

    def exclusive(self) -> FairLock:
        """This engine's write turn, as a context manager: a change group holds it from start to
        end, and a daemon takes it around each of its steps (a batch, a reconcile, a commit), so
        that nothing of its own interleaves with a group of the same engine written from another
        thread (``syncd serve`` writes through the daemon's engine)."""
        return self.writes.exclusive()

    def written_as_is(self, rel: str) -> bool:
        """Whether ``rel`` is still exactly as this engine last wrote it (same inode, size and
        modification time): a watcher need not index it again, this engine's own pass does."""
        return self.writes.written_as_is(rel)

    def _require_writer(self) -> None:
        if self.read_only:
            raise IndexError_("this engine was opened read-only; open it with read_only=False to write")

    # -- operations ------------------------------------------------------------------------------

    def sync(self, paths: list[str] | None = None, progress: Progress | None = None) -> SyncReport:
        """Index what changed on disk (everything, or only ``paths``)."""
        self._require_writer()
        report = self._sync(paths, progress)
        self.index.persist()  # index writes the engine's own passes left pending, too
        return report

    def _sync(self, paths: list[str] | None, progress: Progress | None = None, defer: bool = False) -> SyncReport:
        """``defer``: leave the index's table writes to its background writer (Index.apply)."""
        with self._indexing:
            return self._sync_now(paths, progress, defer)

    def _sync_now(self, paths: list[str] | None, progress: Progress | None, defer: bool = False) -> SyncReport:
        self.home.require_readable()
        if self._lock is None:
            self.check_borrowed_index()
        if not self.index.compatible():
            log.warning("%s; rebuilding it", incompatibility(self.index.meta(), self.index.model_id, False))
            return self._reindex(progress)
        meta = self.index.meta()
        if meta and meta.get("transcripts") != self._transcript_mode:
            # Transcript rows depend on a setting, not only on the files: a changed setting
            # changes every transcript's rows while no file changed.
            log.warning("transcript indexing is now %s; rebuilding the index", self._transcript_mode or "off")
            return self._reindex(progress)
        if not meta:
            # A new index says whose rows it holds before it holds any: a first sync killed
            # halfway leaves rows that the next one must know as its own and go on from, not
            # take for another model's and rebuild.
            self.index.write_meta(transcripts=self._transcript_mode)
        report = sync(
            self.home,
            self.index,
            self.embedder,
            self.settings.max_file_bytes,
            paths,
            progress,
            on_applied=self._applied,
            transcripts=self._transcripts,
            defer=defer,
        )
        self.index.write_meta(transcripts=self._transcript_mode)
        return report

    def load_rows(self) -> None:
        """Load the index's rows into memory now. For a long-lived process (the daemon, a server):
        its first query then does not pay for it, and the rows outlive tables deleted under it
        (``rm -rf .syncd``), answering queries while the tables are rebuilt. A one-shot sync never
        needs them (it compares a changed file with that file's rows in the table). Rows of
        another model or layout are not loaded: the next sync rebuilds them."""
        if self.index.compatible():
            with self.index.reading():
                pass

    def follow_index(self, follower: IndexFollower) -> None:
        """Call ``follower`` with every batch of updates this engine applies to the index from
        now on (each file's new record and parse), and ``follower.reset()`` when the index is
        rebuilt from nothing. The wiki registers its link graph here (syncd.wiki.follow_index);
        the engine itself knows nothing of what follows it. A follower already following (equal
        to ``follower``) is not added twice."""
        if follower not in self._followers:
            self._followers.append(follower)

    def _applied(self, updates: Sequence[FileUpdate]) -> None:
        for follower in self._followers:
            follower(updates)

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
        with self.index.rebuilding(transcripts=self._transcript_mode) as aside:
            if not aside.files():
                # Rebuilt from nothing; a rebuild that goes on from an interrupted one keeps the
                # pages that one gave the graph.
                for follower in self._followers:
                    follower.reset()
            report = sync(
                self.home,
                aside,
                self.embedder,
                self.settings.max_file_bytes,
                None,
                progress,
                on_applied=self._applied,
                transcripts=self._transcripts,
                what="reindex",
            )
        self.index.write_meta(transcripts=self._transcript_mode)
        return report

    @property
    def _transcript_mode(self) -> str | None:
        """How transcripts are chunked, as the index's meta records it (None: not indexed)."""
        chunking = self._transcripts
        return None if chunking is None else f"{chunking.size}/{chunking.overlap}"

    # -- writes through markdown (syncd/writes/) ----------------------------------------------------

    def changes(self, intent: Intent | None = None) -> ChangeGroup:
        """Group the writes of one change (an agent turn) into one apply and one commit:
        ``with engine.changes(intent): engine.write_file(...); ...`` (or ``async with``). Inside
        a group, every write records the group's intent; a nested group joins the outer one. An
        exception inside the group puts its files back and commits nothing."""
        return self.writes.changes(intent)

    def in_change_group(self) -> bool:
        """Whether the caller runs inside a change group of this engine (its writer's turn is
        then held: anything it waits for must not wait for that turn)."""
        return current_group(self.writes) is not None

    def write_file(
        self, rel: str, data: bytes, expected_sha: str | object | None = _ANY, intent: Intent | None = None
    ) -> str:
        """Write one file of the home atomically (compare-and-swap when ``expected_sha`` is given:
        a blob sha, or None for "must not exist") and leave its provenance for the committer.
        Outside a group it is a group of one. Returns the new sha once a commit on the branch
        holds it (the write path's acknowledgement, see syncd/writes/).

        What is raised says whether anything was kept: ``GitBusyError`` (the user's git work is
        under way, or took the change out of the tree before its commit: retry), ``ConflictError``
        (the file changed meanwhile) and ``StorageError`` with ``saved=False`` leave the file as
        it was; ``StorageError`` with ``saved=True`` means committed but not indexed (the next
        sync indexes it)."""
        if expected_sha is _ANY:
            return self.writes.write_file(rel, data, intent=intent)
        return self.writes.write_file(rel, data, expected_sha, intent)

    def append_file(self, rel: str, data: bytes, expected_size: int, intent: Intent | None = None) -> str:
        """Append ``data`` to one file of the home (created if absent) with a durable append that
        never rewrites a byte already there, and join the current group like :meth:`write_file`.
        ``expected_size`` is the size the caller last read: if the file is not that size any more
        (someone else appended), ConflictError is raised and nothing is written. Returns the sha
        of the whole file after the append."""
        return self.writes.append_file(rel, data, expected_size, intent)

    # -- what the write path needs of the index (writes.indexer.Indexer) ------------------------------

    def index_paths(self, wanted: Callable[[], list[str]]) -> list[str]:
        with self._indexing:
            paths = wanted()  # a pass may have indexed some meanwhile
            if paths:
                # Searchable once in memory; the tables are written behind (Index.apply), so a
                # stream of writes pays LanceDB's per-write cost once per batch, not per pass.
                self._sync(paths, defer=True)
            return paths

    def index_applied(self) -> int:
        return self.index.applied

    def wait_index_written(self, applied: int) -> None:
        self.index.wait_written(applied)

    def check_borrowed_index(self) -> None:
        """A process that borrows the home for a change (an agent's, no daemon running) must not
        rebuild the home's index for a model only it is configured with (its writer's next sync
        would rebuild it back), nor write its vectors beside the others': IndexError_ naming both
        models. The write path asks before a change writes anything; a sync asks again."""
        problem = model_mismatch(self.index.meta(), self.index.model_id, self.index.dim)
        if problem is not None:
            raise IndexError_(problem)

    def indexed_sha(self, rel: str) -> str | None:
        record = self.index.files([rel]).get(rel)
        return record.sha if record else None

    # -- commits ---------------------------------------------------------------------------------

    def commit(self, paths: Iterable[str] | None = None) -> list[str]:
        """Commit indexed changes of ``paths`` (default: everything git sees as changed), one
        commit per intent, so one agent turn is one revertible commit. Returns the new shas.
        Raises GitBusyError while the user's own git operation is under way, HistoryError when
        git fails otherwise."""
        self._require_writer()
        return self.writes.commit_editor(None if paths is None else set(paths))

    def revert(self, commit: str) -> str:
        """``git revert`` one commit (an agent turn, say) as the person's git identity (else the
        settings' human identity), once every change acknowledged before it is committed, and
        bring the index in step. Returns the new commit's sha. RevertError (nothing changed)
        when later commits changed the same lines; NotFoundError for an unknown commit."""
        from ..history.revert import revert_commit

        self._require_writer()
        with self.writes.quiesced():
            name, email = user_identity(self.home.root)
            sha = revert_commit(
                self.home.root, commit, name or self.settings.human_name, email or self.settings.human_email
            )
            self._sync(None)
            self.index.persist()
            self.note_aligned_commit(head_sha(self.home.root))
        return sha

    def align_to_head(self) -> None:
        """Record that the index reflects the tree of HEAD: after a commit of everything it indexed
        (a one-shot `syncd sync`)."""
        self.note_aligned_commit(head_sha(self.home.root))

    def note_aligned_commit(self, sha: str | None) -> None:
        """Record that the index reflects the tree of commit ``sha`` (``Status.aligned_commit``):
        after a revert here, and by the daemon once nothing of its own waits to be committed."""
        if sha and self.index.meta().get("aligned_commit") != sha:
            self.index.write_meta(aligned_commit=sha)

    def wait_indexed(self, rel: str, sha: str | None, timeout: float = 10.0) -> bool:
        """Block until the index reflects ``rel`` at ``sha`` (None: until it is gone from it)."""
        deadline = time.monotonic() + timeout
        while True:
            if self.indexed_sha(rel) == sha:
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.01)

    # -- reading ---------------------------------------------------------------------------------

    def _fresh(self, user_id: str | None = None) -> None:
        """Inside a group, reads see the writes made so far: the group's own and those of groups
        queued for their pass. A read for one user leaves other users' files to their pass (it
        cannot see them anyway), so concurrent writers of different users still share passes."""
        if self.writes.pending_reads():
            self.writes.flush(None if user_id is None else lambda rel: classify_path(rel).user in (None, user_id))

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
        floor: bool = False,
        at: str | None = None,
    ) -> list[Hit]:
        """Best ``limit`` hits for ``query`` within the user's (and chat's) scope, ranked with the
        settings' weights (``text=False``: by meaning only, no full-text part). ``min_cosine``
        drops rows that share no word with the query and are less close in meaning than that;
        ``memory_only`` leaves the wiki out; ``floor`` returns nothing when the memory in scope
        does not answer the query at all (every hit says so in ``Hit.relevant``; see
        syncd.index.search.answered); ``at``: as that commit left the memory (a revision git
        names or a date/time; syncd.engine.asof). Raises QueryError for an empty query, or one
        holding a lone surrogate (syncd.home.check_query)."""
        check_query(query)
        if at is not None:
            from .asof import search_at

            return search_at(self, query, at, user_id=user_id, chat_id=chat_id, limit=limit, kind=kind, now=now,
                             text=text, min_cosine=min_cosine, memory_only=memory_only, floor=floor)  # fmt: skip
        from .database import ranked_search  # the hybrid search: see the imports

        self._fresh(user_id)
        # hybrid_search refuses rows of another model than this engine's (Index.reading).
        return ranked_search(
            self.index,
            self.embedder.embed_query,
            self.settings,
            query,
            user_id=user_id,
            chat_id=chat_id,
            limit=limit,
            kind=kind,
            now=now,
            text=text,
            min_cosine=min_cosine,
            memory_only=memory_only,
            floor=floor,
        )

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
        """Hybrid search with the caller's own query vector (the seed's store API, which embeds
        before it searches): ``vector`` must come from this home's embedding model (its
        dimension is checked; it is normalised, as the index's vectors are), ``text`` ranks by
        words too ("" for meaning only), ``weights`` ({part: weight}, syncd.index.search.Weights'
        fields) replace those of the settings they name. The memory only (no wiki), facts by
        default. InvalidInputError for a vector of another size or not finite, or an unknown part."""
        import numpy as np

        from ..index.search import Weights, hybrid_search

        try:
            query = np.asarray(vector, dtype=np.float64).reshape(-1)
        except (TypeError, ValueError):
            query = np.zeros(0)
        if query.shape != (self.embedder.dim,) or not np.isfinite(query).all() or not np.linalg.norm(query):
            raise InvalidInputError(
                f"the query embedding must be {self.embedder.dim} finite numbers, not all 0, from this home's model "
                f"{self.embedder.model_id!r} (got {query.shape[0]} usable numbers): embed the query with that model"
            )
        ranking = Weights.from_settings(self.settings)
        unknown = sorted(set(weights or {}) - set(Weights.__dataclass_fields__))
        if unknown:
            raise InvalidInputError(
                f"unknown score part(s) {', '.join(unknown)}: use {', '.join(Weights.__dataclass_fields__)}"
            )
        self._fresh(user_id)
        return hybrid_search(
            self.index,
            (query / np.linalg.norm(query)).astype(np.float32),
            text,
            user_id,
            chat_id,
            limit,
            kind,
            weights=dataclasses.replace(ranking, **{k: float(v) for k, v in (weights or {}).items()}),
            now=now,
            memory_only=True,
        )

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit vectors of ``texts`` (through the embedding cache)."""
        return self.embedder.embed(list(texts))

    def nearest_facts(self, vector: np.ndarray, *, user_id: str, limit: int) -> list[tuple[float, dict]]:
        """``(cosine, row)`` of the facts in the user's memory nearest to ``vector``, best first;
        a row says the fact's ``id``, ``text``, ``path`` and ``line``."""
        from ..index.rowcache import ScopeMask

        self._fresh(user_id)
        # Cosines with another model's vectors would mean nothing: refused (Index.reading).
        with self.index.reading(same_model=True) as rows:
            near = rows.search(vector, ScopeMask(user=user_id, kind="fact"), limit)
            payloads = rows.payloads([(path, fid) for path, fid, _ in near])
            return [(score, payloads[(path, fid)]) for path, fid, score in near if (path, fid) in payloads]

    def find_fact(self, fact_id: str) -> list[dict]:
        """Index rows (path, user, ...) of the fact with this id, wherever it is."""
        self._fresh()
        return self.index.find_fact(fact_id)

    def indexed_files(self) -> Mapping[str, FileRecord]:
        """What the index knows of each file it reflects (kind, blob sha, size, mtime, error)."""
        return self.index.files()

    def rows_of(self, rel: str) -> int:
        """How many index rows the file ``rel`` has (facts and chunks)."""
        return sum(1 for r in self.index.all_rows().to_pylist() if r["path"] == rel)

    def counts(self, *, user_id: str | None = None) -> dict[str, int]:
        """Files, facts and chunks in the index; with ``user_id``, the facts and chunks that
        user's searches reach (theirs and the shared ones; which files they may be named is
        their front end's rule, syncd.engine.visibility)."""
        if user_id is None:
            return self.index.counts()
        from ..index.rowcache import ScopeMask

        with self.index.reading() as rows:
            return {
                "facts": rows.count(ScopeMask(user=user_id, kind="fact")),
                "chunks": rows.count(ScopeMask(user=user_id, kind="chunk")),
            }

    def stale_count(self) -> int:
        """How many files on disk the index does not reflect yet (a scan of the tree: stat, and
        a hash of what changed), the number a search answer warns of."""
        return count_stale(self.home, self.index.files(), self.settings.max_file_bytes)

    def index_on_disk(self) -> bool:
        """False once ``.syncd/`` was deleted under the engine (the daemon then rebuilds it)."""
        return self.index.on_disk()

    def status(self) -> Status:
        if not self.index.on_disk():  # .syncd/ deleted under us: missing until the daemon rebuilds it
            return missing_status(self.home, self.index.model_id, self.settings.max_file_bytes)
        try:
            return build_status(
                self.home,
                self.index.files(),
                self.index.counts(),
                self.index.model_id,
                self.index.compatible(),
                self.index.meta(),
                self.settings.max_file_bytes,
            )
        except IndexError_ as exc:
            # A PostgreSQL index whose database is down: every file is behind until it is back.
            reached = getattr(exc, "status", None)
            if reached is None:
                raise
            missing = missing_status(self.home, self.index.model_id, self.settings.max_file_bytes)
            return dataclasses.replace(missing, index=reached)


def _transcript_chunking(settings: Settings, embedder: Embedder) -> TranscriptChunking | None:
    if not settings.transcript_indexing_enabled:
        return None
    if settings.transcript_chunk_overlap >= settings.transcript_chunk_tokens:
        raise ConfigError("transcript_chunk_overlap must be smaller than transcript_chunk_tokens")
    return TranscriptChunking(
        TokenSpanner(embedder), settings.transcript_chunk_tokens, settings.transcript_chunk_overlap
    )


def open_engine(
    home: Path | str | None = None,
    read_only: bool = False,
    settings: Settings | None = None,
    embedder: Embedder | None = None,
    looks_only: bool = False,
    rebuild_damaged: bool = False,
) -> Engine:
    """Open the home at ``home`` (default: settings.home, then the nearest enclosing home);
    ``looks_only``, ``rebuild_damaged``: see :class:`Engine`."""
    settings = settings or Settings()
    root = Path(home) if home is not None else settings.home or find_home()
    return Engine(
        Home(root),
        settings,
        read_only=read_only,
        embedder=embedder,
        looks_only=looks_only,
        rebuild_damaged=rebuild_damaged,
    )
