"""Several commits at once: the turns waiting to be committed become a chain of commits, one per
turn, made by a fixed handful of git processes whatever their number.

``commit_exact`` (git.py) costs about eight git processes a commit. When several agents write at
once, their turns queue up; committing them one by one would make git the bottleneck of every
write. Here the whole queue is committed in one pass:

1. our paths are staged in the real index (``update-index``), so that afterwards ``git status``
   shows them clean, exactly as with one commit;
2. what each commit changes is read off the index (``ls-files -s``: mode and blob of each path)
   and HEAD (``ls-tree``), so no tree is written and no diff is run;
3. ``git fast-import`` writes every commit of the chain in one process, each commit's tree being
   its parent's tree with that turn's paths only: whatever else the user staged never gets in;
4. one ``update-ref`` moves HEAD from the commit we started from to the chain's last commit
   (compare-and-swap: a commit of the user's landing meanwhile makes it fail, and the next pass
   commits on top of theirs).

Small imports are unpacked into loose objects (``fastimport.unpackLimit``), as ``git commit``
writes them, so a busy day does not leave thousands of tiny packs behind. And like ``git commit``
(whose loose objects git does not fsync by default), the import is not fsynced: the markdown it
records is, and waiting twice for the disk on every pass cost more than the rest of the commit.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..errors import GitBusyError, HistoryError
from .git import (
    _PATHSPEC_MAX,
    DiffEntry,
    _guard,
    _last_line,
    _stage,
    commit_exact,
    git_dir,
    head_sha,
    run_git,
)

__all__ = ["PlannedCommit", "commit_chain"]

# Below this many objects an import is written as loose objects, not as a pack of its own.
_UNPACK_LIMIT = 1000


@dataclass(frozen=True)
class PlannedCommit:
    """One commit of the chain: exactly ``present`` (as on disk) and ``removed`` (as deletions),
    under the given author (who is also the committer)."""

    present: tuple[str, ...]
    removed: tuple[str, ...]
    author_name: str
    author_email: str


def _index_state(root: Path, paths: list[str]) -> dict[str, tuple[str, str]]:
    """``{path: (mode, sha)}`` of the real index's stage-0 entries among ``paths``."""
    spec = ["--", *paths] if len(paths) <= _PATHSPEC_MAX else []
    out = run_git(root, "ls-files", "-s", "-z", *spec, env={"GIT_LITERAL_PATHSPECS": "1"})
    return _entries(out, set(paths), stage_field=True)


def _head_state(root: Path, parent: str | None, paths: list[str]) -> dict[str, tuple[str, str]]:
    """``{path: (mode, sha)}`` of ``parent``'s tree among ``paths``."""
    if parent is None:
        return {}
    spec = ["--", *paths] if len(paths) <= _PATHSPEC_MAX else []
    out = run_git(root, "ls-tree", "-r", "-z", "--full-tree", parent, *spec, env={"GIT_LITERAL_PATHSPECS": "1"})
    return _entries(out, set(paths), stage_field=False)


def _entries(out: bytes, wanted: set[str], stage_field: bool) -> dict[str, tuple[str, str]]:
    """Parse ``ls-files -s -z`` ("mode sha stage\\tpath") or ``ls-tree -z`` ("mode type sha\\tpath")."""
    found = {}
    for record in out.split(b"\0"):
        meta, tab, raw = record.partition(b"\t")
        if not tab:
            continue
        rel = raw.decode("utf-8", "surrogateescape")
        fields = meta.decode().split(" ")
        if rel not in wanted or len(fields) != 3:
            continue
        if stage_field:
            mode, sha, stage = fields
            if stage != "0":
                continue
        else:
            mode, kind, sha = fields
            if kind != "blob":
                continue
        found[rel] = (mode, sha)
    return found


def _diff(paths: Sequence[str], before: dict[str, tuple[str, str]], after: dict[str, tuple[str, str]]) -> list[DiffEntry]:
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


def _quote(rel: str) -> bytes:
    """A path as fast-import reads it: C-style quoted, every byte outside printable ASCII as octal,
    so names with spaces, quotes, newlines or bytes that are not UTF-8 travel intact."""
    out = bytearray(b'"')
    for byte in rel.encode("utf-8", "surrogateescape"):
        if byte in (0x22, 0x5C):
            out += b"\\" + bytes([byte])
        elif 0x20 <= byte < 0x7F:
            out.append(byte)
        else:
            out += b"\\%03o" % byte
    out += b'"'
    return bytes(out)


def _person(name: str, email: str, when: str) -> bytes:
    # git refuses angle brackets and newlines inside an identity; strip them as git itself does.
    def clean(text: str) -> str:
        return " ".join(text.replace("<", "").replace(">", "").split())

    return f"{clean(name) or 'syncd'} <{clean(email)}> {when}".encode("utf-8", "replace")


