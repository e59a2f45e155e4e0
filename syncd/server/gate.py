"""The door of the HTTP server (pure ASGI, in front of REST and MCP alike): a bearer token on
every request, a cap on the body size. Who the token stands for travels in the request's scope
(``scope["syncd.principal"]``), where the REST routes and the MCP tools read it. While the user
tokens cannot be read (a damaged ``tokens.json``), the admin token still works and every other
token gets a JSON 503.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
from collections.abc import Awaitable, Callable, Collection
from typing import Any

from ..errors import ConfigError
from .tokens import Principal, TokenStore

__all__ = ["PRINCIPAL_KEY", "Gate", "bearer_of", "principal_of_scope", "send_error"]

log = logging.getLogger(__name__)

PRINCIPAL_KEY = "syncd.principal"

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict]]
Send = Callable[[dict], Awaitable[None]]


def principal_of_scope(scope: Scope) -> Principal | None:
    return scope.get(PRINCIPAL_KEY)


class _TooLarge(Exception):
    pass


async def send_error(send: Send, status: int, kind: str, message: str, headers: list | None = None) -> None:
    body = json.dumps({"error": {"type": kind, "message": message}}).encode()
    await send({
        "type": "http.response.start",
        "status": status,
        "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                    *(headers or [])],
    })  # fmt: skip
    await send({"type": "http.response.body", "body": body})


def bearer_of(scope: Scope) -> str | None:
    for name, value in scope.get("headers") or ():
        if name == b"authorization":
            scheme, _, token = value.decode("latin-1").partition(" ")
            if scheme.lower() == "bearer" and token.strip():
                return token.strip()
            return None
    return None


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers") or ():
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return -1
    return None


# What a client is told while the token files cannot be read (the log says which and why).
_DAMAGED = (
    "the server cannot read its token file, so it cannot check user tokens; its admin must "
    "repair it (`syncd token list` says what is wrong); the admin token still works"
)


class Gate:
    """Wraps an ASGI app: 401 without a valid token (except on ``open_paths``: the API's
    description, which holds no one's memory), 413 for a body over ``max_body_bytes``."""

    def __init__(self, app, tokens: TokenStore, max_body_bytes: int, open_paths: Collection[str] = ()):
        self.app = app
        self.tokens = tokens
        self.max_body_bytes = max_body_bytes
        self.open_paths = frozenset(open_paths)
        self._damage_logged: str | None = None

    def _admin_despite(self, token: str | None, exc: Exception) -> Principal | None:
        """The admin, when ``token`` is the admin token though the user tokens cannot be read
        (a damaged ``tokens.json`` must not lock out the one who can repair it); else None. The
        damage is logged once for as long as it lasts."""
        if str(exc) != self._damage_logged:
            self._damage_logged = str(exc)
            log.error("user tokens refused until the token file is repaired: %s", exc)
        try:
            admin = self.tokens.admin_token()
        except (ConfigError, OSError):
            return None
        if token and admin and hmac.compare_digest(hashlib.sha256(token.encode()).digest(),
                                                   hashlib.sha256(admin.encode()).digest()):  # fmt: skip
            return Principal(None, "admin")
        return None

    async def _admit(self, scope: Scope, send: Send) -> bool:
        """Put the request's principal in ``scope``; or answer 503 (token store damaged) or 401
        and return False."""
        token = bearer_of(scope)
        try:
            principal = self.tokens.check(token) if token else None
            self._damage_logged = None
        except (ConfigError, OSError) as exc:
            principal = self._admin_despite(token, exc)
            if principal is None:
                await send_error(send, 503, "TokenStoreError", _DAMAGED)
                return False
        if principal is None:
            what = "a valid bearer token" if token else "a bearer token (Authorization: Bearer <token>)"
            await send_error(send, 401, "Unauthorized", f"this request needs {what}",
                              [(b"www-authenticate", b"Bearer")])  # fmt: skip
            return False
        scope[PRINCIPAL_KEY] = principal
        return True

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if scope["path"] not in self.open_paths and not await self._admit(scope, send):
            return
        length = _content_length(scope)
        if length is not None and (length < 0 or length > self.max_body_bytes):
            await send_error(send, 413, "PayloadTooLarge", f"request bodies are limited to {self.max_body_bytes} bytes")
            return
        received = 0
        started = answered = False

        async def counted_receive() -> dict:
            # A body without a length (chunked) is counted as it comes: past the cap, the 413 is
            # sent at once, and whatever the app makes of the cut-off body is dropped.
            nonlocal received, answered
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_body_bytes:
                    if not started and not answered:
                        answered = True
                        await send_error(send, 413, "PayloadTooLarge", too_large)
                    raise _TooLarge()
            return message

        async def tracked_send(message: dict) -> None:
            nonlocal started
            if answered:
                return
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        too_large = f"request bodies are limited to {self.max_body_bytes} bytes"
        try:
            await self.app(scope, counted_receive, tracked_send)
        except _TooLarge:
            pass
