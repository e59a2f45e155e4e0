"""``syncd serve --read-only --index URL`` with no home: a read-only server for every home whose
index one PostgreSQL database holds, on a machine holding none of them.

**Shape.** The home is named in the path, by its schema (``git config syncd.indexschema`` in the
home): ``GET /homes`` lists the homes the request's token opens; ``GET /homes/{home}/memory/
archival`` searches, ``.../memory/core`` reads the core blocks and ``.../memory/stats`` counts,
with the same inputs and answers as the home's own server (``syncd.api.schemas``). Nothing else
is served: writes, history, daily logs and transcripts need the home, and belong to its server
(an unknown route is 404, a write 405). ``/health`` and the API's description need no token.

**Tokens.** A request is checked against the tokens of the home it names, exactly as the home's
own server checks it: its admin token reads every user of that home, a user's token reads that
user only (naming another user is 403), and no token of one home opens another (401), even for a
user of the same name. The home's writer publishes the hashes of its tokens into its schema
(``syncd serve`` at its start and within a second of ``syncd token add|revoke``; see
serve.TokenMirror); this server re-reads them at most :data:`TOKENS_TTL_S` old, so a revoked token
is refused here within about two seconds of its revocation while the writer runs. A home whose
writer never published tokens is opened by none.

**Faults.** The database down: 503 with ``Retry-After``, as the home's own reader says.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import re
import signal
import threading
import time
from collections.abc import Callable
from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, Query, Request

from .._version import __version__
from ..api import schemas as s
from ..config import Settings
from ..engine.database import DatabaseHomes, IndexedHome
from ..engine.search import hit_record, search
from ..errors import InvalidInputError, NotFoundError, SyncdError
from ..memory.blocks import block_folders, resolve_kept_blocks
from .gate import PRINCIPAL_KEY, Gate, bearer_of, send_error
from .http import bounded_http
from .rest import OPEN_PATHS, answer_errors, bearer, status_of
from .serve import uvicorn_server
from .service import user_for
from .tokens import Principal, match_token

__all__ = ["HOME_KEY", "TOKENS_TTL_S", "DatabaseService", "HomesGate", "build_database_app", "serve_database"]

log = logging.getLogger(__name__)

HOME_KEY = "syncd.home"
# How old a home's token hashes may be when a request is checked against them: one query per
# home per second at most, and a revocation reaches every reader within it.
TOKENS_TTL_S = 1.0
_HOME_PATH = re.compile(r"/homes/([^/]+)(?:/.*)?\Z")
_DATE_LOG = re.compile(r"(\d{4}-\d{2}-\d{2})\.md\Z")


class HomesGate(Gate):
    """The token gate of a server for many homes: a request under ``/homes/{home}/`` is checked
    against that home's published token hashes; ``/homes`` against every home's (it lists those
    the token opens). The principal and the home go in the request's scope."""

    def __init__(self, app, homes: DatabaseHomes, max_body_bytes: int):
        super().__init__(app, None, max_body_bytes, OPEN_PATHS)  # type: ignore[arg-type]
        self.homes = homes
        self._hashes: dict[str, tuple[float, dict | None]] = {}

    def hashes(self, name: str) -> dict | None:
        """The home's published token hashes, re-read once they are TOKENS_TTL_S old."""
        now = time.monotonic()
        held = self._hashes.get(name)
        if held is None or now - held[0] > TOKENS_TTL_S:
            held = (now, self.homes.token_hashes(name))
            self._hashes[name] = held
        return held[1]

    def principal(self, token: str, name: str) -> Principal | None:
        hashes = self.hashes(name) or {}
        return match_token(token, hashes.get("admin"), list(hashes.get("users") or ()))

    async def _admit(self, scope, send) -> bool:
        token = bearer_of(scope)
        path = scope["path"]
        if token is None:
            await send_error(
                send,
                401,
                "Unauthorized",
                "this request needs a bearer token (Authorization: Bearer <token>) of the home it names",
                [(b"www-authenticate", b"Bearer")],
            )
            return False
        matched = _HOME_PATH.match(path)
        try:
            if matched is None:
                # /homes, or a route this server does not have: the token must open some home.
                opened = await asyncio.to_thread(self._opened_by, token)
                principal = Principal(None, "reader") if opened else None
                scope["syncd.opened"] = opened
            else:
                principal = await asyncio.to_thread(self._principal_of, token, matched.group(1))
                scope[HOME_KEY] = matched.group(1)
        except SyncdError as exc:
            status = status_of(exc) or 500
            retry = [(b"retry-after", b"1")] if status == 503 else None
            await send_error(send, status, type(exc).__name__, str(exc), retry)
            return False
        if principal is None:
            await send_error(
                send,
                401,
                "Unauthorized",
                "this request needs a valid bearer token of the home it names",
                [(b"www-authenticate", b"Bearer")],
            )
            return False
        scope[PRINCIPAL_KEY] = principal
        return True

    def _principal_of(self, token: str, name: str) -> Principal | None:
        try:
            return self.principal(token, name)
        except NotFoundError:
            return None  # no such home looks like a home this token does not open: 401 either way

    def _opened_by(self, token: str) -> dict[str, Principal]:
        opened = {}
        for name in self.homes.names():
            try:
                found = self.principal(token, name)
            except (NotFoundError, SyncdError) as exc:
                if status_of(exc) == 503:
                    raise
                continue  # a home indexed with another model, or gone meanwhile
            if found is not None:
                opened[name] = found
        return opened