def _stream(ref: str, parent: str | None, commits: list[tuple[PlannedCommit, list[DiffEntry], str]],
            index: dict[str, tuple[str, str]]) -> bytes:
    stamp = time.time()
    when = f"{int(stamp)} {time.strftime('%z', time.localtime(stamp))}"
    parts = [b"feature done\n"]
    for mark, (planned, entries, text) in enumerate(commits, start=1):
        person = _person(planned.author_name, planned.author_email, when)
        message = text.encode("utf-8", "replace")
        parts.append(b"commit %s\nmark :%d\nauthor %s\ncommitter %s\ndata %d\n%s\n"
                     % (ref.encode(), mark, person, person, len(message), message))
        if mark > 1:
            parts.append(b"from :%d\n" % (mark - 1))
        elif parent:
            parts.append(b"from %s\n" % parent.encode())
        for entry in entries:
            if entry.new_sha is None:
                parts.append(b"D %s\n" % _quote(entry.path))
            else:
                mode = index[entry.path][0]
                parts.append(b"M %s %s %s\n" % (mode.encode(), entry.new_sha.encode(), _quote(entry.path)))
        parts.append(b"\n")
    parts.append(b"done\n")
    return b"".join(parts)


def _fast_import(root: Path, folder: Path, stream: bytes, count: int) -> list[str]:
    """Run fast-import on ``stream``; the shas of its ``count`` commits (marks 1..count)."""
    marks = Path(os.path.abspath(folder)) / f"syncd-marks-{os.getpid()}-{secrets.token_hex(4)}"
    try:
        try:
            done = subprocess.run(
                ["git", "-c", f"fastimport.unpackLimit={_UNPACK_LIMIT}", "-c", "core.fsync=none", "fast-import", "--quiet", "--done",
                 f"--export-marks={marks}"],
                cwd=root, input=stream, capture_output=True, check=False,
            )  # fmt: skip
        except OSError as exc:
            raise HistoryError("fast-import", exc.strerror or str(exc)) from None
        if done.returncode != 0:
            raise HistoryError("fast-import", _last_line(done.stderr.decode("utf-8", "replace")) or "failed")
        shas = dict(line.split(" ", 1) for line in marks.read_text().split("\n") if line.startswith(":"))
    finally:
        marks.unlink(missing_ok=True)
    return [shas[f":{n}"].strip() for n in range(1, count + 1)]


def commit_chain(
    root: Path,
    planned: Sequence[PlannedCommit],
    describe: Callable[[list[list[DiffEntry]]], list[str]],
) -> list[tuple[str | None, list[DiffEntry]]]:
    """Commit each of ``planned`` in order on the current branch, each as exactly its paths;
    everything else the user staged stays staged and uncommitted. ``describe`` gets what each
    commit really changes (an empty list for one whose paths already match) and returns their
    messages. Returns ``(sha or None, changes)`` per planned commit (None: nothing to commit).
    Afterwards git status shows those paths clean.

    Raises GitBusyError when the user's git work is under way or HEAD is detached (nothing is
    done), or when HEAD moved while we committed (our paths are then staged, and the next attempt
    commits them); HistoryError when git fails otherwise."""
    root = Path(root)
    if len(planned) == 1:
        # A chain of one is the one-writer case: commit_exact makes the same commit (tested) with
        # a process less than an import that git unpacks afterwards.
        only = planned[0]
        made = commit_exact(root, only.present, only.removed, lambda entries: describe([entries])[0],
                            only.author_name, only.author_email)  # fmt: skip
        return [made]
    _guard(root)
    folder = git_dir(root)
    if folder is None:
        raise HistoryError("commit", f"{root} is not a git repository")
    present = sorted({p for c in planned for p in c.present})
    removed = sorted({p for c in planned for p in c.removed} - set(present))
    if not (present or removed):
        return [(None, []) for _ in planned]
    parent = head_sha(root)
    # The real index first: if the user's git holds it we stop before anything is committed.
    _stage(root, present, removed)
    paths = present + removed
    index = _index_state(root, paths)
    state = _head_state(root, parent, paths)
    changes = []
    for commit in planned:
        after = dict(state)
        for rel in (*commit.present, *commit.removed):
            # What the index now holds is what we commit (a file deleted since status listed it
            # was staged as the deletion it now is).
            if rel in index:
                after[rel] = index[rel]
            else:
                after.pop(rel, None)
        changes.append(_diff((*commit.present, *commit.removed), state, after))
        state = after
    messages = describe(changes)
    made = [(c, entries, text) for c, entries, text in zip(planned, changes, messages) if entries]
    if not made:
        return [(None, []) for _ in planned]
    # fast-import needs a ref to build on; ours lives only until HEAD holds the chain.
    ref = f"refs/syncd/chain-{os.getpid()}-{secrets.token_hex(4)}"
    try:
        shas = _fast_import(root, folder, _stream(ref, parent, made, index), len(made))
        subject = made[-1][2].strip().splitlines()[0] if made[-1][2].strip() else ""
        note = f"commit: {subject}" if len(made) == 1 else f"commit: {len(made)} commits, the last: {subject}"
        zero = "0" * len(shas[-1])
        # One transaction: HEAD moves from the commit we started from, and our ref goes.
        run_git(root, "update-ref", "-m", note, "--stdin",
                input=f"update HEAD {shas[-1]} {parent or zero}\ndelete {ref}\n".encode())  # fmt: skip
    except (GitBusyError, HistoryError):
        run_git(root, "update-ref", "-d", ref, ok=(0, 1))
        if head_sha(root) != parent:
            raise GitBusyError("HEAD moved while syncd was committing (a commit of yours at the same moment); "
                               "it commits its changes on top of yours next time") from None
        raise
    made_shas = iter(shas)
    return [(next(made_shas) if entries else None, entries) for entries in changes]
