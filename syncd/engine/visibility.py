"""What one user may see of a shared home beyond their own memory: which files they may be named,
which paths it may ask the history of, and what it is shown of a commit. Pure (no I/O).

A user sees their own folder (``memory/users/<user>/``, sessions included) and the files that
hold nobody's memory: the vault, global blocks, notes outside ``memory/users/``. Never another
user's folder, a folder with an invalid user id (nobody's), the old top-level ``sessions/``, or a
folder that holds other users' memory (``memory``, ``memory/users``, the whole home).

A commit is shown whole when every file it touched is visible and it names no other user
(``Syncd-User``); a commit that also touched what the reader may not see is shown with the
reader's files only, a neutral subject, and no author or trailers (those describe the whole
commit: whose turn it was, how many facts it added); a commit that touched nothing visible is
left out.

An error a user is answered with names no file they may not be named: a message that does (git's
unmerged paths, say, which may be another user's) is told them without its reason (:func:`told`).

The servers decide who a request acts for (a token's user); the use cases that show a shared home
to one user (``audit.blame``, ``audit.user_log``) and the servers apply these rules.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import replace

from ..errors import AccessError, InvalidInputError
from ..history.log import LogEntry
from ..home import classify_path

__all__ = ["log_path", "readable", "seen_by", "sees", "told", "withholds"]

_USERS = ("memory", "users")
# The empty file `syncd init` keeps the users' folder with: nobody's memory, in the first commit.
_PLACEHOLDER = "memory/users/.gitkeep"
# Where a message names a file or folder under the users' folder (group 1: what follows), or under
# the old top-level ``sessions/`` (group 1 None).
_NAMED = re.compile(r"memory/users/(?=(.{0,256}))|(?<![\w./-])sessions/", re.DOTALL)
# What may end a user's folder's name in a sentence: "(memory/users/ana)", "'memory/users/ana'".
_NAME_ENDS = ")]'\"`,;:"
# The users' folder itself, named in a sentence: nothing after it but such marks, then the end,
# or a space and words holding no path ("memory/users/) and more" is the folder itself;
# "memory/users/,/a.md" and "memory/users/ x /a.md" name folders called "," and " x "). What
# follows a name is read up to 256 characters, more than a folder's name can be.
_FOLDER_ITSELF = re.compile(rf"[{re.escape(_NAME_ENDS)}]*+(?:$|\s[^/]*$)")


def readable(rel: str, user: str) -> bool:
    """Whether a file of the home may be named to ``user``: theirs, or shared (global blocks, the
    vault, notes outside any user's folder); never another user's, a folder with an invalid
    user id (nobody's), or anything under the old top-level ``sessions/``."""
    scope = classify_path(rel)
    if scope.user is not None:
        return scope.user == user
    if rel == _PLACEHOLDER:
        return True
    return not rel.startswith(("memory/users/", "sessions/")) and scope.kind not in ("transcript", "state")


def _parts(path: str) -> list[str]:
    """The components of a home-relative path as git reads it ("a//b/./c" is "a/b/c")."""
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if ".." in parts or "\x00" in path:
        raise InvalidInputError("path is a home-relative file or folder, without '..'")
    if parts and parts[0].startswith((".", ":")):
        raise InvalidInputError("path is a plain home-relative file or folder: no '.syncd', '.git' or pathspec magic")
    return parts


def log_path(path: str | None, user: str | None) -> str | None:
    """The path to read the history of, for ``user`` (None: the admin). Raises InvalidInputError
    for a path that climbs or is no plain path, and AccessError for one outside the user's reach;
    a user who names none gets their own folder."""
    parts = _parts(path) if path is not None else []
    if user is None:
        return "/".join(parts) or None
    if not parts:
        if path is None:
            return "/".join((*_USERS, user))
        raise AccessError("the whole home holds other users' memory")
    if tuple(parts[:3]) == (*_USERS, user):
        return "/".join(parts)
    if tuple(parts[:2]) == _USERS or parts in (["memory"], ["sessions"]) or parts[0] == "sessions":
        raise AccessError(f"{'/'.join(parts)} is not in the memory of {user!r}")
    rel = "/".join(parts)
    if not readable(rel, user):
        raise AccessError(f"{rel} is not in the memory of {user!r}")
    return rel


def _neutral_subject(files: list[str]) -> str:
    return f"change {files[0]}" if len(files) == 1 else f"change {len(files)} files"


def sees(files: Iterable[str], user: str) -> bool:
    """Whether ``user`` is shown a commit that touched ``files`` at all (:func:`seen_by`)."""
    return any(readable(f, user) for f in files)


def seen_by(entry: LogEntry, user: str) -> LogEntry | None:
    """``entry`` as ``user`` may see it (see the module's docstring), or None."""
    visible = [f for f in entry.files if readable(f, user)]
    if not visible:
        return None
    if len(visible) == len(entry.files) and entry.trailers.get("Syncd-User", user) == user:
        return entry
    return replace(entry, author="", email="", subject=_neutral_subject(visible), trailers={}, files=tuple(visible))


def withholds(message: str, user: str) -> bool:
    """Whether ``message`` names a file or folder ``user`` may not be named (see :func:`readable`):
    another user's, a folder whose name is no valid user id, the old top-level ``sessions/``."""
    for named in _NAMED.finditer(message):
        after = named.group(1)
        if after is None:
            return True
        # Their own folder or what is in it, the users' folder itself, its placeholder. Anything
        # else ("ana b" or "anab" beside "ana", a name git quoted) names no file of theirs.
        if after.startswith(f"{user}/") or _FOLDER_ITSELF.match(after):
            continue
        if any(after.startswith(name) and after[len(name) : len(name) + 1] in ("", *_NAME_ENDS)
               for name in (user, _PLACEHOLDER.rpartition("/")[2])):  # fmt: skip
            continue
        return True
    return False


def told(message: str, user: str) -> str:
    """``message`` as ``user`` may be told it: itself, or, when it names a file they may not be
    named, a message saying only that its reason lies outside their memory (how many such files,
    and which, is not said). The error's kind and status still say what to do (retry, say)."""
    if not withholds(message, user):
        return message
    return (
        f"the reason concerns files outside the memory of {user!r}, which this token may not be told of; "
        "the home's admin sees it (`syncd status`)"
    )
