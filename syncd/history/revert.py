"""Undo one commit (an agent turn, say) with ``git revert``; never leave a half-done revert."""

from __future__ import annotations

from pathlib import Path

from ..errors import GitBusyError, HistoryError, NotFoundError, RevertError
from .git import git_busy, git_dir, head_sha, identity_env, repo_or_raise, run_git
from .status import changed_paths

__all__ = ["revert_commit"]


def revert_commit(root: Path, commit: str, name: str, email: str) -> str:
    """``git revert`` one commit (an agent turn, say) as ``name <email>``; return the new HEAD.
    On a conflict the revert is aborted, the tree left as it was, and RevertError raised."""
    repo_or_raise(root)
    busy = git_busy(root)
    if busy:
        raise RevertError(f"cannot revert now: {busy}")
    try:
        target = (
            run_git(root, "rev-parse", "-q", "--verify", "--end-of-options", f"{commit}^{{commit}}").decode().strip()
        )
    except (HistoryError, GitBusyError):
        target = ""
    listed = "`syncd log` lists the commits you can revert"
    if not target:
        raise NotFoundError(f"no commit {commit!r} in this home's history; {listed}")
    short = target[:10]
    if not _is_ancestor(root, target):
        raise NotFoundError(f"commit {short} is not in the history of this home's branch; {listed}")
    parents = len(run_git(root, "rev-list", "--parents", "-n", "1", target).split()) - 1
    if parents > 1:
        raise RevertError(
            f"commit {short} is a merge; revert the commits it brought in, one at a time, instead ({listed})"
        )
    if parents == 0:
        # The commit that made the home (`syncd init`'s, or the first of an adopted repository):
        # undoing it deletes every file it added, .gitignore (which keeps .syncd/ out of git) too.
        raise RevertError(
            f"commit {short} is the first commit of this home; reverting it would delete every file it "
            f"added (.gitignore, the memory/ and vault/ layout); nothing was changed ({listed})"
        )
    unsaved = _uncommitted_in(root, target)
    if unsaved:
        # git would refuse with "Your local changes to the following files would be overwritten"
        # and name them only on lines after that one: say which, and what to do.
        shown = ", ".join(unsaved[:5]) + (f" and {len(unsaved) - 5} more" if len(unsaved) > 5 else "")
        raise RevertError(
            f"cannot revert {short}: {shown} changed since the last commit; commit that first (`syncd sync`, "
            f"or a running `syncd watch` does it) and revert again; nothing was changed"
        )
    before = head_sha(root)
    try:
        run_git(root, "revert", "--no-edit", target, env=identity_env(name, email))
    except (HistoryError, GitBusyError) as exc:
        folder = git_dir(root)
        if folder is not None and (folder / "REVERT_HEAD").exists():
            run_git(root, "revert", "--abort")
            detail = "later commits change the same lines; nothing was changed"
        elif head_sha(root) == before and not run_git(root, "status", "--porcelain", "--untracked-files=no"):
            detail = "what it changed is already undone on this branch (reverted before?); nothing to revert"
        else:
            detail = exc.detail if isinstance(exc, HistoryError) else exc.reason
        raise RevertError(f"cannot revert {short}: {detail}") from None
    return head_sha(root) or target


def _uncommitted_in(root: Path, target: str) -> list[str]:
    """The files ``target`` changed that now hold changes not committed yet (edited, deleted or
    untracked): a revert would have to overwrite them."""
    out = run_git(root, "diff-tree", "--no-commit-id", "--name-only", "-r", "-z", "--no-renames", target)
    touched = {p for p in out.decode("utf-8", "surrogateescape").split("\0") if p}
    changes = changed_paths(root, touched)
    return sorted({*changes.paths, *changes.unmerged})


def _is_ancestor(root: Path, target: str) -> bool:
    """Whether ``target`` is in HEAD's history: a commit of another branch (or one fetched and
    never merged) is not this home's to revert."""
    # Their common ancestor is target itself when it is one; none at all (exit 1) on another root.
    return run_git(root, "merge-base", target, "HEAD", ok=(0, 1)).decode().strip() == target
