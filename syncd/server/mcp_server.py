"""MCP (the official ``mcp`` SDK): the servers' operations as tools, over streamable HTTP at
``/mcp`` inside ``syncd serve``, or over stdio (``syncd mcp``) for desktop agents.

Each tool is generated from its :data:`~syncd.server.service.OPERATIONS` entry: its parameters
are the fields of the shared input model (``syncd.api.schemas``), so MCP clients see the same names,
descriptions and limits as the REST API and the agent tools. Every call is validated again by
that model and then run by a *backend*: the service itself (this process holds the home), or the
running daemon over the local socket (``syncd mcp`` beside ``syncd serve`` or ``watch``).

Who a call acts for: over HTTP, the token's principal (the gate put it in the request's scope);
over stdio, the account running ``syncd mcp``, as the admin, or bound to ``--user``.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
from pathlib import Path
from typing import Annotated, Any, Protocol

from pydantic import Field

from .._version import __version__
from ..engine.visibility import told
from ..errors import AccessError, RemoteError, SyncdError
from ..index.damage import damaged_index
from .gate import principal_of_scope
from .scrub import scrubber
from .service import LOCAL_ADMIN, OPERATIONS, MemoryService, Operation, call
from .tokens import Principal

__all__ = ["Backend", "LocalBackend", "SocketBackend", "build_mcp", "control_methods"]

log = logging.getLogger(__name__)

_INSTRUCTIONS = (
    "syncd is this user's long-term memory, kept as markdown files with a git history. Search it "
    "before answering questions about the user; add one fact per call when you learn something "
    "worth remembering; core memory blocks are always in your prompt; the wiki vault holds notes."
)


class Backend(Protocol):
    async def call(self, principal: Principal, name: str, arguments: dict) -> dict: ...


class LocalBackend:
    """Runs operations on the service of this process."""

    def __init__(self, service: MemoryService):
        self.service = service
        # Its errors go to remote clients: no message names the server's folders.
        self.scrub = scrubber(service.home.root, service.home.state_dir)

    async def call(self, principal: Principal, name: str, arguments: dict) -> dict:
        return await call(self.service, principal, name, arguments)


class SocketBackend:
    """Hands operations to the daemon over its socket (``.git/syncd/daemon.sock``). The socket
    acts as the home's admin (only its owner reaches it), so a principal bound to a user is
    enforced here first."""

    def __init__(self, root: Path):
        self.root = Path(root)

    async def call(self, principal: Principal, name: str, arguments: dict) -> dict:
        from ..control.client import ask_daemon

        op = OPERATIONS.get(name)
        if op is not None and principal.user is not None and "user_id" in op.input.model_fields:
            asked = arguments.get("user_id")
            if asked is not None and asked != principal.user:
                raise AccessError(f"this server acts for user {principal.user!r}; it cannot act for {asked!r}")
            arguments = {**arguments, "user_id": principal.user}
        # A RemoteError carries the daemon's error type in ``kind``: the tool names that one.
        result = await asyncio.to_thread(ask_daemon, self.root, "call", {"name": name, "arguments": arguments})
        if result is None:
            raise SyncdError("the syncd daemon of this home stopped answering; restart `syncd mcp`")
        return result


def control_methods(service_factory) -> dict:
    """The control socket's ``call`` method, over the service ``service_factory()`` makes (on
    first use, so ``syncd watch`` pays for the memory layer only when asked)."""
    from ..memory.tools import run_sync

    made: list[MemoryService] = []

    def service() -> MemoryService:
        if not made:
            made.append(service_factory())
        return made[0]

    def call_method(name: str, arguments: dict | None = None) -> dict:
        svc = service()
        return run_sync(svc.manager, lambda: call(svc, LOCAL_ADMIN, name, arguments or {}))

    return {"call": call_method}


def _principal(ctx, default: Principal) -> Principal:
    request = getattr(ctx.request_context, "request", None) if ctx is not None else None
    scope = getattr(request, "scope", None)
    if scope is None:
        return default  # stdio: the account that started us
    found = principal_of_scope(scope)
    if found is None:  # the gate lets no request through without one
        raise AccessError("no token")
    return found


def _tool_function(op: Operation, backend: Backend, default: Principal, context_type):
    """A function whose signature is the operation's input model (minus what the tool fixes),
    for the SDK to describe and validate; it validates again with the model and runs the call."""
    fixed = dict(op.fixed)
    params = []
    annotations: dict[str, Any] = {}
    for name, field in op.input.model_fields.items():
        if name in fixed:
            continue
        # The field's type, constraints and validators; its default goes on the parameter. Built at
        # run time from the model's fields: a value a type checker cannot read as a type.
        annotated: Any = Annotated
        annotation = annotated[(field.annotation, *field.metadata, Field(description=field.description))]
        default_value = inspect.Parameter.empty if field.is_required() else field.get_default(call_default_factory=True)
        params.append(
            inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default_value, annotation=annotation)
        )
        annotations[name] = annotation
    params.append(inspect.Parameter("ctx", inspect.Parameter.KEYWORD_ONLY, annotation=context_type))
    annotations["ctx"] = context_type
    annotations["return"] = str

    async def tool(ctx=None, **arguments: Any) -> str:
        from mcp.server.mcpserver.exceptions import ToolError

        principal = _principal(ctx, default)
        try:
            # The operation's input model checks the arguments (service.call): see
            # _checked_by_the_operation.
            result = await backend.call(principal, op.name, {**arguments, **fixed})
        except (SyncdError, ValueError, TypeError, RuntimeError) as raised:
            exc = damaged_index(raised) or raised
            if not isinstance(exc, SyncdError | ValueError | TypeError):
                raise  # a bug of ours: the SDK reports it as an error of the tool
            kind = exc.kind if isinstance(exc, RemoteError) else type(exc).__name__
            message = getattr(backend, "scrub", str)(str(exc))
            # A principal bound to a user (a user's token, `syncd mcp --user`) is told no file
            # outside its memory, as REST tells it (rest.answer_errors).
            if principal.user is not None:
                message = told(message, principal.user)
            raise ToolError(f"{kind}: {message}") from None
        return json.dumps(result, ensure_ascii=False)

    tool.__name__ = op.name
    tool.__doc__ = op.description
    # inspect.signature() reads __signature__ off any function; typeshed's function type lacks it.
    tool.__signature__ = inspect.Signature(params, return_annotation=str)  # type: ignore[attr-defined]
    tool.__annotations__ = annotations
    return tool


def build_mcp(backend: Backend, default: Principal = LOCAL_ADMIN):
    """An MCPServer with one tool per operation, run by ``backend``."""
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.context import Context
    from mcp_types import ToolAnnotations

    server = MCPServer("syncd", version=__version__, instructions=_INSTRUCTIONS, log_level="WARNING")
    for op in OPERATIONS.values():
        server.add_tool(
            _tool_function(op, backend, default, Context),
            name=op.name,
            description=op.description,
            annotations=ToolAnnotations(read_only_hint=op.read_only, destructive_hint=op.name == "memory_delete"),
            structured_output=False,
        )
        _checked_by_the_operation(server, op.name)
    return server


def _checked_by_the_operation(server, name: str) -> None:
    """Leave a call's arguments to the operation's own input model instead of the SDK's copy of
    it: that copy drops names it does not know (``userid`` for ``user_id`` wrote to the caller's
    own memory, silently), and says what is wrong as pydantic's multi-line report with a link.
    Ours refuses unknown names and answers one line per field, as REST does. The published schema
    stays the SDK's (built from the same fields). An SDK without this hook keeps its own check."""
    from mcp.server.mcpserver.utilities.func_metadata import FuncMetadata

    class AsGiven(FuncMetadata):
        def validate_arguments(self, arguments_to_validate: dict[str, Any]) -> dict[str, Any]:
            return self.pre_parse_json(arguments_to_validate)

    tool = getattr(getattr(server, "_tool_manager", None), "get_tool", lambda _: None)(name)
    if tool is not None:
        meta = tool.fn_metadata
        tool.fn_metadata = AsGiven(
            arg_model=meta.arg_model,
            output_schema=meta.output_schema,
            output_model=meta.output_model,
            wrap_output=meta.wrap_output,
        )
