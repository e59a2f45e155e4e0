"""A change handed to a daemon (an agent writing while ``syncd watch`` or a server holds the home):
when it counts as committed, how the writer sees that daemon gone, and what it is told when the
commit comes late."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Literal

from ..errors import CommitDeferredError, GitBusyError, HistoryError, SyncdError
from ..history.git import blob_at_head, busy_state, head_sha, run_git
from ..home import Home, file_blob_sha, git_dir, read_memory_file
from ..home.lock import HomeLock
from .rewind import holds_change

__all__ = ["Handed", "TakeOver", "daemon_gone_look", "deferred", "still_late", "wait_handed", "wait_indexed"]

# How often a writer waiting for the daemon looks at the home's lock.
_DAEMON_LOOK_S = 0.5
# How often a writer waiting for the daemon looks whether HEAD holds its change.
_POLL_S = 0.02
# How often, at most, it looks whether the commits since its write show the change gone for good
# (a few git processes; at once whenever HEAD holds a new version of the file).
_VERDICT_S = 0.5
# How long a file must stay exactly as HEAD holds it, HEAD unmoved since the write, before the
# change counts as lost (`git checkout -- <file>`, `git restore`): an editor saving by truncating
# and rewriting never shows HEAD's bytes for that long unless that is what it saved.
_REVERTED_FOR_S = 2.0
# How many of the newest stash entries are looked at for lines a `git stash` holds for a moment.
_STASH_DEPTH = 10
# How many of the newest commits that took the file away are looked at for where they moved it.
_MOVES_LOOKED_AT = 10
_LITERAL = {"GIT_LITERAL_PATHSPECS": "1"}

# What became of a change handed to a daemon that let go of the home (WritePath._take_over):
# committed here; a daemon holds the home (again), which commits it; another writer kept the lock
# throughout; another writer's change built on it and waits for its own commit; git refused the
# commit.
TakeOver = Literal["landed", "daemon", "held", "waiting", "refused"]
_DEFERRED_BECAUSE: dict[str, str] = {
    "daemon": "the daemon commits it once git is free",
    "held": "another writer held the home's lock throughout; the next sync commits it",
    "waiting": "another writer's change to the same file waits for its commit, which takes it in",
    "refused": "the daemon stopped before committing it and git refused it here; the next sync commits it",
}


class Handed:
    """One file of a change handed to a daemon: the sha written (``sha``) and the change it made
    (``before`` -> ``after``, as ``ChangeGroup.changed`` keeps it), HEAD's commit before the write
    (``base``; None: not known), and whether it is committed, or lost for good.

    Committed means a commit on the branch holds the change (:func:`rewind.holds_change`: every
    line it added, counted with copies, and none it took out; byte-exact when counts cannot show
    it): HEAD, or a commit between ``base`` and HEAD (committed, then changed again by a later
    commit: in history all the same), or one of the file a commit since ``base`` renamed it to,
    or, once HEAD moved on without it, a commit since ``base`` on another local branch
    (committed there, then the person checked out this one). Not that the file no longer holds ``sha``: changed again
    before the daemon's commit (a person's edit, another writer), the file may still hold our
    lines, and then whoever commits it commits them too; or it may not, and then no commit ever
    holds them. So the writer waits for HEAD, not for the file.

    Lost (``lost``) means HEAD shows the change gone for good: the branch moved on from ``base``
    with commits of the file none of which holds the change, and nothing that could still bring
    it back holds it either: not the file (nor the file a commit renamed it to), not a stash entry (a `git stash` keeps uncommitted
    lines for its pop), not a git command under way (an autostash, a rebase). Or HEAD never moved
    and the file went back to HEAD's version (`git checkout -- <file>`): nothing holds the change
    and no commit ever will, once the file has stayed so for ``_REVERTED_FOR_S`` (nor a stash
    keeps it). The writer is told then (OverwrittenError) instead of waiting out ``lock_wait_s``."""

    def __init__(self, root: Path, rel: str, sha: str, before: bytes | None, after: bytes, base: str | None = None):
        self.root, self.rel, self.sha = root, rel, sha
        self.before, self.after = before, after
        self.base = base
        self.lost = False
        self._looked: str | None = None  # HEAD's last blob of the file whose bytes were looked at
        self._next_verdict = 0.0  # when the history is looked at next (monotonic)
        self._reverted_since: float | None = None  # since when the file is HEAD's, HEAD unmoved

    def landed(self) -> bool:
        """Whether a commit holds the change: HEAD's blob of the file each time (one git
        process), its bytes only when that blob is new; the commits since ``base`` when HEAD's
        version does not hold it (then ``lost`` may be set), at most every ``_VERDICT_S``."""
        head = blob_at_head(self.root, self.rel)
        if head == self.sha:
            return True
        if head is not None and head != self._looked:
            try:
                data = run_git(self.root, "cat-file", "blob", head)
            except (GitBusyError, HistoryError):
                return False  # looked at again
            self._looked = head
            if holds_change(data, self.before, self.after):
                return True
            self._next_verdict = 0.0  # a new version without the change: the history at once
        if self.base is None or time.monotonic() < self._next_verdict:
            return False
        self._next_verdict = time.monotonic() + _VERDICT_S
        verdict = self._verdict()
        self.lost = verdict == "lost"
        return verdict == "landed"

    def kept(self) -> bool:
        """Whether the file on disk still holds the change (as :meth:`landed` counts)."""
        try:
            return holds_change(read_memory_file(self.root, self.rel), self.before, self.after)
        except (OSError, SyncdError):
            return False  # a link or a folder there now: not ours

    def _verdict(self) -> Literal["landed", "lost", "waiting"]:
        """What the commits since ``base`` say: one of them holds the change ("landed"), the
        branch moved on without it and nothing can bring it back ("lost"; see the class doc),
        or not yet known ("waiting": git busy or unreadable counts as that)."""
        assert self.base is not None
        root = self.root
        if self.kept() or busy_state(root) is not None or _autostash_pending(root):
            self._reverted_since = None
            return "waiting"
        try:
            head = head_sha(root)
            if head == self.base:
                return self._reverted()
            if head is None:
                return "waiting"
            # A branch set back or rewritten (a rebase's abort, a reset) is not "moved on": what
            # it dropped may be put back (rewind.py).
            if run_git(root, "merge-base", self.base, head, ok=(0, 1)).decode().strip() != self.base:
                return "waiting"
            commits = run_git(root, "rev-list", f"{self.base}..{head}", "--", self.rel, env=_LITERAL).decode().split()
            if not commits:
                return "waiting"  # no commit took the file in since the write
            versions = _versions(root, [f"{c}:{self.rel}" for c in commits])
            if any(self._holds(data) for data in versions):
                return "landed"
            # A commit that took the file away may have moved it (the person renamed it, in
            # Obsidian say, with our lines in it): committed all the same, under its new name.
            gone = [c for c, data in zip(commits, versions, strict=True) if data is None]
            for moved in _moved_to(root, gone, self.rel):
                since = run_git(root, "rev-list", f"{self.base}..{head}", "--", moved, env=_LITERAL).decode().split()
                if any(self._holds(data) for data in _versions(root, [f"{c}:{moved}" for c in since])):
                    return "landed"
                if self._kept_at(moved):
                    return "waiting"  # the moved file holds it, uncommitted: its next commit takes it in
            if any(self._holds(data) for data in _versions(root, _stashed_specs(root, self.rel))):
                return "waiting"  # a stash keeps it; its pop brings it back
            # Committed, then the person checked out another branch (that moved on from ``base``
            # too) before this looked: the commit is on the branch they left, which they come
            # back to. Any local branch counts (not refs/stash: a stash entry may be dropped).
            elsewhere = run_git(root, "rev-list", "--branches", f"^{self.base}", "--", self.rel, env=_LITERAL)
            seen = set(commits)
            others = [c for c in elsewhere.decode().split() if c not in seen]
            if any(self._holds(data) for data in _versions(root, [f"{c}:{self.rel}" for c in others])):
                return "landed"
        except (GitBusyError, HistoryError):
            return "waiting"
        return "lost"

    def _reverted(self) -> Literal["lost", "waiting"]:
        """HEAD has not moved since the write and the file does not hold the change: "lost" once
        the file has been exactly HEAD's version (or, new with the write, absent as HEAD has it)
        for ``_REVERTED_FOR_S``, with no stash entry keeping the change; looked at again until then."""
        try:
            reverted = file_blob_sha(self.root / self.rel) == blob_at_head(self.root, self.rel)
        except OSError:
            reverted = False
        if not reverted or any(self._holds(data) for data in _versions(self.root, _stashed_specs(self.root, self.rel))):
            self._reverted_since = None
            return "waiting"
        now = time.monotonic()
        if self._reverted_since is None:
            self._reverted_since = now
        return "lost" if now - self._reverted_since >= _REVERTED_FOR_S else "waiting"

    def _kept_at(self, rel: str) -> bool:
        """Whether the file ``rel`` on disk holds the change (the file it was moved to)."""
        try:
            return self._holds(read_memory_file(self.root, rel))
        except (OSError, SyncdError):
            return False

    def _holds(self, data: bytes | None) -> bool:
        return holds_change(data, self.before, self.after)


def wait_handed(handed: dict[str, Handed], deadline: float, gone: Callable[[], bool]) -> dict[str, Handed]:
    """Wait until a commit holds each change of ``handed``, at most until ``deadline``, until
    ``gone()`` says there is no daemon to wait for, or until one of them is lost (``Handed.lost``:
    the turn cannot be committed whole any more). The ones no commit holds yet."""
    late = dict(handed)
    while True:
        late = {rel: one for rel, one in late.items() if not one.landed()}
        if not late or any(one.lost for one in late.values()) or time.monotonic() >= deadline or gone():
            return late
        time.sleep(_POLL_S)


def _versions(root: Path, specs: list[str]) -> list[bytes | None]:
    """The blobs ``specs`` name (``<commit>:<path>``; None: no such blob), read by one git."""
    if not specs:
        return []
    out = run_git(root, "cat-file", "--batch", input="".join(f"{spec}\n" for spec in specs).encode())
    found: list[bytes | None] = []
    at = 0
    for _ in specs:
        end = out.index(b"\n", at)
        header = out[at:end].split()
        at = end + 1
        if len(header) == 3 and header[1] == b"blob":
            size = int(header[2])
            found.append(out[at : at + size])
            at += size + 1
        else:
            found.append(None)  # "<spec> missing", or not a blob
    return found


def _moved_to(root: Path, commits: list[str], rel: str) -> list[str]:
    """Where ``commits`` (each one that took ``rel`` away) moved ``rel`` to, as git's rename
    detection sees it against each one's first parent (the newest few commits)."""
    found: dict[str, None] = {}
    for commit in commits[:_MOVES_LOOKED_AT]:
        out = run_git(root, "diff-tree", "-r", "-M", "-z", "--name-status", "--no-commit-id", f"{commit}^", commit)
        fields, at = out.split(b"\0"), 0
        while at < len(fields) - 1:  # status, path (and a new path for a rename or a copy)
            status = fields[at]
            if status[:1] == b"R" and fields[at + 1] == rel.encode() and at + 2 < len(fields):
                found.setdefault(fields[at + 2].decode("utf-8", "replace"), None)
            at += 3 if status[:1] in (b"R", b"C") else 2
    return list(found)


