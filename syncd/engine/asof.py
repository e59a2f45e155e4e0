"""Memory as it was: search the memory at any past commit (issue 29, first floor).

``search_at(engine, query, at="HEAD~20")`` answers from the tree of that commit: the revision is
anything git names (a sha, ``HEAD~3``, a branch, a tag) or a date/time (``2026-11-20T14:00``: the
last commit on the current branch at or before it). The answer is exact by construction: the
tree of the commit is checked out from git's objects into ``.syncd/asof/<sha>/`` (git's own
index and working tree are never touched) and indexed there by the same sync every home gets.

Cheap because the past index does not start empty: it starts as a copy of the rows of the index
nearest to that commit (the home's own index, or a past one kept here, whichever differs from the
commit in the fewest files), and the sync then redoes only the files whose content differs from
what those rows were made of. Exact because that is the incremental = rebuild law every sync
keeps (tests/test_rows_incremental.py and the as-of law in tests/test_asof.py): rows of a file
whose content is the commit's are the rows a rebuild would make of it. So a revision costs one
copy of the rows (sequential, no parse, no embedding) plus its difference from the nearest
index; a text embedded once, now or then, is never embedded again (the home's embedding cache
stands behind the past index's own). A past index is built aside and published whole, never
written again: any process reads it without a lock. The few most recently asked revisions are
kept on disk (``KEEP``) and the last ``OPEN_KEEP`` stay open in the process, so asking again
costs one search.

Why not rows carrying the span of commits in which they hold, filtered by the revision: the
index follows the working tree, not commits (rows are written before their commit, and many
writes share one), and the word statistics of a past revision (document frequencies, lengths)
are those of its own rows, so an exact answer would need them per revision anyway.
"""

from __future__ import annotations

import collections
import contextlib
import datetime as dt
import logging
import os
import re
import shutil
import threading
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import InvalidInputError, NotFoundError
from ..history.git import run_git
from ..home import Home

if TYPE_CHECKING:
    from ..index.search import Hit
    from .facade import Engine

log = logging.getLogger(__name__)

__all__ = ["KEEP", "describe_revision", "past_engine", "past_files", "resolve_revision", "search_at"]

# Past revisions kept indexed under .syncd/asof/ (the most recently asked).
KEEP = 4
_FOLDER = "asof"
_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
_LOCK = threading.Lock()  # one past index built at a time per process: they share the folder
# Past folders in use in this process (a workbench viewing the past holds one for long): never
# evicted, their engines never closed; and the engines kept open, the most recently asked last.
_IN_USE: collections.Counter[Path] = collections.Counter()
_OPEN: collections.OrderedDict[Path, Engine] = collections.OrderedDict()
OPEN_KEEP = 2
# In a past folder once its index is whole (see _build).
_COMPLETE = "complete"


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


def describe_revision(root: Path, sha: str) -> str:
    """``<sha10> <date> <subject>`` of a commit: what a person reads to know which past this is."""
    out = run_git(root, "show", "-s", "--format=%h %cd %s", "--date=format:%Y-%m-%d %H:%M", "--abbrev=10",
                  "--end-of-options", sha)  # fmt: skip
    return out.decode("utf-8", "replace").strip()


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


@contextlib.contextmanager
def past_files(home: Home, at: str, folders: Sequence[str]) -> Iterator[Home]:
    """A scratch home holding the files under ``folders`` (home-relative) as commit ``at`` left
    them, nothing else and no index: for reads of a few files (core memory as of a revision),
    which need no past index. Removed when the block ends."""
    root = home.root
    sha = resolve_revision(root, at)
    listed = run_git(root, "ls-tree", "-r", "-z", "--name-only", sha, "--", *folders) if folders else b""
    names = [n for n in listed.decode("utf-8", "surrogateescape").split("\0") if n]
    scratch = home.ensure_state_dir() / _FOLDER / f".read-{uuid.uuid4().hex[:8]}"
    scratch.mkdir(parents=True)
    try:
        if names:
            private = scratch / "index"
            env = {"GIT_INDEX_FILE": str(private)}
            run_git(root, "read-tree", sha, env=env)
            tree = scratch / "tree"
            tree.mkdir()
            paths = "\0".join(names).encode("utf-8", "surrogateescape") + b"\0"
            run_git(root, "--work-tree", str(tree), "checkout-index", "--force", "-z", "--stdin",
                    env=env, input=paths)  # fmt: skip
        yield Home(scratch / "tree")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _changed_files(root: Path, sha: str, since: str | None) -> int:
    """How many files differ between commit ``sha`` and commit ``since`` (None: the working tree)."""
    args = ["diff", "--name-only", "--no-renames", "-z", sha] + ([since] if since else [])
    return run_git(root, *args, "--").count(b"\0")


