"""Pure path rules of a memory home: what a path means, which ids are safe (no I/O).

Scope comes from the path alone (``memory/users/<user>/...``), so isolation between users is
structural: validating ids before they become paths or filters is the whole defence, and it lives
here so every caller gets it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import PurePosixPath

from ..errors import InvalidIdError, InvalidInputError, QueryError

__all__ = [
    "FACT_CONTENT_MAX",
    "ID_MAX_LEN",
    "ID_RULE",
    "case_twin",
    "check_text",
    "check_fact_content",
    "check_query",
    "validate_id",
    "validate_label",
    "FileScope",
    "KINDS",
    "SESSION_FILES",
    "classify_path",
    "is_indexable",
    "is_markdown",
]


ID_MAX_LEN = 128


# Letters, digits and . _ @ + -, starting with a letter or digit: enough for telegram ids, emails,
# uuids and slugs, and nothing that can be a separator, a glob, a quote or a filter operator.
_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@+-]*\Z")


ID_RULE = "ids are 1-128 characters of A-Z a-z 0-9 . _ @ + -, starting with a letter or digit, and never contain '..'"


_LABEL_RE = re.compile(r"[a-z][a-z0-9_-]{0,63}\Z")


_DAILY_RE = re.compile(r"(\d{4})-(\d{2})-(\d{2})\.md\Z")


# Files and folders the engine never treats as memory: VCS, our own state, editor droppings.
_IGNORED_DIRS = {".git", ".syncd", ".obsidian", ".trash", ".stfolder", "__pycache__", "node_modules"}


_TEMP_SUFFIXES = ("~", ".swp", ".swx", ".swo", ".tmp", ".part", ".crdownload", ".bak")


def validate_id(kind: str, value: object) -> str:
    """Return ``value`` if it is a safe user/chat/session id, else raise InvalidIdError."""
    if not isinstance(value, str):
        raise InvalidIdError(kind, value, "must be a string")
    if value == "":
        raise InvalidIdError(kind, value, "must not be empty")
    if len(value) > ID_MAX_LEN:
        raise InvalidIdError(kind, value[:40] + "...", f"longer than {ID_MAX_LEN} characters")
    if "\x00" in value:
        raise InvalidIdError(kind, value, "contains NUL")
    if "/" in value or "\\" in value:
        raise InvalidIdError(kind, value, "contains a path separator")
    if ".." in value:
        raise InvalidIdError(kind, value, "contains '..'")
    if not _ID_RE.match(value):
        raise InvalidIdError(kind, value, ID_RULE)
    return value


def case_twin(name: str, names: Iterable[str]) -> str | None:
    """The one of ``names`` (a folder's entries) that differs from ``name`` only by case, when
    ``name`` itself is not among them: on a file system that ignores case (macOS, Windows, a FAT
    stick) the two are one folder, so an id must not be used beside its twin."""
    names = list(names)
    if name in names:
        return None
    folded = name.casefold()
    return next((n for n in names if n.casefold() == folded), None)


def validate_label(label: object) -> str:
    """Core block labels become file names: lowercase word, at most 64 characters."""
    if not isinstance(label, str) or not _LABEL_RE.match(label):
        raise InvalidIdError("block label", label, "labels are a lowercase word: a-z 0-9 _ -")
    return label


# Control characters (Unicode category Cc: C0, DEL, C1). Git refuses a NUL in the commit message a
# fact's text becomes, terminals act on escapes, and none of them reads as text in a markdown file.
_CONTROL_RE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f]")
_CONTROL_MULTILINE_RE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
# A lone surrogate (a str from JSON's "\\ud800", or from bytes decoded with surrogateescape) is no
# character at all: UTF-8 cannot encode it, so the write failed late with a UnicodeEncodeError.
_SURROGATE_RE = re.compile("[\ud800-\udfff]")


def check_text(what: str, value: object, *, multiline: bool = False, existing: str = "") -> str:
    """Return ``value`` if it is text syncd may write, else raise InvalidInputError (before
    anything is written): no control character but a tab, and a newline where ``multiline``.
    Characters already in ``existing`` (the text being edited) are let through: a person's own
    bytes in a file are theirs, and an edit elsewhere must not be refused for them."""
    if not isinstance(value, str):
        raise InvalidInputError(f"{what} must be a str, not {type(value).__name__}")
    pattern = _CONTROL_MULTILINE_RE if multiline else _CONTROL_RE
    allowed = set(pattern.findall(existing)) if existing else set()
    for found in pattern.finditer(value):
        if found.group() not in allowed:
            lines = "tab and newline are" if multiline else "tab is"
            raise InvalidInputError(
                f"{what} holds the control character U+{ord(found.group()):04X} at position {found.start()};"
                f" only text is stored (of the control characters, {lines} allowed)"
            )
    surrogate = _SURROGATE_RE.search(value)
    if surrogate is not None:
        raise InvalidInputError(
            f"{what} holds the lone surrogate U+{ord(surrogate.group()):04X} at position {surrogate.start()}:"
            " not a character, and not writable as UTF-8"
        )
    return value


# The longest fact a writer may give, in characters: one statement, not a document (a page belongs
# in the vault, a long text in MEMORY.md). The one rule every entry point keeps: the REST and MCP
# schemas (``max_length``) and the Python API (:func:`check_fact_content`, in the memory store
# every fact write goes through, and in MemoryManager before anything else is done).
FACT_CONTENT_MAX = 10_000


def check_fact_content(value: object, *, multiline: bool = False) -> str:
    """:func:`check_text` for a fact's content, and no longer than ``FACT_CONTENT_MAX``
    characters; InvalidInputError (naming the limit) before anything is written."""
    text = check_text("fact content", value, multiline=multiline)
    if len(text) > FACT_CONTENT_MAX:
        raise InvalidInputError(
            f"fact content is {len(text)} characters, over the limit of {FACT_CONTENT_MAX}; nothing was written "
            "(keep a fact to one statement; a long text belongs in MEMORY.md or a vault page)"
        )
    return text


def check_query(query: object) -> str:
    """Return ``query`` if a search can run on it, else QueryError: it is empty (nothing matches
    nothing, and an agent that sent it has a bug worth seeing), or it holds a lone surrogate
    (bytes that were not UTF-8, as Python reads them from a command line), which the model
    cannot read: it failed as "the model failed to embed", blaming the model."""
    if not isinstance(query, str) or not query.strip():
        raise QueryError(query, "the search query is empty: say what to look for")
    surrogate = _SURROGATE_RE.search(query)
    if surrogate is not None:
        raise QueryError(
            query,
            f"the search query holds the lone surrogate U+{ord(surrogate.group()):04X} at position "
            f"{surrogate.start()} (a byte that is not UTF-8?): not a character; search for text",
        )
    return query


@dataclass(frozen=True)
class FileScope:
    """What a path in the home means. ``kind`` is one of KINDS. ``error`` says why a file that
    belongs to someone cannot be indexed at all (its owner's id is not valid): such a file is
    nobody's, never shared."""

    kind: str
    user: str | None = None
    chat: str | None = None
    label: str | None = None
    date: str | None = None
    session: str | None = None
    error: str | None = None


KINDS = ("daily_log", "memory_md", "block", "vault_page", "transcript", "state", "session", "note")


def _label_of(name: str) -> str | None:
    """The block label a file name stands for, or None when it is not a valid label."""
    if not name.endswith(".md"):
        return None
    try:
        return validate_label(name[:-3])
    except InvalidIdError:
        return None


def _valid_id(kind: str, value: str) -> str | None:
    try:
        return validate_id(kind, value)
    except InvalidIdError:
        return None


def classify_path(rel: str) -> FileScope:
    """Scope of a home-relative posix path.

    Scope is structural, so a path that names an owner keeps it whatever else is odd about it:
    anything under ``memory/users/<user>/`` is that user's, and an unusual name inside (a block
    label with a capital, a chat folder with a space) only makes it a plain note of that user (and
    of that chat when the chat id is valid). If ``<user>`` itself is not a valid id, the file is
    nobody's: its scope carries an ``error`` and it is never indexed. Falling back to a global note
    instead would hand one user's memory to every other user. A session's files live in its
    user's folder (``memory/users/<user>/sessions/<session>/``) for the same reason.
    """
    parts = PurePosixPath(rel).parts
    if parts[:1] == ("vault",):
        return FileScope("vault_page")
    if parts[:1] == ("sessions",):
        return _session_scope(parts)
    if parts[:1] != ("memory",):
        return FileScope("note")
    if parts[1:2] == ("users",):
        return _user_scope(parts[2:])
    if len(parts) == 3 and parts[1] == "core" and (label := _label_of(parts[2])):
        return FileScope("block", label=label)
    return FileScope("note")


def _session_scope(parts: tuple[str, ...]) -> FileScope:
    """Top-level ``sessions/``: where an older ``init`` put transcripts, before they moved under
    their user. Nothing there names an owner, so nothing there is anyone's: never indexed."""
    return FileScope(
        "note", error="files under sessions/ belong to nobody; sessions live in memory/users/<user>/sessions/"
    )


# A session's files, ``memory/users/<user>/sessions/<session>/<name>``: the one transcript kind
# that is indexed as text, and two JSON files that are tracked and committed but hold no text rows.
SESSION_FILES = {"transcript.jsonl": "transcript", "state.json": "state", "session.json": "session"}


def _session_file_scope(user: str, session: str, name: str) -> FileScope:
    kind = SESSION_FILES[name]
    try:
        return FileScope(kind, user=user, session=validate_id("session", session))
    except InvalidIdError as exc:
        # Still that user's (scope is structural), but not a session anyone can address.
        return FileScope(kind, user=user, error=f"{exc}; not indexed (rename the folder to a valid id)")


def _user_scope(rest: tuple[str, ...]) -> FileScope:
    """Scope of ``memory/users/<rest...>``."""
    if len(rest) < 2:
        return FileScope("note", error="not inside a user's folder (memory/users/<user>/); not indexed")
    try:
        user = validate_id("user", rest[0])
    except InvalidIdError as exc:
        return FileScope("note", error=f"{exc}; not indexed (rename the folder to a valid id)")
    rest = rest[1:]
    if len(rest) == 3 and rest[0] == "sessions" and rest[2] in SESSION_FILES:
        return _session_file_scope(user, rest[1], rest[2])
    if rest == ("MEMORY.md",):
        return FileScope("memory_md", user=user)
    if len(rest) == 1 and (m := _DAILY_RE.match(rest[0])):
        return FileScope("daily_log", user=user, date=f"{m[1]}-{m[2]}-{m[3]}")
    if len(rest) == 2 and rest[0] == "core" and (label := _label_of(rest[1])):
        return FileScope("block", user=user, label=label)
    chat = _valid_id("chat", rest[1]) if len(rest) >= 3 and rest[0] == "chats" else None
    if chat is not None and len(rest) == 4 and rest[2] == "core" and (label := _label_of(rest[3])):
        return FileScope("block", user=user, chat=chat, label=label)
    return FileScope("note", user=user, chat=chat)


def is_markdown(name: str) -> bool:
    """Whether a file name is markdown: ``.md`` in any case, as Obsidian opens ``Tea.MD`` as a
    page and its links resolve to it (syncd/wiki/resolve.py). The index, the link graph and lint
    all ask this, so they see the same files."""
    return name[-3:].lower() == ".md"


def is_indexable(rel: str) -> bool:
    """Markdown (and a session's three files) outside ignored folders, and not an editor's temp
    file: what the index tracks and the committer commits."""
    # Split by hand rather than through PurePosixPath: a scan asks this for every file and folder
    # of the tree, and the path object cost a third of `syncd status` at 10,000 files.
    parts = [p for p in rel.split("/") if p and p != "."]
    if not parts or any(p in _IGNORED_DIRS for p in parts[:-1]):
        return False
    name = parts[-1]
    if name.startswith((".#", "~$", ".")) or name.endswith(_TEMP_SUFFIXES):
        return False
    if is_markdown(name):
        return True
    return len(parts) == 6 and name in SESSION_FILES and parts[:2] == ["memory", "users"] and parts[3] == "sessions"
