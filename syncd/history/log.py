"""Reading history: recent commits with their trailers and the files they touched.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .git import head_sha, repo_or_raise, run_git

__all__ = ["LogEntry", "read_log"]


_FIELD = "\x1f"


RECORD_SEP = "\x1d"


LOG_FORMAT = f"{RECORD_SEP}%H{_FIELD}%an{_FIELD}%ae{_FIELD}%aI{_FIELD}%s{_FIELD}%(trailers:unfold,separator=%x1e){_FIELD}"


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


def parse_record(record: str) -> LogEntry | None:
    parts = record.split(_FIELD)
    if len(parts) < 7:
        return None
    sha, author, email, date, subject, raw_trailers, rest = parts[:7]
    trailers = {}
    for item in raw_trailers.split("\x1e"):
        key, sep, value = item.partition(":")
        if sep and key.strip():
            trailers[key.strip()] = value.strip()
    files = tuple(line for line in rest.splitlines() if line.strip())
    return LogEntry(sha.strip(), author, email, date, subject, trailers, files)


def read_log(root: Path, path: str | None = None, limit: int = 20) -> list[LogEntry]:
    """Recent commits (newest first), only those touching ``path`` when given, with their
    trailers and the files they touched."""
    repo_or_raise(root)
    if head_sha(root) is None:
        return []
    args = [f"-n{limit}", f"--format={LOG_FORMAT}", "--name-only"]
    if path:
        args += ["--", path]
    out = run_git(root, "log", *args).decode("utf-8", "replace")
    return [e for e in (parse_record(r) for r in out.split(RECORD_SEP)) if e is not None]
