"""The progress file: a running sync says where it stands, for ``syncd status`` in another process.

``<private dir>/sync-progress.json`` holds the latest ``SyncProgress`` with the writer's pid. It is
written only once a sync has run for a while (a one-line edit never touches it), at most every
``_WRITE_EVERY_S``, and removed when a sync ends. A sync stopped by an error or an interrupt
marks it stopped; one killed halfway leaves it as it was, and a reader then sees that its pid is
gone (or no longer holds the home). Either way it reports an interrupted sync, not a running one,
until the next sync removes the file.

It lives in the private dir, not in ``.syncd/``: a sync that outlives ``rm -rf .syncd`` must
still be able to say so.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..errors import HomeError
from ..home import Home, HomeLock
from .progress import Progress, SyncProgress

__all__ = ["PROGRESS_NAME", "ProgressFile", "SyncInProgress", "read_progress"]

log = logging.getLogger(__name__)

PROGRESS_NAME = "sync-progress.json"
# A sync shorter than this writes no file at all; a longer one rewrites it this often.
_FIRST_WRITE_AFTER_S = 1.0
_WRITE_EVERY_S = 1.0


@dataclass(frozen=True)
class SyncInProgress:
    """What the progress file says, and whether the sync that wrote it still runs."""

    pid: int
    running: bool
    progress: SyncProgress

    def to_dict(self) -> dict:
        return {"pid": self.pid, "running": self.running, **self.progress.to_dict()}


def _path(home: Home) -> Path | None:
    try:
        return home.private_dir / PROGRESS_NAME
    except HomeError:
        return None  # no repository, so no private dir: nothing to tell anyone


class ProgressFile:
    """Writes a sync's events to the progress file (throttled) and removes it at the end.

    ``listener(inner)`` passes every event on to ``inner`` too."""

    def __init__(self, home: Home, clock: Callable[[], float] = time.monotonic):
        self._path = _path(home)
        self._clock = clock
        self._started = clock()
        self._next = self._started + _FIRST_WRITE_AFTER_S
        self._failed = False
        self._written = False
        self._last: SyncProgress | None = None

    def listener(self, inner: Progress | None) -> Progress:
        def listen(event: SyncProgress) -> None:
            self.note(event)
            if inner is not None:
                inner(event)

        return listen

    def note(self, event: SyncProgress) -> None:
        self._last = event
        now = self._clock()
        if now >= self._next:
            self._next = now + _WRITE_EVERY_S
            self._write(event, stopped=False)

    def stopped(self) -> None:
        """The sync stopped halfway (an error, an interrupt) in a process that may live on (the
        daemon): its note must not say it runs. Only a sync that wrote a note marks it."""
        if self._written and self._last is not None:
            self._write(self._last, stopped=True)

    def _write(self, event: SyncProgress, stopped: bool) -> None:
        if self._path is None or self._failed:
            return
        data = json.dumps({"pid": os.getpid(), "stopped": stopped, **event.to_dict()}).encode()
        tmp = self._path.with_name(f".{PROGRESS_NAME}.{os.getpid()}.tmp")
        try:
            # Not fsynced: it is a note for a person, and a lost one only means no line in status.
            tmp.write_bytes(data)
            os.replace(tmp, self._path)
        except OSError as exc:
            self._failed = True  # the sync itself goes on; say so once
            log.info("cannot write the progress file %s: %s", self._path, exc)
        else:
            self._written = True

    def finish(self) -> None:
        """The sync ended (done, or failed with an error it reported): no progress to tell. Also
        removes what a killed sync left (this process holds the home, so no one else writes it)."""
        if self._path is None:
            return
        try:
            self._path.unlink()
        except FileNotFoundError:
            pass
        except OSError as exc:
            log.info("cannot remove the progress file %s: %s", self._path, exc)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process: alive
    return True


def _lock_holder_pid(home: Home) -> int | None:
    """The pid the home's lock names (HomeLock writes "pid 123 (what)" and empties it when let
    go); None when it is free or says something else."""
    try:
        holder = HomeLock(home.lock_path).holder()
    except (OSError, HomeError):
        return None
    if not holder or not holder.startswith("pid "):
        return None
    word = holder[4:].split(" ", 1)[0]
    return int(word) if word.isdigit() else None


def read_progress(home: Home) -> SyncInProgress | None:
    """The sync in progress (``running``), or the one that was interrupted (not ``running``: its
    process is gone, or no longer holds the home), or None when no sync left a note."""
    path = _path(home)
    if path is None:
        return None
    try:
        data = json.loads(path.read_bytes())
        pid = int(data["pid"])
        progress = SyncProgress.from_dict(data)
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.debug("ignoring the progress file %s: %s", path, exc)
        return None
    # A pid is reused in time; one that still holds the home's lock is the writer itself.
    running = not data.get("stopped") and _alive(pid) and _lock_holder_pid(home) == pid
    return SyncInProgress(pid, running, progress)
