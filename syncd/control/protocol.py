"""The wire format of the daemon's socket, ``daemon.sock`` in the home's private folder
(``<git dir>/syncd/``, see ``Home.private_dir``): not under ``.syncd/``, so that deleting the
derived state under a running daemon never hides it from the processes that ask it.

One request per connection, each one line of UTF-8 JSON ending in ``\\n``:

    request   {"v": 1, "method": "search", "params": {...}}
    response  {"v": 1, "ok": true, "result": ...}
              {"v": 1, "ok": false, "error": {"type": "InvalidIdError", "message": "..."}}

Methods (version 1):
    ping    {}  -> {"pid", "home", "version", "protocol", "methods"}
    search  {"query", "user_id", "chat_id", "limit", "kind", "include_wiki"}
            -> {"hits": [hit, ...], "stale": n}: the one search (``syncd.engine.search``, its defaults
               and relevance floor), where a hit is ``Hit.to_dict()`` plus its ``snippet`` (the
               fields of ``syncd.api.schemas.MemoryHit``), and ``stale`` counts the files the index
               does not reflect yet
    status  {}  -> ``Status.to_dict()``
    revert  {"commit"} -> {"commit": the new commit's sha} (``Engine.revert``, by the one writer)
    sync    {}  -> {"summary", "facts", "chunks", "embedded_texts", "errors", "commits",
            "indexed_before", "uncommitted", "in_changes", "head", "pid"}: the whole tree synced
            and committed by the daemon (``Daemon.sync_now``), for ``syncd sync`` beside it;
            ``head`` is HEAD's sha once the pass is done; ``uncommitted`` says why the
            commit is still due (a git command of the person's), else null. A daemon of an older
            syncd answers ``ProtocolError`` (unknown method)
    reindex {}  -> {"files", "facts", "chunks", "embedded_texts", "kept", "errors"}: the index
            rebuilt by the daemon (``Daemon.reindex_now``), for ``syncd reindex`` beside it;
            ``kept`` counts the files an interrupted rebuild had written already
    call    {"name", "arguments"} -> the result of one of the servers' operations (the MCP
            tools, ``syncd.server.service.OPERATIONS``), as JSON; served by ``syncd serve`` and
            ``syncd watch``, for ``syncd mcp``. The socket is its owner's alone (0600, peer uid
            checked), so a call acts as the home's admin. Errors keep their type
            (``InvalidIdError``, ``NotFoundError``, ``ValidationError``...).

A server answers a request of another version with an error of type ``ProtocolError``; new
methods and new fields may be added within a version, never removed or changed.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..home import Home

__all__ = [
    "MAX_MESSAGE_BYTES",
    "PROTOCOL_VERSION",
    "SOCKET_NAME",
    "decode",
    "encode",
    "socket_address",
    "socket_path",
]

PROTOCOL_VERSION = 1
SOCKET_NAME = "daemon.sock"
# A search answer is a few kilobytes; anything near this is not a message of ours.
MAX_MESSAGE_BYTES = 16 * 1024 * 1024


# An AF_UNIX address holds 108 bytes on Linux, the ending NUL included.
_MAX_ADDRESS_BYTES = 107


def socket_path(root: Path) -> Path:
    """Where the daemon of the home at ``root`` listens (HomeError: the home has no repository,
    so no private folder, and no daemon can listen there)."""
    return Home(root).private_dir / SOCKET_NAME


@contextmanager
def socket_address(path: Path) -> Iterator[str]:
    """An address for the socket file at ``path`` that fits in AF_UNIX's 108 bytes: the path
    itself, or, when it is longer (a home deep in the tree, a linked worktree's git folder), the
    same file reached through ``/proc/self/fd/<its folder>``, which Linux resolves like any path.
    Valid for the block only (the folder stays open for it). Elsewhere a long path stays as it
    is, and binding or connecting fails as it always did there."""
    if len(os.fsencode(path)) <= _MAX_ADDRESS_BYTES or not os.path.isdir("/proc/self/fd"):
        yield str(path)
        return
    fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        yield f"/proc/self/fd/{fd}/{path.name}"
    finally:
        os.close(fd)


def _plain(value: object) -> object:
    # Scores computed with numpy are numpy scalars; the wire carries plain numbers.
    item = getattr(value, "item", None)
    return item() if callable(item) else str(value)


def encode(message: dict) -> bytes:
    text = json.dumps(message, ensure_ascii=False, separators=(",", ":"), default=_plain)
    return text.encode("utf-8") + b"\n"


def decode(line: bytes) -> dict:
    message = json.loads(line.decode("utf-8"))
    if not isinstance(message, dict):
        raise ValueError("a message is a JSON object")
    return message
