"""The HTTP connection: uvicorn's httptools protocol, bounded, so that no client can make the
server wait for it or work for it before its token is checked.

Unbounded, a request's line and headers may be of any size and take any time: httptools joins
the pieces of a header value one by one as they arrive (quadratic), so one client sending a
100 MB header held the event loop, and every other request (``/health`` included) waited behind
it. Here, for every request:

- its line and headers are at most :data:`MAX_HEAD_BYTES` (431), its URL at most
  :data:`MAX_URL_BYTES` (414), its header fields at most :data:`MAX_HEADERS` (431);
- its headers arrive within ``header_timeout_s`` of its first byte (of the connection, for the
  first request), its body within ``body_timeout_s`` of its headers (408);
- a request refused so, or one that is no HTTP at all (400), is answered in the API's JSON error
  shape and its connection closed.

What the application does with a request (an answer streamed for minutes included) is not
bounded here: this only guards what the client owes.
"""

from __future__ import annotations

import json
from asyncio import TimerHandle

from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

__all__ = ["MAX_HEADERS", "MAX_HEAD_BYTES", "MAX_URL_BYTES", "BoundedHttpTools", "bounded_http"]

# The request line and headers. A bearer token, a few cookies from a browser on the same host and
# the longest query the API takes (a search of 4,000 characters, percent-encoded) fit many times.
MAX_HEAD_BYTES = 64 * 1024
MAX_URL_BYTES = 32 * 1024
MAX_HEADERS = 100
# How long a refused client's remaining bytes are read (and dropped) before its connection closes.
LINGER_S = 2.0


class _Refused(Exception):
    def __init__(self, status: int, kind: str, message: str):
        super().__init__(message)
        self.status, self.kind, self.message = status, kind, message


class BoundedHttpTools(HttpToolsProtocol):
    """uvicorn's httptools protocol with the bounds of the module's docstring."""

    header_timeout_s = 10.0
    body_timeout_s = 30.0

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._in_head = True  # between requests or inside a request's line and headers
        self._head_bytes = 0
        self._heads = 0  # requests whose headers were read, so a split feed knows one ended
        self._deadline: TimerHandle | None = None
        self._refusal: _Refused | None = None
        self._lingering = False

    # -- deadlines -------------------------------------------------------------------------------

    def _arm(self, seconds: float, what: str) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(seconds, self._expired, what)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expired(self, what: str) -> None:
        self._deadline = None
        limit = self.header_timeout_s if what == "headers" else self.body_timeout_s
        self._answer(_Refused(408, "RequestTimeout", f"the request's {what} took over {limit:g} s to arrive"))

    # -- refusing --------------------------------------------------------------------------------

    def _answer(self, refused: _Refused) -> None:
        """Answer ``refused`` (unless an answer has begun) and close the connection; the request
        in hand, if any, is told its client is gone and whatever it sends is dropped."""
        self._disarm()
        if self.transport is None or self.transport.is_closing() or self._lingering:
            return
        cycle = self.cycle
        started = cycle is not None and not cycle.response_complete and cycle.response_started
        if cycle is not None and not cycle.response_complete:
            cycle.keep_alive = False
            cycle.disconnected = True
            cycle.message_event.set()
        if not started:
            body = json.dumps({"error": {"type": refused.kind, "message": refused.message}}).encode()
            head = [STATUS_LINE[refused.status]]
            for name, value in self.server_state.default_headers:
                head += [name, b": ", value, b"\r\n"]
            head += [b"content-type: application/json\r\n", b"content-length: %d\r\n" % len(body),
                     b"connection: close\r\n\r\n", body]  # fmt: skip
            self.transport.write(b"".join(head))
        # Closed at once with the client's bytes unread, the socket would be reset and the answer
        # lost: the writing side is closed, what still comes is read and dropped for a moment.
        self._lingering = True
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self.loop.call_later(LINGER_S, self.transport.close)

    def shutdown(self) -> None:
        if self._lingering:
            self.transport.close()
            return
        super().shutdown()

    def send_400_response(self, msg: str) -> None:
        # uvicorn's answer to anything the parser refused, a bound of ours included (raised from a
        # parser callback, it reaches here as a parser error).
        refused, self._refusal = self._refusal, None
        self._answer(refused or _Refused(400, "BadRequest", "the request is not valid HTTP/1.1"))

    def _refuse(self, status: int, kind: str, message: str):
        self._refusal = _Refused(status, kind, message)
        raise self._refusal

    # -- the connection --------------------------------------------------------------------------

    def connection_made(self, transport) -> None:
        super().connection_made(transport)
        self._arm(self.header_timeout_s, "headers")

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._lingering:
            return
        if not self._in_head:
            super().data_received(data)
            return
        if self._deadline is None:
            self._arm(self.header_timeout_s, "headers")
        room = MAX_HEAD_BYTES - self._head_bytes
        if len(data) <= room:
            self._head_bytes += len(data)
            super().data_received(data)
            return
        # Only what fits is parsed; the rest only if the headers ended within it.
        heads = self._heads
        self._head_bytes = MAX_HEAD_BYTES
        super().data_received(data[:room])
        if self.transport.is_closing() or self._lingering:
            return
        if self._heads == heads and self._in_head:
            self._answer(_Refused(431, "RequestHeaderFieldsTooLarge",
                                  f"a request's line and headers are limited to {MAX_HEAD_BYTES} bytes"))  # fmt: skip
            return
        self.data_received(data[room:])

    # -- parser callbacks ------------------------------------------------------------------------

    def on_url(self, url: bytes) -> None:
        if len(self.url) + len(url) > MAX_URL_BYTES:
            self._refuse(414, "URITooLong", f"URLs are limited to {MAX_URL_BYTES} bytes")
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        if len(self.headers) >= MAX_HEADERS:
            self._refuse(431, "RequestHeaderFieldsTooLarge", f"requests are limited to {MAX_HEADERS} header fields")
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._in_head = False
        self._heads += 1
        self._arm(self.body_timeout_s, "body")
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._disarm()
        self._in_head, self._head_bytes = True, 0
        super().on_message_complete()


def bounded_http(header_timeout_s: float, body_timeout_s: float) -> type[BoundedHttpTools]:
    """The protocol class for uvicorn's ``http`` option, with these deadlines."""
    return type("BoundedHttpTools", (BoundedHttpTools,), {"header_timeout_s": header_timeout_s,
                                                          "body_timeout_s": body_timeout_s})  # fmt: skip
