"""Ask the running daemon: ``ask_daemon(home, "search", {...})``.

Kept tiny on purpose (socket and json from the stdlib, nothing else): the point of asking the
daemon is that this process never imports LanceDB or loads the model. ``None`` means no daemon
answered (no socket, a stale one left by a killed daemon, another user's, a timeout), and the
caller does the work itself.
"""

from __future__ import annotations

import logging
import os
import socket
import struct
from pathlib import Path

from ..errors import HomeError, RemoteError
from .protocol import MAX_MESSAGE_BYTES, PROTOCOL_VERSION, decode, encode, socket_address, socket_path

__all__ = ["ask_daemon", "peer_uid"]

log = logging.getLogger(__name__)

_CONNECT_TIMEOUT_S = 1.0
# A search waits while the daemon applies a batch; a reconcile of a huge checkout may take long.
_ANSWER_TIMEOUT_S = 30.0


def peer_uid(sock: socket.socket) -> int | None:
    """The uid of the process at the other end of a Unix socket (None where the OS cannot say)."""
    if not hasattr(socket, "SO_PEERCRED"):
        return None
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return struct.unpack("3i", creds)[1]


def ask_daemon(root: Path, method: str, params: dict | None = None, timeout: float | None = _ANSWER_TIMEOUT_S):
    """The daemon's result for ``method``, or None when no daemon of this user answers within
    ``timeout`` seconds (None: however long it works). Raises RemoteError when the daemon
    answered with an error."""
    try:
        path = socket_path(root)
    except HomeError:  # no repository, so no private folder: no daemon listens anywhere
        return None
    if not path.exists():
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(_CONNECT_TIMEOUT_S)
        try:
            with socket_address(path) as address:
                sock.connect(address)
        except OSError as exc:
            # Refused: the socket file outlived its daemon (kill -9). Too long a path, no access:
            # we cannot reach it either. Both mean: do the work here.
            log.debug("no daemon at %s: %s", path, exc)
            return None
        uid = peer_uid(sock)
        if uid is not None and uid != os.getuid():
            log.warning("%s is served by uid %d, not by you; not asking it", path, uid)
            return None
        sock.settimeout(timeout)
        try:
            sock.sendall(encode({"v": PROTOCOL_VERSION, "method": method, "params": params or {}}))
            answer = _read_line(sock)
        except OSError as exc:  # socket.timeout is an OSError
            log.warning("the daemon at %s did not answer (%s); working without it", path, exc)
            return None
    finally:
        sock.close()
    if not answer:
        return None
    message = decode(answer)
    if not message.get("ok"):
        error = message.get("error") or {}
        raise RemoteError(str(error.get("type", "Error")), str(error.get("message", "the daemon refused")))
    return message.get("result")


def _read_line(sock: socket.socket) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        size += len(chunk)
        if chunk.endswith(b"\n") or size > MAX_MESSAGE_BYTES:
            return b"".join(chunks)
