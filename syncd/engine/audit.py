"""Auditing a home's history from Python: recent commits, where a fact came from, what a commit
did to the facts, and undoing a commit with the index following.

This is the public face of ``syncd.history`` for tools (the workbench, scripts): each function
takes the home's folder and raises only SyncdError subclasses. ``revert`` works beside a running
daemon (it indexes the reverted files like any edit) and alone (the index is brought in step here).
"""

from __future__ import annotations

import dataclasses
import pathlib

# Modules, not names: what this module defines beyond them is exactly its public API (tests/test_api.py).
from .. import formats
from ..history import git
from ..history.blame import FactHistory, fact_history
from ..history.log import LogEntry, read_log

__all__ = ["LogEntry", "FactHistory", "FactChange", "CommitEffect", "read_log", "fact_history", "commit_effect", "revert"]


@dataclasses.dataclass(frozen=True)
class FactChange:
    """One fact line a commit added or removed (an edited fact is one of each)."""

    path: str
    fact: formats.Fact


@dataclasses.dataclass(frozen=True)
class CommitEffect:
    """What one commit did to the facts: lines added and removed, at most ``limit`` of each
    (a big import adds thousands); the totals count them all."""

    sha: str
    added: tuple[FactChange, ...]
    removed: tuple[FactChange, ...]
    added_total: int
    removed_total: int


def commit_effect(root: pathlib.Path | str, commit: str, limit: int = 200) -> CommitEffect:
    """The facts ``commit`` added and removed in the daily logs (the diff read through the fact
    grammar, so prose, task boxes and look-alikes are not counted)."""
    root = pathlib.Path(root)
    git.repo_or_raise(root)
    # Only the fact lines matter: no context lines, no rename pairing (a moved log is its lines).
    out = git.run_git(
        root, "-c", "core.quotepath=off", "show", "--format=%H", "--no-color", "--no-renames",
        "--unified=0", "--no-ext-diff", commit, "--", "memory/users",
    ).decode("utf-8", "replace")
    lines = out.splitlines()
    sha = lines[0].strip() if lines else commit
    added: list[FactChange] = []
    removed: list[FactChange] = []
    totals = {"+": 0, "-": 0}
    path = ""
    for line in lines[1:]:
        if line.startswith("+++ "):
            path = line[6:] if line.startswith("+++ b/") else path
            continue
        if line.startswith("--- "):
            path = line[6:] if line.startswith("--- a/") else path
            continue
        sign = line[:1]
        if sign not in totals:
            continue
        fact = formats.parse_fact_line(line[1:])
        if fact is None:
            continue
        totals[sign] += 1
        side = added if sign == "+" else removed
        if len(side) < limit:
            side.append(FactChange(path, fact))
    return CommitEffect(sha, tuple(added), tuple(removed), totals["+"], totals["-"])


def revert(home: pathlib.Path | str, commit: str, settings=None) -> str:
    """``git revert`` one commit (an agent turn, say) as the person's git identity, by the one
    writer of the home (Engine.revert): here when nothing else holds the home, else by the daemon
    that does, asked over its socket, so it never runs between another writer's write and its
    commit. Returns the new commit's sha. RevertError (nothing changed) when later commits
    changed the same lines; NotFoundError for an unknown commit; LockedError when a process that
    is not a daemon holds the home."""
    from ..config import Settings
    from ..control.client import ask_daemon
    from ..control.protocol import RemoteError
    from .facade import open_engine
    from ..errors import GitBusyError, LockedError, NotFoundError, RevertError, SyncdError

    settings = settings or Settings()
    root = pathlib.Path(home).resolve()
    try:
        engine = open_engine(root, settings=settings)
    except LockedError:
        try:
            answer = ask_daemon(root, "revert", {"commit": commit}, timeout=max(settings.lock_wait_s, 60.0))
        except RemoteError as exc:
            known = {"RevertError": RevertError, "NotFoundError": NotFoundError}
            if exc.kind == "GitBusyError":
                raise GitBusyError(str(exc)) from None
            raise known.get(exc.kind, SyncdError)(str(exc)) from None
        if answer is None:
            raise
        return answer["commit"]
    with engine:
        return engine.revert(commit)
