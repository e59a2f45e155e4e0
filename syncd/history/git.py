"""Git plumbing for the home's repository (gitpython): open it, tell when git is busy, stage and
commit exact paths.

The user's own git work always wins: while git holds ``index.lock`` or is in the middle of a
merge, rebase, cherry-pick, revert or bisect, we commit nothing (:func:`git_busy`) and try later;
and we only ever commit what ``git status`` still shows as changed, so whatever the user committed,
pulled or checked out themselves is never committed a second time.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

import git

from ..errors import NotFoundError
from .messages import format_message

log = logging.getLogger(__name__)

__all__ = ["open_or_init_repo", "git_busy", "head_sha", "commit_paths", "uncommitted_paths"]


# What git leaves in its folder while an operation of the user's is under way.
_BUSY_MARKERS = ("index.lock", "HEAD.lock", "MERGE_HEAD", "CHERRY_PICK_HEAD", "REVERT_HEAD", "rebase-merge",
                 "rebase-apply", "BISECT_LOG")


# A lock file this old is probably left by a crashed git; we still never remove it ourselves.
_STALE_LOCK_S = 60


# Above this many paths, one whole-tree `git status` filtered here beats a huge pathspec.
_PATHSPEC_MAX = 100


def open_or_init_repo(root: Path) -> tuple[git.Repo, bool]:
    """The repository whose top is ``root``; created (branch ``main``) when there is none."""
    try:
        repo = git.Repo(root)
        if Path(repo.working_tree_dir or "").resolve() == root.resolve():
            return repo, False
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        pass
    repo = git.Repo.init(root, initial_branch="main")
    return repo, True


def _open_repo(root: Path) -> git.Repo | None:
    """The home's repository, or None when the home is not (yet) under git."""
    try:
        repo = git.Repo(root)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        return None
    if Path(repo.working_tree_dir or "").resolve() != Path(root).resolve():
        return None
    return repo


def identity_env(name: str, email: str) -> dict[str, str]:
    return {
        "GIT_AUTHOR_NAME": name,
        "GIT_AUTHOR_EMAIL": email,
        "GIT_COMMITTER_NAME": name,
        "GIT_COMMITTER_EMAIL": email,
    }


def git_busy(root: Path) -> str | None:
    """Why committing now would fight the user's own git operation, or None when it would not."""
    repo = _open_repo(root)
    if repo is None:
        return None
    folder = Path(repo.git_dir)
    for marker in _BUSY_MARKERS:
        try:
            age = time.time() - (folder / marker).stat().st_mtime
        except FileNotFoundError:
            continue
        if age > _STALE_LOCK_S and marker.endswith(".lock"):
            return (f"git is busy ({marker} present for {age:.0f} s; if no git command is running, "
                    f"a crashed one left it: remove {folder / marker})")
        return f"git is busy ({marker} present)"
    return None


def head_sha(root: Path) -> str | None:
    repo = _open_repo(root)
    if repo is None or not repo.head.is_valid():
        return None
    return repo.head.commit.hexsha


def _tracked_or_present(repo: git.Repo, paths: Iterable[str]) -> list[str]:
    """Paths git can stage: present on disk, or tracked (a deletion). A file created and removed
    again before the commit is neither, and naming it would make ``git add`` fail."""
    root = Path(repo.working_tree_dir or ".")
    wanted = sorted(set(paths))
    present = [p for p in wanted if (root / p).exists()]
    missing = [p for p in wanted if p not in set(present)]
    if missing:
        tracked = set(repo.git.ls_files("-z", "--", *missing).split("\0")) - {""}
        present.extend(p for p in missing if p in tracked)
    return sorted(present)


def commit_paths(
    repo: git.Repo,
    paths: Iterable[str],
    message: str,
    author_name: str,
    author_email: str,
    trailers: Mapping[str, str] | None = None,
) -> str | None:
    """Commit exactly ``paths`` (additions, edits, deletions); return the sha, or None if nothing
    under those paths changed. Other staged work of the user is left staged and uncommitted."""
    stageable = _tracked_or_present(repo, paths)
    if not stageable:
        return None
    full = format_message(message, trailers=trailers) if trailers else message
    before = _head(repo)
    with repo.git.custom_environment(**identity_env(author_name, author_email)):
        repo.git.add("-A", "--", *stageable)
        try:
            repo.git.commit("--no-verify", "-q", "-m", full, "--only", "--", *stageable)
        except git.GitCommandError:
            # "nothing to commit" is how git says these paths already match HEAD; asking first
            # (a diff) would cost every commit one more process. Any other failure re-raises.
            if _head(repo) == before and not _staged_differs(repo, stageable):
                return None
            raise
    return repo.head.commit.hexsha


def _head(repo: git.Repo) -> str | None:
    return repo.head.commit.hexsha if repo.head.is_valid() else None


def _staged_differs(repo: git.Repo, paths: list[str]) -> bool:
    if not repo.head.is_valid():
        return bool(paths)
    return bool(repo.git.diff("--cached", "--name-only", "HEAD", "--", *paths).strip())


def changed_paths(repo: git.Repo, paths: Iterable[str] | None) -> dict[str, str]:
    """``{path: blob sha, or '' when deleted}`` of what git sees as changed (untracked, modified,
    deleted). A file we cannot read is left out: git could not stage it either."""
    args = ["--porcelain=v1", "-z", "--untracked-files=all", "--no-renames"]
    wanted: set[str] | None = None
    if paths is not None:
        wanted = set(paths)
        if not wanted:
            return {}
        if len(wanted) <= _PATHSPEC_MAX:
            args += ["--", *sorted(wanted)]
    out = _status(repo, *args)
    root = Path(repo.working_tree_dir or ".")
    changed: dict[str, str] = {}
    for entry in out.split("\0"):
        if len(entry) < 4:
            continue
        rel = entry[3:]
        if rel.startswith(".syncd/") or (wanted is not None and rel not in wanted):
            continue
        try:
            changed[rel] = _blob_sha_of(root / rel)
        except OSError as exc:
            log.warning("not committing %s: %s", rel, exc.strerror or exc)
    return changed


def _status(repo: git.Repo, *args: str) -> str:
    """``git status`` without the index refresh it would write under index.lock: a status that
    takes the lock makes the user's own git command (or our commit) fail with "index.lock exists"."""
    with repo.git.custom_environment(GIT_OPTIONAL_LOCKS="0"):
        return repo.git.status(*args)


def _blob_sha_of(path: Path) -> str:
    from ..home import file_blob_sha

    return file_blob_sha(path) or ""


def uncommitted_paths(root: Path) -> list[str]:
    """Markdown (and transcripts) that git shows as changed since HEAD: what the next commit
    will hold. Empty when the home is not a git repository."""
    from ..layout import is_indexable

    repo = _open_repo(root)
    if repo is None:
        return []
    try:
        out = _status(repo, "--porcelain=v1", "-z", "--untracked-files=all", "--no-renames")
    except git.GitCommandError as exc:
        # A repository git refuses to read (another owner, a broken index) leaves status without
        # this one list rather than without an answer at all.
        log.warning("git status failed in %s: %s", root, (exc.stderr or str(exc)).strip())
        return []
    return sorted(e[3:] for e in out.split("\0") if len(e) >= 4 and is_indexable(e[3:]))


def repo_or_raise(root: Path) -> git.Repo:
    repo = _open_repo(root)
    if repo is None:
        raise NotFoundError(f"{root} is not a git repository; run `syncd init` to start its history")
    return repo

