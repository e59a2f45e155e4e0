"""Memory as it was: search the memory at any past commit (issue 29, first floor).

``search_at(engine, query, at="HEAD~20")`` answers from the tree of that commit: the revision is
anything git names (a sha, ``HEAD~3``, a branch, a tag) or a date/time (``2026-11-20T14:00``: the
last commit on the current branch at or before it). The answer is exact by construction: the
tree of the commit is checked out from git's objects into ``.syncd/asof/<sha>/`` (git's own
index and working tree are never touched) and indexed there by the same sync a fresh home gets,
so its hits are those of an index rebuilt from a checkout of that commit. The embedding cache of
the home stands behind the past index's own, so a text embedded once, now or then, is never
embedded again: a past revision costs its rows, not its embeddings. The few most recently asked
revisions are kept (``KEEP``); asking again costs one search.

Not yet built: rows carrying the span of commits in which they hold, so that "now" and "then"
are filters over one table and a past revision costs nothing to open (see the issue).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import shutil
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import InvalidInputError, NotFoundError
from ..history.git import run_git
from ..home import Home

if TYPE_CHECKING:
    from ..index.search import Hit
    from .facade import Engine

__all__ = ["KEEP", "past_engine", "resolve_revision", "search_at"]

# Past revisions kept indexed under .syncd/asof/ (the most recently asked).
KEEP = 4
_FOLDER = "asof"
_LOCK = threading.Lock()  # one past index built at a time per process: they share the folder


def resolve_revision(root: Path, at: str) -> str:
    """The commit ``at`` names: a revision git knows, else a date or date-time (ISO 8601; the
    last commit at or before it on the current branch). InvalidInputError / NotFoundError."""
    if not isinstance(at, str) or not at.strip() or at.startswith("-"):
        raise InvalidInputError(f"bad revision {at!r}: a commit, HEAD~N, a branch, a tag or a date")
    out = run_git(root, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{at}^{{commit}}", ok=(0, 1))
    if out.strip():
        return out.decode().strip()
    try:
        when = dt.datetime.fromisoformat(at.strip())
    except ValueError:
        raise NotFoundError(f"no commit {at!r} in this home's history (nor is it a date)") from None
    if when.tzinfo is None:
        when = when.astimezone()
    found = run_git(root, "rev-list", "-1", "--first-parent", f"--before={when.isoformat()}", "HEAD", ok=(0, 128))
    if not found.strip():
        raise NotFoundError(f"no commit at or before {at} in this home's history")
    return found.decode().strip()


def _check_out(root: Path, sha: str, folder: Path) -> None:
    """The tree of ``sha`` as files under ``folder``, through a private index (git's own index,
    HEAD and working tree stay as they are)."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    private = folder.parent / f"index-{uuid.uuid4().hex[:8]}"
    env = {"GIT_INDEX_FILE": str(private)}
    try:
        run_git(root, "read-tree", sha, env=env)
        folder.mkdir(parents=True)
        run_git(root, "--work-tree", str(folder), "checkout-index", "--all", "--force", env=env)
    finally:
        private.unlink(missing_ok=True)
    # A home of its own (the engine's locks and journals live in a git directory), never committed.
    run_git(folder, "init", "--quiet")


def _evict(base: Path, keep: Path) -> None:
    past = sorted((p for p in base.iterdir() if p.is_dir() and p != keep), key=lambda p: p.stat().st_mtime)
    for old in past[: max(0, len(past) - (KEEP - 1))]:
        shutil.rmtree(old, ignore_errors=True)


@contextlib.contextmanager
def past_engine(engine: Engine, at: str) -> Iterator[Engine]:
    """An engine over the home as commit ``at`` left it (see the module docstring)."""
    from .facade import Engine

    root = engine.home.root
    sha = resolve_revision(root, at)
    base = engine.home.ensure_state_dir() / _FOLDER
    folder = base / sha
    with _LOCK:
        base.mkdir(exist_ok=True)
        if not (folder / "tree").is_dir():
            shutil.rmtree(folder, ignore_errors=True)
            building = base / f".{sha}-{uuid.uuid4().hex[:8]}"
            _check_out(root, sha, building / "tree")
            os.replace(building, folder)
        os.utime(folder)
        _evict(base, folder)
        # Always the embedded index: a past tree is this process's scratch, never a shared database's.
        local = engine.settings.model_copy(update={"index_url": None, "index_schema": None})
        past = Engine(Home(folder / "tree"), local, embedder=engine.embedder)
        try:
            past.sync()
        except BaseException:
            past.close()
            raise
    with past:
        yield past


def search_at(engine: Engine, query: str, at: str, **options: Any) -> list[Hit]:
    """``engine.search(query, **options)`` over the memory as commit ``at`` left it."""
    with past_engine(engine, at) as past:
        return past.search(query, **options)