def _start_from_nearest(engine: Engine, sha: str, tree: Path) -> None:
    """Copy into the past index at ``tree`` the rows of the index nearest to commit ``sha``: the
    home's own (when it is a LanceDB index of the same model and layout) or a kept past one."""
    from ..index.store import Index  # LanceDB: loaded only when a past index is made

    root = engine.home.root
    candidates: list[tuple[int, Path | None]] = []
    own = engine.index
    if isinstance(own, Index) and own.compatible():
        candidates.append((_changed_files(root, sha, None), None))
    base = tree.parent.parent
    for kept in base.iterdir():
        index_dir = Home(kept / "tree").state_dir / "index"
        if kept.name != sha and _is_kept(kept) and (kept / _COMPLETE).is_file():
            candidates.append((_changed_files(root, sha, kept.name), index_dir))
    if not candidates:
        return  # the sync builds it from nothing (the embedding cache still spares the model)
    differ, nearest = min(candidates, key=lambda c: (c[0], c[1] is None))
    files = run_git(root, "ls-tree", "-r", "-z", "--name-only", sha).count(b"\0")
    if differ * 2 > files:
        return  # mostly other files (an old revision of a grown home): copying would cost more
    if nearest is None:
        assert isinstance(own, Index)  # the home's own index is a candidate only if it is one
        source = own
    else:
        source = Index(nearest, own.dim, own.model_id, read_only=True)
    if not source.compatible():
        return
    index_dir = Home(tree).ensure_state_dir() / "index"
    target = Index(index_dir, source.dim, source.model_id)
    try:
        target.copy_rows_from(source)
        # Whose rows these are (model, layout, transcript setting), as the source says; not its
        # aligned commit, which names the source's history, not this revision.
        target.write_meta(**{k: v for k, v in source.meta().items() if k == "transcripts"})
        target.close()
    except Exception as exc:  # noqa: BLE001 (a failed copy costs the head start, never the answer)
        # Only a head start is lost (a kept index evicted by another process meanwhile, a full
        # disk): the sync then builds this revision from nothing, as exactly.
        log.warning("past index of %s made from nothing: copying the nearest index failed: %s", sha[:12], exc)
        target.close()
        shutil.rmtree(index_dir, ignore_errors=True)
    finally:
        if source is not own:
            source.close()


def _is_kept(folder: Path) -> bool:
    """A published past revision (named by its sha), not a folder still being made or read."""
    return folder.is_dir() and bool(_SHA.fullmatch(folder.name))


def _evict(base: Path, keep: Path) -> None:
    past = sorted((p for p in base.iterdir() if _is_kept(p) and p != keep and not _IN_USE[p]),
                  key=lambda p: p.stat().st_mtime)
    for old in past[: max(0, len(past) - (KEEP - 1))]:
        if old in _OPEN:
            _OPEN.pop(old).close()
        shutil.rmtree(old, ignore_errors=True)


def _build(engine: Engine, sha: str, folder: Path) -> None:
    """Make the past index of ``sha`` aside and publish it at ``folder`` whole: checked out, its
    rows copied from the nearest index, synced (with the home's embedding cache behind it), and
    only then renamed into place with a mark that it is complete. So a published past index is
    never written again, and any process may read it without a lock."""
    engine_class = type(engine)  # the facade's, without importing the module that imports this one

    building = folder.parent / f".{sha}-{uuid.uuid4().hex[:8]}"
    try:
        _check_out(engine.home.root, sha, building / "tree")
        _start_from_nearest(engine, sha, building / "tree")
        with engine_class(Home(building / "tree"), _local(engine), embedder=engine.embedder) as past:
            past.sync()
        (building / _COMPLETE).touch()
        shutil.rmtree(folder, ignore_errors=True)  # an incomplete one an older syncd or a kill left
        try:
            os.replace(building, folder)
        except OSError:
            if not (folder / _COMPLETE).is_file():
                raise
            # another process published it meanwhile: theirs is as good
    finally:
        shutil.rmtree(building, ignore_errors=True)


def _local(engine: Engine) -> Any:
    # Always the embedded index: a past tree is this machine's scratch, never a shared database's.
    return engine.settings.model_copy(update={"index_url": None, "index_schema": None})


def _close_unused() -> None:
    """Close the open past engines beyond OPEN_KEEP that nobody is using (under _LOCK)."""
    for folder in list(_OPEN)[: max(0, len(_OPEN) - OPEN_KEEP)]:
        if not _IN_USE[folder]:
            _OPEN.pop(folder).close()


@contextlib.contextmanager
def past_engine(engine: Engine, at: str) -> Iterator[Engine]:
    """A read-only engine over the home as commit ``at`` left it (see the module docstring).
    The first call for a revision builds its past index; later ones in this process reuse the
    engine while it is one of the OPEN_KEEP most recent (a repeated question costs one search)."""
    engine_class = type(engine)  # as in _build

    base = engine.home.ensure_state_dir() / _FOLDER
    # A full sha already made into a past index names a commit: no git process to ask again.
    known = isinstance(at, str) and _SHA.fullmatch(at) is not None and (base / at / _COMPLETE).is_file()
    sha = at if known else resolve_revision(engine.home.root, at)
    folder = base / sha
    with _LOCK:
        base.mkdir(exist_ok=True)
        past = _OPEN.get(folder)
        if past is None or not (folder / _COMPLETE).is_file():
            if past is not None and not _IN_USE[folder]:
                _OPEN.pop(folder).close()  # its folder was deleted under it (rm -rf .syncd)
            if not (folder / _COMPLETE).is_file():
                _build(engine, sha, folder)
            # Queries need the model, not the home's embedding cache (which its engine may close).
            model = getattr(engine.embedder, "embedder", engine.embedder)
            past = _OPEN[folder] = engine_class(Home(folder / "tree"), _local(engine), read_only=True, embedder=model)
        _OPEN.move_to_end(folder)
        os.utime(folder)
        _IN_USE[folder] += 1
        _evict(base, folder)
        _close_unused()
    try:
        yield past
    finally:
        with _LOCK:
            _IN_USE[folder] -= 1
            _close_unused()


def search_at(engine: Engine, query: str, at: str, **options: Any) -> list[Hit]:
    """``engine.search(query, **options)`` over the memory as commit ``at`` left it."""
    with past_engine(engine, at) as past:
        return past.search(query, **options)
