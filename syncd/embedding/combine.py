"""Embedding calls that arrive together, run as one model call.

The model runs one call at a time (FastEmbedBackend serialises them: onnxruntime already uses
every core it is given). When several callers embed at once — eight agents each adding a fact
over REST, each embedding its one text to screen it for duplicates — each used to wait for the
lock and then run a batch of one. Here the callers that queued up while a call ran are taken
together by the first of them to get the turn: one call of all their texts, each caller handed
back its own rows. A call of a few short texts costs less CPU per text than the same texts one by
one (the model's fixed cost per run is paid once), and the callers wait for one call, not for
one after another.

A vector does not depend on which texts shared its call: every text is embedded on its own row,
padded and masked, as the texts of a sync's batches already are.

Locks: ``_cond`` guards the queue and whether a call is under way; it is never held while the
model runs, so a caller can queue while the call before it runs.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: a process that embeds nothing never imports numpy
    import numpy as np

__all__ = ["CallCombiner"]


@dataclass(eq=False)
class _Call:
    texts: list[str]
    rows: list[np.ndarray] | None = None
    error: BaseException | None = None

    @property
    def answered(self) -> bool:
        return self.rows is not None or self.error is not None


class CallCombiner:
    """Runs ``run(texts) -> rows`` (one row per text, in order) for concurrent callers, combining
    the texts of the callers waiting for their turn into one run."""

    def __init__(self, run: Callable[[list[str]], Sequence[np.ndarray]]):
        self._run = run
        self._cond = threading.Condition(threading.Lock())
        self._queue: list[_Call] = []
        self._running = False

    def __call__(self, texts: list[str]) -> list[np.ndarray]:
        """The rows of ``texts``, in order; raises what the run of its call raised."""
        call = _Call(texts)
        with self._cond:
            self._queue.append(call)
            while self._running and not call.answered:
                self._cond.wait()
            if not call.answered:
                # Our turn: take every call queued so far, ours among them.
                self._running = True
                calls, self._queue = self._queue, []
        if not call.answered:
            self._answer(calls)
        if call.error is not None:
            raise call.error
        assert call.rows is not None
        return call.rows

    @property
    def waiting(self) -> int:
        """Calls queued for the next run (not the one under way)."""
        with self._cond:
            return len(self._queue)

    def _answer(self, calls: list[_Call]) -> None:
        """Run the texts of ``calls`` as one and hand each its rows (or the error raised)."""
        try:
            rows = list(self._run([text for call in calls for text in call.texts]))
            start = 0
            for call in calls:
                call.rows = rows[start : start + len(call.texts)]
                start += len(call.texts)
        except BaseException as exc:
            for call in calls:
                call.error = exc
            raise
        finally:
            with self._cond:
                self._running = False
                self._cond.notify_all()
