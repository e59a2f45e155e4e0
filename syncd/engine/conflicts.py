"""The conflicts a shared home's merges kept both versions of: listed for ``syncd status``,
``syncd lint`` and the workbench, and resolved through the write path.

A merge (engine/sharing.py) never leaves a conflict marker: where both machines changed one
thing differently it keeps both, in a callout or as a restated fact (formats/conflicts.py). They
stay until a person picks one, and these use cases are how the front ends find and resolve them.

Finding reads only the files that hold a marking: ``git grep`` (in C, over the tracked and the
untracked files git does not ignore, so never ``.syncd/``) names them, then each is parsed. A
folder outside any repository (``syncd lint --vault``) is searched the same way with
``--no-index``.

Resolving is one compare-and-swap write through :meth:`Engine.write_file`: the file is read, the
conflict at the given line resolved, and the result written only if the file is still the one
read (else ConflictError, nothing written). Its acknowledgement is the write path's: once it
returns, a commit on the branch holds the resolution (authored by ``author``) and the index
reflects it. The write path's own locks (the write turn, the home lock or the daemon that holds
it) order it with every other write; nothing here holds a lock of its own.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from ..errors import ConflictError, HistoryError, InvalidInputError, NotFoundError
from ..formats.conflicts import KEEP, Conflict
from ..formats.conflicts import find_conflicts as conflicts_in_text
from ..formats.conflicts import resolve_conflict as resolve_text
from ..formats.text import decode_markdown, decode_markdown_lossy, encode_markdown
from ..history.git import run_git
from ..history.intents import Intent
from ..home import blob_sha, classify_path, is_markdown

if TYPE_CHECKING:
    from .facade import Engine

__all__ = ["KEEP", "Conflict", "find_conflicts", "resolve_conflict"]

# What a merge writes when it keeps both versions (formats/conflicts.py): the files to parse.
_MARKINGS = ("> [!conflict]", "<!-- syncd merge: both machines changed fact")
# Where a home's merges can leave them: the merge driver's routes (history/remote.py).
SHARED = ("memory", "vault")


def _marked_files(folder: Path, under: tuple[str, ...]) -> list[str]:
    grep = ["grep", "-I", "-l", "-z", "-F", *(arg for m in _MARKINGS for arg in ("-e", m))]
    paths = ["--", *under] if under else []
    try:
        out = run_git(folder, *grep[:1], "--untracked", *grep[1:], *paths, ok=(0, 1))
    except HistoryError:
        # Not inside a repository (a vault of its own): search its files all the same.
        out = run_git(folder, *grep[:1], "--no-index", *grep[1:], *paths, ok=(0, 1))
    return sorted(p for p in out.decode("utf-8", "surrogateescape").split("\0") if is_markdown(p))


def find_conflicts(folder: Path, under: tuple[str, ...] = SHARED, home: bool = True) -> list[Conflict]:
    """Every conflict kept in the files of ``folder`` (a home: its ``memory/`` and ``vault/``),
    by path and line. Paths are relative to ``folder``; ``home`` says whether they are
    home-relative (daily logs are then told apart by their path)."""
    found: list[Conflict] = []
    for rel in _marked_files(folder, under if home else ()):
        try:
            text, _ = decode_markdown_lossy((folder / rel).read_bytes(), rel)
        except OSError:
            continue  # gone since git named it
        found += conflicts_in_text(text, rel, daily_log=home and classify_path(rel).kind == "daily_log")
    return found


def _checked(path: str) -> str:
    rel = PurePosixPath(path)
    if rel.is_absolute() or ".." in rel.parts or not rel.parts or rel.parts[0] not in SHARED:
        raise InvalidInputError(f"{path!r}: a conflict is kept in a file under memory/ or vault/ of the home")
    return rel.as_posix()


def resolve_conflict(
    engine: Engine, path: str, line: int, keep: str, *, author: str = "syncd", expected: Conflict | None = None
) -> str:
    """Resolve the conflict at ``path:line`` (home-relative) by keeping ``mine``, ``theirs`` or
    ``both``; the new blob sha, once committed and indexed. NotFoundError when no conflict is
    there (any more); ConflictError when the file changed between our read and our write, or
    when the conflict there is no longer ``expected`` (the one the person was shown: a version
    they never saw is never the one kept); ParseError for a file that is not UTF-8;
    InvalidInputError for a path outside memory/ and vault/ or another ``keep``."""
    if keep not in KEEP:
        raise InvalidInputError(f"keep what? {keep!r}: one of {', '.join(KEEP)}")
    rel = _checked(path)
    try:
        data = (engine.home.root / rel).read_bytes()
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        raise NotFoundError(f"no file {rel} in the home") from None
    text = decode_markdown(data, rel)  # a file we cannot read exactly is never rewritten
    scope = classify_path(rel)
    daily_log = scope.kind == "daily_log"
    if expected is not None:
        found = next((c for c in conflicts_in_text(text, rel, daily_log=daily_log) if c.line == line), None)
        if found is not None and found != expected:
            raise ConflictError(rel, _versions(expected), _versions(found))
    resolved = resolve_text(text, rel, line, keep, daily_log=daily_log)
    intent = Intent(author=author, summary=f"Resolve the conflict at {rel}:{line}: keep {keep}", user=scope.user)
    return engine.write_file(rel, encode_markdown(resolved), expected_sha=blob_sha(data), intent=intent)


def _versions(conflict: Conflict) -> str:
    return f"line {conflict.line}: ours {conflict.ours!r}, theirs {conflict.theirs!r}"
