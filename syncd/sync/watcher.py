"""The thin watchdog loop: a recursive observer on the home whose events feed the daemon (see
events.py for the pure rules that turn them into work).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..compat.patches import watchdog_decline_watches, watchdog_forget_vanished_watches, watchdog_walk_iteratively
from .events import CHANGING_KINDS, Event, is_noise, is_unwatched_folder, to_event
from .walk import walk

__all__ = ["TreeWatcher"]

log = logging.getLogger(__name__)


@dataclass
class TreeWatcher:
    """The thin watchdog loop: a recursive observer on the home that hands each relevant event
    to ``sink`` (from the observer's thread) and reports a queue overflow as an overflow event."""

    root: Path
    sink: Callable[[list[Event]], None]
    # Why the home is not being watched (None while it is): set when start() could not watch it.
    failure: str | None = field(default=None, init=False)
    _observer: Any = field(default=None, init=False, repr=False)
    _overflow_hook: logging.Handler | None = field(default=None, init=False, repr=False)

    def start(self) -> None:
        from watchdog import events as wd
        from watchdog.observers import Observer

        root = str(self.root)
        sink = self.sink

        class _Handler(wd.FileSystemEventHandler):
            def on_any_event(self, event) -> None:
                if event.event_type not in CHANGING_KINDS:
                    return
                converted = to_event(
                    root,
                    event.event_type,
                    event.src_path,
                    getattr(event, "dest_path", None) or None,
                    event.is_directory,
                )
                if converted is None or (is_noise(converted.path) and (not converted.dest or is_noise(converted.dest))):
                    return
                sink([converted])

        # watchdog's own behaviour, mended where syncd needs it (syncd.compat.patches says why).
        watchdog_walk_iteratively(walk)
        watchdog_forget_vanished_watches()
        watchdog_decline_watches(is_unwatched_folder)
        observer = Observer()
        # Only changes reach us: reads (Obsidian opening a note, git status hashing the tree)
        # would otherwise wake the daemon and keep postponing a burst's quiet period.
        changes = [
            wd.FileCreatedEvent,
            wd.FileDeletedEvent,
            wd.FileModifiedEvent,
            wd.FileMovedEvent,
            wd.FileAttribEvent,
            wd.DirCreatedEvent,
            wd.DirDeletedEvent,
            wd.DirMovedEvent,
        ]
        observer.schedule(_Handler(), root, recursive=True, event_filter=changes)
        observer.daemon = True
        try:
            observer.start()
        except (OSError, RecursionError) as exc:
            # Out of inotify instances or watches, or a tree watchdog cannot walk: no reason to
            # stop following the home. The periodic reconcile still finds every change, later.
            self.failure = f"{type(exc).__name__}: {exc}"
            log.warning(
                "cannot watch %s for changes (%s); changes are picked up only by the periodic "
                "reconcile (reconcile_interval_s)",
                root,
                self.failure,
            )
            with contextlib.suppress(Exception):
                observer.stop()
            return
        self._observer = observer
        self._overflow_hook = _OverflowHook(lambda: sink([Event("overflow", "")]))
        for name in ("watchdog.observers.inotify_c", "watchdog.observers.inotify"):
            logging.getLogger(name).addHandler(self._overflow_hook)

    def healthy(self) -> bool:
        """False when the observer or one of its emitter threads has died. watchdog lets an
        exception end the thread (its inotify emitter raises KeyError when a watched folder is
        renamed away mid-event, as an index rebuilt aside under .syncd/ is), and then no event
        comes again: only asking tells a dead watcher from a quiet home."""
        observer = self._observer
        if observer is None:
            return True  # not watching by choice (start() failed and said so): nothing died
        return observer.is_alive() and all(emitter.is_alive() for emitter in observer.emitters)

    def restart(self) -> None:
        self.stop()
        self.start()

    def stop(self) -> None:
        if self._overflow_hook is not None:
            for name in ("watchdog.observers.inotify_c", "watchdog.observers.inotify"):
                logging.getLogger(name).removeHandler(self._overflow_hook)
            self._overflow_hook = None
        if self._observer is not None:
            try:
                self._observer.stop()
            except KeyError:
                # watchdog loses track of a watched folder that was renamed away (an index rebuilt
                # aside under .syncd/ and swapped in) and fails to unwatch it; the watches end
                # with the observer's inotify instance anyway.
                pass
            self._observer.join(timeout=5)
            self._observer = None


class _OverflowHook(logging.Handler):
    """watchdog handles IN_Q_OVERFLOW by rebuilding its watches and logging a warning; it never
    tells the event handler. Its log record is the only signal, so we listen for it and turn it
    into a full reconcile instead of waiting for the periodic one."""

    def __init__(self, on_overflow: Callable[[], None]):
        super().__init__(level=logging.WARNING)
        self._on_overflow = on_overflow

    def emit(self, record: logging.LogRecord) -> None:
        if "overflow" in record.getMessage().lower():
            self._on_overflow()