class DatabaseService:
    """The reads of the home's own server (service.MemoryService), for a home of the database."""

    def __init__(self, homes: DatabaseHomes, default_user: str = "default"):
        self.homes = homes
        self.settings = homes.settings
        self.default_user = default_user

    def _home(self, name: str) -> IndexedHome:
        return self.homes.home(name)

    async def search(self, home: str, p: Principal, q: s.SearchInput) -> s.SearchResult:
        user = user_for(p, q.user_id, self.default_user)
        if q.at is not None:
            raise InvalidInputError(
                "a reader of the shared index has no history: ask the home's own server "
                "for a search as of a past revision"
            )
        hits = await asyncio.to_thread(
            lambda: search(
                self._home(home),
                q.query,
                user_id=user,
                chat_id=q.chat_id,
                limit=q.limit,
                kind=q.kind,
                include_wiki=q.include_wiki,
                settings=self.settings,
            )
        )
        return s.SearchResult(hits=[s.MemoryHit.model_validate(hit_record(h)) for h in hits])

    def _blocks(self, home: IndexedHome, user: str, chat: str | None):
        return resolve_kept_blocks(home.texts(block_folders(user, chat)), self.settings, user, chat)

    async def core(self, home: str, p: Principal, q: s.CoreInput) -> s.CoreMemory:
        user = user_for(p, q.user_id, self.default_user)
        if q.at is not None:
            raise InvalidInputError(
                "a reader of the shared index has no history: ask the home's own server "
                "for the blocks as of a past revision"
            )
        blocks = await asyncio.to_thread(self._blocks, self._home(home), user, q.chat_id)
        return s.CoreMemory(
            user_id=user,
            chat_id=q.chat_id,
            blocks={
                label: s.BlockOut(label=b.label, content=b.content, scope=b.scope, path=b.path, limit=b.limit)
                for label, b in blocks.items()
            },
        )

    async def stats(self, home: str, p: Principal, q: s.StatusInput) -> s.Stats:
        user = user_for(p, q.user_id, self.default_user)
        return await asyncio.to_thread(self._stats, self._home(home), user)

    def _stats(self, home: IndexedHome, user: str) -> s.Stats:
        """MemoryManager.get_memory_stats' counts, from what the index holds of the markdown."""
        folder = f"memory/users/{user}"
        dates = [
            m.group(1)
            for path in home.files_in(folder, "daily_log")
            if (m := _DATE_LOG.fullmatch(path.rpartition("/")[2]))
        ]
        categories = home.fact_categories(user)
        memory_md = home.texts([folder]).get(f"{folder}/MEMORY.md", "")
        blocks = self._blocks(home, user, None)
        return s.Stats(
            user_id=user,
            daily_logs=len(dates),
            first_log=dates[0] if dates else None,
            last_log=dates[-1] if dates else None,
            facts=sum(categories.values()),
            categories=dict(sorted(categories.items())),
            memory_file_chars=len(memory_md),
            blocks={label: b.scope for label, b in blocks.items()},
            as_of=dt.datetime.now().astimezone().isoformat(timespec="seconds"),
        )


