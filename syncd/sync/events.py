"""Filesystem events in, batches out: the rules that turn what editors and git do into work.

Everything here is pure, so the rules are tested without a filesystem.
The one principle behind them: an event only says *where to look*. What a path became is read
from the disk afterwards (stat, hash), so every sequence of events that ends in the same tree ends
in the same index:

- an editor that saves by writing a temp file and renaming it over the target (vim, Obsidian,
  VS Code) yields one path to look at, the target, hence one modify; the temp file is never
  indexable and is ignored;
- a delete of a file that still exists (atomic-save editors report the old inode gone) is a
  modify, because the disk says the file is there;
- a delete and a create of the same path in one batch is one look at that path: if its bytes did
  not change, the hash says so and nothing is re-embedded or committed;
- a rename or a folder move puts both ends in the batch, so the planner sees the old path vanish
  and the same sha appear at the new one: a move, with no embedding;
- more than ``burst_threshold`` paths (a checkout, an unzip) is one full reconcile rather than
  thousands of small ones, and an inotify overflow (lost events) is a full reconcile too.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import PurePosixPath

from ..home import is_indexable

__all__ = ["Event", "Batch", "is_git_ref", "is_noise", "is_unwatched_folder", "coalesce", "to_event"]


# Kinds of watchdog events that can change what a path holds. "opened" and "closed_no_write" are
# reads; "closed" (close after write) adds nothing to the "modified" that precedes it.
CHANGING_KINDS = {"created", "modified", "deleted", "moved", "attrib"}


@dataclass(frozen=True)
class Event:
    """One filesystem event with home-relative posix paths. ``kind`` is created, modified,
    deleted, moved, attrib, or overflow (the OS dropped events; nothing is known)."""

    kind: str
    path: str
    dest: str | None = None
    is_dir: bool = False


@dataclass(frozen=True)
class Batch:
    """What one batch of events asks for: paths and folders to look at again, or everything."""

    paths: frozenset[str] = frozenset()
    dirs: frozenset[str] = frozenset()  # moved/created/deleted folders: every file below them
    full: bool = False
    git_moved: bool = False  # HEAD or a branch moved: someone committed, checked out, reset...
    events: int = 0

    @property
    def empty(self) -> bool:
        return not (self.paths or self.dirs or self.full or self.git_moved)


def is_git_ref(rel: str) -> bool:
    """``.git/HEAD`` and branch refs: the files whose change means the history moved."""
    return rel in (".git/HEAD", ".git/packed-refs") or rel.startswith(".git/refs/heads/")


def _in_ignored_tree(rel: str) -> bool:
    """Folders nothing of ours lives in; a folder event there must not widen the batch."""
    return not is_indexable(f"{rel}/x.md")


def coalesce(events: Iterable[Event], burst_threshold: int) -> Batch:
    """Pure: fold a burst of events into one :class:`Batch` (see the module docstring)."""
    paths: set[str] = set()
    dirs: set[str] = set()
    full = git_moved = False
    count = 0
    for event in events:
        count += 1
        if event.kind == "overflow":
            full = True
            continue
        if event.kind not in CHANGING_KINDS:
            continue
        ends = [event.path] + ([event.dest] if event.dest else [])
        if any(is_git_ref(p) for p in ends):
            git_moved = True
        if event.is_dir:
            if event.kind != "modified":  # a folder's own mtime says nothing about its files
                dirs.update(p for p in ends if p and not _in_ignored_tree(p))
            continue
        paths.update(p for p in ends if is_indexable(p))
    if len(paths) + len(dirs) > burst_threshold:
        full = True
    if full:
        paths, dirs = set(), set()
    return Batch(frozenset(paths), frozenset(_outermost(dirs)), full, git_moved, count)


def _outermost(dirs: set[str]) -> set[str]:
    """Drop folders inside other listed folders: they are rescanned with their parent."""
    keep: set[str] = set()
    for d in sorted(dirs, key=lambda p: len(PurePosixPath(p).parts)):
        if not any(d.startswith(k + "/") for k in keep):
            keep.add(d)
    return keep


def to_event(root: str, kind: str, src: str | bytes, dest: str | bytes | None, is_dir: bool) -> Event | None:
    """A watchdog event as an :class:`Event` relative to ``root``, or None when it is outside."""

    def rel(p: str | bytes) -> str | None:
        p = os.fsdecode(p)
        if p == root:
            return ""
        if not p.startswith(root + os.sep):
            return None
        return p[len(root) + 1 :].replace(os.sep, "/")

    src_rel = rel(src)
    dest_rel = rel(dest) if dest else None
    if src_rel is None and dest_rel is None:
        return None
    if src_rel is None:
        # Moved in from outside the home: for us, it was created.
        return Event("created", dest_rel or "", None, is_dir)
    if kind == "moved" and dest_rel is None:
        # Moved out of the home: gone.
        return Event("deleted", src_rel, None, is_dir)
    return Event(kind, src_rel, dest_rel, is_dir)


def is_unwatched_folder(rel: str) -> bool:
    """Folders not worth an inotify watch: every event in them would be noise (``is_noise``).
    Git's object store and the index's LanceDB files change on every commit and every index
    write: watching them makes watchdog's thread read and drop several events per add, a cost
    every write would pay for nothing.
    ``.git`` itself stays watched (HEAD, packed-refs), and so does ``.git/refs``."""
    if rel == ".syncd" or rel.startswith(".syncd/"):
        return True
    return rel.startswith(".git/") and rel != ".git/refs" and not rel.startswith(".git/refs/")


def is_noise(rel: str) -> bool:
    """Events the daemon drops at once, before they cost a queue slot: its own state, git's
    object store and index, editor droppings. Branch refs stay: they say the history moved."""
    if rel.startswith(".git/") or rel == ".git":
        return not is_git_ref(rel)
    return rel.startswith(".syncd/") or rel == ".syncd"
