"""The commit queue: change groups that have written their files wait here to be indexed and
committed together (group commit), in two stages that overlap.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Generic, TypeVar, cast

R = TypeVar("R")  # what indexing a batch returns, handed to settle
C = TypeVar("C")  # what a commit returns, handed to every group of its batches

__all__ = ["CommitQueue"]


@dataclass(eq=False)
class _Batch(Generic[R]):
    """Groups' paths taken from the queue together: tickets ``first``..``last``."""

    paths: set[str]
    first: int
    last: int
    indexed: bool = False
    failure: BaseException | None = None  # of its indexing
    receipt: R | None = None  # what indexing returned, for ``settle``


class CommitQueue(Generic[R, C]):
    """Change groups waiting for their files to be indexed and committed, done together (group
    commit), in two stages that overlap.

    A group that has written its files queues their paths and waits. A waiter that finds the
    index stage free takes everything queued so far and indexes it (``index(paths)``: one
    apply); a waiter that finds the commit stage free takes every batch indexed so far and
    commits them together (``commit(paths)``: one commit per intent, made as one chain, so
    the git processes of a chain are paid once for all of them). So the next batch is indexed
    while the last one commits, batches indexed meanwhile share the next commit, and each group
    still returns only once its own commit is made. Batches are committed in the order they
    were indexed; a batch whose indexing failed is committed all the same, then the failure is
    raised in each of its groups, as a failed commit's is in each group it held. What indexing
    returned is handed to ``settle`` once the batch is committed: what it raises is that batch's
    failure (the index's own tables are written behind, beside the commit: see Index.apply).
    Settling holds the commit stage: the groups arriving meanwhile then share the next commit.
    Letting the stage go before settling was tried: passes came sooner with fewer groups each,
    and the git processes paid per add outweighed the wait: each add cost more CPU and fewer
    adds were acknowledged a second than with the stage held (bench_adds.py measures both).
    What ``commit`` returned (which of the paths landed, and as what) is what :meth:`wait`
    returns to each group of the batches it committed.

    A path queued, being indexed, waiting for its commit or for its group to take in the
    outcome is not written again until that group calls :meth:`finish` (``wait_for_path``): two
    turns' versions of one file must not fold into one commit, and a group whose commit failed
    undoes its write before anyone else builds on it (else the next writer's commit would carry
    the refused write's bytes)."""

    def __init__(
        self,
        index: Callable[[set[str]], R],
        commit: Callable[[set[str]], C],
        settle: Callable[[R], object] = lambda receipt: None,
    ):
        self._index, self._commit, self._settle = index, commit, settle
        self._cond = threading.Condition()
        self._queued: set[str] = set()
        # ticket -> its paths, from add() until its group calls finish(): what wait_for_path waits out.
        self._held: dict[int, frozenset[str]] = {}
        # Written by a group, not indexed yet (by a read-your-writes flush or the index stage).
        self._unindexed: set[str] = set()
        # Written by groups since undone: for the daemon to commit what they hold now.
        self._undone: set[str] = set()
        self._batches: list[_Batch[R]] = []  # taken from the queue, not committed yet, in order
        self._indexing = False
        self._committing = False
        self._stage_waiting = 0  # commits outside the queue waiting for the stage: they go first
        self._issued = 0  # tickets handed out
        self._done = 0  # every ticket up to this one has been committed
        # (first, last ticket) -> [error or None, commit's result, readers left]
        self._outcomes: dict[tuple[int, int], list] = {}

    def add(self, paths: Iterable[str]) -> int:
        """Queue ``paths``; the ticket to :meth:`wait` on. Every ticket must be waited on, then
        given back with :meth:`finish`."""
        with self._cond:
            paths = frozenset(paths)
            self._queued |= paths
            self._issued += 1
            self._held[self._issued] = paths
            return self._issued

    def finish(self, ticket: int) -> None:
        """The group of ``ticket`` has taken in its outcome (acknowledged, or undone): its paths
        may be written again."""
        with self._cond:
            self._held.pop(ticket, None)
            self._cond.notify_all()

    def wait(self, ticket: int) -> C | None:
        """Return what the commit of ``ticket``'s paths returned, once it is made, doing a
        stage's work whenever one is free and has work. If their indexing or their commit
        failed, that error is raised here, in every group of the batch."""
        with self._cond:
            while self._done < ticket:
                if not self._indexing and self._issued > self._last_taken():
                    self._index_next()
                elif not self._committing and not self._stage_waiting and self._batches and self._batches[0].indexed:
                    self._commit_indexed()
                else:
                    self._cond.wait()
            for (first, last), entry in list(self._outcomes.items()):
                if first <= ticket <= last:
                    entry[2] -= 1  # each ticket is waited for once: the last reader drops it
                    if not entry[2]:
                        del self._outcomes[(first, last)]
                    if entry[0] is not None:
                        raise entry[0]
                    return entry[1]
            return None

    def _last_taken(self) -> int:
        """The last ticket taken from the queue."""
        return self._batches[-1].last if self._batches else self._done

    def _index_next(self) -> None:
        """Index everything queued (called and returning with ``_cond`` held)."""
        batch: _Batch[R] = _Batch(self._queued, self._last_taken() + 1, self._issued)
        self._queued = set()
        self._batches.append(batch)
        self._indexing = True
        self._cond.release()
        try:
            batch.receipt = self._index(batch.paths)
        except BaseException as exc:  # noqa: BLE001 - raised in the batch's groups once committed
            batch.failure = exc
        finally:
            self._cond.acquire()
            batch.indexed = True
            self._indexing = False
            self._cond.notify_all()

    def _commit_indexed(self) -> None:
        """Commit every batch indexed so far, oldest first, as one (called with ``_cond`` held)."""
        ready: list[_Batch[R]] = []
        while len(ready) < len(self._batches) and self._batches[len(ready)].indexed:
            ready.append(self._batches[len(ready)])
        self._committing = True
        self._cond.release()
        failures = [batch.failure for batch in ready]
        result: C | None = None
        try:
            result = self._commit(set().union(*(batch.paths for batch in ready)))
            for n, batch in enumerate(ready):
                if failures[n] is None:
                    try:
                        # Indexed without a failure: its receipt is what index() returned.
                        self._settle(cast(R, batch.receipt))
                    except BaseException as exc:  # noqa: BLE001 - raised in this batch's groups
                        failures[n] = exc
        except BaseException as exc:  # noqa: BLE001 - handed to every group of these batches
            failures = [exc] * len(ready)
        finally:
            self._cond.acquire()
            del self._batches[: len(ready)]
            self._committing = False
            for batch, error in zip(ready, failures, strict=True):
                self._outcomes[(batch.first, batch.last)] = [error, result, batch.last - batch.first + 1]
            self._done = ready[-1].last
            self._cond.notify_all()

    @contextlib.contextmanager
    def commit_stage(self) -> Iterator[None]:
        """Hold the commit stage for a commit made outside the queue (the daemon's, a sync's)
        or for a revert: one commit at a time, HEAD moves once per pass."""
        with self._cond:
            # Waiting here keeps the queue's next pass back (see wait): under a steady stream of
            # agent writes the passes would otherwise take the stage turn after turn, and the
            # daemon's commit of a person's edit wait for as long as the agents kept writing.
            self._stage_waiting += 1
            try:
                while self._committing:
                    self._cond.wait()
            finally:
                self._stage_waiting -= 1
            self._committing = True
        try:
            yield
        finally:
            with self._cond:
                self._committing = False
                self._cond.notify_all()

    def committing(self) -> bool:
        """Whether a commit is under way (the queue's pass or one holding the commit stage)."""
        with self._cond:
            return self._committing

    # -- what the groups wrote: not indexed yet, undone -------------------------------------------

    def written(self, paths: Iterable[str]) -> None:
        """``paths`` were written (or put back) and are not indexed yet."""
        with self._cond:
            self._unindexed.update(paths)

    def unindexed(self, only: Callable[[str], bool] | None = None) -> list[str]:
        """The paths written and not indexed yet (those ``only`` accepts), sorted."""
        with self._cond:
            return sorted(p for p in self._unindexed if only is None or only(p))

    def indexed(self, paths: Iterable[str]) -> None:
        with self._cond:
            self._unindexed.difference_update(paths)

    def undone(self, paths: Iterable[str]) -> None:
        """``paths`` were written by a group that was then undone."""
        with self._cond:
            self._undone.update(paths)

    def take_undone(self) -> set[str]:
        """The paths undone since the last call."""
        with self._cond:
            undone, self._undone = self._undone, set()
            return undone

    def wait_idle(self) -> None:
        """Block until every ticket handed out so far is committed and finished (its group has
        acknowledged or undone its write). Whoever calls this must keep new groups out meanwhile."""
        with self._cond:
            while self._done < self._issued or self._held:
                self._cond.wait()

    def wait_for_path(self, rel: str) -> None:
        """Block while ``rel`` belongs to another group's ticket not finished yet."""
        with self._cond:
            while any(rel in paths for paths in self._held.values()):
                self._cond.wait()
