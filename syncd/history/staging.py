"""Committing exact paths with git's plumbing: stage our paths (never the person's other staged
work), write the tree, ``commit-tree`` and ``update-ref`` against the HEAD we started from.

``commit_exact`` (one commit, used by revert and the tools): our paths are staged in the real
index, its tree is written, and when that tree differs from HEAD in our paths only (the person has
nothing else staged) it is the commit's tree; otherwise the tree is built aside in a private index
(``read-tree HEAD`` + our paths). The committer commits queued turns as a chain instead (chain.py),
holding the real index the while (:class:`HeldIndex`). Paths travel on stdin, never as pathspecs
(see git.py)."""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import subprocess
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from ..errors import GitBusyError, HistoryError
from ..home import git_dir
from .git import (
    PATHSPEC_MAX,
    busy_state,
    carry_unmerged,
    detached_head,
    git_reason,
    head_sha,
    identity_env,
    index_identity,
    run_git,
)
from .processes import process_clock, wait_for_git_writers

__all__ = ["DiffEntry", "HeldIndex", "commit_exact", "commit_paths", "guard_commit", "stage_paths"]

log = logging.getLogger(__name__)

_EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"

# From this many files on, new blobs go into git as one pack rather than a loose file each; files
# above the size bound are left to update-index (a pack stream needs each file read whole).
_PACK_MIN_FILES = 256
_PACK_MAX_BYTES = 1 << 20


@dataclass(frozen=True)
class DiffEntry:
    """One path a commit changes: ``status`` A, M, D or T, with the blob shas before and after
    (``None`` where there is none)."""

    path: str
    status: str
    old_sha: str | None
    new_sha: str | None


def _paths_stdin(paths: Iterable[str]) -> bytes:
    return b"".join(p.encode("utf-8", "surrogateescape") + b"\0" for p in paths)


