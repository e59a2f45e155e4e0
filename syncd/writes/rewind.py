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
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
import tempfile
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from ..errors import GitBusyError, HistoryError, SyncdError
from ..history.git import run_git
from ..history.objects import committed_blob
from ..home import blob_sha, read_regular

__all__ = ["find_rewound", "lost_facts", "merge_back", "undo_would_uncommit"]

log = logging.getLogger(__name__)

# A fact line syncd wrote: "- [category] ... <!-- id:... -->" (hand-written facts carry no id).
_SYNCD_FACT = re.compile(r"^- \[[a-z][a-z0-9_-]*\] .*<!--.*\bid:\S+.*-->\s*$")
_HISTORY_DEPTH = 30


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


def find_rewound(root: Path, paths: Iterable[str]) -> dict[str, bytes]:
    """Of ``paths``, the files a git command rewound or took out whole (see the module doc),
    each with the bytes to write back (for a file taken out, HEAD's). Empty when git is busy or
    cannot say (nothing is restored on a guess)."""
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
        found[rel] = merge_back(root, head, _base(root, rel, work), work)
    return found


def _stashed_whole(root: Path, gone: dict[str, str]) -> dict[str, bytes]:
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
            found[rel] = head
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
