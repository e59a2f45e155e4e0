"""Commit messages people can read: "+3 facts in memory/users/ana/2026-11-22.md", "move a -> b",
counts over many files, and ``Key: value`` trailers.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import git

from ..errors import SyncdError

__all__ = ["format_message", "describe_change"]


# Above this many files a commit message names counts only: reading every old blob to count
# facts would cost more than the commit.
_DETAILED_FILES = 50


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


def _fact_texts(rel: str, data: bytes | None) -> list[str]:
    from ..index.rows import parse_file

    if not data:
        return []
    try:
        return [row.text for row in parse_file(rel, data) if row.kind == "fact"]
    except SyncdError:
        return []


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


@dataclass
class _FileChange:
    path: str
    action: str  # add, edit, delete, move
    added: int = 0
    removed: int = 0
    source: str | None = None  # a move's old path

    def line(self) -> str:
        facts = ", ".join(
            s for s in (f"+{_plural(self.added, 'fact')}" if self.added else "",
                        f"-{_plural(self.removed, 'fact')}" if self.removed else "") if s
        )
        if self.action == "move":
            return f"move {self.source} -> {self.path}"
        if facts:
            return f"{facts} in {self.path}"
        return f"{self.action} {self.path}"


def _old_blobs(repo: git.Repo, paths: Iterable[str]) -> dict[str, tuple[str, bytes | None]]:
    """``{path: (sha, bytes)}`` in HEAD for the paths it has; bytes only when there are few, since
    they serve to count facts. One ``ls-tree`` answers for any number of paths."""
    if not repo.head.is_valid():
        return {}
    wanted = set(paths)
    # Naming the paths keeps the listing small in a big tree; past a few hundred, the full listing
    # is cheaper than a command line that could outgrow the system's argument limit.
    limit = ["--", *sorted(wanted)] if len(wanted) <= 500 else []
    listing = repo.git.ls_tree("-r", "-z", "--full-tree", "HEAD", *limit)
    out: dict[str, tuple[str, bytes | None]] = {}
    for entry in listing.split("\0"):
        meta, _, rel = entry.partition("\t")
        if rel in wanted and meta.split(" ")[1:2] == ["blob"]:
            out[rel] = (meta.split(" ")[2], None)
    if len(wanted) <= _DETAILED_FILES:
        for rel, (sha, _) in out.items():
            out[rel] = (sha, repo.odb.stream(bytes.fromhex(sha)).read())
    return out


def describe_change(repo: git.Repo, changed: Mapping[str, str]) -> tuple[str, str, dict[str, str]]:
    """Subject, body and trailers for committing ``changed`` (``{path: new sha or ''}``):
    "+3 facts in memory/users/ana/2026-11-22.md", "-1 fact in ...", "edit vault/Tea.md",
    "move a.md -> b.md", or counts over many files with one line per file in the body."""
    root = Path(repo.working_tree_dir or ".")
    detailed = len(changed) <= _DETAILED_FILES
    old = _old_blobs(repo, changed)
    old_by_sha = {sha: rel for rel, (sha, _) in old.items() if not changed[rel]}
    changes: list[_FileChange] = []
    moved_from: set[str] = set()
    for rel, sha in sorted(changed.items()):
        if not sha:
            continue
        source = old_by_sha.pop(sha, None) if rel not in old else None
        if source is not None:
            moved_from.add(source)
            changes.append(_FileChange(rel, "move", source=source))
            continue
        change = _FileChange(rel, "edit" if rel in old else "add")
        if detailed:
            try:
                new_facts = _fact_texts(rel, (root / rel).read_bytes())
            except OSError:
                new_facts = []
            old_facts = _fact_texts(rel, old.get(rel, ("", None))[1])
            change.added = sum(1 for t in new_facts if t not in set(old_facts))
            change.removed = sum(1 for t in old_facts if t not in set(new_facts))
        changes.append(change)
    for rel, sha in sorted(changed.items()):
        if not sha and rel not in moved_from:
            removed = len(_fact_texts(rel, old.get(rel, ("", None))[1])) if detailed else 0
            changes.append(_FileChange(rel, "delete", removed=removed))
    added = sum(c.added for c in changes)
    removed = sum(c.removed for c in changes)
    if len(changes) == 1:
        subject, body = changes[0].line(), ""
    else:
        counts = ", ".join(s for s in (f"+{_plural(added, 'fact')}" if added else "",
                                       f"-{_plural(removed, 'fact')}" if removed else "") if s)
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

