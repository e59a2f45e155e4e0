"""Files a git command of the person's rewound under syncd, and how what it took out comes back.

git is not made for two writers of one branch. A command of the person's that read HEAD before
one of our commits and rewrites the tree after it leaves files as an older commit had them while
HEAD already holds our newer version: `git merge` with local changes stashes them, resets the tree
to the HEAD it read and puts them back; `git stash`, `git checkout` and `git reset` do the same
with the HEAD they read. Committed as found, that tree is a commit "as the person" deleting facts
an agent was told were kept, which nobody deleted. The settle rule (WritePath.settle_due) and
holding git's index lock through a commit pass make the window small; this closes it.

A rewound file is told from an edit by how it got there: git writes a file it checks out to the
tree and to its index together, so the index entry equals the file and differs from HEAD; an
editor's save touches the file only. Such a file that lacks fact lines HEAD holds with a syncd id
(``<!-- id:...``: written through syncd, hence acknowledged) is rewound. It is written back as a
three-way union merge of HEAD's version and the file over the version it went back to (the newest
earlier version of the file whose lines the file all holds), so the person's own changes on top
stay and what the command took out comes back. The one thing this rule cannot tell from a rewind
is a person who deletes an agent's fact and stages the deletion with ``git add`` without
committing it: they commit it themselves (or save it and let syncd commit it).

A file can also be taken out whole. `git stash --include-untracked` that read git's index just
before a commit pass of ours published a new file counts the file as untracked, keeps it in the
stash's third parent and cleans it from the tree, after the pass committed it. The commit pass puts
such a file back when it sees it gone (WritePath._put_back_taken); a clean that lands after that
look leaves a file HEAD and git's index hold, missing from the tree, and the stash entry holding
exactly HEAD's bytes as untracked. No command of the person's leaves that state on purpose: a file
git tracks is never stashed as untracked, and ``rm`` or ``git rm`` of it leaves no such entry (the
one exception, a page the person stashed untracked, then wrote again byte for byte, committed and
deleted, is put back once; they delete it again). It is put back as HEAD has it.

And a branch can lose commits whole. `git rebase` reads HEAD when it starts and, once done, moves
the branch from what it read: a commit of ours landing in between (before the rebase writes its
state, so nothing says a rebase is under way) makes that move fail ("could not update
refs/heads/main"), and `git rebase --abort` then sets the branch back to the HEAD the rebase read,
without looking at what the branch holds now: our commit is out of the branch, its lines out of
the tree, acknowledged and gone. The branch's reflog names such a move ("rebase (abort)") and the
commit it left (the previous entry); when every commit it dropped is syncd's (a ``Syncd-Source``
trailer), what they changed is merged back into the tree (:class:`DroppedCommits`), as syncd's own
change. A commit of the person's that their abort dropped, and a reset they type (`git reset
--hard HEAD~1`), are theirs to make, and stay.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ..errors import ConflictError, GitBusyError, HistoryError, StorageError, SyncdError
from ..formats.merging import merge_json_kind
from ..history.git import run_git
from ..history.intents import Intent, record_intent
from ..history.objects import committed_blob
from ..home import Home, atomic_write, blob_sha, common_git_dir, git_dir, read_regular

__all__ = [
    "DroppedCommits",
    "Merged",
    "PutBack",
    "find_rewound",
    "head_holds",
    "holds_change",
    "lost_facts",
    "merge_back",
    "undo_would_uncommit",
]

log = logging.getLogger(__name__)

# A fact line syncd wrote: "- [category] ... <!-- id:... -->" (hand-written facts carry no id).
_SYNCD_FACT = re.compile(r"^- \[[a-z][a-z0-9_-]*\] .*<!--.*\bid:\S+.*-->\s*$")
_HISTORY_DEPTH = 30
# A move of the branch that sets it back to what a command read when it started, whatever the
# branch holds by then: the reflog's words for `git rebase --abort`. (`git am --abort` checks what
# the branch holds, and no commit of ours lands during `git am`, which leaves rebase-apply/.)
_ABORT_MOVE = re.compile(r"^rebase( -i)?[^:]*\(abort\)")
_REFLOG_DEPTH = 50
# What a reflog file's tail is read in: its last _REFLOG_DEPTH entries are almost always in the
# first block (an entry is a line of two shas, a name, a time and a short message).
_TAIL_BLOCK = 16384
_TAIL_MAX = 1 << 20


def _lines(data: bytes) -> list[str]:
    return data.decode("utf-8", "replace").splitlines()


def lost_facts(head: bytes, work: bytes) -> list[str]:
    """Fact lines with a syncd id that ``head`` holds and ``work`` does not."""
    have = set(_lines(work))
    return [line for line in _lines(head) if _SYNCD_FACT.match(line) and line not in have]


def _holds_all(work: bytes, older: bytes) -> bool:
    need, have = Counter(_lines(older)), Counter(_lines(work))
    return all(have[line] >= n for line, n in need.items())


def merge_back(root: Path, head: bytes, base: bytes | None, work: bytes) -> bytes:
    """HEAD's version and the file, merged over ``base`` keeping both sides' lines (``git
    merge-file --union``); without a base, HEAD's version then the file's lines it lacks."""
    if base is None:
        have = set(_lines(head))
        extra = [line for line in _lines(work) if line not in have]
        text = head.decode("utf-8", "replace")
        if extra:
            text = text + ("" if text.endswith("\n") or not text else "\n") + "\n".join(extra) + "\n"
        return text.encode()
    with tempfile.TemporaryDirectory() as folder:
        names = []
        for name, data in (("head", head), ("base", base), ("work", work)):
            path = os.path.join(folder, name)
            with open(path, "wb") as handle:
                handle.write(data)
            names.append(path)
        done = subprocess.run(
            ["git", "merge-file", "-p", "--union", *names], cwd=root, capture_output=True, check=False
        )
    if done.returncode < 0 or done.returncode >= 128:
        raise HistoryError("merge-file", done.stderr.decode("utf-8", "replace").strip())
    return done.stdout


def _entries(root: Path, *args: str) -> dict[str, str]:
    """``{path: sha}`` from ``ls-files -s -z`` or ``ls-tree -z`` output (stage 0 only)."""
    out = run_git(root, *args, env={"GIT_LITERAL_PATHSPECS": "1"})
    found = {}
    for record in out.split(b"\0"):
        meta, tab, raw = record.partition(b"\t")
        fields = meta.decode().split()
        if not tab or len(fields) < 3:
            continue
        if args[0] == "ls-files" and fields[2] != "0":
            continue
        found[raw.decode("utf-8", "surrogateescape")] = fields[1] if args[0] == "ls-files" else fields[2]
    return found


def _blob(root: Path, spec: str) -> bytes | None:
    try:
        return run_git(root, "cat-file", "blob", spec)
    except HistoryError:
        return None


def _base(root: Path, rel: str, work: bytes) -> bytes | None:
    """The newest earlier committed version of ``rel`` whose lines ``work`` all holds."""
    try:
        commits = (
            run_git(
                root,
                "log",
                f"-n{_HISTORY_DEPTH}",
                "--format=%H",
                "HEAD~1",
                "--",
                rel,
                env={"GIT_LITERAL_PATHSPECS": "1"},
            )
            .decode()
            .split()
        )
    except HistoryError:
        return None
    for sha in commits:
        older = _blob(root, f"{sha}:{rel}")
        if older is not None and _holds_all(work, older):
            return older
    return None


def find_rewound(root: Path, paths: Iterable[str]) -> dict[str, Merged]:
    """Of ``paths``, the files a git command rewound or took out whole (see the module doc),
    each with the bytes to write back (for a file taken out, HEAD's) over the bytes they were
    made from. Empty when git is busy or cannot say (nothing is restored on a guess)."""
    # HEAD's blobs come from the objects in memory, so a file as HEAD has it (the common case:
    # a write checks the file it builds on) costs no git process; git's index is asked only
    # about files that differ from HEAD.
    works: dict[str, bytes] = {}
    committed: dict[str, str] = {}
    missing: dict[str, str] = {}
    for rel in sorted(p for p in set(paths) if p.endswith(".md")):
        try:
            work = read_regular(root, rel)
            head_sha = committed_blob(root, rel)
        except (OSError, SyncdError):
            continue
        if head_sha is None:
            continue
        if work is None:
            if not os.path.lexists(root / rel):
                missing[rel] = head_sha
        elif blob_sha(work) != head_sha:
            works[rel], committed[rel] = work, head_sha
    if not works and not missing:
        return {}
    try:
        staged = _entries(root, "ls-files", "-s", "-z", "--", *works, *missing)
    except (GitBusyError, HistoryError):
        return {}
    found = _stashed_whole(root, {rel: sha for rel, sha in missing.items() if staged.get(rel) == sha})
    for rel, work in works.items():
        index_sha = staged.get(rel)
        if index_sha is None or index_sha == committed[rel]:
            continue
        if blob_sha(work) != index_sha:
            continue  # an editor's save (the index still holds what was committed), or SHA-256
        head = _blob(root, f"HEAD:{rel}")
        if head is None or not lost_facts(head, work):
            continue
        found[rel] = Merged(merge_back(root, head, _base(root, rel, work), work), work)
    return found


def _stashed_whole(root: Path, gone: dict[str, str]) -> dict[str, Merged]:
    """Of ``gone`` (``{path: HEAD's sha}``, files HEAD and git's index hold and the tree does
    not), those the newest stash entry keeps as untracked with exactly HEAD's bytes: taken out
    by a `git stash -u` racing our commit (module doc). Each with HEAD's bytes."""
    if not gone:
        return {}
    try:
        untracked = _entries(root, "ls-tree", "-z", "refs/stash^3", "--", *gone)
    except (GitBusyError, HistoryError):
        return {}  # no stash, or its newest entry keeps no untracked files
    found = {}
    for rel, sha in gone.items():
        if untracked.get(rel) != sha:
            continue
        head = _blob(root, sha)
        if head is not None and lost_facts(head, b""):
            found[rel] = Merged(head, None)
    return found


def undo_would_uncommit(root: Path, rel: str, current: bytes, before: bytes | None) -> bool:
    """Whether putting ``before`` (None: no file) back in place of ``current`` would take out of
    the tree lines HEAD holds: HEAD holds the file as it is, or a commit of someone else's took
    the group's lines in (its bytes taken by a `git stash`, popped back and committed as the
    person's edit before the group gave up). Undone then, the next commit would be a deletion
    nobody asked for; left, the bytes stay as they were committed. False when HEAD cannot be
    read (git busy, no commit, the file not in HEAD): the undo goes ahead as before."""
    try:
        head = run_git(root, "cat-file", "blob", f"HEAD:{rel}", env={"GIT_LITERAL_PATHSPECS": "1"})
    except (GitBusyError, HistoryError):
        return False
    if head == current:
        return True
    kept = set(before.splitlines()) if before is not None else set()
    return bool((set(head.splitlines()) & set(current.splitlines())) - kept)


def holds_change(have: bytes | None, before: bytes | None, after: bytes) -> bool:
    """Whether ``have`` (a version of a file; None: no file) holds the change ``before`` (None: no
    file) -> ``after``: of every line it added, ``have`` has at least as many copies as ``after``,
    and of every line it took out, at most as many (a line counted with its copies: a second copy
    of a line already there is a line added, and taking one of two out a line taken out). A
    change no count of lines shows (lines moved, their endings changed) is held only by ``have``
    being the bytes written."""
    if before == after:
        return True  # nothing changed: nothing to hold
    old = Counter(before.splitlines()) if before is not None else Counter()
    new = Counter(after.splitlines())
    if old == new:
        return have == after
    held = Counter(have.splitlines()) if have is not None else Counter()
    for line in old.keys() | new.keys():
        if new[line] > old[line] and held[line] < new[line]:
            return False
        if new[line] < old[line] and held[line] > new[line]:
            return False
    return True


def head_holds(root: Path, changed: dict[str, tuple[bytes | None, bytes]]) -> bool:
    """Whether HEAD holds each change of ``changed`` (path -> bytes before, bytes after), as
    :func:`holds_change` counts. A group whose commit found its file taken in by another commit
    (the person's `git commit -a` over it, a stash popped back and committed) is committed then,
    by that commit, and acknowledged: told instead that nothing of it was kept, a client would
    write its lines again. False when HEAD cannot be read (git busy, no commit)."""
    for rel, (before, after) in changed.items():
        try:
            head = run_git(root, "cat-file", "blob", f"HEAD:{rel}", env={"GIT_LITERAL_PATHSPECS": "1"})
        except GitBusyError:
            return False
        except HistoryError:
            head = None  # no such file in HEAD (or no HEAD)
        if not holds_change(head, before, after):
            return False
    return True


class DroppedCommits:
    """Finds what an abort took out of the branch (module doc) for one writer of the home: each
    reflog entry is looked at once, and the reflog only when it changed. What was looked at is
    kept in ``state_file`` (the home's private folder) and read again before each look, so a
    daemon started after an abort it did not see (the commit was made by a process that ended)
    still looks at it, and no writer (a daemon, or an agent's process writing with no daemon)
    looks at an entry another has looked at; with no such file, the entries from now on.
    Callers hold the home's lock, so no two look at once."""

    def __init__(self, root: Path, state_file: Path):
        self.root = root
        self.state_file = state_file
        self.since = int(time.time())  # whole seconds, as the reflog says when
        self._seen: set[tuple[str, str]] = set()
        self._last: list[tuple[str, str]] = []  # the entries the last look took in
        self._stamp: tuple[int, int] | None = None
        if not self._read_kept():
            self._keep()  # from now on, for this writer and the next

    def _read_kept(self) -> bool:
        """Take in what the state file says was looked at (by any writer); False without one."""
        try:
            state = json.loads(self.state_file.read_text(encoding="utf-8"))
            since, seen = int(state["since"]), {(str(b), str(a)) for b, a in state["seen"]}
        except (OSError, ValueError, TypeError, KeyError):
            return False
        self.since = since
        self._seen |= seen
        return True

    def look_again(self) -> None:
        """The last look's findings could not all be written back (a file changed meanwhile):
        the next :meth:`find` looks at those entries again (merging is idempotent). They were
        never kept (:meth:`looked`), so reading the state file again does not undo this."""
        self._seen.difference_update(self._last)
        self._last = []
        self._stamp = None

    def looked(self) -> None:
        """The last look's findings are written back: keep its entries as looked at, for this
        writer and the next. Only now: a writer killed before the write looks at them again."""
        if self._last:
            self._keep()
            self._last = []

    def find(self) -> dict[str, Merged]:
        """Each file the dropped commits changed (and left there), as the tree holds it with
        their change merged in. Empty when git is busy (looked at again next time), HEAD is
        detached, or no abort set the branch back since. The caller writes them, then says
        :meth:`looked` (or :meth:`look_again`)."""
        # Read from git's files, not asked of git: this runs on every commit pass of a writer.
        folder, shared = git_dir(self.root), common_git_dir(self.root)
        reflog: Path | None = None
        try:
            head = (folder / "HEAD").read_text(encoding="utf-8").strip() if folder is not None else ""
            branch = head[len("ref: ") :] if head.startswith("ref: refs/heads/") else ""
            reflog = shared / "logs" / branch if branch and shared is not None else None
            st = None if reflog is None else os.stat(reflog)
        except (OSError, UnicodeDecodeError):
            st = None
        if reflog is None or st is None or (st.st_size, st.st_mtime_ns) == self._stamp:
            return {}
        try:
            found = self._look(reflog)
        except (GitBusyError, HistoryError):
            return {}
        self._stamp = (st.st_size, st.st_mtime_ns)
        return found

    def _look(self, reflog: Path) -> dict[str, Merged]:
        self._read_kept()
        entries = _reflog_tail(reflog, _REFLOG_DEPTH)
        found: dict[str, Merged] = {}
        done = []
        for entry in entries:
            if not _ABORT_MOVE.match(entry.message) or entry.when < self.since or entry.move in self._seen:
                continue
            # Dropped: the branch held ``before`` and was set back to an ancestor of it, and HEAD
            # has not taken it in again since (a later pull of the same commits, say).
            before, after = entry.move
            if (
                _is_ancestor(self.root, after, before)
                and not _is_ancestor(self.root, before, "HEAD")
                and _all_ours(self.root, after, before)
            ):
                # Oldest first, each merged into what the ones before made of a file (two aborts
                # looked at once: the second's merge from the tree would lack the first's lines).
                found.update(_merged_back(self.root, after, before, found))
            done.append(entry.move)
        # Only once all were looked at (a failure looks at them again), and only entries the
        # reflog still shows among its last ones: an older one is never looked at again anyway.
        self._seen = (self._seen & {entry.move for entry in entries}) | set(done)
        self._last = done
        return found

    def _keep(self) -> None:
        """Remember what was looked at (best effort: forgotten, an entry is merged back again,
        which changes nothing the tree still holds)."""
        state = {"since": self.since, "seen": [list(pair) for pair in sorted(self._seen)]}
        with contextlib.suppress(OSError, SyncdError):
            self.state_file.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(self.state_file, json.dumps(state).encode())


@dataclass(frozen=True)
class Merged:
    """A file to put back: ``data`` to write, merged from the tree's bytes ``over`` (None: no
    file there), which it replaces only if the tree still holds them."""

    data: bytes
    over: bytes | None


@dataclass(frozen=True)
class _ReflogEntry:
    move: tuple[str, str]  # the commit the ref held before, and after
    when: int  # seconds since the epoch
    message: str


def _reflog_tail(path: Path, count: int) -> list[_ReflogEntry]:
    """The last ``count`` entries of the reflog file at ``path``, oldest first, read from its end
    (a branch's reflog grows by a line a commit; this runs on every commit pass). git writes an
    entry as one line, ``<old> <new> <name> <email> <seconds> <zone>\t<message>``; a line not so
    (a torn last line, say) is skipped. No file: no entries."""
    try:
        with open(path, "rb") as handle:
            start = handle.seek(0, os.SEEK_END)
            blocks: list[bytes] = []
            lines_read = 0
            # Each block is read once; a reflog with lines longer than _TAIL_MAX / count (never
            # git's own) gives fewer entries rather than a read of the whole file.
            while start > 0 and lines_read <= count and len(blocks) * _TAIL_BLOCK < _TAIL_MAX:
                size = min(_TAIL_BLOCK, start)
                start -= size
                handle.seek(start)
                blocks.append(handle.read(size))
                lines_read += blocks[-1].count(b"\n")
    except OSError:
        return []
    data = b"".join(reversed(blocks))
    lines = data.split(b"\n")
    if start > 0:
        lines = lines[1:]  # the first may be the end of a line read only in part
    entries = []
    for raw in lines[-count - 1 :]:
        head, tab, message = raw.decode("utf-8", "replace").partition("\t")
        words = head.split()
        if not tab or len(words) < 4 or not words[-2].isdigit():
            continue
        entries.append(_ReflogEntry((words[0], words[1]), int(words[-2]), message))
    return entries[-count:]


# The reflog entries of aborts already looked at (DroppedCommits), in the home's private folder:
# shared by every writer of the home, a daemon started later too.
_DROPPED_STATE = "dropped-commits.json"


class _Unread:
    """The default of PutBack.write's ``over``: read the file then."""


_UNREAD = _Unread()


class PutBack:
    """Writes back, as syncd's own change, what git commands took out of the tree or the branch,
    for a holder of the home's lock (a daemon, or a change that borrowed it): no other writer
    looks at the reflog or writes those files meanwhile. The caller commits what was written."""

    def __init__(self, home: Home):
        self.home = home
        self._dropped: DroppedCommits | None = None  # made on first use

    def dropped(self, commit_first: Callable[[list[str]], object]) -> dict[str, str]:
        """Merge back into the tree what a `git rebase --abort` took out of the branch: commits of
        syncd's that landed after the rebase read HEAD (:class:`DroppedCommits`), each file with
        its intent recorded; ``{path: blob sha written}``. A file changed since the merge read
        it is left as it is now, and looked at again next time.

        A file someone changed since the abort (the person's save, which git left uncommitted)
        is first committed as it is, by ``commit_first`` (the caller commits those paths, as
        any edit is: its intent's author, else the person): merged in and committed together,
        their lines would be syncd's in `git log` and blame. If that commit fails (git busy),
        nothing is put back now; the next look merges again."""
        if self._dropped is None:
            self._dropped = DroppedCommits(self.home.root, self.home.private_dir / _DROPPED_STATE)
        found = self._dropped.find()
        edited = sorted(rel for rel, merged in found.items() if self._uncommitted(rel, merged.over))
        if edited:
            try:
                commit_first(edited)
            except SyncdError as exc:
                log.info("did not put back %s yet: the edits there since are not committed: %s", ", ".join(edited), exc)
                self._dropped.look_again()
                return {}
        written: dict[str, str] = {}
        for rel, merged in found.items():
            summary = f"Put back what a git rebase --abort took out of the branch in {rel}"
            if self.write(rel, merged.data, summary, over=merged.over):
                written[rel] = blob_sha(merged.data)
        if len(written) == len(found):
            self._dropped.looked()
        else:
            self._dropped.look_again()  # changed meanwhile: merged again with what is there then
        if written:
            log.warning("a git rebase --abort took commits out of the branch; put back %s", ", ".join(sorted(written)))
        return written

    def _uncommitted(self, rel: str, now: bytes | None) -> bool:
        """Whether ``now`` (the tree's bytes of ``rel``; None: no file) differs from HEAD's."""
        try:
            head = committed_blob(self.home.root, rel)
        except SyncdError:
            return True  # HEAD cannot be read: committing first asks git itself
        return (None if now is None else blob_sha(now)) != head

    def write(self, rel: str, data: bytes, summary: str, over: bytes | _Unread | None = _UNREAD) -> bool:
        """Write ``data`` to ``rel`` as syncd's change (``summary`` its commit's subject) in place
        of ``over`` (the bytes ``data`` was made from; None: no file; by default what the file
        holds when this reads it), unless the file holds something else by the rename (then
        False: the caller's next pass looks again)."""
        try:
            if isinstance(over, _Unread):
                over = read_regular(self.home.root, rel)
            record_intent(self.home, rel, blob_sha(data), Intent(author="syncd", summary=summary))
            # A file taken out whole is put back only if nobody made it again meanwhile.
            atomic_write(self.home.root / rel, data, expected_sha=None if over is None else blob_sha(over))
        except (OSError, SyncdError) as exc:
            log.info("did not put back %s yet: %s", rel, exc)
            return False
        return True

    def taken_under_commit(self, rel: str, sha: str) -> None:
        """``rel`` was committed as written (blob ``sha``), and a git command took it out of the
        tree while the commit pass ran: a `git stash --include-untracked` (or `git clean`) that
        read git's index before the pass published it counts a new file as untracked and deletes
        it, after the pass staged its bytes. HEAD holds the write, so it is acknowledged; the
        tree must hold it too, else the next write to the file starts it anew and its commit, in
        the agent's name, deletes what was acknowledged (or the daemon commits the deletion as
        the person's). Put back as HEAD has it: nobody asked for the deletion (the stash keeps
        its own copy). Unless HEAD no longer holds it (a checkout of a branch without it): the
        file went with the commit that has it; or the person asked for it: git's index no longer
        holds it (`git rm`, `git mv`), or an untracked file holds its bytes (a rename)."""
        root = self.home.root
        try:
            if committed_blob(root, rel) != sha:
                log.info("not putting back %s: HEAD moved to a commit without it", rel)
                return
            # A `git rm` or `git mv` of the person's took it out of git's index too (a stash or a
            # clean racing the pass leaves the entry the pass staged): theirs to make.
            if _entries(root, "ls-files", "-s", "-z", "--", rel).get(rel) != sha:
                log.info("not putting back %s: git's index no longer holds it (a git rm, a git mv)", rel)
                return
            # Renamed (in Obsidian, with `mv`): put back, the rename became a copy of the page.
            moved = _untracked_copy(root, sha)
            if moved is not None:
                log.info("not putting back %s: it was moved to %s", rel, moved)
                return
            data = run_git(root, "cat-file", "blob", sha)
        except SyncdError as exc:
            log.info("did not put back %s, taken out of the tree under its commit: %s", rel, exc)
            return
        self.taken_whole(rel, data)

    def taken_whole(self, rel: str, data: bytes) -> None:
        """Write committed ``data`` to ``rel``, which a git command took out of the tree, unless
        someone made the file again meanwhile (compare-and-swap on "must not exist")."""
        try:
            atomic_write(self.home.root / rel, data, expected_sha=None)
        except (ConflictError, StorageError) as exc:
            # Made again meanwhile (whoever did commits it), or the disk refused: looked at no more.
            log.info("did not put back %s, taken out of the tree under its commit: %s", rel, exc)
            return
        # Not noted as the writer's own (WritePath._written_stat): a daemon that indexed the
        # deletion sees a new file and indexes it again; with no daemon, the index never left
        # these bytes.
        log.warning("a git command took %s out of the tree while it was committed; put it back", rel)


def _untracked_copy(root: Path, sha: str) -> str | None:
    """An untracked file of the tree holding exactly blob ``sha`` (where a rename moved it), or
    None. Files of another size are not read."""
    size = int(run_git(root, "cat-file", "-s", sha))
    for raw in run_git(root, "ls-files", "-o", "--exclude-standard", "-z").split(b"\0"):
        other = raw.decode("utf-8", "surrogateescape")
        try:
            if not other or os.lstat(root / other).st_size != size:
                continue
            data = read_regular(root, other)
        except (OSError, SyncdError):
            continue
        if data is not None and blob_sha(data) == sha:
            return other
    return None


def _is_ancestor(root: Path, older: str, newer: str) -> bool:
    """Whether commit ``older`` is ``newer`` or one of its ancestors (HistoryError: git could not
    say, e.g. a commit no longer there)."""
    done = subprocess.run(
        ["git", "merge-base", "--is-ancestor", older, newer], cwd=root, capture_output=True, check=False
    )
    if done.returncode not in (0, 1):
        raise HistoryError("merge-base", done.stderr.decode("utf-8", "replace").strip())
    return done.returncode == 0


def _all_ours(root: Path, base: str, dropped: str) -> bool:
    """Whether every commit of ``base..dropped`` was made by syncd (its ``Syncd-Source`` trailer):
    a commit of the person's that their abort took out is theirs to have dropped."""
    out = run_git(root, "log", "--format=%x00%(trailers:key=Syncd-Source,valueonly)", f"{base}..{dropped}", "--")
    commits = out.decode("utf-8", "replace").split("\0")[1:]
    return bool(commits) and all(trailer.strip() for trailer in commits)


def _merged_back(root: Path, base: str, dropped: str, earlier: dict[str, Merged]) -> dict[str, Merged]:
    """Each file the commits ``base..dropped`` changed, as the tree holds it (or as ``earlier``
    merges made it) with their change merged in (three-way, keeping both sides' lines); files
    already so are left out."""
    names = run_git(root, "diff", "--name-only", "-z", "--no-renames", base, dropped, "--")
    found: dict[str, Merged] = {}
    for raw in names.split(b"\0"):
        rel = raw.decode("utf-8", "surrogateescape")
        if not rel:
            continue
        was, then = _blob(root, f"{base}:{rel}"), _blob(root, f"{dropped}:{rel}")
        now: bytes | None
        over: bytes | None
        if rel in earlier:
            now, over = earlier[rel].data, earlier[rel].over
        else:
            try:
                now = over = read_regular(root, rel)
            except (OSError, SyncdError):
                continue  # a link or a folder there now: the person's, left alone
        if now == then or then is None:
            # A file the dropped commits deleted stays as it is: putting back is for what was
            # taken out, and a deletion committed again would be nobody's (no intent names it).
            continue
        if now is None or now == was:
            found[rel] = Merged(then, over)
        elif all(_is_text(data) for data in (then, was, now) if data is not None):
            found[rel] = Merged(_merge_text(root, rel, then, was, now), over)
        else:  # a picture, say, changed since: lines cannot be merged, and the newer one stays
            log.warning("did not put back %s (not text, and changed since): the dropped commit has it", rel)
    return found


def _merge_text(root: Path, rel: str, then: bytes, was: bytes | None, now: bytes) -> bytes:
    """``now`` (the tree's) with the dropped commit's ``then`` merged in over ``was``: a
    session's JSON files by their kind (a line merge of two versions of one JSON object is not
    JSON: without a base it put the tree's lines after the closing brace), the rest keeping
    both sides' lines."""
    base = None if was is None else was.decode("utf-8")
    by_kind = merge_json_kind(PurePosixPath(rel).name, base, now.decode("utf-8"), then.decode("utf-8"))
    if by_kind is not None:
        return by_kind.text.encode("utf-8")
    return merge_back(root, then, was, now)


def _is_text(data: bytes) -> bool:
    if b"\0" in data:
        return False
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True