async def _principal(request: Request) -> Principal:
    return request.scope[PRINCIPAL_KEY]


async def _home_name(request: Request) -> str:
    return request.scope[HOME_KEY]


Who = Annotated[Principal, Depends(_principal)]
HomeName = Annotated[str, Depends(_home_name)]


def build_database_app(service: DatabaseService, max_body_bytes: int = 1 << 20) -> HomesGate:
    """The HTTP app of the module's docstring, behind its token gate."""
    app = FastAPI(
        title="syncd (shared index reader)",
        version=__version__,
        description="Read-only search, stats and core blocks for every home of one PostgreSQL index.",
    )

    @app.get("/health", tags=["home"], summary="Liveness (no token needed)")
    async def health() -> dict[str, str]:
        return {"status": "ok", "version": __version__}

    r = APIRouter(dependencies=[Depends(bearer)])

    @r.get("/homes", summary="The homes this token opens")
    async def homes(request: Request) -> dict[str, Any]:
        opened = request.scope.get("syncd.opened") or {}
        return {"homes": [{"home": name, "user_id": p.user} for name, p in sorted(opened.items())]}

    @r.get("/homes/{home}/memory/archival", response_model=s.SearchResult, summary="Search a home's memory")
    async def search_(q: Annotated[s.SearchInput, Query()], who: Who, home: HomeName):
        return await service.search(home, who, q)

    @r.get("/homes/{home}/memory/core", response_model=s.CoreMemory, summary="A home's core memory blocks")
    async def core(q: Annotated[s.CoreInput, Query()], who: Who, home: HomeName):
        return await service.core(home, who, q)

    @r.get("/homes/{home}/memory/stats", response_model=s.Stats, summary="Counts of a user's memory")
    async def stats(who: Who, home: HomeName, user_id: Annotated[s.UserId | None, Query()] = None):
        return await service.stats(home, who, s.StatusInput(user_id=user_id))

    app.include_router(r)
    answer_errors(app, lambda message: message)  # no folder of this machine is ever in a message
    return HomesGate(app, service.homes, max_body_bytes)


def serve_database(
    url: str,
    settings: Settings,
    host: str = "127.0.0.1",
    port: int = 8765,
    *,
    graceful_s: float = 30.0,
    embedder=None,
    on_ready: Callable[[str], None] | None = None,
) -> None:
    """Serve every home of ``url``'s database read-only until SIGTERM or SIGINT."""
    import uvicorn

    homes = DatabaseHomes(url, settings, embedder=embedder)
    try:
        homes.warm()
        app = build_database_app(DatabaseService(homes))
        config = uvicorn.Config(
            app,
            host=host,
            port=port,
            log_level="warning",
            lifespan="off",
            timeout_graceful_shutdown=graceful_s,  # type: ignore[arg-type]
            access_log=False,
            http=bounded_http(settings.server_header_timeout_s, settings.server_body_timeout_s),
        )

        def started(where: str) -> None:
            log.info("serving every home of %s on %s, read-only", homes.where, where)
            if on_ready is not None:
                on_ready(where)

        server = uvicorn_server(config, started)

        def stop(*_: object) -> None:
            server.should_exit = True

        previous = {}
        if threading.current_thread() is threading.main_thread():
            previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
        try:
            server.run()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
    finally:
        homes.close()
