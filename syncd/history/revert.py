"""Undo one commit (an agent turn, say) with ``git revert``; never leave a half-done revert."""

from __future__ import annotations

from pathlib import Path

from ..errors import GitBusyError, HistoryError, NotFoundError, RevertError
from .git import git_busy, git_dir, head_sha, identity_env, repo_or_raise, run_git

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
    if not target:
        raise NotFoundError(f"no commit {commit!r} in this home's history")
    try:
        run_git(root, "revert", "--no-edit", target, env=identity_env(name, email))
    except (HistoryError, GitBusyError) as exc:
        folder = git_dir(root)
        if folder is not None and (folder / "REVERT_HEAD").exists():
            run_git(root, "revert", "--abort")
            detail = "later commits change the same lines; nothing was changed"
        else:
            detail = exc.detail if isinstance(exc, HistoryError) else exc.reason
        raise RevertError(f"cannot revert {target[:10]}: {detail}") from None
    return head_sha(root) or target
