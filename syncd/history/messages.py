"""Commit messages people can read: "+3 facts in memory/users/ana/2026-11-22.md", "move a -> b",
counts over many files, and ``Key: value`` trailers.

Pure: the message is a function of what the commit really changes (``git diff-tree`` of its tree,
see :func:`syncd.history.staging.commit_exact`) and of the blobs on both sides, so it never claims a
change its diff lacks. Counting is linear in the size of the files: the lines both sides share
cancel out as multisets, and only the lines left over are read as facts, so a one-line edit in a
log of 100,000 facts reads two lines, not 200,000.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ..formats.text import shared_ends
from ..home import classify_path

__all__ = ["DETAILED_FILES", "counts_facts", "describe_change", "format_message"]


# Above this many files a commit message names counts only: reading every old blob to count
# facts would cost more than the commit.
DETAILED_FILES = 50


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


def counts_facts(rel: str) -> bool:
    """Only daily logs hold facts."""
    return classify_path(rel).kind == "daily_log"


def _fact_contents(lines: Iterable[str]) -> Counter[str]:
    from ..formats.facts import parse_fact_line

    found: Counter[str] = Counter()
    for line in lines:
        fact = parse_fact_line(line)
        if fact is not None:
            found[fact.content] += 1
    return found


def fact_delta(old: bytes | None, new: bytes | None) -> tuple[int, int]:
    """(added, removed) facts between two versions of a daily log, by content: a fact whose
    category or tags changed is neither. Lines are read one by one, out of context (a fact-looking
    line inside a code fence counts): this is a summary, the diff is the truth."""
    old, new = old or b"", new or b""
    head, tail = shared_ends(old, new)
    old_lines = Counter(old[head : len(old) - tail].decode("utf-8", "replace").splitlines())
    new_lines = Counter(new[head : len(new) - tail].decode("utf-8", "replace").splitlines())
    before = _fact_contents((old_lines - new_lines).elements())
    after = _fact_contents((new_lines - old_lines).elements())
    return sum((after - before).values()), sum((before - after).values())


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _facts_phrase(added: int, removed: int) -> str:
    return ", ".join(
        s
        for s in (f"+{_plural(added, 'fact')}" if added else "", f"-{_plural(removed, 'fact')}" if removed else "")
        if s
    )


@dataclass(frozen=True)
class FileChange:
    path: str
    action: str  # add, edit, delete, move
    added: int = 0
    removed: int = 0
    source: str | None = None  # a move's old path

    def line(self) -> str:
        if self.action == "move":
            return f"move {self.source} -> {self.path}"
        facts = _facts_phrase(self.added, self.removed)
        return f"{facts} in {self.path}" if facts else f"{self.action} {self.path}"


def file_changes(entries: Iterable, blobs: Mapping[str, bytes | None]) -> list[FileChange]:
    """One :class:`FileChange` per path of ``entries`` (``DiffEntry``: path, status, old_sha,
    new_sha): a deletion and an addition of the same blob are one move; facts are counted in daily
    logs whose blobs (both sides) are in ``blobs`` (a blob left out or None: too big, or too many
    files to read)."""
    entries = sorted(entries, key=lambda e: e.path)
    deleted_by_sha: dict[str, str] = {}
    for e in entries:
        if e.new_sha is None and e.old_sha is not None:
            deleted_by_sha.setdefault(e.old_sha, e.path)
    moved_from: set[str] = set()
    changes: list[FileChange] = []
    for e in entries:
        if e.new_sha is None:
            continue
        if e.old_sha is None:
            source = deleted_by_sha.pop(e.new_sha, None)
            if source is not None:
                moved_from.add(source)
                changes.append(FileChange(e.path, "move", source=source))
                continue
        added = removed = 0
        if blobs and counts_facts(e.path):
            old = blobs.get(e.old_sha) if e.old_sha else b""
            new = blobs.get(e.new_sha)
            if old is not None and new is not None:
                added, removed = fact_delta(old, new)
        changes.append(FileChange(e.path, "add" if e.old_sha is None else "edit", added, removed))
    for e in entries:
        if e.new_sha is None and e.path not in moved_from:
            old = blobs.get(e.old_sha) if e.old_sha else None
            removed = fact_delta(old, b"")[1] if old is not None and blobs and counts_facts(e.path) else 0
            changes.append(FileChange(e.path, "delete", removed=removed))
    return changes


def describe_change(changes: list[FileChange]) -> tuple[str, str, dict[str, str]]:
    """Subject, body and trailers for a commit of ``changes``: "+3 facts in
    memory/users/ana/2026-11-22.md", "-1 fact in ...", "edit vault/Tea.md", "move a.md -> b.md", or
    counts over many files with one line per file in the body."""
    added = sum(c.added for c in changes)
    removed = sum(c.removed for c in changes)
    if len(changes) == 1:
        subject, body = changes[0].line(), ""
    else:
        counts = _facts_phrase(added, removed)
        actions = sorted({c.action for c in changes})
        verb = actions[0] if len(actions) == 1 else "change"
        subject = f"{counts} in {len(changes)} files" if counts else f"{verb} {len(changes)} files"
        body = "\n".join(c.line() for c in changes[:200])
        if len(changes) > 200:
            body += f"\n... and {len(changes) - 200} more"
    trailers = {}
    if added:
        trailers["Syncd-Facts-Added"] = str(added)
    if removed:
        trailers["Syncd-Facts-Removed"] = str(removed)
    return subject, body, trailers
