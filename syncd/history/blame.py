"""Where a fact came from: the commit that introduced its line, and the later ones that changed it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..errors import HistoryError, NotFoundError
from .git import blob_at_head, head_sha, repo_or_raise, run_git
from .log import LOG_FORMAT, RECORD_SEP, LogEntry, parse_record

__all__ = ["FactHistory", "fact_history", "current_line"]


@dataclass(frozen=True)
class FactHistory:
    """Where a fact came from: the commit that introduced its line, and the later ones that
    changed it (newest first). ``uncommitted`` when its current text is not committed yet."""

    path: str
    line: int
    text: str
    introduced: LogEntry | None
    edits: tuple[LogEntry, ...] = ()
    uncommitted: bool = False

    def to_dict(self) -> dict:
        return {
            "path": self.path,
            "line": self.line,
            "text": self.text,
            "uncommitted": self.uncommitted,
            "introduced": self.introduced.to_dict() if self.introduced else None,
            "edits": [e.to_dict() for e in self.edits],
        }


def fact_history(root: Path, path: str, line: int, text: str, at: str | None = None) -> FactHistory:
    """Blame one line of the working tree (or of the file as commit ``at`` left it), then follow
    that line back through history (``git log -L``): the oldest commit is the one that
    introduced it."""
    repo_or_raise(root)
    if head_sha(root) is None:
        return FactHistory(path, line, text, None, (), True)
    revision = () if at is None else (at,)
    try:
        porcelain = run_git(root, "blame", "--porcelain", f"-L{line},{line}", *revision, "--", path).decode(
            "utf-8", "replace"
        )
    except HistoryError as exc:
        if at is None and (root / path).is_file() and blob_at_head(root, path) is None:
            # A file made since the last commit: git blames only what HEAD has a path for.
            return FactHistory(path, line, text, None, (), True)
        raise NotFoundError(f"{path}:{line} has no history in git: {exc.detail}") from None
    sha, orig_line = porcelain.split()[0], int(porcelain.split()[1])
    if set(sha) == {"0"}:
        return FactHistory(path, line, text, None, (), True)
    # The line may have been elsewhere (another path, another number) in the blamed commit.
    orig_path = path
    for row in porcelain.splitlines():
        if row.startswith("filename "):
            orig_path = row[len("filename ") :]
    out = run_git(root, "log", f"-L{orig_line},{orig_line}:{orig_path}", "-s", f"--format={LOG_FORMAT}", sha)
    records = out.decode("utf-8", "replace").split(RECORD_SEP)
    entries = [e for e in (parse_record(r) for r in records) if e is not None]
    entries = [LogEntry(e.sha, e.author, e.email, e.date, e.subject, e.trailers) for e in entries]
    if not entries:
        return FactHistory(path, line, text, None, (), False)
    return FactHistory(path, line, text, entries[-1], tuple(entries[:-1]), False)


def current_line(root: Path, row: dict) -> int:
    """Where an indexed fact (``row``: path, line, text) sits in its file now: its indexed line,
    or the first line holding its text if the file moved lines around since it was indexed."""
    try:
        lines = (root / row["path"]).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return row["line"]
    if 0 < row["line"] <= len(lines) and row["text"] in lines[row["line"] - 1]:
        return row["line"]
    for number, line in enumerate(lines, 1):
        if row["text"] in line:
            return number
    return row["line"]
