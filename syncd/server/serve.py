"""``syncd serve``: the daemon, the REST API and MCP over streamable HTTP in one process, which
holds the home's lock. Reads are served from the daemon's live index; writes go through
``MemoryManager(engine)`` on the same engine, whose change groups the daemon's own steps never
interleave with (``Engine.exclusive``).

Threads: uvicorn's event loop on the main thread, the daemon's work thread beside it (plus the
watcher's and the control socket's). On SIGTERM or SIGINT: the server stops accepting (a new
connection is refused) and the daemon is told to stop at once, so that a reconcile under way
(at start, or a periodic one: long in a large home) is given up instead of holding the write
turn the requests in flight wait for; those are answered (up to ``graceful_s``), each write
acknowledged only once committed, as always; then the daemon finishes the batch in hand and
commits what people changed, the engine releases the lock, and the process exits 0. Each wait
is logged (what is waited for), so a slow stop says why.

While it runs, ``server.json`` in the home's private folder (``<git dir>/syncd/``, beside the
admin token; not under ``.syncd/``, which may be deleted under it) says where (``{"pid", "url",
"mcp"}``), for local clients that started it with ``--port 0`` or do not know the port.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import socket
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from pathlib import Path

from ..config import Settings
from ..daemon.loop import Daemon
from ..daemon.sharing import RemoteSharing
from ..engine.facade import open_engine
from ..errors import ConfigError
from ..home import atomic_write
from ..memory import MemoryManager
from .gate import Gate
from .http import bounded_http
from .mcp_server import LocalBackend, build_mcp, control_methods
from .rest import OPEN_PATHS, create_app
from .routes_session import session_routers
from .service import WORKER_THREADS, MemoryService
from .tokens import TokenStore

__all__ = [
    "LOOPBACK",
    "MAX_BODY_BYTES",
    "SERVER_FILE",
    "ServerHandle",
    "build_server_app",
    "check_listen",
    "serve",
    "uvicorn_server",
]

log = logging.getLogger(__name__)

SERVER_FILE = "server.json"
# A fact, a block or a turn is far below this; anything near it is not a request of ours.
MAX_BODY_BYTES = 1 << 20
LOOPBACK = ("127.0.0.1", "localhost", "::1")
# A stop that waits longer than this for the daemon says so in the log.
_SAY_WAITING_AFTER_S = 1.0


def build_server_app(service: MemoryService, tokens: TokenStore, *, host: str = "127.0.0.1",
                     max_body_bytes: int = MAX_BODY_BYTES, cors_origins: Sequence[str] = ()):  # fmt: skip
    """The whole HTTP app: REST and ``/mcp`` behind the token gate."""
    from mcp.server.streamable_http_manager import StreamableHTTPASGIApp
    from mcp.server.transport_security import TransportSecuritySettings
    from starlette.routing import Route

    mcp = build_mcp(LocalBackend(service))
    # Stateless and JSON: every MCP call is one POST answered in full, so no stream outlives a
    # request (a graceful shutdown never waits on an idle session) and the gate sees each call.
    security = None if host in LOOPBACK else TransportSecuritySettings(enable_dns_rebinding_protection=False)
    mcp.streamable_http_app(streamable_http_path="/mcp", stateless_http=True, json_response=True,
                            max_request_body_size=max_body_bytes, transport_security=security, host=host)  # fmt: skip
    sessions = mcp.session_manager

    @asynccontextmanager
    async def lifespan(app):
        # Enough worker threads for the writers waiting their turn and the reads beside them.
        asyncio.get_running_loop().set_default_executor(
            ThreadPoolExecutor(WORKER_THREADS, thread_name_prefix="syncd-worker")
        )
        async with sessions.run():
            yield

    app = create_app(service, routers=session_routers(service), lifespan=lifespan, cors_origins=cors_origins)
    # POST only: a stateless server has nothing to push, so GET (an event stream that would stay
    # open, idle, through a shutdown's whole grace period) and DELETE are 405, as MCP allows.
    app.router.routes.append(Route("/mcp", endpoint=StreamableHTTPASGIApp(sessions), methods=["POST"],
                                   include_in_schema=False))  # fmt: skip
    return Gate(app, tokens, max_body_bytes, OPEN_PATHS)


class ServerHandle:
    """For a host running :func:`serve` on another thread: ``ready`` is set (and ``url`` known)
    once it listens; :meth:`stop` shuts it down as SIGTERM would."""

    def __init__(self) -> None:
        self.ready = threading.Event()
        self.url: str | None = None
        self._stop: Callable[[], None] | None = None
        self._stopped = False

    def stop(self) -> None:
        self._stopped = True
        if self._stop is not None:
            self._stop()


def uvicorn_server(config, on_started: Callable[[str], None], on_stopping: Callable[[], None] = lambda: None):
    """uvicorn's server, telling ``on_started`` its URL once it listens and calling
    ``on_stopping`` as its shutdown begins (right before it stops accepting)."""
    import uvicorn

    class Server(uvicorn.Server):
        def capture_signals(self):
            """Signals are ours (see serve): uvicorn re-raises the one it caught once it is done,
            which would end the process by that signal before the daemon has committed."""
            from contextlib import nullcontext

            return nullcontext()

        async def startup(self, sockets=None) -> None:
            await super().startup(sockets)
            if self.started and self.servers:
                bound = self.servers[0].sockets[0].getsockname()
                shown = f"[{bound[0]}]" if ":" in bound[0] else bound[0]
                on_started(f"http://{shown}:{bound[1]}")

        async def shutdown(self, sockets=None) -> None:
            log.info("stopping: %d request(s) in flight to answer (at most %g s)", len(self.server_state.tasks),
                     self.config.timeout_graceful_shutdown)  # fmt: skip
            on_stopping()
            await super().shutdown(sockets)

    return Server(config)


def check_listen(host: str, port: int) -> None:
    """ConfigError unless ``host``:``port`` can be listened on now (each address the name has,
    as uvicorn binds them): a name that does not resolve or a port in use is said in one line
    before the home is held or anything loads. uvicorn itself only logs such a failure and exits
    the process with its own status (3)."""
    try:
        addresses = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as exc:
        raise ConfigError(f"cannot listen on {host!r}: {getattr(exc, 'strerror', None) or exc}") from None
    for family, kind, proto, _, address in addresses:
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as asyncio's server does
            try:
                probe.bind(address)
            except OSError as exc:
                raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None


def serve(
    home: Path,
    settings: Settings,
    host: str = "127.0.0.1",
    port: int = 8765,
    *,
    cors_origins: Sequence[str] = (),
    graceful_s: float = 30.0,
    embedder=None,
    on_ready: Callable[[str], None] | None = None,
    handle: ServerHandle | None = None,
    manager_options: dict | None = None,
    read_only: bool = False,
    remote: str | None = None,
    pull_every: float = 10.0,
) -> None:
    """Hold ``home`` and serve it until SIGTERM or SIGINT (handled when called on the main
    thread) or ``handle.stop()``. ``manager_options`` go to the MemoryManager (``llm_options``,
    ``job_llm_options``...). ``read_only``: hold nothing and run no daemon; answer reads from
    the index as its writer leaves it (a shared PostgreSQL index, for servers on other machines)
    and refuse writes. ``remote``: share the home through that git remote as ``syncd watch
    --remote`` does (pull every ``pull_every`` seconds, push what is new; daemon/sharing.py)."""
    import uvicorn

    check_listen(host, port)
    # The lock comes first: a second server (or a `syncd watch`) fails here, naming the holder.
    with open_engine(home, settings=settings, embedder=embedder, read_only=read_only, looks_only=read_only) as engine:
        tokens = TokenStore.of(engine.home)
        tokens.admin_token(create=True)
        service = MemoryService(
            engine, MemoryManager(engine, author="syncd-server", **(manager_options or {})), read_only=read_only
        )
        daemon = (
            None
            if read_only
            else Daemon(engine, settings, control_methods=control_methods(lambda: service), role="syncd serve")
        )
        app = build_server_app(service, tokens, host=host, cors_origins=cors_origins)
        config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on",
                                # uvicorn annotates an int but hands it to asyncio.wait_for: a float serves.
                                timeout_graceful_shutdown=graceful_s, access_log=False,  # type: ignore[arg-type]
                                http=bounded_http(settings.server_header_timeout_s, settings.server_body_timeout_s))  # fmt: skip
        info_path = engine.home.ensure_private_dir() / SERVER_FILE

        def started(url: str) -> None:
            if daemon is not None:  # a reader beside the home's own server leaves its file be
                # Whole or not at all: clients read it as soon as it exists.
                info = json.dumps({"pid": os.getpid(), "url": url, "mcp": f"{url}/mcp"}) + "\n"
                atomic_write(info_path, info.encode())
            log.info("serving %s on %s (REST, MCP at /mcp)", engine.home.root, url)
            if on_ready is not None:
                on_ready(url)
            if handle is not None:
                handle.url = url
                handle.ready.set()

        # As the server stops accepting: the daemon gives up a reconcile under way, which the
        # writes in flight would otherwise wait for (Daemon.reconcile).
        server = uvicorn_server(config, started, on_stopping=daemon.stop if daemon is not None else lambda: None)

        def stop(*_: object) -> None:
            server.should_exit = True

        if handle is not None:
            handle._stop = stop
            if handle._stopped:
                stop()

        # Started before the daemon and the server: a remote the home lacks fails here, serving nothing.
        shared = (
            None
            if remote is None or daemon is None
            else RemoteSharing(engine, remote, pull_every).start(daemon.control_methods)
        )
        previous = {}
        if threading.current_thread() is threading.main_thread():
            previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
        worker = None if daemon is None else threading.Thread(target=daemon.run, name="syncd-daemon", daemon=True)
        if worker is not None:
            worker.start()
        try:
            server.run()
        finally:
            if shared is not None:
                shared.stop()
            if worker is not None and daemon is not None:
                info_path.unlink(missing_ok=True)
                # The requests are answered; now the batch in hand, the last commit, the lock.
                daemon.stop()
                worker.join(_SAY_WAITING_AFTER_S)
                if worker.is_alive():
                    log.info("stopping: waiting for the daemon's %s step, then its last commit", daemon.doing or "last")
                    worker.join()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
