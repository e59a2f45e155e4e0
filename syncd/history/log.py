"""Reading history: recent commits with their trailers and the files they touched.

Paths are literal (``GIT_LITERAL_PATHSPECS``): ``*``, ``:/`` or ``:(glob)**`` name files of those
names, never a pattern or the whole tree, so a path checked against a caller's scope is the path
git reads. Each commit lists every file it touched (``--full-diff``, both sides of a move), not
just those under the path asked for: whoever filters a log by reader needs the whole commit.
File names are read NUL-separated (never quoted) and fields split on a marker made for each call,
so no file name or commit message can pass for another field or another commit.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from .git import head_sha, repo_or_raise, run_git

__all__ = ["LogEntry", "commit_files", "first_parents", "read_log"]


_FIELD = "\x1f"


RECORD_SEP = "\x1d"


LOG_FORMAT = (
    f"{RECORD_SEP}%H{_FIELD}%an{_FIELD}%ae{_FIELD}%aI{_FIELD}%s{_FIELD}%(trailers:unfold,separator=%x1e){_FIELD}"
)

# Literal paths; moves as a delete and an add (both paths named); a merge as its change over its
# first parent (what it brought into the branch); names NUL-terminated, as they are.
_LITERAL = {"GIT_LITERAL_PATHSPECS": "1"}
_FILES = ("-z", "--name-only", "--no-renames", "--diff-merges=first-parent")


@dataclass(frozen=True)
class LogEntry:
    sha: str
    author: str
    email: str
    date: str
    subject: str
    trailers: dict[str, str] = field(default_factory=dict)
    files: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        return {**self.__dict__, "files": list(self.files)}


def _trailers(raw: str) -> dict[str, str]:
    trailers = {}
    for item in raw.split("\x1e"):
        key, sep, value = item.partition(":")
        if sep and key.strip():
            trailers[key.strip()] = value.strip()
    return trailers


def parse_record(record: str) -> LogEntry | None:
    """One record of ``git log --format=LOG_FORMAT`` (no file names: blame reads it so)."""
    parts = record.split(_FIELD)
    if len(parts) < 7:
        return None
    sha, author, email, date, subject, raw_trailers, rest = parts[:7]
    files = tuple(line for line in rest.splitlines() if line.strip())
    return LogEntry(sha.strip(), author, email, date, subject, _trailers(raw_trailers), files)


def _log_with_files(root: Path, *args: str, path: str | None = None) -> list[LogEntry]:
    marker = f"\x1d{secrets.token_hex(8)}"
    sep = f"\x1f{marker}"
    fields = ("%H", "%an", "%ae", "%aI", "%s", "%(trailers:unfold,separator=%x1e)")
    spec = ["--full-diff", "--", path] if path else []
    out = run_git(root, "log", f"--format={marker}{sep.join(fields)}{sep}", *_FILES, *args, *spec, env=_LITERAL)
    entries: list[LogEntry] = []
    head: list[str] | None = None
    files: list[str] = []
    first = False

    def close() -> None:
        if head is not None:
            sha, author, email, date, subject, raw = head
            entries.append(LogEntry(sha, author, email, date, subject, _trailers(raw), tuple(files)))

    for token in out.decode("utf-8", "replace").split("\0"):
        if token.startswith(marker):
            close()
            parts = token[len(marker) :].split(sep)
            head, files, first = (parts[:6] if len(parts) >= 7 else None), [], True
            continue
        if first:  # git puts a newline between a commit's header and its file names
            token, first = token.removeprefix("\n"), False
        if token and head is not None:
            files.append(token)
    close()
    return entries


def read_log(root: Path, path: str | None = None, limit: int = 20) -> list[LogEntry]:
    """Recent commits (newest first), only those touching ``path`` (literal) when given, with
    their trailers and every file they touched."""
    repo_or_raise(root)
    if head_sha(root) is None:
        return []
    return _log_with_files(root, f"-n{limit}", path=path)


def commit_files(root: Path, shas: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """Every file each commit of ``shas`` touched (as :func:`read_log` lists them), in one git call."""
    wanted = list(dict.fromkeys(shas))
    if not wanted:
        return {}
    return {e.sha: e.files for e in _log_with_files(root, "--no-walk=unsorted", *wanted)}


def first_parents(root: Path, start: str, limit: int, skip: int = 0) -> list[LogEntry]:
    """``limit`` commits of the first-parent line of commit ``start`` (itself first), after the
    first ``skip``, as :func:`read_log` lists them."""
    return _log_with_files(root, "--first-parent", f"-n{limit}", f"--skip={skip}", "--end-of-options", start)
