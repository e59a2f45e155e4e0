"""Auditing a home's history: recent commits, where a fact came from, what a commit did to the
facts, and undoing a commit with the index following.

The one home of these use cases and the face of ``syncd.history`` for every front end (the
command line, the servers, the workbench, scripts); they raise only SyncdError subclasses.
``log`` and ``blame`` show a shared home to one user when given one (syncd.engine.visibility);
``revert`` works beside a running daemon (it asks the daemon, the one writer, over its socket)
and alone (it opens the home and the index is brought in step here).
"""

from __future__ import annotations

import dataclasses
import pathlib
import re

# Modules, not names: what this module defines beyond them is exactly its public API (tests/test_api.py).
from .. import errors, formats
from ..formats.fact_grammar import ID_PATTERN as _ID_PATTERN
from ..history import blame as _blame
from ..history import git
from ..history import log as _log
from ..history.blame import FactHistory, fact_history
from ..history.log import LogEntry, read_log
from . import visibility

__all__ = [
    "LogEntry",
    "FactHistory",
    "FactChange",
    "CommitEffect",
    "read_log",
    "log",
    "fact_history",
    "blame",
    "commit_effect",
    "revert",
]


def log(
    root: pathlib.Path | str, path: str | None = None, limit: int = 20, *, user_id: str | None = None
) -> list[LogEntry]:
    """The ``limit`` newest commits touching ``path`` (a file or folder; None: the whole home),
    as ``user_id`` may see them: their own folder when they name none, never another user's
    (AccessError), each commit shown as visibility.seen_by says. ``user_id`` None: everything,
    as the home's own tools see it. InvalidInputError for a path that climbs out of the home."""
    rel = visibility.log_path(path, user_id)
    entries = read_log(pathlib.Path(root), rel, limit)
    if user_id is None:
        return entries
    return [seen for entry in entries if (seen := visibility.seen_by(entry, user_id)) is not None]


def blame(engine, fact_id: str, *, user_id: str | None = None) -> list[FactHistory]:
    """Where the fact ``fact_id`` came from, for each line that holds it (``engine``: an open
    Engine, which knows where the fact sits): the commit that introduced the line and the later
    ones that changed it. With ``user_id``, only lines in files that user may be named, each
    commit as they may see it (visibility.seen_by), without its list of files. NotFoundError
    when no such line holds it."""
    if not isinstance(fact_id, str) or not re.fullmatch(_ID_PATTERN, fact_id):
        shown = fact_id[:40] + "..." if isinstance(fact_id, str) and len(fact_id) > 40 else fact_id
        raise errors.InvalidInputError(f"bad fact id {shown!r}: a search shows each fact's id (such as m-1a2b3c4d)")
    rows = engine.find_fact(fact_id)
    if user_id is not None:
        rows = [row for row in rows if visibility.readable(row["path"], user_id)]
    if not rows:
        raise errors.NotFoundError(f"no fact {fact_id!r} in this memory (a search shows each fact's id)")
    root = engine.home.root
    histories = [fact_history(root, row["path"], _blame.current_line(root, row), row["text"]) for row in rows]
    if user_id is None:
        return histories
    shas = [e.sha for h in histories for e in (h.introduced, *h.edits) if e is not None]
    touched = _log.commit_files(root, shas)

    def seen(entry: LogEntry | None) -> LogEntry | None:
        if entry is None:
            return None
        shown = visibility.seen_by(dataclasses.replace(entry, files=touched.get(entry.sha, ())), user_id)
        return None if shown is None else dataclasses.replace(shown, files=())

    return [
        dataclasses.replace(
            h, introduced=seen(h.introduced), edits=tuple(e for e in map(seen, h.edits) if e is not None)
        )
        for h in histories
    ]


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
    # A log holding a NUL byte is still a log (its facts are indexed), not git's "binary files
    # differ"; a merge's effect is what it brought onto the branch, as `read_log` lists its files.
    out = git.run_git(
        root,
        "-c",
        "core.quotepath=off",
        "show",
        "--format=%H",
        "--no-color",
        "--no-renames",
        "--unified=0",
        "--no-ext-diff",
        "--text",
        "--diff-merges=first-parent",
        commit,
        "--",
        "memory/users",
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
    from ..errors import GitBusyError, LockedError, NotFoundError, RemoteError, RevertError, SyncdError
    from .facade import open_engine

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
