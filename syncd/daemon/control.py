"""The daemon's side of its socket (protocol.py has the wire format and where it lives).

Connections are served on their own threads while the daemon's work thread goes on: searches run
against the daemon's live engine, whose index holds its lock for the length of one query and one
apply, so a search sees the rows before or after a batch, never halfway. The socket is created
0600 under a temporary name and renamed into place, so it is never reachable by others even for an
instant, and each connection's peer uid is checked (SO_PEERCRED) as well.
"""

from __future__ import annotations

import logging
import os
import socketserver
import threading
from collections.abc import Callable, Mapping
from pathlib import Path

from .._version import __version__
from ..control.client import peer_uid
from ..control.protocol import MAX_MESSAGE_BYTES, PROTOCOL_VERSION, decode, encode, socket_address, socket_path
from ..engine.search import DEFAULT_LIMIT, search_answer
from ..errors import SyncdError
from ..index.damage import damaged_index

__all__ = ["ControlServer"]

log = logging.getLogger(__name__)


class _Handler(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        line = self.rfile.readline(MAX_MESSAGE_BYTES + 1)
        if not line:
            return
        server: _UnixServer = self.server  # type: ignore[assignment]  # the only server this handler serves
        try:
            self.wfile.write(encode(server.answer(line)))
        except OSError:
            pass  # the client went away; nothing to tell it


class _UnixServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    block_on_close = False

    def __init__(self, path: Path, answer: Callable[[bytes], dict]):
        self.answer = answer
        super().__init__(str(path), _Handler)

    def server_bind(self) -> None:
        final = str(self.server_address)
        tmp = f"{final}.{os.getpid()}.tmp"
        if os.path.lexists(tmp):
            os.unlink(tmp)
        with socket_address(Path(tmp)) as address:
            self.socket.bind(address)
        os.chmod(tmp, 0o600)
        # Replaces a socket a killed daemon left behind; we hold the home lock, so it is stale.
        os.replace(tmp, final)

    def verify_request(self, request, client_address) -> bool:
        uid = peer_uid(request)
        if uid is not None and uid != os.getuid():
            log.warning("refused a connection from uid %d on the control socket", uid)
            return False
        return True


class ControlServer:
    """Answers ping, search and status for one engine (the daemon's) until :meth:`stop`, plus
    the ``methods`` its host adds (``call``: the servers' operations, see syncd.server)."""

    def __init__(
        self,
        engine,
        generation: Callable[[], object] | None = None,
        methods: Mapping[str, Callable[..., object]] | None = None,
    ):
        """``generation`` (the daemon's): a value that changes whenever a change is noticed or a
        batch applied; while it stays the same, so does what is stale, and searches reuse it.
        ``methods``: more methods by name, called with the request's params as keywords."""
        self.engine = engine
        self._generation = generation
        self._stale: tuple[object, int] | None = None
        self._stale_lock = threading.Lock()
        self.path: Path | None = None
        self._server: _UnixServer | None = None
        self._thread: threading.Thread | None = None
        self._inode: int | None = None
        self._methods = {
            **(methods or {}),
            "ping": self._ping,
            "search": self._search,
            "status": self._status,
            "revert": self._revert,
        }

    def start(self) -> ControlServer:
        try:
            self.engine.home.ensure_private_dir()
            self.path = socket_path(self.engine.home.root)
            self._server = _UnixServer(self.path, self.answer)
        except (OSError, SyncdError) as exc:
            # Without a socket the daemon still works; other processes just load the index.
            log.warning(
                "cannot serve %s (%s); searches will not use the daemon",
                self.path or f"a socket for {self.engine.home.root}",
                exc,
            )
            return self
        self._inode = os.stat(self.path).st_ino
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.2}, name="syncd-control", daemon=True
        )
        self._thread.start()
        log.info("answering on %s", self.path)
        return self

    def stop(self) -> None:
        if self._server is None:
            return
        self._server.shutdown()
        self._server.server_close()
        self._server = None
        path = self.path
        assert path is not None  # set whenever the server is
        try:
            # Only our own socket: never one a later daemon put in its place.
            if os.stat(path).st_ino == self._inode:
                path.unlink()
        except FileNotFoundError:
            pass

    def __enter__(self) -> ControlServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- requests --------------------------------------------------------------------------------

    def answer(self, line: bytes) -> dict:
        """The response to one request line (never raises)."""
        try:
            request = decode(line)
            if request.get("v") != PROTOCOL_VERSION:
                return _error("ProtocolError", f"protocol version {request.get('v')!r} is not {PROTOCOL_VERSION}")
            name = request.get("method")
            method = self._methods.get(name) if isinstance(name, str) else None
            if method is None:
                return _error("ProtocolError", f"unknown method {request.get('method')!r}")
            params = request.get("params") or {}
            if not isinstance(params, dict):
                return _error("ProtocolError", "params must be an object")
            return {"v": PROTOCOL_VERSION, "ok": True, "result": method(**params)}
        except (SyncdError, ValueError, TypeError) as exc:
            # Bad input from the client (a malformed line, an invalid id, a wrong parameter).
            return _error(type(exc).__name__, str(exc))
        except Exception as exc:
            damaged = damaged_index(exc)
            if damaged is not None:  # the home's index, said with its fix as the CLI says it
                return _error(type(damaged).__name__, str(damaged))
            log.exception("control request failed")
            return _error("InternalError", f"the daemon failed to answer: {exc}")

    def _ping(self) -> dict:
        return {
            "pid": os.getpid(),
            "home": str(self.engine.home.root),
            "version": __version__,
            "protocol": PROTOCOL_VERSION,
            "methods": sorted(self._methods),
        }

    def _search(
        self,
        query: str,
        user_id: str | None = None,
        chat_id: str | None = None,
        limit: int = DEFAULT_LIMIT,
        kind: str | None = None,
        include_wiki: bool = False,
    ) -> dict:
        """The one search (syncd.engine.search), on the daemon's live engine."""
        if not isinstance(query, str) or not isinstance(limit, int) or isinstance(limit, bool):
            raise TypeError("search takes a string query and an integer limit")
        if not isinstance(include_wiki, bool):
            raise TypeError("include_wiki is true or false")
        return search_answer(
            self.engine,
            query,
            stale=self._count_stale,
            user_id=user_id,
            chat_id=chat_id,
            limit=limit,
            kind=kind,
            include_wiki=include_wiki,
        )

    def _count_stale(self) -> int:
        """Files the index does not reflect yet: a scan of the tree (a stat of every file, so it
        grows with the home), reused while the daemon has noticed no change and applied no batch
        since, which is when the answer cannot have changed."""
        key = self._generation() if self._generation is not None else None
        with self._stale_lock:
            if key is not None and self._stale is not None and self._stale[0] == key:
                return self._stale[1]
        stale = self.engine.stale_count()
        with self._stale_lock:
            self._stale = (key, stale)
        return stale

    def _status(self) -> dict:
        return self.engine.status().to_dict()

    def _revert(self, commit: str) -> dict:
        """A revert asked by another process (`syncd revert`, the workbench) is made here, by the
        one writer, after the changes acknowledged before it are committed (Engine.revert)."""
        if not isinstance(commit, str):
            raise TypeError("revert takes the commit as a string")
        return {"commit": self.engine.revert(commit)}


def _error(kind: str, message: str) -> dict:
    return {"v": PROTOCOL_VERSION, "ok": False, "error": {"type": kind, "message": message}}
