"""A real LLM endpoint for tests: an OpenAI-compatible chat server on loopback that answers as it
is told, or holds a request open (so a test can act while a model is being asked)."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

__all__ = ["FakeLLM", "Gate", "NO_FACTS"]

NO_FACTS = json.dumps({"facts": []})
# How often a held request looks whether it was released or the server closed.
_HOLD_LOOK_S = 0.05


@dataclass
class Gate:
    """A reply held open until ``opened`` is set (then it is ``text``) or the server closes: one
    request held while the ones before and after it are answered."""

    text: str
    opened: threading.Event = field(default_factory=threading.Event)


class FakeLLM:
    """An OpenAI-compatible chat endpoint on loopback, which litellm calls as it would any
    OpenAI-compatible server. ``replies`` answer the requests in order: a string is the
    completion's text, None holds the request open until :meth:`release` (then it gets
    ``NO_FACTS``) or :meth:`close` (then it gets nothing: its caller was killed meanwhile). Past
    the list, requests get ``NO_FACTS``. A :class:`Gate` holds its request until the gate opens."""

    def __init__(self, replies: list[str | Gate | None]):
        self.replies = replies
        self.requests: list[dict] = []
        self.arriving = threading.Condition()  # notified as each request arrives
        self.held = threading.Event()  # set by close(): the requests held open (None) end
        self.released = threading.Event()  # set by release(): they are answered
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                with fake.arriving:
                    n = len(fake.requests)
                    fake.requests.append(body)
                    fake.arriving.notify_all()
                text = fake.replies[n] if n < len(fake.replies) else NO_FACTS
                if isinstance(text, Gate):
                    gate, text = text, text.text
                    while not gate.opened.wait(_HOLD_LOOK_S):
                        if fake.held.is_set():
                            return
                if text is None:
                    while not fake.released.wait(_HOLD_LOOK_S):
                        if fake.held.is_set():
                            return
                    text = NO_FACTS
                data = json.dumps(
                    {
                        "id": f"chatcmpl-{n}",
                        "object": "chat.completion",
                        "created": 0,
                        "model": "gpt-4o-mini",
                        "choices": [
                            {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}
                        ],
                        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                    }
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def arrived(self, n: int) -> bool:
        with self.arriving:
            return len(self.requests) >= n

    def release(self) -> None:
        self.released.set()

    def close(self) -> None:
        self.held.set()
        self.server.shutdown()
        self.server.server_close()
