"""The wire format of ``HOME/.syncd/daemon.sock``.

One request per connection, each one line of UTF-8 JSON ending in ``\\n``:

    request   {"v": 1, "method": "search", "params": {...}}
    response  {"v": 1, "ok": true, "result": ...}
              {"v": 1, "ok": false, "error": {"type": "InvalidIdError", "message": "..."}}

Methods (version 1):
    ping    {}  -> {"pid", "home", "version", "protocol", "methods"}
    search  {"query", "user_id", "chat_id", "limit", "kind"}
            -> {"hits": [hit, ...], "stale": n}  where a hit is ``Hit.to_dict()`` plus its
               ``snippet``, and ``stale`` counts the files the index does not reflect yet
    status  {}  -> ``Status.to_dict()``
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
from pathlib import Path

from ..errors import SyncdError

__all__ = [
    "MAX_MESSAGE_BYTES",
    "PROTOCOL_VERSION",
    "SOCKET_NAME",
    "RemoteError",
    "decode",
    "encode",
    "hit_to_wire",
    "socket_path",
]

PROTOCOL_VERSION = 1
SOCKET_NAME = "daemon.sock"
# A search answer is a few kilobytes; anything near this is not a message of ours.
MAX_MESSAGE_BYTES = 16 * 1024 * 1024


class RemoteError(SyncdError):
    """The daemon refused or failed a request; ``kind`` names its error type there."""

    def __init__(self, kind: str, message: str):
        self.kind = kind
        super().__init__(message)


def socket_path(root: Path) -> Path:
    return Path(root) / ".syncd" / SOCKET_NAME


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


def hit_to_wire(hit) -> dict:
    """A search hit as the protocol (and ``syncd search``) carries it."""
    return hit.to_dict() | {"snippet": hit.snippet()}
