"""Sharing a home between machines through a git remote: pull (fetch, merge by file kind, index
what came in) and push (never forced; a remote that moved on is pulled first).

The use cases behind ``syncd remote``, ``syncd pull`` and ``syncd push`` (and ``sync --pull
--push``). A pull is one more change batch for the index: the merge lands in the tree while the
write path is quiesced (no agent write half-way, every acknowledged write committed first), then
the files it changed are indexed as any sync indexes them, so only what changed is embedded.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import HistoryError, InvalidInputError
from ..history import remote as git_remote
from ..history.git import head_sha, user_identity
from ..history.staging import commit_paths

if TYPE_CHECKING:
    from .facade import Engine

__all__ = [
    "PullReport",
    "PushReport",
    "check_remote",
    "merge_driver",
    "pull",
    "push",
    "remote_config",
    "remotes",
    "share",
    "shown_url",
]

# The git side, for the front ends (the command line's `remote list` and the driver git calls).
remotes = git_remote.remotes
remote_config = git_remote.remote_config
shown_url = git_remote.shown_url
merge_driver = git_remote.merge_driver

# A push that finds the remote moved on pulls and tries again, this many times in all.
PUSH_ATTEMPTS = 3
# The journal of a merge under way, in the home's private folder.
PULL_JOURNAL = "pull.json"


@dataclass(frozen=True)
class PullReport:
    remote: str
    branch: str
    head: str | None  # the new commit, or None when nothing came in
    fast_forward: bool
    kept_both: tuple[str, ...]

    def summary(self) -> str:
        if self.head is None:
            return f"{self.remote}/{self.branch}: nothing new"
        how = "fast-forward" if self.fast_forward else "merged"
        both = f"; both versions kept in {', '.join(self.kept_both)}" if self.kept_both else ""
        return f"{self.remote}/{self.branch}: {how} to {self.head[:10]}{both}"


@dataclass(frozen=True)
class PushReport:
    remote: str
    branch: str
    head: str | None
    pulls: tuple[PullReport, ...]

    def summary(self) -> str:
        return f"pushed {self.head[:10] if self.head else 'nothing'} to {self.remote}/{self.branch}"


def check_remote(root: Path, remote: str) -> None:
    """InvalidInputError for a remote the home lacks: what `watch --remote` and `serve --remote`
    check before they open anything."""
    if remote not in remotes(root):
        raise InvalidInputError(f"no remote {remote!r} in this home; add it with `syncd remote add {remote} URL`")


def _journal(engine: Engine) -> Path:
    """Where a pull says it is merging (the home's private folder: never in the tree)."""
    return engine.home.private_dir / PULL_JOURNAL


def share(engine: Engine, remote: str, url: str | None) -> bool:
    """Set the home up for sharing through ``remote`` (added with ``url`` when given): syncd's
    merge driver in git's config, its routes in ``.gitattributes`` (committed); and finish or
    undo a pull that was killed mid-merge (history/remote.py, ``recover_merge``). True when
    ``.gitattributes`` changed."""
    return _set_up(engine, remote, url)[0]


def _set_up(engine: Engine, remote: str, url: str | None) -> tuple[bool, str | None]:
    """:func:`share`'s work: whether ``.gitattributes`` changed, and what a killed pull left
    that was finished or undone (None: nothing)."""
    root = engine.home.root
    if url is not None:
        git_remote.add_remote(root, remote, url)
    with engine.writes.quiesced():
        name, email = user_identity(root)
        recovered = git_remote.recover_merge(
            root, _journal(engine), name or engine.settings.human_name, email or engine.settings.human_email
        )
        changed = git_remote.configure_merges(root)
        if changed:
            commit_paths(
                root,
                [".gitattributes"],
                "Share memory through git remotes: merge it by file kind",
                name or engine.settings.human_name,
                email or engine.settings.human_email,
                {"Syncd-Source": "sharing"},
            )
    return changed, recovered


def pull(engine: Engine, remote: str = "origin") -> PullReport:
    """Fetch the current branch from ``remote`` and merge it (syncd's merge driver), then index
    what changed. Everything of ours is committed first. GitBusyError when git refuses now
    (retry later); HistoryError when the remote cannot be reached."""
    root = engine.home.root
    branch = git_remote.current_branch(root)
    _, recovered = _set_up(engine, remote, None)
    theirs = git_remote.fetch(root, remote, branch)
    if theirs is None:
        return PullReport(remote, branch, None, False, ())
    if recovered is None and git_remote.holds(root, theirs):
        # Nothing came in: no scan of the home (a daemon pulls every few seconds).
        return PullReport(remote, branch, None, False, ())
    engine.sync()
    engine.commit()
    name, email = user_identity(root)
    name, email = name or engine.settings.human_name, email or engine.settings.human_email
    with engine.writes.quiesced():
        # .syncd/ tracked by a commit of ours is untracked before the merge, which then cannot stop
        # at this home's own derived state; the remote's is merged through a commit that stops
        # tracking it (remote.without_derived), so none of its bytes are written here; and after
        # the merge, as a last check, whatever came in tracked is untracked too.
        git_remote.untrack_derived(root, name, email)
        result = git_remote.merge_fetched(
            root,
            remote,
            branch,
            theirs,
            name,
            email,
            _journal(engine),
        )
        if result.head is not None and git_remote.untrack_derived(root, name, email) is not None:
            result = dataclasses.replace(result, head=head_sha(root))
    if result.head is not None or recovered is not None:
        # A merge recovered above (committed, say, as a killed pull left it) is new to the index
        # as much as one made here, though it leaves nothing for merge_fetched to merge.
        engine.sync()
        engine.note_aligned_commit(head_sha(root))
    # What came in is indexed: a kill from here on leaves nothing for the next pull to pick up.
    _journal(engine).unlink(missing_ok=True)
    return PullReport(remote, branch, result.head, result.fast_forward, result.kept_both)


def push(engine: Engine, remote: str = "origin") -> PushReport:
    """Commit what is pending and push the current branch to ``remote``; where the remote moved
    on, pull (merge) and push again, at most PUSH_ATTEMPTS times. Never forces."""
    root = engine.home.root
    branch = git_remote.current_branch(root)
    share(engine, remote, None)
    engine.sync()
    engine.commit()
    pulls: list[PullReport] = []
    for _ in range(PUSH_ATTEMPTS):
        if git_remote.push(root, remote, branch):
            return PushReport(remote, branch, head_sha(root), tuple(pulls))
        pulls.append(pull(engine, remote))
    raise HistoryError(
        "push", f"remote {remote!r} kept moving on: pushed nothing after {PUSH_ATTEMPTS} pulls; try again"
    )
