"""The REST API (FastAPI): the seed's endpoints plus what a client needs beside them, over one
:class:`MemoryService`. OpenAPI at ``/openapi.json``, docs at ``/docs``.

Every route is thin: it takes the shared input model (``syncd.api.schemas``; query parameters for
reads, a JSON body for writes), the principal the gate found for the token, and returns the
shared output model. Errors are one JSON shape, ``{"error": {"type", "message"}}``, with a status
saying whose problem it is: 4xx for the request (bad ids, dates and paths are 422 before they
reach a path or a filter; another user's memory is 403; nothing there is 404; a conflict with the
state of the home is 409), 5xx only for the server. Every answer says so, unmatched routes and
unreadable bodies included, and no message names the server's own folders: a path inside the
home is shown home-relative.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from http import HTTPStatus
from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.security import HTTPBearer
from pydantic import ValidationError
from starlette.exceptions import HTTPException

from .._version import __version__
from ..api import schemas as s
from ..engine.visibility import told
from ..errors import (
    AccessError,
    BlockLimitError,
    ConflictError,
    ExtractionError,
    GitBusyError,
    HomeError,
    IndexDamaged,
    IndexUnreachable,
    InvalidInputError,
    LockedError,
    NotFoundError,
    OverwrittenError,
    ParseError,
    RevertError,
    StorageError,
    SyncdError,
)
from ..index.damage import damaged_index
from .gate import PRINCIPAL_KEY
from .scrub import scrubber
from .service import MemoryService
from .tokens import Principal

__all__ = ["OPEN_PATHS", "UserParam", "Who", "answer_errors", "bearer", "create_app", "status_of"]

log = logging.getLogger(__name__)

# Paths served without a token: the API's description and a liveness probe hold nobody's memory.
OPEN_PATHS = ("/health", "/openapi.json", "/docs", "/docs/oauth2-redirect")

_ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": s.ErrorBody} for code in (400, 401, 403, 404, 409, 413, 422, 503, 507)
}

# What each error says about whose problem it is (first match wins: subclasses first).
_STATUS: Sequence[tuple[type[Exception], int]] = (
    (AccessError, 403),
    (NotFoundError, 404),
    (BlockLimitError, 422),
    (InvalidInputError, 422),
    (ConflictError, 409),
    (OverwrittenError, 409),
    # Nothing was kept; the same request succeeds once the person's git command is over.
    (GitBusyError, 503),
    (LockedError, 409),
    (RevertError, 409),
    (ParseError, 409),
    (ExtractionError, 503),
    (StorageError, 507),
    # The PostgreSQL index's database is down: the same request succeeds once it is back.
    (IndexUnreachable, 503),
    # The index's files are damaged: nothing this request can change; the message says the fix.
    (IndexDamaged, 503),
    (HomeError, 400),
    (SyncdError, 400),
    (ValidationError, 422),
)


# What Starlette says, in words a client can act on.
_HTTP_MESSAGES = {
    "There was an error parsing the body": "the request body could not be read (JSON in UTF-8 expected)",
    "Method Not Allowed": "this route does not take that method (see the Allow header)",
}


def status_of(exc: BaseException) -> int | None:
    """The HTTP status of an error the request caused (None: a bug of ours, 500)."""
    for kind, status in _STATUS:
        if isinstance(exc, kind):
            return status
    return None


def _error(status: int, kind: str, message: str, headers: Mapping[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": {"type": kind, "message": message}}, status_code=status, headers=headers)


async def _principal(request: Request) -> Principal:
    # The gate refused every request without a valid token before it got here. Async: FastAPI
    # would run a plain function on a worker thread, a thread hop per request for a dict lookup.
    return request.scope[PRINCIPAL_KEY]


# Shows the bearer scheme in the OpenAPI description; the gate does the checking.
bearer = HTTPBearer(auto_error=False, description="The admin token (.syncd/admin.token) or a user's token.")
Who = Annotated[Principal, Depends(_principal)]
UserParam = Annotated[s.UserId | None, Query(description="Whose memory (admin tokens only).")]


def _memory_routes(svc: MemoryService) -> APIRouter:
    r = APIRouter(prefix="/memory", tags=["memory"], dependencies=[Depends(bearer)])

    @r.get("/archival", response_model=s.SearchResult, summary="Search the memory")
    async def search(q: Annotated[s.SearchInput, Query()], who: Who):
        return await svc.search(who, q)

    @r.post("/archival", response_model=s.AddResult, summary="Remember one fact")
    async def add(q: s.AddInput, who: Who):
        return await svc.add(who, q)

    @r.patch("/archival/{memory_id}", response_model=s.FactOut, summary="Change one fact")
    async def update(memory_id: s.MemoryId, q: s.FactChanges, who: Who):
        return await svc.update(who, s.UpdateInput(memory_id=memory_id, **q.model_dump()))

    @r.delete("/archival/{memory_id}", response_model=s.DeleteResult, summary="Forget one fact")
    async def delete(memory_id: s.MemoryId, who: Who, user_id: UserParam = None):
        return await svc.delete(who, s.DeleteInput(memory_id=memory_id, user_id=user_id))

    @r.get("/core", response_model=s.CoreMemory, summary="The core memory blocks")
    async def core(q: Annotated[s.CoreInput, Query()], who: Who):
        return await svc.core(who, q)

    @r.put("/core", response_model=s.BlockOut, summary="Update one core memory block")
    async def update_core(q: s.BlockUpdateInput, who: Who):
        return await svc.update_block(who, q)

    @r.get("/daily", response_model=s.DailyLogs, summary="Recent daily logs")
    async def recent(q: Annotated[s.RecentLogsInput, Query()], who: Who):
        return await svc.recent_logs(who, q)

    @r.get("/daily/{date}", response_model=s.DailyLog, summary="One day's log")
    async def daily(date: s.DateStr, who: Who, user_id: UserParam = None):
        return await svc.daily_log(who, s.DailyLogInput(date=date, user_id=user_id))

    @r.get("/file", response_model=s.MemoryFile, summary="The user's MEMORY.md")
    async def memory_file(who: Who, user_id: UserParam = None):
        return await svc.memory_file(who, s.StatusInput(user_id=user_id))

    @r.get("/stats", response_model=s.Stats, summary="Counts from the markdown")
    async def stats(who: Who, user_id: UserParam = None):
        return await svc.stats(who, s.StatusInput(user_id=user_id))

    @r.post("/reindex", response_model=s.ReindexResult, summary="Rebuild the index (admin)")
    async def reindex(who: Who):
        return await svc.reindex(who)

    @r.post("/turns", response_model=s.TurnResult, summary="Remember the facts of a conversation turn")
    async def turn(q: s.TurnInput, who: Who):
        return await svc.process_turn(who, q)

    return r


def _home_routes(svc: MemoryService) -> APIRouter:
    r = APIRouter(tags=["home"], dependencies=[Depends(bearer)])

    @r.get("/status", response_model=s.StatusOut, summary="What the index reflects")
    async def status(q: Annotated[s.StatusInput, Query()], who: Who):
        return await svc.status(who, q)

    @r.get("/log", response_model=s.LogOut, summary="Recent commits")
    async def log_(q: Annotated[s.LogInput, Query()], who: Who):
        return await svc.log(who, q)

    @r.get("/blame/{fact_id}", response_model=s.BlameOut, summary="Where a fact came from")
    async def blame(fact_id: s.MemoryId, who: Who, user_id: UserParam = None):
        return await svc.blame(who, s.BlameInput(fact_id=fact_id, user_id=user_id))

    @r.post("/revert", response_model=s.RevertResult, summary="Undo one commit (admin)")
    async def revert(q: s.RevertInput, who: Who):
        return await svc.revert(who, q)

    return r


def _vault_routes(svc: MemoryService) -> APIRouter:
    r = APIRouter(prefix="/vault", tags=["vault"], dependencies=[Depends(bearer)])

    @r.get("/search", response_model=s.SearchResult, summary="Search the wiki vault")
    async def search(q: Annotated[s.VaultSearchInput, Query()], who: Who):
        return await svc.vault_search(who, q)

    @r.get("/page", response_model=s.PageOut, summary="Read one vault page")
    async def page(q: Annotated[s.PageInput, Query()], who: Who):
        return await svc.page(who, q)

    @r.get("/lint", response_model=s.LintResult, summary="Check the vault")
    async def lint(who: Who, user_id: UserParam = None):
        return await svc.lint(who, s.LintInput(user_id=user_id))

    return r


def create_app(
    service: MemoryService,
    *,
    routers: Sequence[APIRouter] = (),
    lifespan=None,
    cors_origins: Sequence[str] = (),
) -> FastAPI:
    """The REST app over ``service``; ``routers`` are added beside the built-in ones (the session
    routes, see ``routes_session``). The token gate wraps the app from outside (see serve.py)."""
    app = FastAPI(
        title="syncd",
        version=__version__,
        description="Filesystem-native memory for AI agents: markdown is the truth, LanceDB the index, git the history.",
        lifespan=lifespan,
        responses=_ERRORS,
    )
    if cors_origins:
        from fastapi.middleware.cors import CORSMiddleware

        app.add_middleware(CORSMiddleware, allow_origins=list(cors_origins), allow_methods=["*"],
                           allow_headers=["Authorization", "Content-Type"])  # fmt: skip

    @app.get("/health", tags=["home"], summary="Liveness (no token needed)")
    async def health() -> dict[str, str]:
        return {"status": "ok", "version": __version__}

    for router in (_memory_routes(service), _home_routes(service), _vault_routes(service), *routers):
        app.include_router(router)
    answer_errors(app, scrubber(service.home.root, service.home.state_dir))
    return app


def answer_errors(app: FastAPI, scrub: Callable[[str], str]) -> None:
    """Answer every error of ``app`` in the API's one JSON shape with the status of ``status_of``
    (500 for a bug of ours, logged), each message passed through ``scrub`` (see scrub.py) and, for
    a user's token, told as that user may be told it (visibility.told: a message naming another
    user's file says only that its reason lies outside their memory)."""

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError):
        return _error(422, "ValidationError", s.describe_errors(exc.errors(), nowhere="request"))

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException):
        # Starlette's own answers (no such route, a method the route lacks, a body it could not
        # read) in the same shape as ours.
        phrase = HTTPStatus(exc.status_code).phrase if exc.status_code in HTTPStatus._value2member_map_ else "Error"
        message = _HTTP_MESSAGES.get(str(exc.detail), str(exc.detail))
        # FastAPI says "an error parsing the body" for whatever json.loads raised (its cause): valid
        # JSON nested past the parser's recursion limit is not a body in the wrong encoding.
        if isinstance(exc.__cause__, RecursionError):
            message = "the request body is JSON nested too deeply to read (no request needs more than a few levels)"
        if exc.status_code == 404 and message == "Not Found":
            message = f"no route {request.method} {request.url.path} (see /docs)"
        return _error(exc.status_code, phrase.replace(" ", ""), message, exc.headers)

    async def refused(request: Request, exc: Exception):
        status = status_of(exc)
        if status is None:
            return await failed(request, exc)
        message = scrub(s.describe_invalid(exc) if isinstance(exc, ValidationError) else str(exc))
        retry = {"Retry-After": "1"} if isinstance(exc, GitBusyError | IndexUnreachable) else None
        principal = request.scope.get(PRINCIPAL_KEY)
        if principal is not None and principal.user is not None:
            shown = told(message, principal.user)
            if shown != message:
                log.info("%s %s: told user %r less than: %s", request.method, request.url.path, principal.user, message)
            message = shown
        return _error(status, type(exc).__name__, message, retry)

    async def failed(request: Request, exc: Exception):
        log.error("%s %s failed", request.method, request.url.path, exc_info=exc)
        return _error(500, "InternalError", f"the server failed ({type(exc).__name__}); the details are in its log")

    async def raised_at_runtime(request: Request, exc: Exception):
        # LanceDB's own errors reading damaged tables are RuntimeErrors: no bug of ours, the
        # home's state, with its fix.
        damaged = damaged_index(exc)
        return await (failed(request, exc) if damaged is None else refused(request, damaged))

    # Registered per class (not for Exception), so Starlette answers them without re-raising.
    for kind in {kind for kind, _ in _STATUS}:
        app.add_exception_handler(kind, refused)
    app.add_exception_handler(RuntimeError, raised_at_runtime)
    app.add_exception_handler(Exception, failed)
