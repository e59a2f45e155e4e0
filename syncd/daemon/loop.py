"""The process that holds a home (`syncd watch`): watches the tree, keeps the index and the git
history in step with it, and answers other processes over the local socket, for as long as it runs.

One thread does all the work (index and git writes are never concurrent); the observer's thread
only appends events under a condition variable. The work thread sleeps on that condition with a
timeout set to the next thing it has to do (a debounce ending, a commit falling due, the periodic
reconcile), so an idle daemon wakes a few times an hour and costs nothing in between.

The order of things, from one event to its commit:
  events -> (debounce) -> coalesce (sync.events) -> stat + hash + plan + apply (Engine.sync)
         -> pending paths -> (commit_quiet_ms of quiet) -> one commit per agent turn / the human.

The user's git work wins (see history.git): while they merge, rebase, resolve unmerged paths or
sit on a detached HEAD, changes are indexed but not committed; the daemon warns once, with the fix,
and commits as soon as git is free (a move of HEAD or a branch brings the retry forward). At start
it removes the temp files a killed write left behind, then commits whatever an earlier run indexed
but had no time to commit.

Another process may ask for a sync over the socket (`syncd sync` beside a running daemon, which
holds the home's lock): :meth:`Daemon.sync_now` queues the ask, and the work thread, after the step
in hand, reconciles the whole tree and commits, then answers every ask queued before it began.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..config import Settings
from ..engine.database import TokenMirror, shares_index
from ..errors import GitBusyError, HistoryError, SyncdError
from ..history.git import busy_state, head_sha
from ..history.status import uncommitted_paths
from ..home import ignore_write_temp_files, remove_stale_temp_files
from ..index.damage import damaged_index
from ..sync.apply import SyncReport
from ..sync.events import Batch, Event, coalesce
from ..sync.plan import combined_plan
from ..sync.progress import SyncProgress, log_every
from ..sync.scan import DiskScan, list_tree
from ..sync.watcher import TreeWatcher
from ..wiki.store import follow_index
from ..writes.rewind import find_rewound
from .control import ControlServer

if TYPE_CHECKING:
    from ..engine.facade import Engine  # only for annotations: the CLI hands the daemon its engine

__all__ = ["Daemon"]

log = logging.getLogger(__name__)

# However busy the tree, a change waits at most this long before it is indexed.
_MAX_BATCH_DELAY_S = 0.5
# A burst (a checkout) is reconciled once it is over: wait for this much quiet first, but no
# longer than _BURST_MAX_BATCH_S after its first event. Agents writing steadily make events without
# a pause: waiting for quiet up to 30 s put a person's page saved meanwhile off by as long (CI,
# test_acknowledged_writes). A checkout still writing holds index.lock, which reconcile waits out
# for up to _BURST_MAX_WAIT_S, so ending the wait for quiet early never reconciles halfway.
_BURST_QUIET_S = 0.25
_BURST_MAX_BATCH_S = 2.0
_BURST_MAX_WAIT_S = 30.0
# Commit at the latest this long after the first uncommitted change, even if edits keep coming.
_COMMIT_MAX_DELAY_S = 5.0
# Retry backoff while git is busy with the user's operation, or a commit failed.
_RETRY_MIN_S, _RETRY_MAX_S = 0.5, 30.0
_RETRY_DOUBLINGS = 16  # past _RETRY_MAX_S long before
# A sync running longer than this logs a progress line this often (syncd/sync/progress.py).
_PROGRESS_LOG_EVERY_S = 10.0


class _Stopped(Exception):
    """A reconcile given up halfway because the daemon is asked to stop (see reconcile)."""


@dataclass
class _AskedSync:
    """A sync another process asked for (Daemon.sync_now), answered by the work thread: it
    writes ``answer`` or ``error`` once, before ``done`` is set; the asker reads them only after
    ``done.wait()`` (the event orders the two threads)."""

    done: threading.Event = field(default_factory=threading.Event)
    answer: dict | None = None
    error: SyncdError | None = None
    # The daemon's syncs that ended while this ask waited in the queue (a startup reconcile, the
    # watcher's batches): told with the asked pass's, as what the asker waited for. Under _cond.
    waited: list[SyncReport] = field(default_factory=list)
    commits_before: int = 0  # how many commits the daemon had made when asked (Daemon.commits)

    def settle(self, answer: dict | None = None, error: SyncdError | None = None) -> None:
        self.answer, self.error = answer, error
        self.done.set()


class Daemon:
    """Follows one home with a writable :class:`Engine` (which holds the home's lock)."""

    def __init__(
        self,
        engine: Engine,
        settings: Settings | None = None,
        serve: bool = True,
        control_methods: Mapping[str, Callable[..., object]] | None = None,
        role: str = "syncd watch",
    ):
        self.engine = engine
        # Answer other processes' searches over the home's socket (syncd.control), and the
        # methods the host adds (`syncd serve` and `watch`: the servers' operations, for `syncd mcp`).
        self.serve = serve
        self.control_methods = dict(control_methods or {})
        self.settings = settings or engine.settings
        engine.declare_daemon(role)  # the command running it, as a lock error names it
        # The process holding the home applies most batches: the wiki's link graph follows them.
        follow_index(engine)
        self.root: Path = engine.home.root
        self._cond = threading.Condition()
        self._events: list[Event] = []
        self._first_event = self._last_event = 0.0
        self._stopping = False
        self._doing: str | None = None
        self._pending: set[str] = set()
        self._pending_since: float | None = None
        # Whether a commit pass should look for commits a `git rebase --abort` took out of the
        # branch though nothing is pending: at the start, and after each move of git's. Left to
        # the passes of pending files, one whose file the index already held as the abort left it
        # (it indexed the rebase's own checkout) waited for the next change anywhere.
        self._look_for_dropped = True
        self._commit_due: float | None = None
        self._retry_s = _RETRY_MIN_S
        self._warned: str | None = None  # the git state last warned about, to warn once per state
        self._failures = 0
        self._next_reconcile = time.monotonic() + self.settings.reconcile_interval_s
        self._next_watch_check = time.monotonic() + self.settings.watcher_check_s
        self._watcher = TreeWatcher(self.root, self.push)
        self.watcher_restarts = 0
        self.batches = 0
        self._noticed = 0  # events pushed so far: with `batches`, what the socket's stale count keys on
        self.reconciles = 0
        self.commits: list[str] = []
        self._asked: list[_AskedSync] = []  # under _cond

    # -- called from other threads ---------------------------------------------------------------

    @property
    def watcher(self) -> TreeWatcher:
        """The watch on the home's tree: its ``failure`` says why it stopped, if it did (restarted
        by the loop, ``watcher_restarts``)."""
        return self._watcher

    def push(self, events: Iterable[Event]) -> None:
        """Queue events (the observer calls this from its thread)."""
        events = list(events)
        if not events:
            return
        with self._cond:
            now = time.monotonic()
            if not self._events:
                self._first_event = now
            self._events.extend(events)
            self._noticed += len(events)
            self._last_event = now
            self._cond.notify()

    def stop(self) -> None:
        """Ask the loop to finish the batch in hand, commit and return (safe from a signal). A
        reconcile under way (the one at start, a periodic one, a burst's) is given up at its
        next slice of work instead: the next start goes on from where it stopped."""
        with self._cond:
            self._stopping = True
            self._cond.notify()

    def sync_now(self) -> dict:
        """Sync the whole tree and commit it, as `syncd sync` does, for another process (this
        daemon holds the home's lock, so `syncd sync` asks over the socket instead of failing).

        Returns once the work thread, after the step in hand, has made a pass that began after
        the ask: everything on disk then is indexed, and committed, unless git is busy with a
        command of the person's (``uncommitted`` says which; the daemon commits once git is
        free) or the files belong to a change still under way (``in_changes``; that change
        commits them when it ends). Returns the report as JSON (protocol.py). Raises SyncdError
        when the daemon stops first or the pass fails. Takes ``_cond`` only: the pass runs on
        the work thread in its exclusive turn, as every step does."""
        asked = _AskedSync()
        with self._cond:
            if self._stopping:
                raise SyncdError("the daemon is stopping; run `syncd sync` again once it has stopped")
            asked.commits_before = len(self.commits)  # a list only ever extended
            self._asked.append(asked)
            self._cond.notify()
        asked.done.wait()
        if asked.error is not None:
            raise asked.error
        assert asked.answer is not None  # settled with one or the other
        return asked.answer

    def reindex_now(self) -> dict:
        """Rebuild the index, as `syncd reindex` does, for another process (this daemon holds
        the home's lock). Runs on the asking connection's thread in the engine's exclusive turn,
        as REST's /memory/reindex does: the daemon's steps wait meanwhile and the watcher's
        events queue (the rebuild reads the tree as it is then; later changes are handled after
        it). Once the daemon is asked to stop it is given up at its next slice of work, keeping
        what it built aside for the next rebuild. Returns the counts as JSON (protocol.py)."""
        if self._stopping:
            raise SyncdError("the daemon is stopping; run `syncd reindex` again once it has stopped")
        progress = _then(log_every(log, _PROGRESS_LOG_EVERY_S), self._raise_if_stopping)
        try:
            with self.engine.exclusive():
                report = self.engine.reindex(progress=progress)
                counts = self.engine.counts()
        except _Stopped:
            raise SyncdError(
                "the daemon stopped halfway through the rebuild; the next `syncd reindex` goes on from where it stopped"
            ) from None
        return {
            **{key: counts[key] for key in ("files", "facts", "chunks")},
            "embedded_texts": report.embedded_texts,
            # A rebuild going on from an interrupted one finds the files it had written unchanged.
            "kept": report.plan.unchanged + len(report.plan.touched),
            "errors": dict(report.errors),
        }

    @property
    def doing(self) -> str | None:
        """The step the work thread is in (for a log line saying what a shutdown waits for)."""
        return self._doing

    # -- the loop --------------------------------------------------------------------------------

    def run(self, install_signals: bool = False) -> None:
        """Watch until :meth:`stop` (or SIGINT / SIGTERM when ``install_signals``)."""
        if install_signals:
            for sig in (signal.SIGINT, signal.SIGTERM):
                signal.signal(sig, lambda *_: self.stop())
        # Watch first, then reconcile: whatever changes during the reconcile is queued, not lost.
        self._watcher.start()
        methods = {**self.control_methods, "sync": self.sync_now, "reindex": self.reindex_now}
        server = ControlServer(self.engine, self._generation, methods).start() if self.serve else None
        # The home's writer keeps its token hashes published for the readers of a shared index.
        mirror = TokenMirror(self.engine).start() if shares_index(self.engine) else None
        try:
            log.info("watching %s (pid %d)", self.root, os.getpid())
            # Asked to stop already (a server stopped as it started): loading the rows would
            # only hold the stop up; the next start does it.
            if not self._stopping:
                self._guarded(self._preload)
            self._guarded(self._startup)
            while True:
                events = self._wait_for_work()
                if events is None:
                    break
                self._guarded(self._tick, events)
            self._guarded(self._shutdown)
        finally:
            if mirror is not None:
                mirror.stop()
            if server is not None:
                server.stop()
            self._watcher.stop()
            with self._cond:
                unanswered, self._asked = self._asked, []
            for asked in unanswered:
                asked.settle(error=SyncdError("the daemon stopped before it synced; run `syncd sync` again"))
            log.info("stopped watching %s", self.root)

    def _guarded(self, step, *args) -> None:
        """The daemon's one broad catch: a failed step is logged and the daemon goes on. A step
        never interleaves with a change group written through this engine from another thread."""
        self._doing = step.__name__.strip("_")
        try:
            with self.engine.exclusive():
                step(*args)
        except _Stopped:
            # Not a failure: what the reconcile left undone is on disk, and the next start's
            # reconcile goes on from there (a sync keeps what it wrote).
            log.info("stopping: left a reconcile of %s halfway; the next start goes on from there", self.root)
        except Exception as raised:
            # LanceDB's own error reading damaged tables: a state of the home too, with its fix.
            exc = damaged_index(raised) or raised
            # A reconcile soon redoes whatever the failed step dropped; backing off keeps a
            # lasting failure (an unreadable home, its .git deleted) from spinning and flooding
            # the log. The exponent is bounded: 2.0**1024 overflows, which killed the daemon.
            delay = min(_RETRY_MIN_S * 2.0 ** min(self._failures, _RETRY_DOUBLINGS), _RETRY_MAX_S)
            self._failures += 1
            if isinstance(exc, SyncdError):
                # A state of the home, said in syncd's words with its fix: no traceback to read.
                log.error("watch step failed: %s; trying again in %.1f s", exc, delay)
            else:
                log.exception("watch step failed; reconciling again in %.1f s", delay)
            with self._cond:
                again = time.monotonic() + delay
                self._next_reconcile = again
                # A commit due already would be tried again at once, failing the same way (a
                # step can fail before commit_pending backs off itself): held back as long.
                if self._commit_due is not None:
                    self._commit_due = max(self._commit_due, again)
        else:
            self._failures = 0
        finally:
            self._doing = None

    def _wait_for_work(self) -> list[Event] | None:
        """Block until there is something to do; return the events to handle (maybe none), or
        None once stopping and nothing is left."""
        with self._cond:
            while True:
                now = time.monotonic()
                if self._stopping:
                    return None
                if self._asked:
                    return self._take_events()
                deadlines = [self._next_reconcile, self._next_watch_check]
                if self._events:
                    ready_at = self._batch_ready_at()
                    if now >= ready_at:
                        return self._take_events()
                    deadlines.append(ready_at)
                elif self._commit_due is not None:
                    deadlines.append(self._commit_due)
                if now >= min(deadlines):
                    return []
                self._cond.wait(timeout=max(0.0, min(deadlines) - now))

    def _batch_ready_at(self) -> float:
        if len(self._events) > self.settings.burst_threshold:
            return min(self._last_event + _BURST_QUIET_S, self._first_event + _BURST_MAX_BATCH_S)
        debounce = self.settings.debounce_ms / 1000
        return min(self._last_event + debounce, self._first_event + _MAX_BATCH_DELAY_S)

    def _take_events(self) -> list[Event]:
        events, self._events = self._events, []
        return events

    def _tick(self, events: list[Event]) -> None:
        now = time.monotonic()
        with self._cond:
            asked, self._asked = self._asked, []
            if asked and events:
                # The asked pass scans the whole tree, which covers what these point at: handed
                # to it (it takes what is queued), their changes are in the report its askers get.
                self._events[:0], events = events, []
        if asked:
            self._answer_asked(asked)  # first: whatever fails after, its askers are answered
        if events:
            self.handle_batch(events)
        # Files a change group of this engine undid: whatever they hold now is committed as is.
        self._add_pending(self.engine.writes.take_undone())
        if now >= self._next_watch_check:
            self._check_watcher()
        if now >= self._next_reconcile:
            self.reconcile()
        if self._commit_due is not None and time.monotonic() >= self._commit_due:
            self.commit_pending()

    def _answer_asked(self, asked: list[_AskedSync]) -> None:
        """Reconcile and commit for the syncs other processes asked for (sync_now), and answer
        every one of them, whatever happens (each asker waits with no timeout)."""
        answers: list[dict] = []
        error: SyncdError = SyncdError("the daemon failed to sync: see its log")
        try:
            before = set(self._pending)  # indexed by earlier batches (the watcher's), not committed
            report = self.reconcile()
            self._commit_for_askers()
            answers = [
                self._asked_answer([*one.waited, report], self.commits[one.commits_before :], before) for one in asked
            ]
        except _Stopped:
            error = SyncdError("the daemon stopped halfway through the sync; what it indexed is kept")
            raise
        except SyncdError as exc:
            error = exc
            raise
        finally:
            for n, one in enumerate(asked):
                answer = answers[n] if answers else None
                one.settle(answer, None if answer is not None else error)

    def _commit_for_askers(self) -> None:
        """commit_pending, after waiting out (twice ``commit_quiet_ms`` at most, and not once
        stopping) a git command of the person's that moved HEAD a moment ago: the asker's
        ``syncd sync`` then ends committed, where the loop would commit a moment later. Git is
        looked at holding the commit stage, as commit_pending does, so a pass of ours half done
        is never taken for the person's command. The write turn (the step's) is held meanwhile."""
        limit = time.monotonic() + 2 * self.settings.commit_quiet_ms / 1000
        while self._pending and not self._stopping:
            with self.engine.writes.commit_stage():
                due = self.engine.writes.settle_due()
            if due <= 0 or time.monotonic() + due > limit:
                break
            time.sleep(due)  # the quiet time git still owes the person's command
        self.commit_pending()

    def _asked_answer(self, reports: list[SyncReport], commits: list[str], before: set[str]) -> dict:
        """What an asked sync tells its asker (see protocol.py): the syncs it waited for and the
        asked pass's, as one; the files the daemon had indexed before the ask and committed with
        it; what is left uncommitted, and why."""
        held = self.engine.writes.held() & self._pending if self._pending else set()
        waiting = self._pending - held
        uncommitted = None
        if waiting:
            state = busy_state(self.root)
            uncommitted = state.reason if state is not None else "git moved a moment ago; the daemon commits them soon"
        return {
            "summary": combined_plan([r.plan for r in reports]).summary(),
            "facts": sum(r.facts for r in reports),
            "chunks": sum(r.chunks for r in reports),
            "embedded_texts": sum(r.embedded_texts for r in reports),
            "errors": {path: error for r in reports for path, error in r.errors.items()},
            "commits": commits,
            # Committed now, indexed before the ask by a batch not told above.
            "indexed_before": len(before - self._pending - {p for r in reports for p in r.plan.changed_paths}),
            "uncommitted": uncommitted,
            "in_changes": len(held),
            # What the asker can check the tree against: every change indexed is in it unless
            # ``uncommitted`` or ``in_changes`` says otherwise (a sync answering "0 changed" when
            # the watcher had already committed the edit is then seen to be up to date).
            "head": head_sha(self.root),
            "pid": os.getpid(),
        }

    def _check_watcher(self) -> None:
        """Restart a watcher whose thread died and reconcile what it may have missed, rather
        than go on believing a silent home is unchanged."""
        self._next_watch_check = time.monotonic() + self.settings.watcher_check_s
        self._check_state()
        if self._watcher.healthy():
            return
        self.watcher_restarts += 1
        log.warning("the file watcher of %s stopped; restarting it and reconciling the home", self.root)
        self._watcher.restart()
        self.reconcile()

    def _check_state(self) -> None:
        """``.syncd/`` is derived and may be deleted at any moment, even now: make it again (with
        its .gitignore), reopen an embedding cache whose file went with it, and rebuild an index
        that is gone from disk or was made anew there (aside, then swapped in, as `syncd reindex`
        does). Until then the engine's status says the index is missing, never fresh."""
        self.engine.home.ensure_state_dir()
        cache = getattr(self.engine.embedder, "cache", None)
        if cache is not None:
            cache.reopen_if_gone()
        if self.engine.index_on_disk():
            return
        log.warning("the index of %s is no longer on disk (.syncd/ deleted?); rebuilding it", self.root)
        self.engine.reindex()
        self._note_head()

    def _generation(self) -> tuple[int, int]:
        with self._cond:
            return self._noticed, self.batches

    def _preload(self) -> None:
        """Load the model and the index's rows now, so the first change after start is indexed
        and the first query answered as fast as the rest, and the rows in memory outlive a
        deleted ``.syncd/`` while it is rebuilt (Engine.load_rows)."""
        inner = getattr(self.engine.embedder, "embedder", self.engine.embedder)
        load = getattr(inner, "load", None)
        if load is not None:
            started = time.monotonic()
            load()
            log.info("embedding model ready in %.1f s", time.monotonic() - started)
        self.engine.load_rows()

    def _startup(self) -> None:
        # A kill -9 between an atomic write and its rename leaves a hidden temp file: never
        # indexed or committed, but litter; the write it belonged to was never acknowledged.
        for rel in remove_stale_temp_files(self.root):
            log.info("removed %s, left by an interrupted write", rel)
        ignore_write_temp_files(self.root)  # before any write: a stash must never take one in flight
        self.reconcile()
        # Whatever an earlier run indexed but had no time to commit (a crash, a kill -9).
        self._add_pending(uncommitted_paths(self.root))
        self.commit_pending()

    def _shutdown(self) -> None:
        with self._cond:
            events = self._take_events()
        if events:
            # A burst's reconcile is given up (see reconcile); what the batch indexed is still
            # committed below.
            with contextlib.suppress(_Stopped):
                self.handle_batch(events)
        if self._pending:
            # A git command of the person's that just ended is given a quiet time (at most a
            # second here: the process is going away), not a pass.
            quiet_s = min(self.settings.commit_quiet_ms / 1000, 1.0)
            while not self._git_settled(quiet_s):
                time.sleep(0.05)
            self.commit_pending(quiet_s)
        if self._pending:
            log.warning("left %d changed files uncommitted (git busy); the next start commits them", len(self._pending))

    # -- work ------------------------------------------------------------------------------------

    def handle_batch(self, events: list[Event]) -> SyncReport | None:
        """Coalesce ``events``, then stat, hash, plan and apply what they point at."""
        batch = coalesce(events, self.settings.burst_threshold)
        self._follow_git(batch)
        if not (batch.full or batch.paths or batch.dirs):
            return None
        paths = None if batch.full else self._expand(batch)
        if paths is not None and len(paths) > self.settings.burst_threshold:
            paths = None
        if paths is None:
            return self.reconcile(burst=batch.full and not any(e.kind == "overflow" for e in events))
        # Our own engine's writes (syncd serve) are indexed and committed by its commit passes;
        # syncing them again here would only hold the writers' turn for nothing.
        paths = {p for p in paths if not self.engine.written_as_is(p)}
        if not paths:
            return None
        return self._sync(sorted(paths))

    def _follow_git(self, batch: Batch) -> None:
        if not batch.git_moved:
            return
        self._note_head()
        self._look_for_dropped = True
        if self._pending or self._commit_due is None:
            # The user's commit, checkout or switch may be what our waiting commit waited for (or,
            # with nothing waiting, an abort that took commits of ours out of the branch): try
            # soon, but never later than already due. Agents' commit passes move HEAD
            # several times a second; pushing the due time back on each move put a person's
            # page off until the agents paused (bench_load.py measures how long a person's saved
            # page waits for its commit while agents add).
            self._retry_s = _RETRY_MIN_S
            soon = time.monotonic() + self.settings.commit_quiet_ms / 1000
            with self._cond:
                self._commit_due = soon if self._commit_due is None else min(self._commit_due, soon)

    def _expand(self, batch: Batch) -> set[str]:
        """The batch's paths plus every file below its folders: those indexed (they may be gone
        or moved) and those on disk (they may be new or moved in)."""
        paths = set(batch.paths)
        if not batch.dirs:
            return paths
        known = self.engine.indexed_files()
        for folder in batch.dirs:
            prefix = folder + "/"
            # The folder itself too: it may be recorded as a symbolic link that is gone now.
            paths.update(p for p in known if p == folder or p.startswith(prefix))
            # Never through a link (a folder swapped for a link to elsewhere lists nothing), at
            # any depth; what the listing records (links, bad names) is looked at by the sync.
            listing = DiskScan(files={})
            paths.update(list_tree(self.root, folder, listing))
            paths.update(listing.files)
        return paths

    def reconcile(self, burst: bool = False) -> SyncReport:
        """Sync the whole tree: at start, after a burst or an overflow, and periodically. Once
        the daemon is asked to stop, raises _Stopped (at once, or after the slice of work in
        hand): in a large home on a busy machine a reconcile takes long enough that a stopping
        server would otherwise wait for it, with the writes in flight waiting behind it for
        the write turn, and nothing in it is owed to anyone (acknowledged writes are committed
        by their own passes; a person's files stay on disk, and the next start indexes and
        commits them)."""
        self._raise_if_stopping()
        if burst:
            self._wait_for_git(_BURST_MAX_WAIT_S)
        # Events queued by now are of changes made before this scan reads the tree, which sees
        # them: handled again after it, the tail of a checkout's events (queued while its first
        # thousands were taken) would make a second full reconcile for nothing.
        with self._cond:
            covered = self._take_events()
        if covered:
            self._follow_git(coalesce(covered, self.settings.burst_threshold))
        report = self._sync(None, stoppable=True)
        self.reconciles += 1
        with self._cond:
            self._next_reconcile = time.monotonic() + self.settings.reconcile_interval_s
        return report

    def _wait_for_git(self, limit_s: float) -> None:
        """A checkout in progress holds index.lock: reconcile once, after it, not halfway. (A merge
        or rebase stopped on a conflict is no reason to wait: the tree is what it is.)"""
        deadline = time.monotonic() + limit_s
        while (state := busy_state(self.root)) is not None and state.transient and time.monotonic() < deadline:
            with self._cond:
                if self._stopping:
                    return
                self._cond.wait(timeout=0.05)

    def _raise_if_stopping(self, *_: object) -> None:
        if self._stopping:
            raise _Stopped()

    def _sync(self, paths: list[str] | None, stoppable: bool = False) -> SyncReport:
        """Index ``paths`` (None: everything). ``stoppable``: given up (_Stopped) at the next
        progress event once the daemon is asked to stop (events come after each slice of texts
        embedded and each batch written: a sync's safe places to stop)."""
        started = time.monotonic()
        # A long sync (a first index, a checkout of many files) logs how far it got every so often.
        progress = log_every(log, _PROGRESS_LOG_EVERY_S)
        if stoppable:
            progress = _then(progress, self._raise_if_stopping)
        report = self.engine.sync(paths, progress=progress)
        with self._cond:
            for asked in self._asked:
                asked.waited.append(report)
        self.batches += 1
        plan = report.plan
        if not plan.empty:
            log.info("indexed %s in %.0f ms", plan.summary(), (time.monotonic() - started) * 1000)
        for path, error in sorted(report.errors.items()):
            log.warning("skipped %s: %s", path, error)
        self._add_pending(plan.changed_paths)
        return report

    def _add_pending(self, paths: Iterable[str]) -> None:
        paths = set(paths)
        if not paths:
            return
        now = time.monotonic()
        self._pending |= paths
        if self._pending_since is None:
            self._pending_since = now
        due = now + self.settings.commit_quiet_ms / 1000
        with self._cond:
            self._commit_due = min(due, self._pending_since + _COMMIT_MAX_DELAY_S)

    def commit_pending(self, quiet_s: float | None = None) -> list[str]:
        """Commit the indexed changes, unless the user's own git work is under way (then the
        changes wait, on disk and indexed, and the commit is retried with a backoff).

        Everything from the first look at git to the commit is done holding the write path's
        commit stage (WritePath.commit_stage): no commit pass of ours is then half done, so git
        having moved by one of them is seen for what it is (our own pass, settled), not as a
        person's git command to wait out. Looked at outside the stage, a look falling inside a
        pass (index.lock held, or the index written and HEAD not yet) put the commit off by
        ``commit_quiet_ms``, and under agents writing without a pause it could fall there again."""
        if not self._pending and not self._look_for_dropped:
            self._commit_due = None
            return []
        log.debug("committing %d indexed path(s): waiting for the commit stage", len(self._pending))
        with self.engine.writes.commit_stage():
            return self._commit_pending_staged(quiet_s)

    def _commit_pending_staged(self, quiet_s: float | None) -> list[str]:
        """commit_pending's work, holding the commit stage."""
        state = busy_state(self.root)
        if state is not None and not self._pending:
            # Only a look for dropped commits, which the git command's end (a move) asks again.
            return []
        if state is not None and state.transient:
            # A lock held for a moment (by a git command of the person's or another process's
            # pass: none of ours runs now): try again shortly, never backing off (doubling delays
            # let a person's edit wait far longer than any one hold of the lock).
            log.info("%s; will commit in a moment", state.reason)
            with self._cond:
                self._commit_due = time.monotonic() + _RETRY_MIN_S
            return []
        if state is not None:
            self._defer(state.reason, quiet=False)
            return []
        if not self._git_settled(quiet_s):
            return []
        writes = self.engine.writes
        # A turn whose process died before its commit is undone, never committed in part.
        for rel in writes.recover():
            self._pending.add(rel)
        # Paths of a change group still under way or waiting for its commit (in any process,
        # this one's under syncd serve): committed by it, so its turn stays one commit.
        held = writes.held() & self._pending
        self._put_back_dropped()
        self._look_for_dropped = False
        self._put_back_rewound(self._pending - held)
        try:
            ready = sorted(self._pending - held)
            shas = writes.commit_staged(ready) if ready else []
        except GitBusyError as exc:
            # A lock taken between our look and the commit is the ordinary, transient case; a
            # detached HEAD is not.
            now = busy_state(self.root)
            self._defer(exc.reason, quiet=now is not None and now.transient)
            return []
        except HistoryError as exc:
            log.warning("commit failed, will retry: %s", exc)
            self._retry_later()
            return []
        except BaseException:
            self._retry_later()  # else the due commit would be retried at once, in a loop
            raise
        for sha in shas:
            log.info("committed %s", sha[:10])
        if self._warned is not None:
            log.warning("git is free again: the waiting changes are committed")
            self._warned = None
        self.commits.extend(shas)
        self._pending = held
        self._pending_since = time.monotonic() if held else None
        self._retry_s = _RETRY_MIN_S
        with self._cond:
            self._commit_due = time.monotonic() + self.settings.commit_quiet_ms / 1000 if held else None
        self._note_head()
        return shas

    def _put_back_rewound(self, paths: set[str]) -> None:
        """Files a git command of the person's rewound under our commits (writes/rewind.py) get
        back what it took out before anything is committed; the restoration is committed as
        syncd's own change, never as the person deleting facts."""
        for rel, merged in find_rewound(self.root, paths).items():
            summary = f"Put back the facts a git command took out of {rel}"
            # Over the bytes the merge was made from: a save since then is not overwritten.
            if self.engine.writes.put_back.write(rel, merged.data, summary, over=merged.over):
                log.warning("a git command took committed facts out of %s; put them back", rel)

    def _put_back_dropped(self) -> None:
        """Commits a `git rebase --abort` took out of the branch (they landed after the rebase
        read HEAD; writes/rewind.py) get their changes merged back into the tree, committed as
        syncd's own change with the rest of the pending files. A file edited since the abort is
        committed as it is first (holding the commit stage, as this does), as the editor's; not
        while a live group has it written (its turn commits it whole): then looked at again."""
        writes = self.engine.writes

        def commit_first(paths: list[str]) -> None:
            if writes.held() & set(paths):
                raise GitBusyError(f"a change to {', '.join(paths)} is under way")
            writes.commit_staged(paths)

        self._pending.update(writes.put_back.dropped(commit_first))

    def _git_settled(self, quiet_s: float | None = None) -> bool:
        """Whether git is still enough to commit what the tree holds (WritePath.settle_due); if
        not, the commit is put off until it would be."""
        due = self.engine.writes.settle_due(quiet_s)
        if due > 0:
            log.debug("git moved a moment ago, not by a commit pass of ours: committing in %.2f s", due)
            with self._cond:
                self._commit_due = time.monotonic() + due
        return due == 0

    def _defer(self, reason: str, quiet: bool) -> None:
        """Commit later. Warn once per state, at once, with its fix; a lock a running git command
        holds for a moment is not worth a warning unless it lasts."""
        if not quiet and reason != self._warned:
            log.warning("not committing %d changed file(s) yet: %s", len(self._pending), reason)
            self._warned = reason
        else:
            log.info("%s; will commit later", reason)
        self._retry_later()

    def _retry_later(self) -> None:
        with self._cond:
            self._commit_due = time.monotonic() + self._retry_s
        self._retry_s = min(self._retry_s * 2, _RETRY_MAX_S)

    def _note_head(self) -> None:
        """Record in the index which commit it is aligned with (plus what status lists as
        uncommitted). Only when nothing of ours waits: else HEAD is not yet what we indexed."""
        if self._pending:
            return
        self.engine.note_aligned_commit(head_sha(self.root))


def _then(
    first: Callable[[SyncProgress], None], second: Callable[[SyncProgress], None]
) -> Callable[[SyncProgress], None]:
    """A progress listener telling ``first``, then ``second`` (which may raise to stop the sync)."""

    def both(event: SyncProgress) -> None:
        first(event)
        second(event)

    return both
