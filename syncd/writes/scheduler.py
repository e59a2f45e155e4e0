"""The write path of one engine: change groups, their journals, the commit queue, every commit.

See the package docstring (syncd/writes/__init__.py) for what an acknowledgement guarantees and
which lock protects what. This module is the one place that takes those locks.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from ..config import Settings
from ..errors import (
    ChangedMeanwhileError,
    ConflictError,
    GitBusyError,
    HistoryError,
    LockedError,
    OverwrittenError,
    StorageError,
    SyncdError,
)
from ..history.git import (
    busy_state,
    check_tree_writable,
    head_sha,
    operation_in_progress,
)
from ..history.intents import Intent, drop_intents, record_intent
from ..history.objects import committed_blob, object_format
from ..home import (
    CHANGE_HOLDER,
    Home,
    HomeLock,
    atomic_write,
    blob_sha,
    durable_append,
    file_blob_sha,
    git_dir,
    read_memory_file,
    sync_folders,
)
from .groups import ChangeGroup, current_group
from .handoff import Handed, TakeOver, daemon_gone_look, deferred, still_late, wait_handed, wait_indexed
from .indexer import Indexer
from .journal import GroupJournal, Original, held_paths, recover_abandoned
from .queue import CommitQueue
from .rewind import PutBack, find_rewound, head_holds, undo_would_uncommit
from .settle import GitSettle
from .turn import FairLock

__all__ = ["Indexer", "WritePath"]

log = logging.getLogger(__name__)

_ANY = object()
_POLL_S = 0.02
# How long an acknowledgement of a write handed to the daemon waits, once HEAD holds it, for the
# daemon's pass to put git's index in place (_wait_committed): a pass holds the lock at most
# about 2 s past its move of HEAD (staging._SETTLE_LIMIT_S); a person's git command may hold it
# longer, and HEAD holding the write is what the acknowledgement promises.
_INDEX_IN_PLACE_S = 3.0
# A takeover waiting for the home's lock looks this often whether HEAD took its change meanwhile.
_TAKEOVER_LOOK_S = 0.5
# How long a change with no daemon waits for git to settle before putting back what a rebase
# abort dropped (else the next change does): a few of commit_quiet_ms's 0.3 s.
_PUT_BACK_SETTLE_S = 1.5
# How long after a git command of someone else's a write checks its file was not rewound by it.
_REWIND_WATCH_S = 30.0


class WritePath:
    """Writes through markdown for one engine: ``changes`` / ``write_file`` / ``append_file`` for
    the API, ``commit_editor`` for the daemon, ``quiesced`` for a revert or a reindex.

    Every writer's file is read as ``home.read_memory_file`` reads it: a symbolic link at or on
    the way to it refuses the write (ParseError, naming the link) before anything is written, so
    no writer (facts, blocks, MEMORY.md, transcripts, the workbench) replaces a link of the
    person's by a file or writes through it."""

    def __init__(self, home: Home, settings: Settings, indexer: Indexer, lock: HomeLock | None):
        self.home = home
        self.settings = settings
        self._indexer = indexer
        self._lock = lock  # the engine's lifetime lock (None: read-only engine)
        self._turn = FairLock()  # first come, first served: a daemon step is never starved by agents
        # Also keeps what groups wrote and have not indexed yet, and what was undone (its condition
        # guards those sets), and holds the commit stage for commits made outside it.
        self._queue = CommitQueue(self._index_pass, self._commit_pass, self._settle_pass)
        # What each file looked like (inode, size, mtime) right after we wrote it: a watcher's
        # event for a file still so is our own write, which our pass indexes.
        self._written_stat: dict[str, tuple[int, int, int]] = {}
        # The sha each path was last written with by a group of ours: what its commit must hold
        # (written under the write turn; read by the commit pass of the groups that wrote it).
        self._expected: dict[str, str] = {}
        # When git is settled enough to commit, and when someone else last moved it.
        self._settle = GitSettle(home, settings)
        # What git commands took out of the tree or the branch, written back (by a lock holder).
        self.put_back = PutBack(home)

    # -- the API's writes -----------------------------------------------------------------------

    def changes(self, intent: Intent | None = None) -> ChangeGroup:
        return ChangeGroup(self, intent)

    def write_file(
        self, rel: str, data: bytes, expected_sha: str | object | None = _ANY, intent: Intent | None = None
    ) -> str:
        check_tree_writable(self.home.root)  # the person's merge or rebase: refused, nothing written
        path = self.home.root / rel
        sha = blob_sha(data)

        def original() -> Original:
            current = read_memory_file(self.home.root, rel)
            return Original() if current is None else Original(data=current)

        def put(sync: bool) -> object:
            if expected_sha is _ANY:
                return atomic_write(path, data, sync_folder=sync)
            return atomic_write(path, data, expected_sha, sync_folder=sync)

        return self._place(path, sha, intent, put, original, lambda _: data)

    def append_file(self, rel: str, data: bytes, expected_size: int, intent: Intent | None = None) -> str:
        check_tree_writable(self.home.root)  # the person's merge or rebase: refused, nothing written
        path = self.home.root / rel
        current = read_memory_file(self.home.root, self.home.rel(path)) or b""
        if len(current) != expected_size:
            raise ConflictError(path, f"size {expected_size}", f"size {len(current)}")
        sha = blob_sha(current + data)
        existed = os.path.lexists(path)

        def original() -> Original:
            return Original(size=expected_size) if existed else Original()

        def put(_sync: bool) -> object:  # an append is made durable as it is written
            return durable_append(path, data, expected_size=expected_size)

        return self._place(path, sha, intent, put, original, lambda before: (before or b"") + data)

    def _check_settled(self, group: ChangeGroup) -> None:
        """Before anything is written, let a git command of the person's that just moved HEAD or
        the index finish (see settle_due): the write would wait for it anyway, and the tree it
        leaves dirty would make their next command fail ("local changes would be overwritten").
        Their git comes first; past ``lock_wait_s`` the write is refused. A group handed to a
        daemon leaves the timing of commits to it. While a commit pass of ours is under way, git
        moves under it and cannot be told from the person's command: the write goes ahead (the
        pass that commits it waits for git to settle itself), else every writer would wait out
        the quiet time after every pass of the others, each holding the write turn as it
        waited."""
        if group.mode != "handoff" and not self._queue.committing():
            self._settle.wait(time.monotonic() + self.settings.lock_wait_s)

    def _await_unheld(self, rel: str, group: ChangeGroup) -> None:
        """Handed to a daemon: wait while a group of another process (the daemon's own API, say)
        has ``rel`` written and not yet committed or undone, as ``wait_for_path`` does within a
        process: written on top of it, our commit would carry its bytes even if it is refused.
        Past ``lock_wait_s`` the write is refused, before anything is written."""
        deadline = time.monotonic() + self.settings.lock_wait_s
        while rel in held_paths(self.home, besides=group.journal):
            if time.monotonic() >= deadline:
                raise GitBusyError(
                    f"not written, retry in a moment: another writer's change to {rel} is still waiting for its commit"
                )
            time.sleep(_POLL_S)

    def _commit_foreign(self, rel: str) -> None:
        """Before a group builds on ``rel``, commit what someone else changed in it and nobody
        committed yet (a hand edit the daemon has not committed, a ``git stash pop``), as theirs
        (commit_changes attributes it: its intent, else the person): folded into the group's
        commit it would be recorded as the agent's turn, and taken back with it if the group is
        undone. A change that took committed facts out (rewind.py) is refused, not committed as
        the person deleting them. Nothing of the group is written yet; GitBusyError if git stays
        busy. Only in SHA-1 repositories, whose blob ids ours are (others fold it in, as before)."""
        root = self.home.root
        if object_format(root) != "sha1":
            return
        current = file_blob_sha(root / rel)
        try:
            committed = committed_blob(root, rel)
        except SyncdError:
            return  # HEAD cannot be read just now: the commit pass will tell
        if current is None or current == committed:
            return
        if find_rewound(root, [rel]):
            raise GitBusyError(
                f"not written, retry in a moment: a git command of yours took facts out of {rel} "
                "that are committed; syncd puts them back first"
            )
        with self._queue.commit_stage():
            self._commit_retrying({rel}, {})

    def _check_not_rewound(self, rel: str) -> None:
        """Refuse, before anything is written, a write that would build on a file a git command
        of the person's rewound (rewind.py): committed, it would delete facts acknowledged
        before. Looked at for a while after git moved under someone else's command, and always
        for a file missing from the tree (rare, and cheap to look at: HEAD's objects are in
        memory): a stash's clean can take one out whenever, and a write starting it anew would
        delete what HEAD holds of it however long after."""
        gone = not os.path.lexists(self.home.root / rel)
        if not gone and time.time() - self._settle.foreign_moved > _REWIND_WATCH_S:
            return
        if not gone and self._settle.as_we_left_it():
            return  # git's index is as our last pass left it: nothing rewound since
        rewound = find_rewound(self.home.root, [rel])
        if rel in rewound and gone:
            # Taken out whole (a stash racing our commit): put back as HEAD has it, so the write
            # builds on what is committed instead of starting the file anew.
            self.put_back.taken_whole(rel, rewound[rel].data)
        elif rewound:
            raise GitBusyError(
                f"not written, retry in a moment: a git command of yours took facts out of {rel} "
                "that are committed; syncd puts them back first"
            )

    def _place(
        self,
        path: Path,
        sha: str,
        intent: Intent | None,
        put: Callable[[bool], object],
        original: Callable[[], Original],
        after: Callable[[bytes | None], bytes],
    ) -> str:
        """Write through ``put(sync_folder)`` inside a group (or a group of one): journal the
        path, record the intent for the content ``sha`` it will hold, write, then index or wait
        for the daemon. A group this process commits leaves its folders' fsync to the commit
        pass (_commit_pass), which makes them durable before any of its groups is acknowledged:
        once per pass for every write in it, not once per write under the write turn."""
        with self.changes(intent) as group:
            rel = self.home.rel(path)
            recorded = group.adopt(intent)
            self._check_settled(group)
            if group.mode == "own":
                # Another group's version of this file waits for its commit: let it have it.
                self._queue.wait_for_path(rel)
                if not self.written_as_is(rel):
                    self._commit_foreign(rel)
            elif group.mode == "handoff":
                self._await_unheld(rel, group)
                if not group.written:
                    with contextlib.suppress(GitBusyError, HistoryError):
                        group.handed_from = head_sha(self.home.root)
            _journal(group).before_write(rel, sha, original)
            if group.mode != "handoff":
                self._check_not_rewound(rel)
            if recorded is not None:
                # Handed to a daemon, the intent is for a commit that may come after a power cut.
                record_intent(self.home, rel, sha, recorded, durable=group.mode == "handoff")
            try:
                before = read_memory_file(self.home.root, rel)
                put(group.mode == "handoff")
            except BaseException:
                # Nothing written (a compare-and-swap that lost, say): an intent left for these
                # bytes would name this agent for whoever's file comes to hold them later.
                if recorded is not None and group.written.get(rel) != sha:
                    drop_intents(self.home, {rel: sha})
                raise
            group.changed[rel] = (group.changed[rel][0] if rel in group.changed else before, after(before))
            group.written[rel] = sha
            self._expected[rel] = sha
            with contextlib.suppress(OSError):
                st = os.lstat(path)
                self._written_stat[rel] = (st.st_ino, st.st_size, st.st_mtime_ns)
            if group.mode == "handoff":
                # The daemon indexes it; waiting here lets the rest of the group read it back.
                # A daemon gone meanwhile never will: the group's end commits it (_wait_committed).
                if not wait_indexed(self._indexer.indexed_sha, self.home, rel, sha, self.settings.lock_wait_s):
                    log.warning(
                        "%s was written but not indexed within %.0f s; is the daemon running?",
                        rel,
                        self.settings.lock_wait_s,
                    )
            else:
                self._queue.written([rel])
        return sha

    def written_as_is(self, rel: str) -> bool:
        """Whether ``rel`` is still exactly as we last wrote it (same inode, size and mtime)."""
        seen = self._written_stat.get(rel)
        if seen is None:
            return False
        try:
            st = os.lstat(self.home.root / rel)
        except OSError:
            return False
        return (st.st_ino, st.st_size, st.st_mtime_ns) == seen

    # -- a group's life (the GroupOwner protocol) -------------------------------------------------

    def begin(self, group: ChangeGroup) -> None:
        self._turn.acquire()
        try:
            if self._lock is not None:
                group.mode = "own"
            else:
                group.lock = self._borrow_lock()
                group.mode = "borrowed" if group.lock is not None else "handoff"
                if group.lock is not None:
                    self._indexer.check_borrowed_index()
                    self.recover()
                    self._commit_dropped()
            group.journal = GroupJournal.open(self.home)
        except BaseException:
            self.release(group)
            raise

    def try_begin(self, group: ChangeGroup) -> bool:
        if self._lock is None or not self._turn.acquire(blocking=False):
            return False
        try:
            group.mode = "own"
            group.journal = GroupJournal.open(self.home)
        except BaseException:
            self.release(group)
            raise
        return True

    def _borrow_lock(self, deadline: float | None = None) -> HomeLock | None:
        """The home lock for one change, or None when a daemon holds it (it takes our writes).
        Another process's engine lets go between its changes, so we wait for it, bounded (by
        ``deadline``; default ``lock_wait_s`` from now); LockedError, naming the holder, past it."""
        lock = self.home.lock()
        deadline = time.monotonic() + self.settings.lock_wait_s if deadline is None else deadline
        while True:
            try:
                return lock.acquire(CHANGE_HOLDER, after_waiters=True)
            except LockedError as exc:
                if lock.held_by_daemon():
                    return None
                if time.monotonic() >= deadline:
                    raise LockedError(
                        lock.path, f"{exc.holder}, which did not let go within {self.settings.lock_wait_s:.0f} s"
                    ) from None
            time.sleep(_POLL_S)

    def end(self, group: ChangeGroup, failed: bool) -> None:
        ticket = None
        try:
            if failed:
                self._undo(group)
            elif group.mode == "handoff":
                _journal(group).close()  # the daemon may commit our paths now
                self._wait_committed(group)
            elif group.written and group.mode == "own":
                # Indexed and committed by the queue (group commit), once this group has let go
                # of the write turn: the next group writes while this one's is done.
                ticket = self._queue.add(group.written)
            elif group.written:
                # A borrowed home lock: indexed and committed before it is given back.
                self._land(group, lambda: self._index_and_commit(set(group.written)))
        finally:
            try:
                self.release(group, keep_journal=ticket is not None)
            finally:
                if ticket is not None:  # a queued ticket is always waited for: its pass must run
                    try:
                        self._land(group, lambda: self._queue.wait(ticket))
                    finally:
                        # Only now, acknowledged or undone, may the next group write its paths.
                        self._queue.finish(ticket)

    def release(self, group: ChangeGroup, keep_journal: bool = False) -> None:
        """Let go of what ``begin`` took; the journal too unless the group still waits for its
        commit (a kill -9 until then must undo it)."""
        try:
            if group.journal is not None and not keep_journal:
                group.journal.close()
            if group.lock is not None:
                group.lock.release()
        finally:
            self._turn.release()

    def _land(self, group: ChangeGroup, commit: Callable[[], dict[str, str | None] | None]) -> None:
        """Run ``commit``, which says what of each path is now committed: the group is
        acknowledged only if each of its files landed exactly as written, or HEAD holds each of its
        changes (a commit made meanwhile took them in: _taken_in); otherwise it is undone and
        GitBusyError says why, so the caller retries (nothing of it was kept)."""
        try:
            landed = commit() or {}
        except StorageError as exc:
            if exc.saved:  # committed, not indexed: kept, and the next sync indexes it
                _journal(group).close()
            else:
                self._undo(group)
            raise
        except ChangedMeanwhileError:
            if self._taken_in(group):
                return
            self._undo(group)
            raise
        except BaseException:
            self._undo(group)
            raise
        missing = sorted(rel for rel, sha in group.written.items() if landed.get(rel) != sha)
        if missing and not self._taken_in(group):
            self._undo(group)
            raise GitBusyError(
                f"not kept, retry: {', '.join(missing)} changed under the commit (a git command of yours "
                "rewrote the working tree meanwhile); nothing of this change was committed"
            )
        _journal(group).close()

    def _taken_in(self, group: ChangeGroup) -> bool:
        """Whether a commit made meanwhile took the group's files in with its changes (the
        person's `git commit -a` over them): then the group is committed and acknowledged, and
        what it kept of its own (its journal, intents, expected shas) goes as an undo's would,
        its files left as they are: what the tree still holds of the group's writes is committed
        (a file put back there would undo, at the next commit, a line it took out).

        Looked at holding the commit stage, with the group's intents forgotten first: a commit of
        this process (the daemon's commit of a `git stash pop` that brought the group's bytes
        back, another group's commit of the file as someone else's change) either came before
        and, finding the intent, named the agent (HEAD holds the change: acknowledged), or comes
        after and names the person, from whose stash the bytes came back. Looked at without the
        stage, a commit between the look and the undo named the agent for a write that was then
        answered "nothing of this change was committed"."""
        if not group.written.keys() <= group.changed.keys():
            return False
        with self._queue.commit_stage():
            drop_intents(self.home, group.written)
            if not head_holds(self.home.root, group.changed):
                return False
        log.info("a commit made meanwhile took in %s as written: acknowledged", ", ".join(sorted(group.written)))
        self._undo(group, put_back=False)
        return True

    def _undo(self, group: ChangeGroup, put_back: bool = True) -> None:
        """Put the group's files back as they were (unless not ``put_back``: committed by someone
        else, _taken_in), forget its provenance, and bring the index in step with what is on disk
        now."""
        try:
            root = self.home.root
            # A file HEAD holds as the group wrote it is committed: never taken back out of the tree.
            restored = (
                _journal(group).rollback(root, keep=functools.partial(undo_would_uncommit, root)) if put_back else []
            )
            if restored:
                log.warning("undid an unfinished change: %s", ", ".join(restored))
            # They may now differ from HEAD (a person's change under the undone write), and the
            # index follows them, so no sync would list them: the daemon asks (take_undone).
            self._queue.undone(group.written)
            for rel, sha in group.written.items():
                if self._expected.get(rel) == sha:
                    del self._expected[rel]
            drop_intents(self.home, group.written)
            if group.mode != "handoff" and group.written:
                self._queue.written(group.written)
                self.flush(only=group.written.__contains__)
        finally:
            _journal(group).close()

    # -- indexing and committing -------------------------------------------------------------------

    def _index_and_commit(self, paths: set[str]) -> dict[str, str | None]:
        """Index ``paths``, then commit them. A failure to index is StorageError with
        ``saved=True``; the commit is made all the same."""
        try:
            receipt = self._index_pass(paths)
        finally:
            landed = self._commit_pass(paths)
        self._settle_pass(receipt)
        return landed

    def _index_pass(self, paths: set[str]) -> tuple[set[str], int]:
        """The queue's index stage: index ``paths`` (those not indexed yet), searchable at once;
        the index writes its tables behind. Returns what ``_settle_pass`` waits for."""
        try:
            self.flush(only=paths.__contains__)
        except Exception as exc:
            raise StorageError.not_indexed(paths, exc) from exc
        return paths, self._indexer.index_applied()

    def _settle_pass(self, receipt: tuple[set[str], int]) -> None:
        paths, applied = receipt
        try:
            self._indexer.wait_index_written(applied)
        except SyncdError as exc:
            raise StorageError.not_indexed(paths, exc) from exc

    def _commit_pass(self, paths: set[str]) -> dict[str, str | None]:
        """The queue's commit stage: commit ``paths``; return, per path, the sha now committed
        for it (absent: not committed as it was). A lock a git command of the user's holds for a
        moment is waited out (up to ``lock_wait_s``); anything lasting is raised."""
        root = self.home.root
        # The groups' renames, durable before anything of them is committed (see _place).
        sync_folders(root / rel for rel in paths)
        before = {rel: file_blob_sha(root / rel) for rel in paths}
        expected = {rel: self._expected[rel] for rel in paths if rel in self._expected}
        self._commit_retrying(paths, expected)
        # In a SHA-1 repository the pass checked what it staged against the bytes written
        # before HEAD moved: those landed, whatever the tree holds by now. Otherwise a file
        # unchanged from before the pass to after it was committed as it is.
        staged_checked = object_format(root) == "sha1"
        landed: dict[str, str | None] = {}
        taken: dict[str, str] = {}
        for rel in paths:
            if staged_checked and rel in expected:
                landed[rel] = expected[rel]
                if before[rel] is not None and not os.path.lexists(root / rel):
                    taken[rel] = expected[rel]
                continue
            sha = file_blob_sha(root / rel)
            if sha is not None and sha == before[rel]:
                landed[rel] = sha
        if taken:
            self._put_back_taken_under_commit(taken)
        # The commit rewrote git's index file: asking now whether it holds unmerged paths
        # (remembered per index version) spares the next writer that git process.
        with contextlib.suppress(SyncdError):
            operation_in_progress(root)
        return landed

    def _put_back_taken_under_commit(self, taken: dict[str, str]) -> None:
        """Files the pass committed (``{path: blob sha}``) that are gone from the tree after it:
        put back as committed if HEAD still holds them (rewind.PutBack.taken_under_commit). The
        git command that took them out is let finish first (its lock gone, git settled, for at
        most ``_PUT_BACK_SETTLE_S``): a `git checkout` of another branch deletes the files its
        commit lacks before it moves HEAD, and a file put back in that moment would be left in
        the other branch's tree, uncommitted, a stray of a turn committed elsewhere."""
        deadline = time.monotonic() + _PUT_BACK_SETTLE_S
        while busy_state(self.home.root) is not None or self.settle_due() > 0:
            if time.monotonic() >= deadline:
                log.info("git is still busy: not putting back %s", ", ".join(sorted(taken)))
                return
            time.sleep(_POLL_S)
        for rel, sha in sorted(taken.items()):
            self.put_back.taken_under_commit(rel, sha)

    def _commit_retrying(self, paths: set[str], expected: dict[str, str]) -> None:
        """Commit ``paths`` (the caller holds the commit stage) once git is settled, waiting out
        a lock a git command of the user's holds for a moment (up to ``lock_wait_s``)."""
        deadline = time.monotonic() + self.settings.lock_wait_s
        while True:
            self._settle.wait(deadline)
            try:
                self._commit(paths, expected)
                return
            except ChangedMeanwhileError:
                raise
            except GitBusyError:
                state = busy_state(self.home.root)
                if (state is None or state.transient) and time.monotonic() < deadline:
                    time.sleep(_POLL_S)
                    continue
                raise
            except HistoryError as exc:
                # A git command of the person's rewriting the tree under the pass (git checks a
                # file out by removing it and writing it anew: update-index, between its look
                # and its read, fails "Unable to process path"): git is busy, not broken. Tried
                # again once it settles; past the deadline the writers are told to retry (503),
                # never answered as if their request were wrong.
                if busy_state(self.home.root) is None and self.settle_due() == 0:
                    raise
                if time.monotonic() >= deadline:
                    raise GitBusyError(
                        f"git kept changing the tree under the commit ({exc.detail}); nothing of this "
                        "change was kept, retry once your git command is done"
                    ) from exc
                time.sleep(_POLL_S)

    def settle_due(self, quiet_s: float | None = None) -> float:
        """Seconds until git counts as settled enough to commit (0: it is): see settle.py."""
        return self._settle.due(quiet_s)

    def commit_editor(self, paths: Iterable[str] | None, expected: dict[str, str] | None = None) -> list[str]:
        """The one way anything is committed (our groups' passes, the daemon's batches, ``syncd
        sync``): what git shows as changed under ``paths`` (None: everywhere), one commit per
        intent, holding the queue's commit stage. Raises GitBusyError while the user's git work
        is under way (nothing is committed), HistoryError when git fails otherwise."""
        with self._queue.commit_stage():
            return self._commit(paths, expected)

    def commit_stage(self) -> contextlib.AbstractContextManager[None]:
        """The commit stage (one commit at a time in this process, the queue's passes included),
        for a caller that must look at git and commit with no pass of ours half done meanwhile
        (the daemon: what moved git since our last pass is then the person's, or another
        process's). Not reentrant: inside it, commit with :meth:`commit_staged`."""
        return self._queue.commit_stage()

    def commit_staged(self, paths: Iterable[str] | None) -> list[str]:
        """:meth:`commit_editor` for a caller holding :meth:`commit_stage`."""
        return self._commit(paths, None)

    def _commit(self, paths: Iterable[str] | None, expected: dict[str, str] | None) -> list[str]:
        """commit_editor's work, for a caller holding the commit stage (the queue's pass does)."""
        from ..history.committer import commit_changes

        try:
            return commit_changes(self.home, self.settings, None if paths is None else sorted(paths), expected)
        finally:
            self._settle.committed()

    # -- reading one's writes, waiting ----------------------------------------------------------------

    def flush(self, only: Callable[[str], bool] | None = None) -> None:
        """Index what we wrote but have not indexed yet (read-your-writes in a group); with
        ``only``, just the paths it accepts."""

        def wanted() -> list[str]:
            return self._queue.unindexed(only)

        # Looked at before waiting for the index: a read for one user must not wait for a pass
        # that is indexing other users' files.
        if not wanted():
            return
        self._queue.indexed(self._indexer.index_paths(wanted))

    def pending_reads(self) -> bool:
        """Whether a read in the current group should flush first."""
        return current_group(self) is not None and bool(self._queue.unindexed())

    def _wait_committed(self, group: ChangeGroup) -> None:
        """Handed to the daemon: wait (``lock_wait_s`` in all) until HEAD holds the group's
        changes (:class:`handoff.Handed`) and the daemon's pass has let go of git's index lock.
        A daemon gone meanwhile: committed here (:meth:`_take_over`). Late is CommitDeferredError
        when the files still hold the changes: saved, their intents recorded, committed by the
        daemon once git is free (or the next sync); kept, so not to be written again.

        A file changed again before any commit (a person's edit, another writer) is waited for
        the same way: acknowledged once HEAD holds our lines, whoever's commit took them in. If
        someone took the change out before a commit held it (the person deleted the agent's
        line), no commit ever will: OverwrittenError says so, rather than an acknowledgement no
        commit keeps, "kept" (CommitDeferredError), or a retry (ConflictError) that would undo
        their edit. Decided as soon as HEAD shows it gone for good (``Handed.lost``: the branch
        moved on with commits of the file, none holding it, and neither the file, a stash nor
        a git command under way does), else once waiting is over (deadline, or takeover): a
        git command of the person's (a stash, then its pop) takes uncommitted lines out for a
        moment, and a commit that landed while they were out says nothing of them.

        Why the lock too: a pass moves HEAD, then puts its index in place, both under index.lock
        (staging.HeldIndex). Acknowledged as soon as HEAD moved, a caller's next `git status`
        could land between the two and see its files staged backwards ("MM"), which a pass in
        this process never shows (it returns after both). The lock was taken before HEAD moved,
        so once HEAD holds the writes, the lock gone means the index is in place. A lock still
        held longer (a person's long git command) does not undo the acknowledgement:
        HEAD holds the writes."""
        deadline = time.monotonic() + self.settings.lock_wait_s
        late = {
            rel: Handed(self.home.root, rel, sha, *group.changed[rel], group.handed_from)
            for rel, sha in group.written.items()
        }
        while True:
            late = wait_handed(late, deadline, daemon_gone_look(self.home.lock()))
            if not late:
                break
            lost = sorted(rel for rel, handed in late.items() if handed.lost)
            if lost:
                raise OverwrittenError(lost)  # HEAD shows it gone for good: no need to wait on
            outcome = self._take_over(late, deadline)
            if outcome == "landed":
                return
            if outcome in ("daemon", "waiting") and time.monotonic() < deadline:
                continue  # a daemon (started anew), or another writer's change, commits them
            taken_out = sorted(rel for rel, handed in late.items() if not handed.kept())
            if taken_out:
                raise OverwrittenError(taken_out)
            raise deferred(late, self.settings.lock_wait_s, outcome)
        folder = git_dir(self.home.root)
        until = min(deadline, time.monotonic() + _INDEX_IN_PLACE_S)
        while folder is not None and (folder / "index.lock").exists() and time.monotonic() < until:
            time.sleep(_POLL_S)

    def _take_over(self, handed: dict[str, Handed], deadline: float) -> TakeOver:
        """The daemon a change was handed to let go of the home before committing it (stopped,
        or killed): index and commit it here, borrowing the home's lock as a change with no
        daemon does (waiting, up to ``deadline``, for other agents' changes that borrow it).
        "landed" once HEAD holds each change of ``handed`` (whoever committed it: an agent's
        change that built on it commits it too); "daemon" when a daemon holds the lock (again:
        it commits them); "held" when another writer kept the lock past ``deadline``; "waiting"
        when another live group has written a file since and not committed it yet; "refused"
        when git refused, or a file no longer holds the change (taken out by someone else:
        nothing of ours to commit). A file changed again that still holds the change is
        committed as it is now (the other's lines with ours, as the daemon would have: their
        intent, else as the person's edit). StorageError (``saved``) when committed but not
        indexed, as for a borrowed change."""
        while True:
            if not still_late(handed):
                return "landed"
            try:
                lock = self._borrow_lock(min(deadline, time.monotonic() + _TAKEOVER_LOOK_S))
                break
            except LockedError:
                if time.monotonic() >= deadline:
                    return "landed" if not still_late(handed) else "held"
        if lock is None:
            return "daemon"
        try:
            late = still_late(handed)  # looked at again under the lock: nobody commits now
            if not late:
                return "landed"
            self.recover()
            # A file another live group has written and not committed yet is its to commit (with
            # our lines, if it kept them): committed here, its bytes would ride along if refused.
            held = late.keys() & self.held()
            if held:
                log.info("the daemon stopped; %s waits for another writer's change to commit it", ", ".join(held))
            # What each file holds now is what this commit must hold (the other's version of a
            # file changed again): checked against the bytes staged, as for our own writes.
            now = {
                rel: sha
                for rel, one in late.items()
                if rel not in held and one.kept() and (sha := file_blob_sha(self.home.root / rel))
            }
            if not now:
                return "waiting" if held else "refused"
            self._expected.update(now)
            self._queue.written(now)
            self._index_and_commit(set(now))
        except StorageError as exc:
            if not exc.saved:
                raise
            log.warning("the daemon stopped before committing %s; committed here, not indexed", ", ".join(late))
            raise
        except SyncdError as exc:
            log.warning("the daemon stopped before committing %s, and git refused it here: %s", ", ".join(late), exc)
            return "landed" if not still_late(handed) else "refused"
        finally:
            lock.release()
        log.info("the daemon stopped before committing %s; committed here", ", ".join(now))
        if not still_late(handed):
            return "landed"
        return "waiting" if held else "refused"

    # -- whole-home operations ---------------------------------------------------------------------

    def exclusive(self) -> FairLock:
        """The write turn: a group holds it from start to end; the daemon takes it around each
        of its steps, so nothing of its own interleaves with a group written from another thread."""
        return self._turn

    @contextlib.contextmanager
    def quiesced(self) -> Iterator[None]:
        """No group writing, none waiting for its commit, no commit under way: for a revert or
        anything else that rewrites the tree through git. Takes the write turn, waits for the
        groups already acknowledged-to-be to be committed, then holds the commit lock."""
        with self._turn:
            self._queue.wait_idle()
            with self._queue.commit_stage():
                yield

    def take_undone(self) -> set[str]:
        """The paths undone since the last call (for the daemon to commit what is there now)."""
        return self._queue.take_undone()

    def recover(self) -> list[str]:
        """Undo the groups of processes that died before their commit (see journal.py)."""
        root = self.home.root
        return recover_abandoned(self.home, functools.partial(undo_would_uncommit, root))

    def _commit_dropped(self) -> None:
        """With no daemon (a change that borrows the home's lock), what a `git rebase --abort`
        took out of the branch is put back and committed, as syncd's own change, before the
        change writes: nothing else would. A commit git refuses now leaves the files written,
        with their intent, for the next commit of them."""
        try:
            if busy_state(self.home.root) is not None:
                raise GitBusyError("a git command of the person's is under way")
            # Between the steps of a git command (see settle_due) the tree is half rewritten:
            # merged into then, its lines would ride along. Waited out for a moment (the home's
            # lock is held meanwhile, and the change's own write waits for git too), else later.
            self._settle.wait(time.monotonic() + _PUT_BACK_SETTLE_S)
        except GitBusyError:
            return  # what it aborts is looked at once git settles (not looked at till then)
        written = self.put_back.dropped(self._commit_as_is)
        if not written:
            return
        # Committed as merged here: a sha this process wrote before the abort is stale now.
        self._expected.update(written)
        self._queue.written(written)
        try:
            self._index_and_commit(set(written))
        except SyncdError as exc:
            log.warning("put back %s, not committed yet: %s", ", ".join(written), exc)

    def _commit_as_is(self, paths: list[str]) -> None:
        """Commit ``paths`` as the tree holds them (their intent's author, else the person's)."""
        with self._queue.commit_stage():
            self._commit_retrying(set(paths), {})

    def held(self) -> set[str]:
        """Paths of groups still open or waiting for their commit, in any live process."""
        return held_paths(self.home)


def _journal(group: ChangeGroup) -> GroupJournal:
    """The journal ``begin`` opened for ``group``: every group that writes has one."""
    assert group.journal is not None
    return group.journal
