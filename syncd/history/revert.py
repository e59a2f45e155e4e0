"""Undo one commit (an agent turn, say) with ``git revert``; never leave a half-done revert.
"""

from __future__ import annotations

from pathlib import Path

import git

from ..errors import NotFoundError, RevertError
from .git import git_busy, identity_env, repo_or_raise

__all__ = ["revert_commit"]


def revert_commit(root: Path, commit: str, name: str, email: str) -> str:
    """``git revert`` one commit (an agent turn, say) as ``name <email>``; return the new HEAD.
    On a conflict the revert is aborted, the tree left as it was, and RevertError raised."""
    repo = repo_or_raise(root)
    busy = git_busy(root)
    if busy:
        raise RevertError(f"cannot revert now: {busy}; finish or abort that git operation first")
    try:
        target = repo.commit(commit).hexsha
    except (git.BadName, ValueError, git.GitCommandError):
        raise NotFoundError(f"no commit {commit!r} in {root}") from None
    with repo.git.custom_environment(**identity_env(name, email)):
        try:
            repo.git.revert("--no-edit", target)
        except git.GitCommandError as exc:
            if (Path(repo.git_dir) / "REVERT_HEAD").exists():
                repo.git.revert("--abort")
            detail = (exc.stderr or str(exc)).strip().splitlines()
            raise RevertError(f"cannot revert {target[:10]}: {detail[-1] if detail else exc}") from None
    return repo.head.commit.hexsha

