"""Progress of a sync or a rebuild, counted in texts embedded: events, their arithmetic, their words.

A sync parses files in batches, embeds their texts (the model's share is most of the time), then
writes them. ``ProgressTracker`` turns those steps into ``SyncProgress`` events. The work is
measured in the bytes of the files being parsed, and a batch's bytes are counted done in
proportion to its texts embedded, so one 13 MB page moves the bar chunk by chunk, not once at the
end. Everything here is pure but for the clock, which the tracker is handed (tests give it theirs).

Who listens: the CLI's bar (``syncd sync``, ``syncd reindex``), a line in the daemon's log every
so often (``log_every``), and the progress file ``syncd status`` reads (``progress_file.py``).
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass

__all__ = ["Progress", "ProgressTracker", "SyncProgress", "format_duration", "log_every"]

# Rate and time left are measured over this much recent time: the model's load and a run of
# cached texts at the start would otherwise skew them for the whole sync.
_RATE_WINDOW_S = 30.0


@dataclass(frozen=True)
class SyncProgress:
    """Where a sync (or a rebuild, ``what``) stands. Counts only grow during one sync."""

    what: str  # "sync" or "reindex"
    files_done: int  # files parsed and written to the index
    files_total: int  # files this sync parses (new, changed, moved here)
    bytes_done: int  # of those files' bytes; within a batch, in proportion to its texts done
    bytes_total: int
    texts_embedded: int  # texts the model embedded (each text once: the cache answers repeats)
    texts_cached: int  # texts whose vector the embedding cache already held
    elapsed_s: float
    texts_per_s: float | None = None  # model rate over the last half minute; None until known
    eta_s: float | None = None  # time left at the recent pace; None until it can be told

    @property
    def fraction(self) -> float:
        return self.bytes_done / self.bytes_total if self.bytes_total else float(self.files_done >= self.files_total)

    @property
    def finished(self) -> bool:
        return self.files_done >= self.files_total

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> SyncProgress:
        """The event ``to_dict`` made; KeyError or TypeError if ``data`` is not one."""
        names = cls.__dataclass_fields__
        return cls(**{name: data[name] for name in names if name in data})

    def describe(self) -> str:
        """One line for a person: ``37%, 310/800 files, 4,210 texts embedded (85/s), about 1m12s left``."""
        parts = [
            f"{self.fraction:.0%}",
            f"{self.files_done:,}/{self.files_total:,} files",
            f"{self.texts_embedded:,} texts embedded",
        ]
        if self.texts_per_s is not None:
            parts[-1] += f" ({self.texts_per_s:,.0f}/s)"
        if self.texts_cached:
            parts.append(f"{self.texts_cached:,} from the cache")
        if self.finished:
            parts.append(f"in {format_duration(self.elapsed_s)}")
        elif self.eta_s is not None:
            parts.append(f"about {format_duration(self.eta_s)} left")
        return ", ".join(parts)


Progress = Callable[[SyncProgress], None]


def format_duration(seconds: float) -> str:
    """``4s``, ``1m12s``, ``2h05m``: short enough for a progress line."""
    s = max(0, round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


class ProgressTracker:
    """Builds the events of one sync from its steps: a batch starts (its files, bytes and texts to
    embed), texts are embedded (the embedding cache reports each slice), the batch is written.

    Events are monotone even when a batch's texts are embedded again (a batch redone after the
    index changed under it): what was counted done stays done."""

    def __init__(
        self, sink: Progress, what: str, files_total: int, bytes_total: int, clock: Callable[[], float] = time.monotonic
    ):
        self._sink = sink
        self._clock = clock
        self._started = clock()
        self._what = what
        self._files_total = files_total
        self._bytes_total = bytes_total
        self._files_done = 0
        self._bytes_before_batch = 0  # bytes of the batches written
        self._bytes_done = 0
        self._embedded = 0
        self._cached = 0
        self._batch = (0, 0, 0)  # files, bytes, texts of the batch in hand
        self._call = (0, 0)  # (cached, embedded) reported so far by the embed call in hand
        self._samples: deque[tuple[float, int, int]] = deque()  # (time, bytes done, texts embedded)

    def start(self) -> None:
        """The first event: how much there is to do, nothing done yet."""
        self._emit()

    def start_batch(self, files: int, nbytes: int, texts: int) -> None:
        self._batch = (files, nbytes, texts)
        self._call = (0, 0)

    def embedding(self, cached: int, embedded: int) -> None:
        """The embed call in hand has ``cached`` texts from the cache and ``embedded`` from the
        model so far (both counted from the start of that call)."""
        prev_cached, prev_embedded = self._call
        self._cached += max(0, cached - prev_cached)
        self._embedded += max(0, embedded - prev_embedded)
        self._call = (max(cached, prev_cached), max(embedded, prev_embedded))
        _, nbytes, texts = self._batch
        if texts:
            within = nbytes * min(cached + embedded, texts) // texts
            self._bytes_done = max(self._bytes_done, self._bytes_before_batch + within)
        self._emit()

    def end_embedding(self) -> None:
        """The embed call in hand is over; a redo of the batch's embedding starts a new one."""
        self._call = (0, 0)

    def batch_written(self) -> None:
        files, nbytes, _ = self._batch
        self._files_done = min(self._files_total, self._files_done + files)
        self._bytes_before_batch = min(self._bytes_total, self._bytes_before_batch + nbytes)
        self._bytes_done = max(self._bytes_done, self._bytes_before_batch)
        self._batch = (0, 0, 0)
        self._call = (0, 0)
        self._emit()

    def event(self) -> SyncProgress:
        now = self._clock()
        elapsed = max(0.0, now - self._started)
        self._samples.append((now, self._bytes_done, self._embedded))
        while len(self._samples) > 2 and self._samples[1][0] <= now - _RATE_WINDOW_S:
            self._samples.popleft()
        t0, bytes0, texts0 = self._samples[0]
        span = now - t0
        rate = eta = None
        if span >= 1.0:
            rate = (self._embedded - texts0) / span
            byte_rate = (self._bytes_done - bytes0) / span
            if byte_rate > 0:
                eta = (self._bytes_total - self._bytes_done) / byte_rate
        return SyncProgress(
            what=self._what,
            files_done=self._files_done,
            files_total=self._files_total,
            bytes_done=self._bytes_done,
            bytes_total=self._bytes_total,
            texts_embedded=self._embedded,
            texts_cached=self._cached,
            elapsed_s=elapsed,
            texts_per_s=rate,
            eta_s=eta,
        )

    def _emit(self) -> None:
        self._sink(self.event())


def log_every(logger: logging.Logger, every_s: float = 10.0, clock: Callable[[], float] = time.monotonic) -> Progress:
    """A progress listener that logs one line every ``every_s`` seconds while a sync runs, and
    one at its end if it logged any: a sync quicker than that logs nothing (the daemon's log
    would otherwise say something for every one-line edit)."""
    state = {"next": clock() + every_s, "logged": False}

    def listen(event: SyncProgress) -> None:
        now = clock()
        if event.finished and state["logged"]:
            logger.info("%s: %s", _verb(event), event.describe())
        elif not event.finished and now >= state["next"]:
            state["next"] = now + every_s
            state["logged"] = True
            logger.info("%s: %s", _verb(event), event.describe())

    return listen


def _verb(event: SyncProgress) -> str:
    return "rebuilding the index" if event.what == "reindex" else "indexing"
