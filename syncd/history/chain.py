"""Several commits at once: the turns waiting to be committed become a chain of commits, one per
turn, made by a fixed handful of git processes whatever their number.

``commit_exact`` (git.py) costs about eight git processes a commit. When several agents write at
once, their turns queue up; committing them one by one would make git the bottleneck of every
write. Here the whole queue is committed in one pass:

1. our paths are staged in the real index (``update-index``), so that afterwards ``git status``
   shows them clean, exactly as with one commit;
2. what each commit changes is read off the index (``ls-files -s``: mode and blob of each path)
   and HEAD's trees (objects.py, mostly from memory), so no diff is run;
3. each commit's tree is its parent's tree with that turn's paths only (whatever else the user
   staged never gets in), written with the commit itself as loose objects by objects.py: no git
   process at all, where ``fast-import`` and the ``unpack-objects`` it ran took the most CPU of a
   pass;
4. one ``update-ref`` moves HEAD from the commit we started from to the chain's last commit
   (compare-and-swap: a commit of the user's landing meanwhile makes it fail, and the next pass
   commits on top of theirs; what we wrote is then unreachable, for git's gc to drop).

A chain of one takes the same way: it is cheaper than ``commit_exact``'s ``write-tree``,
``diff-tree`` and ``commit-tree``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..errors import ChangedMeanwhileError, GitBusyError, HistoryError
from .git import PATHSPEC_MAX, git_dir, head_sha, run_git
from .objects import BlobReader, ObjectStore
from .staging import DiffEntry, HeldIndex, guard_commit, stage_paths

__all__ = ["PlannedCommit", "commit_chain"]


# Index modes of files whose blob is the file's bytes (a symlink's is its target's name).
_FILE_MODES = frozenset({"100644", "100755"})


@dataclass(frozen=True)
class PlannedCommit:
    """One commit of the chain: exactly ``present`` (as on disk) and ``removed`` (as deletions),
    under the given author (who is also the committer)."""

    present: tuple[str, ...]
    removed: tuple[str, ...]
    author_name: str
    author_email: str


def _index_state(root: Path, paths: list[str], env: dict[str, str] | None = None) -> dict[str, tuple[str, str]]:
    """``{path: (mode, sha)}`` of the real index's stage-0 entries among ``paths``
    (``ls-files -s -z``: "mode sha stage\\tpath")."""
    spec = ["--", *paths] if len(paths) <= PATHSPEC_MAX else []
    out = run_git(root, "ls-files", "-s", "-z", *spec, env={"GIT_LITERAL_PATHSPECS": "1", **(env or {})})
    wanted = set(paths)
    found = {}
    for record in out.split(b"\0"):
        meta, tab, raw = record.partition(b"\t")
        rel = raw.decode("utf-8", "surrogateescape")
        fields = meta.decode().split(" ")
        if tab and rel in wanted and len(fields) == 3 and fields[2] == "0":
            found[rel] = (fields[0], fields[1])
    return found


def _diff(
    paths: Sequence[str], before: dict[str, tuple[str, str]], after: dict[str, tuple[str, str]]
) -> list[DiffEntry]:
    """What going from ``before`` to ``after`` changes among ``paths``, as diff-tree would say it."""
    entries = []
    for rel in sorted(paths):
        old, new = before.get(rel), after.get(rel)
        if old == new:
            continue
        if old is None:
            status = "A"
        elif new is None:
            status = "D"
        else:
            # A file that became a symlink (or the reverse) is a type change, not an edit.
            status = "T" if old[0][:2] != new[0][:2] else "M"
        entries.append(DiffEntry(rel, status, old and old[1], new and new[1]))
    return entries


def _person(name: str, email: str, when: str) -> bytes:
    # git refuses angle brackets and newlines inside an identity; strip them as git itself does.
    def clean(text: str) -> str:
        return " ".join(text.replace("<", "").replace(">", "").split())

    return f"{clean(name) or 'syncd'} <{clean(email)}> {when}".encode("utf-8", "replace")


# One function on purpose (hence the C901 noqa): everything between staging and the move of HEAD
# happens under git's index lock held here, in an order the docstring's guarantees depend on.
def commit_chain(  # noqa: C901
    root: Path,
    planned: Sequence[PlannedCommit],
    describe: Callable[[list[list[DiffEntry]], BlobReader], list[str]],
    expected: Mapping[str, str] | None = None,
) -> list[tuple[str | None, list[DiffEntry]]]:
    """Commit each of ``planned`` in order on the current branch, each as exactly its paths;
    everything else the user staged stays staged and uncommitted. ``describe`` gets what each
    commit really changes (an empty list for one whose paths already match) and a reader of blobs
    (``read(shas, limit)``, see ObjectStore.read_blobs), and returns their messages. Returns
    ``(sha or None, changes)`` per planned commit (None: nothing to commit). Afterwards git
    status shows those paths clean.

    ``expected`` (``{path: SHA-1 blob sha}``, the bytes the API's writers wrote): if what was
    staged for one of them is something else (a git command of the person's put another version
    in the tree meanwhile), nothing is committed and GitBusyError says so, before HEAD moves, so a
    change refused is never a change committed (SHA-256 repositories, whose blob ids differ, are
    checked by the caller after the pass instead).

    Raises GitBusyError when the user's git work is under way or HEAD is detached (nothing is
    done), or when HEAD moved while we committed (nothing is staged, and the next attempt commits
    our paths); HistoryError when git fails otherwise."""
    root = Path(root)
    guard_commit(root)
    if git_dir(root) is None:
        raise HistoryError("commit", f"{root} is not a git repository")
    present = sorted({p for c in planned for p in c.present})
    removed = sorted({p for c in planned for p in c.removed} - set(present))
    if not (present or removed):
        return [(None, []) for _ in planned]
    # Staged into a copy of git's index, taken in under git's own index lock with the move of
    # HEAD: a git command of the person's never slips between our staging and that move.
    with HeldIndex(root) as held:
        parent = head_sha(root)
        stage_paths(root, present, removed, held.env, pack=True)
        paths = present + removed
        index = _index_state(root, paths, held.env)
        with ObjectStore(root) as store:
            if expected and store.algorithm == "sha1":
                staged = set(paths)
                changed = sorted(
                    rel for rel, sha in expected.items() if rel in staged and index.get(rel, ("", None))[1] != sha
                )
                if changed:
                    raise ChangedMeanwhileError(
                        f"{', '.join(changed)} changed under the commit (a git command of yours "
                        "rewrote it meanwhile); nothing was committed"
                    )
            tree = store.commit_tree(parent) if parent else None
            state = store.blobs(tree, paths)
            changes = []
            for commit in planned:
                after = dict(state)
                for rel in (*commit.present, *commit.removed):
                    # What the index now holds is what we commit (a file deleted since status
                    # listed it was staged as the deletion it now is).
                    if rel in index:
                        after[rel] = index[rel]
                    else:
                        after.pop(rel, None)
                changes.append(_diff((*commit.present, *commit.removed), state, after))
                state = after
            # The files just staged hold the new side of each change: read there, not from git.
            staged_files = {sha: root / rel for rel, (mode, sha) in index.items() if mode in _FILE_MODES}
            messages = describe(changes, lambda shas, limit: store.read_blobs(shas, limit, staged_files))
            stamp = time.time()
            when = f"{int(stamp)} {time.strftime('%z', time.localtime(stamp))}"
            shas: list[str | None] = []
            head, subject, made = parent, "", 0
            for commit, entries, text in zip(planned, changes, messages):
                if not entries:
                    shas.append(None)
                    continue
                tree = store.write_tree(tree, {e.path: index[e.path] if e.new_sha else None for e in entries})
                person = _person(commit.author_name, commit.author_email, when)
                head = store.write_commit(tree, head, person, person, text.encode("utf-8", "replace"))
                shas.append(head)
                subject = text.strip().splitlines()[0] if text.strip() else ""
                made += 1
        with held.locked():
            if made:
                assert head is not None  # the last commit written
                note = f"commit: {subject}" if made == 1 else f"commit: {made} commits, the last: {subject}"
                zero = "0" * len(head)
                try:
                    run_git(
                        root,
                        "update-ref",
                        "-m",
                        note,
                        "--stdin",
                        input=f"update HEAD {head} {parent or zero}\n".encode(),
                    )
                except (GitBusyError, HistoryError):
                    if head_sha(root) != parent:
                        raise GitBusyError(
                            "HEAD moved while syncd was committing (a commit of yours at the "
                            "same moment); it commits its changes on top of yours next time"
                        ) from None
                    raise
            # Only now does git's index hold what we staged: git status shows our paths clean.
            held.publish()
            if made:
                held.settle()
    if not made:
        return [(None, []) for _ in planned]
    return list(zip(shas, changes))
