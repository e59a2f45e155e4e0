"""Git history of the memory tree (gitpython): commits with provenance trailers, log, blame, revert.

Every commit sets its author and committer explicitly, so a machine with no git identity
configured (CI, a fresh server) still commits, and the author is the agent or person who made the
change rather than whoever happens to run the daemon.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from pathlib import Path

import git

__all__ = ["open_or_init_repo", "commit_paths", "commit_changes", "format_message"]

log = logging.getLogger(__name__)


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


def _identity_env(name: str, email: str) -> dict[str, str]:
    return {
        "GIT_AUTHOR_NAME": name,
        "GIT_AUTHOR_EMAIL": email,
        "GIT_COMMITTER_NAME": name,
        "GIT_COMMITTER_EMAIL": email,
    }


def format_message(subject: str, body: str = "", trailers: Mapping[str, str] | None = None) -> str:
    """Subject, optional body, then ``Key: value`` trailers that ``git interpret-trailers`` reads."""
    parts = [subject.strip()]
    if body.strip():
        parts.append(body.strip())
    if trailers:
        lines = [f"{k}: {' '.join(str(v).split())}" for k, v in trailers.items() if v not in (None, "")]
        if lines:
            parts.append("\n".join(lines))
    return "\n\n".join(parts) + "\n"


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
    with repo.git.custom_environment(**_identity_env(author_name, author_email)):
        repo.git.add("-A", "--", *stageable)
        if repo.head.is_valid():
            changed = repo.git.diff("--cached", "--name-only", "HEAD", "--", *stageable)
            if not changed.strip():
                return None
        repo.git.commit("--no-verify", "-q", "-m", full, "--only", "--", *stageable)
    return repo.head.commit.hexsha


def _changed_paths(repo: git.Repo, paths: Iterable[str] | None) -> dict[str, str]:
    """``{path: blob sha or ''}`` of what git sees as changed (untracked, modified, deleted)."""
    args = ["--porcelain=v1", "-z", "--untracked-files=all", "--no-renames"]
    if paths is not None:
        paths = list(paths)
        if not paths:
            return {}
        args += ["--", *paths]
    out = repo.git.status(*args)
    root = Path(repo.working_tree_dir or ".")
    changed: dict[str, str] = {}
    for entry in out.split("\0"):
        if len(entry) < 4:
            continue
        rel = entry[3:]
        if rel.startswith(".syncd/"):
            continue
        target = root / rel
        changed[rel] = blob_sha_of(target)
    return changed


def blob_sha_of(path: Path) -> str:
    from .home import file_blob_sha

    return file_blob_sha(path) or ""


def describe_change(paths: list[str]) -> str:
    """A one-line subject naming what changed."""
    if len(paths) == 1:
        return f"Update {paths[0]}"
    return f"Update {len(paths)} files"


def commit_changes(home, settings, paths: Iterable[str] | None = None) -> list[str]:
    """Commit what changed under ``paths``: one commit per intent, the rest as the human editor."""
    from .intents import take_intents

    repo, _ = open_or_init_repo(home.root)
    changed = _changed_paths(repo, paths)
    if not changed:
        return []
    intents = take_intents(home, changed)
    groups: dict[object, list[str]] = {}
    for rel in sorted(changed):
        intent = intents.get(rel)
        groups.setdefault(intent, []).append(rel)
    shas = []
    for intent, group in groups.items():
        if intent is None:
            name, email, trailers, subject = settings.human_name, settings.human_email, None, describe_change(group)
        else:
            name = intent.author
            email = intent.email or f"{intent.author}@{settings.agent_email_domain}"
            trailers = intent.trailers()
            subject = intent.summary or describe_change(group)
        sha = commit_paths(repo, group, subject, name, email, trailers=trailers)
        if sha:
            shas.append(sha)
    return shas
