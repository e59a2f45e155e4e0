"""What git shows as changed in the home: the paths the next commit holds, split by what
committing each means (as it is on disk, a deletion, or the person's conflict to resolve). One
``git status`` without the index refresh it would take index.lock for: a status that takes the
lock makes the person's own git command fail."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ..errors import HistoryError
from ..home import git_dir, is_indexable
from .git import PATHSPEC_MAX, run_git

__all__ = ["Changes", "changed_paths", "uncommitted_paths"]

log = logging.getLogger(__name__)

# `git status --porcelain` XY codes of an unmerged path.
_UNMERGED = frozenset({"DD", "AU", "UD", "UA", "DU", "AA", "UU"})


@dataclass(frozen=True)
class Changes:
    """What ``git status`` shows as changed, split by what committing it means: ``present`` paths
    are committed as they are on disk, ``removed`` ones as deletions; ``unmerged`` ones are the
    user's to resolve and never staged by us."""

    present: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    unmerged: tuple[str, ...] = ()

    @property
    def paths(self) -> tuple[str, ...]:
        return self.present + self.removed


def _status(root: Path, *args: str) -> list[tuple[str, str]]:
    """``(XY, path)`` from ``git status --porcelain -z``. It runs without the index refresh it
    would write under index.lock: a status that takes the lock makes the user's own git command
    fail with "index.lock exists". Pathspecs are literal (``[x].md`` is a name, not a pattern)."""
    out = run_git(
        root,
        "status",
        "--porcelain=v1",
        "-z",
        "--untracked-files=all",
        "--no-renames",
        *args,
        env={"GIT_OPTIONAL_LOCKS": "0", "GIT_LITERAL_PATHSPECS": "1"},
    )
    entries = []
    for entry in out.decode("utf-8", "surrogateescape").split("\0"):
        if len(entry) >= 4:
            entries.append((entry[:2], entry[3:]))
    return entries


def _ours(rel: str) -> bool:
    """What we commit: files the index holds (markdown, transcripts), never our temp files,
    never ``.syncd/``; whatever else is in the tree (images, configs) is the user's to commit."""
    return not rel.startswith(".syncd/") and is_indexable(rel)


def changed_paths(root: Path, paths: Iterable[str] | None = None) -> Changes:
    """Of ``paths`` (default: all), what git sees as changed (untracked, modified, deleted, staged
    by the user), split into :class:`Changes`."""
    wanted: set[str] | None = None
    args: list[str] = []
    if paths is not None:
        wanted = set(paths)
        if not wanted:
            return Changes()
        if len(wanted) <= PATHSPEC_MAX:
            args = ["--", *sorted(wanted)]
    codes: dict[str, list[str]] = {}
    for xy, rel in _status(root, *args):
        if _ours(rel) and (wanted is None or rel in wanted):
            codes.setdefault(rel, []).append(xy)
    present, removed, unmerged = [], [], []
    top = os.fspath(root)
    linked: dict[str, bool] = {}
    for rel, xys in sorted(codes.items()):
        path = os.path.join(top, rel)
        if any(xy in _UNMERGED for xy in xys):
            unmerged.append(rel)
        elif xys == ["D "] or _behind_symlink(top, rel, linked) or not os.path.lexists(path):
            # "D " alone while the file is still there: the user untracked it (``git rm
            # --cached``, and it is ignored, else status would list it as untracked too). A file
            # reached through a symlinked folder is, for git, a deletion: it never follows links.
            removed.append(rel)
        elif not os.path.islink(path) and not os.access(path, os.R_OK):
            # Staging it would fail the whole commit; it is committed once it can be read.
            log.warning("not committing %s: permission denied", rel)
        else:
            present.append(rel)
    return Changes(tuple(present), tuple(removed), tuple(unmerged))


def _behind_symlink(top: str, rel: str, seen: dict[str, bool]) -> bool:
    """Whether a folder on the way to ``rel`` is a symlink (memoised per folder: linear)."""
    folder = os.path.dirname(rel)
    if not folder:
        return False
    if folder not in seen:
        seen[folder] = _behind_symlink(top, folder, seen) or os.path.islink(os.path.join(top, folder))
    return seen[folder]


def uncommitted_paths(root: Path) -> list[str]:
    """Markdown (and transcripts) that git shows as changed since HEAD: what the next commit
    will hold. Empty when the home is not a git repository."""
    if git_dir(root) is None:
        return []
    try:
        entries = _status(root)
    except HistoryError as exc:
        # A repository git refuses to read (another owner, a broken index) leaves status without
        # this one list rather than without an answer at all.
        log.warning("git status failed in %s: %s", root, exc.detail)
        return []
    return sorted({rel for _, rel in entries if _ours(rel)})
