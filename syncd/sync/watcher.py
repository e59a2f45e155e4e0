"""The thin watchdog loop: a recursive observer on the home whose events feed the daemon (see
events.py for the pure rules that turn them into work).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .events import CHANGING_KINDS, Event, is_noise, is_unwatched_folder, to_event
from .walk import walk

__all__ = ["TreeWatcher"]

log = logging.getLogger(__name__)


class _OsWithIterativeWalk(types.ModuleType):
    """The ``os`` module as watchdog's inotify observer sees it, with a walk that does not recurse."""

    walk = staticmethod(walk)

    def __getattr__(self, name: str) -> object:
        return getattr(os, name)


def _walk_iteratively_in_watchdog() -> None:
    """watchdog adds its recursive inotify watches with ``os.walk``, which on Python 3.11 calls
    itself once per folder level: a tree ~1,000 folders deep raises RecursionError when the watch
    starts (and, later, in watchdog's own thread when such a tree is created or moved in, which
    silently ends all watching). Python 3.12's ``os.walk`` is iterative; on 3.11 watchdog's module
    is given ours. Only the name ``os`` inside that one module changes, and only what it walks."""
    if sys.version_info >= (3, 12):
        return
    try:
        from watchdog.observers import inotify
    except ImportError:  # not Linux: another observer, which does not walk with os.walk
        return
    if not isinstance(inotify.os, _OsWithIterativeWalk):
        inotify.os = _OsWithIterativeWalk("os")


def _keep_watchdog_alive_on_vanished_folders() -> None:
    """watchdog's inotify thread raises KeyError, and dies, when a watched folder vanishes while
    its removal is under way (an index rebuilt aside under .syncd/ and renamed away): it pops the
    folder from a dict that no longer holds it. Forgetting a watch that is already forgotten is
    what it means to do, so it is given a version that does just that and the thread lives on.
    ``TreeWatcher.healthy`` still catches any other way the thread may die."""
    try:
        from watchdog.observers.inotify import InotifyWatchGroup  # type: ignore[attr-defined]
    except ImportError:  # another watchdog layout or platform: healthy()/restart() cover it
        return
    if getattr(InotifyWatchGroup._remove_watch_internally, "_syncd", False):
        return

    def remove_watch_internally(self, wd) -> None:
        path = self._active_callbacks_by_watch.pop(wd, None)
        if path is None:
            return
        other = self._active_callbacks_by_path.pop(path, None)
        if other is not None and other != wd:
            self._active_callbacks_by_path[path] = other  # the path belongs to a newer watch

    remove_watch_internally._syncd = True
    InotifyWatchGroup._remove_watch_internally = remove_watch_internally


def _leave_noisy_folders_unwatched() -> None:
    """watchdog's recursive watch puts an inotify watch on every folder below the home, and
    Python then decodes, wraps and queues every event in them before our handler drops it. Under
    a stream of writes most of those come from git's object store and the LanceDB index (several
    per file they write), so watchdog is given an ``_add_callback`` that declines the folders
    ``is_unwatched_folder`` names, below the root of the watch that asks."""
    try:
        from watchdog.observers.inotify import InotifyWatchGroup  # type: ignore[attr-defined]
    except ImportError:  # another platform's observer: it watches everything, as before
        return
    add_callback = InotifyWatchGroup._add_callback
    if getattr(add_callback, "_syncd", False):
        return

    def add_callback_unless_noisy(self, path: bytes) -> None:
        top = self.path.rstrip(b"/") + b"/"
        if self.is_recursive and path.startswith(top):
            if is_unwatched_folder(os.fsdecode(path[len(top) :]).replace(os.sep, "/")):
                return
        add_callback(self, path)

    add_callback_unless_noisy._syncd = True
    InotifyWatchGroup._add_callback = add_callback_unless_noisy


@dataclass
class TreeWatcher:
    """The thin watchdog loop: a recursive observer on the home that hands each relevant event
    to ``sink`` (from the observer's thread) and reports a queue overflow as an overflow event."""

    root: Path
    sink: Callable[[list[Event]], None]
    # Why the home is not being watched (None while it is): set when start() could not watch it.
    failure: str | None = field(default=None, init=False)
    _observer: object = field(default=None, init=False, repr=False)
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
                converted = to_event(root, event.event_type, event.src_path, getattr(event, "dest_path", None) or None,
                                     event.is_directory)
                if converted is None or (is_noise(converted.path) and (not converted.dest or is_noise(converted.dest))):
                    return
                sink([converted])

        _walk_iteratively_in_watchdog()
        _keep_watchdog_alive_on_vanished_folders()
        _leave_noisy_folders_unwatched()
        observer = Observer()
        # Only changes reach us: reads (Obsidian opening a note, git status hashing the tree)
        # would otherwise wake the daemon and keep postponing a burst's quiet period.
        changes = [wd.FileCreatedEvent, wd.FileDeletedEvent, wd.FileModifiedEvent, wd.FileMovedEvent,
                   wd.FileAttribEvent, wd.DirCreatedEvent, wd.DirDeletedEvent, wd.DirMovedEvent]
        observer.schedule(_Handler(), root, recursive=True, event_filter=changes)
        observer.daemon = True
        try:
            observer.start()
        except (OSError, RecursionError) as exc:
            # Out of inotify instances or watches, or a tree watchdog cannot walk: no reason to
            # stop following the home. The periodic reconcile still finds every change, later.
            self.failure = f"{type(exc).__name__}: {exc}"
            log.warning("cannot watch %s for changes (%s); changes are picked up only by the periodic "
                        "reconcile (reconcile_interval_s)", root, self.failure)
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