def _pack_blobs(root: Path, paths: list[str]) -> None:
    """Write the small files among ``paths`` into git as one pack (``git fast-import``), so that
    staging them finds their blobs there instead of writing one loose object file each: 100,000
    new notes are then one file in .git, not 100,000 (faster, and kinder to the disk;
    bench_history.py measures committing 100,000 new files).
    Only an optimisation: whatever it leaves out, ``update-index`` stores itself."""
    try:
        proc = subprocess.Popen(
            ["git", "fast-import", "--quiet"],
            cwd=root,
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
    except OSError as exc:
        log.info("no bulk pack (%s); staging file by file", exc)
        return
    assert proc.stdin is not None
    top = os.fspath(root)
    try:
        for rel in paths:
            path = os.path.join(top, rel)
            try:
                if os.path.islink(path) or os.path.getsize(path) > _PACK_MAX_BYTES:
                    continue
                with open(path, "rb") as handle:
                    data = handle.read(_PACK_MAX_BYTES + 1)
            except OSError:
                continue
            if len(data) <= _PACK_MAX_BYTES:
                proc.stdin.write(b"blob\ndata %d\n%s\n" % (len(data), data))
        proc.stdin.close()
    except BrokenPipeError:
        pass
    assert proc.stderr is not None
    err = proc.stderr.read()  # a few lines at most (--quiet): it cannot fill the pipe while we write
    proc.stderr.close()  # else our end stays open until the Popen is collected (a ResourceWarning)
    if proc.wait():
        log.info("no bulk pack (%s); staging file by file", git_reason(err.decode("utf-8", "replace")))


def stage_paths(
    root: Path,
    present: Iterable[str],
    removed: Iterable[str],
    env: Mapping[str, str] | None = None,
    pack: bool | None = None,
) -> None:
    """Make the index (the real one, or ``GIT_INDEX_FILE`` in ``env``) hold ``present`` as they
    are on disk and not hold ``removed``. Literal paths on stdin: linear, no argument limit.
    ``pack``: write many new blobs as one pack first (default: for the real index only)."""
    present, removed = list(present), list(removed)
    if len(present) >= _PACK_MIN_FILES and (env is None if pack is None else pack):
        _pack_blobs(root, present)
    if present:
        # --remove: a file deleted since git status listed it is staged as the deletion it now is.
        run_git(root, "update-index", "--add", "--remove", "-z", "--stdin", input=_paths_stdin(present), env=env)
    if removed:
        run_git(root, "update-index", "--force-remove", "-z", "--stdin", input=_paths_stdin(removed), env=env)


def _index_entries(root: Path, paths: list[str]) -> dict[str, bytes]:
    """``{path: "mode sha stage\\tpath\\0"}`` of the real index for ``paths`` (those it holds)."""
    if not paths:
        return {}
    wanted = set(paths)
    spec = ["--", *paths] if len(paths) <= PATHSPEC_MAX else []
    out = run_git(root, "ls-files", "-s", "-z", *spec, env={"GIT_LITERAL_PATHSPECS": "1"})
    entries = {}
    for record in out.split(b"\0"):
        meta, tab, raw = record.partition(b"\t")
        rel = raw.decode("utf-8", "surrogateescape")
        if tab and rel in wanted and meta.endswith(b" 0"):
            entries[rel] = record + b"\0"
    return entries


def _diff_trees(root: Path, old: str, new: str) -> list[DiffEntry]:
    out = run_git(root, "diff-tree", "-r", "-z", "--no-renames", "--no-commit-id", old, new)
    fields = out.decode("utf-8", "surrogateescape").split("\0")
    entries = []
    for meta, rel in zip(fields[0::2], fields[1::2]):
        parts = meta.lstrip(":").split(" ")
        if len(parts) < 5:
            continue
        old_sha, new_sha, status = parts[2], parts[3], parts[4][:1]
        zero = set(old_sha) == {"0"}, set(new_sha) == {"0"}
        entries.append(DiffEntry(rel, status, None if zero[0] else old_sha, None if zero[1] else new_sha))
    return entries


def _tree_of_real_index(root: Path, parent: str | None, ours: set[str]) -> tuple[str | None, list[DiffEntry]]:
    """The tree of the real index and its diff from ``parent``, when that diff touches only
    ``ours``: the common case (the user has nothing else staged), one ``write-tree`` instead of a
    private index built from HEAD. Otherwise (something of the user's is staged, or git cannot
    write a tree from it now) ``(None, [])``: the caller builds the tree aside. The check is on the
    tree actually written, so a ``git add`` of the user's landing meanwhile is seen, never committed."""
    try:
        tree = run_git(root, "write-tree").decode().strip()
    except HistoryError as exc:  # an unmerged entry of the user's appeared meanwhile, say
        log.debug("no tree from the index (%s); building it aside", exc.detail)
        return None, []
    changes = _diff_trees(root, parent or _EMPTY_TREE, tree)
    if all(entry.path in ours for entry in changes):
        return tree, changes
    return None, []


def _tree_of_private_index(root: Path, folder: Path, parent: str | None, present: list[str], removed: list[str]) -> str:
    """The tree of ``parent`` with exactly our paths as the real index now holds them, built in a
    private index: what the user staged besides stays out of it."""
    private = Path(os.path.abspath(folder)) / f"syncd-index-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    env = {"GIT_INDEX_FILE": str(private)}
    try:
        if parent:
            run_git(root, "read-tree", parent, env=env)
        else:
            run_git(root, "read-tree", "--empty", env=env)
        # The private index takes the entries just staged, not a second read of the files: the
        # commit holds exactly what the real index now holds, and big files are hashed once.
        entries = _index_entries(root, present)
        if entries:
            run_git(root, "update-index", "-z", "--index-info", input=b"".join(entries.values()), env=env)
        stage_paths(root, (), [*removed, *(p for p in present if p not in entries)], env)
        return run_git(root, "write-tree", env=env).decode().strip()
    finally:
        private.unlink(missing_ok=True)


class HeldIndex:
    """A commit pass's view of git's index: staged into a private copy, taken in by git's own
    index lock for just the moment HEAD moves. The copy is made first (``env`` points git at it);
    :meth:`locked` then takes ``index.lock`` the way every git command that writes the index does,
    refuses (GitBusyError, retried) if the index changed since the copy was made, and keeps a git
    command of the person's from writing the index until :meth:`publish` has put the copy in
    place, as git renames its lock over the index. So their command and our pass never
    interleave, and their command waits (fails with "index.lock exists") only for the few
    milliseconds of our ref update, not for the whole pass. Leaving without publishing leaves the
    index as it was."""

    def __init__(self, root: Path):
        folder = git_dir(root)
        if folder is None:
            raise HistoryError("commit", f"{root} is not a git repository")
        self.root = root
        self._folder = folder
        self._lock = folder / "index.lock"
        self._index = folder / "index"
        self._work = folder / f"syncd-index-{os.getpid()}-{threading.get_ident()}"
        self._identity: tuple | None = None
        self.env = {"GIT_INDEX_FILE": str(self._work)}

    def __enter__(self) -> HeldIndex:
        self._identity = index_identity(self._folder)
        try:
            shutil.copy2(self._index, self._work)
        except FileNotFoundError:
            pass  # no index yet: the pass starts from an empty one, as git would
        return self

    @contextlib.contextmanager
    def locked(self):
        try:
            os.close(os.open(self._lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
        except FileExistsError:
            state = busy_state(self.root)
            raise GitBusyError(state.reason if state else "git is busy (index.lock present)") from None
        except OSError as exc:
            raise HistoryError("commit", f"cannot take {self._lock}: {exc.strerror or exc}") from None
        try:
            if self._identity is None or index_identity(self._folder) != self._identity:
                raise GitBusyError(
                    "git's index changed while syncd was committing (a git command of yours); "
                    "it commits on top of it next time"
                )
            yield
        finally:
            self._lock.unlink(missing_ok=True)

    def publish(self) -> None:
        """Put the staged copy in place (call it inside :meth:`locked`). The copy only had our
        paths staged into it, so what git says of unmerged paths carries over (carry_unmerged)."""
        if self._work.exists():
            os.replace(self._work, self._index)
            carry_unmerged(self.root, self._identity, index_identity(self._folder))

    def settle(self) -> None:
        """Keep the lock (call it inside :meth:`locked`, once HEAD moved) until the person's git
        commands that began before now have ended: one that read the old HEAD then stops at our
        lock instead of writing an index computed from it (see processes.py)."""
        wait_for_git_writers(self.root, process_clock(), _SETTLE_LIMIT_S)

    def __exit__(self, *exc: object) -> None:
        self._work.unlink(missing_ok=True)


# How long a pass holds git's index lock for commands of the person's begun before it moved HEAD.
_SETTLE_LIMIT_S = 2.0


def guard_commit(root: Path) -> None:
    state = busy_state(root)
    if state is not None:
        raise GitBusyError(state.reason)
    detached = detached_head(root)
    if detached is not None:
        raise GitBusyError(detached)


def commit_exact(
    root: Path,
    present: Iterable[str],
    removed: Iterable[str],
    message: str | Callable[[list[DiffEntry]], str],
    author_name: str,
    author_email: str,
) -> tuple[str | None, list[DiffEntry]]:
    """Commit exactly ``present`` (as on disk) and ``removed`` (as deletions) on the current
    branch; everything else the user staged stays staged and uncommitted. ``message`` may be a
    function of what the commit really changes. Returns the new sha (None when those paths already
    match HEAD: nothing to commit) and the changes. Afterwards git status shows those paths clean.

    Raises GitBusyError when the user's git work is under way or HEAD is detached (nothing is
    done), or when HEAD moved while we committed (our paths are then staged, and the next attempt
    commits them); HistoryError when git fails otherwise."""
    root = Path(root)
    present, removed = sorted(set(present)), sorted(set(removed))
    guard_commit(root)
    if not (present or removed):
        return None, []
    folder = git_dir(root)
    if folder is None:
        raise HistoryError("commit", f"{root} is not a git repository")
    parent = head_sha(root)
    # The real index first: if the user's git holds it we stop before anything is committed, and
    # once committed, git status shows these paths clean (and a user's `git commit` cannot commit
    # their old versions over ours).
    stage_paths(root, present, removed)
    ours = set(present) | set(removed)
    tree, changes = _tree_of_real_index(root, parent, ours)
    if tree is None:
        tree = _tree_of_private_index(root, folder, parent, present, removed)
        changes = _diff_trees(root, parent or _EMPTY_TREE, tree)
    if not changes:
        return None, []
    text = message(changes) if callable(message) else message
    identity = identity_env(author_name, author_email)
    sha = (
        run_git(
            root,
            "commit-tree",
            tree,
            *(["-p", parent] if parent else []),
            "-F",
            "-",
            input=text.encode("utf-8", "replace"),
            env=identity,
        )
        .decode()
        .strip()
    )
    subject = text.strip().splitlines()[0] if text.strip() else ""
    try:
        run_git(root, "update-ref", "-m", f"commit: {subject}", "HEAD", sha, parent or "", env=identity)
    except HistoryError as exc:
        if head_sha(root) != parent:
            raise GitBusyError(
                "HEAD moved while syncd was committing (a commit of yours at the same moment); "
                "it commits its changes on top of yours next time"
            ) from None
        raise exc from None
    return sha, changes


def commit_paths(
    repo: Path,
    paths: Iterable[str],
    message: str,
    author_name: str,
    author_email: str,
    trailers: Mapping[str, str] | None = None,
) -> str | None:
    """Commit exactly ``paths`` (additions, edits, deletions, as they are on disk); the sha, or None
    when nothing under them changed. Other staged work of the user stays staged."""
    from .messages import format_message

    root = Path(repo)
    present: list[str] = []
    removed: list[str] = []
    for rel in set(paths):
        (present if os.path.lexists(root / rel) else removed).append(rel)
    full = format_message(message, trailers=trailers) if trailers else message
    return commit_exact(root, present, removed, full, author_name, author_email)[0]
