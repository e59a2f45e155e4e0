"""The commit queue: change groups that have written their files wait here to be indexed and
committed together (group commit), in two stages that overlap.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass

__all__ = ["CommitQueue"]


@dataclass(eq=False)
class _Batch:
    """Groups' paths taken from the queue together: tickets ``first``..``last``."""

    paths: set[str]
    first: int
    last: int
    indexed: bool = False
    failure: BaseException | None = None  # of its indexing
    receipt: object = None  # what indexing returned, for ``settle``


class CommitQueue:
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
    What ``commit`` returned (which of the paths landed, and as what) is what :meth:`wait`
    returns to each group of the batches it committed.

    A path queued, being indexed or waiting for its commit is not written again until its
    commit is made (``wait_for_path``): two turns' versions of one file must not fold into one
    commit."""

    def __init__(
        self,
        index: Callable[[set[str]], object],
        commit: Callable[[set[str]], object],
        settle: Callable[[object], object] = lambda receipt: None,
    ):
        self._index, self._commit, self._settle = index, commit, settle
        self._cond = threading.Condition()
        self._queued: set[str] = set()
        self._batches: list[_Batch] = []  # taken from the queue, not committed yet, in order
        self._indexing = False
        self._committing = False
        self._issued = 0  # tickets handed out
        self._done = 0  # every ticket up to this one has been committed
        # (first, last ticket) -> [error or None, commit's result, readers left]
        self._outcomes: dict[tuple[int, int], list] = {}

    def add(self, paths: Iterable[str]) -> int:
        """Queue ``paths``; the ticket to :meth:`wait` on. Every ticket must be waited on."""
        with self._cond:
            self._queued |= set(paths)
            self._issued += 1
            return self._issued

    def wait(self, ticket: int) -> object:
        """Return what the commit of ``ticket``'s paths returned, once it is made, doing a
        stage's work whenever one is free and has work. If their indexing or their commit
        failed, that error is raised here, in every group of the batch."""
        with self._cond:
            while self._done < ticket:
                if not self._indexing and self._issued > self._last_taken():
                    self._index_next()
                elif not self._committing and self._batches and self._batches[0].indexed:
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
        batch = _Batch(self._queued, self._last_taken() + 1, self._issued)
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
        ready: list[_Batch] = []
        while len(ready) < len(self._batches) and self._batches[len(ready)].indexed:
            ready.append(self._batches[len(ready)])
        self._committing = True
        self._cond.release()
        failures = [batch.failure for batch in ready]
        result = None
        try:
            result = self._commit(set().union(*(batch.paths for batch in ready)))
            for n, batch in enumerate(ready):
                if failures[n] is None:
                    try:
                        self._settle(batch.receipt)
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

    def paths(self) -> set[str]:
        """Paths queued or on their way to a commit: their groups' batches commit them."""
        with self._cond:
            return self._queued.union(*(batch.paths for batch in self._batches))

    def wait_idle(self) -> None:
        """Block until every ticket handed out so far is committed (its group may still be
        reading the outcome). Whoever calls this must keep new groups out meanwhile."""
        with self._cond:
            while self._done < self._issued:
                self._cond.wait()

    def wait_for_path(self, rel: str) -> None:
        """Block while ``rel`` is queued or on its way to a commit for another group."""
        with self._cond:
            while rel in self._queued or any(rel in batch.paths for batch in self._batches):
                self._cond.wait()