def _stashed_specs(root: Path, rel: str) -> list[str]:
    """Where the newest stash entries keep ``rel``: each entry's tree (the working tree it took),
    its index (second parent) and its untracked files (third parent, for `git stash -u`)."""
    try:
        out = run_git(root, "log", "-g", f"-n{_STASH_DEPTH}", "--format=%H %P", "refs/stash", "--")
    except HistoryError:
        return []  # no stash
    specs = []
    for line in out.decode().splitlines():
        entry, *parents = line.split()
        specs += [f"{commit}:{rel}" for commit in [entry, *parents[1:]]]
    return specs


def _autostash_pending(root: Path) -> bool:
    """Whether a `git merge --autostash` keeps uncommitted lines aside to put back (a rebase's
    autostash lives in its state folder, which busy_state sees)."""
    folder = git_dir(root)
    return folder is not None and (folder / "MERGE_AUTOSTASH").exists()


def still_late(handed: dict[str, Handed]) -> dict[str, Handed]:
    """Of ``handed``, the files whose change HEAD does not hold yet."""
    return {rel: one for rel, one in handed.items() if not one.landed()}


def wait_indexed(indexed_sha: Callable[[str], str | None], home: Home, rel: str, sha: str, wait_s: float) -> bool:
    """Wait until the index reflects ``sha`` for ``rel`` (``indexed_sha``; read-your-writes for
    the rest of the group) or the file no longer holds ``sha`` (changed again: the index follows
    the newer version), at most ``wait_s`` or until no daemon holds the home. False when it
    gave up while a daemon still holds the home (is it running?). Only for reading: what the
    acknowledgement waits for is HEAD (:class:`Handed`)."""
    deadline = time.monotonic() + wait_s
    gone = daemon_gone_look(home.lock())
    while indexed_sha(rel) != sha:
        if file_blob_sha(home.root / rel) != sha:
            return True
        if time.monotonic() >= deadline or gone():
            return not home.lock().held_by_daemon()
        time.sleep(_POLL_S)
    return True


def daemon_gone_look(lock: HomeLock) -> Callable[[], bool]:
    """A check, made at most every ``_DAEMON_LOOK_S``, that no daemon holds the home's ``lock``
    any more (the one a change was handed to stopped, or was killed): the lock is free, or held
    by another kind of writer (agents' changes borrowing it back to back, a ``syncd sync``),
    which does not take changes handed over (a sync may commit one, or may not). Once it says
    so, it keeps saying so."""
    next_look = time.monotonic() + _DAEMON_LOOK_S
    found = False

    def gone() -> bool:
        nonlocal next_look, found
        if found or time.monotonic() < next_look:
            return found
        next_look = time.monotonic() + _DAEMON_LOOK_S
        found = lock.is_free() or not lock.held_by_daemon()
        return found

    return gone


def deferred(late: Iterable[str], wait_s: float, outcome: TakeOver) -> CommitDeferredError:
    """What a writer whose change is saved but not committed in time is told, and why."""
    return CommitDeferredError(
        f"saved but not committed within {wait_s:.0f} s ({', '.join(late)}): "
        f"{_DEFERRED_BECAUSE[outcome]}; it is kept, do not write it again"
    )
