"""Helpers for the server tests: `syncd serve` on a thread of this process (sharing the test
model) or as its own process, on 127.0.0.1 with a free port, and httpx clients with a token."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

import syncd
from syncd.config import Settings
from syncd.home import Home
from syncd.server.serve import SERVER_FILE, ServerHandle, serve
from syncd.server.tokens import TokenStore

from .daemon_helpers import wait_for, warm_embed_cache

FAKE_FACTS = {"facts": [{"content": "Is training for the Lyon marathon.", "category": "goal", "importance": 0.6}]}


@dataclass
class Served:
    home: Path
    url: str
    admin: str
    tokens: TokenStore

    def client(self, token: str | None = None, **kwargs) -> httpx.Client:
        headers = {} if token is None else {"Authorization": f"Bearer {token}"}
        return httpx.Client(base_url=self.url, headers=headers, timeout=60, **kwargs)


@asynccontextmanager
async def mcp_over_http(served: Served, token: str) -> AsyncIterator[Client]:
    """An MCP session (the SDK's own client) over streamable HTTP at ``/mcp``, as ``token``. The
    SDK leaves an HTTP client it was handed open (the caller's to close): it is closed here with
    the session, else its socket stays open until collected (a ResourceWarning)."""
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60) as http:
        async with Client(streamable_http_client(f"{served.url}/mcp", http_client=http)) as client:
            yield client


def mcp_over_stdio(home: Path, *extra: str, command: Sequence[str] = (sys.executable, "-m", "syncd")) -> Client:
    """An MCP client (the SDK's own) of `syncd mcp` over stdio on ``home``, in a process of its
    own (``command`` runs syncd: another one, say, that drops root's powers)."""
    # The child gets only a minimal environment: say which syncd (this tree) and where git's config is.
    env = {k: os.environ[k] for k in ("PYTHONPATH", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_NOSYSTEM") if k in os.environ}
    return Client(
        StdioServerParameters(
            command=command[0],
            args=[*command[1:], "mcp", "--home", str(home), *extra],
            env=env,
            cwd=str(Path(syncd.__file__).parent.parent),
        )
    )


async def call_tool(client, name: str, **arguments):
    """An MCP tool's answer as JSON, or ``{"error": text}`` when the tool reported an error."""
    result = await client.call_tool(name, arguments)
    text = result.content[0].text
    if result.is_error:
        return {"error": text}
    return json.loads(text)


@contextmanager
def served_in_thread(
    home: Path, embedder, *, host: str = "127.0.0.1", cors_origins: tuple[str, ...] = (), **settings
) -> Iterator[Served]:
    """A real server (uvicorn, daemon, LanceDB, git) on a thread, on ``host`` with a free port;
    the LLM answers with FAKE_FACTS through litellm's own mock_response."""
    warm_embed_cache(home, embedder)
    handle = ServerHandle()
    options = {"job_llm_options": {"extract": {"mock_response": json.dumps(FAKE_FACTS)}}}
    config = Settings(llm_model="gpt-4o-mini", **settings)
    errors: list[BaseException] = []

    def run() -> None:
        try:
            serve(home, config, host, 0, embedder=embedder, handle=handle, manager_options=options, graceful_s=10,
                  cors_origins=cors_origins)  # fmt: skip
        except BaseException as exc:  # noqa: BLE001 - reported by the fixture
            errors.append(exc)
            handle.ready.set()

    thread = threading.Thread(target=run, name="syncd-serve", daemon=True)
    thread.start()
    assert handle.ready.wait(120), "the server did not start"
    assert not errors, errors
    try:
        tokens = TokenStore.of(Home(home))
        yield Served(home, handle.url, tokens.admin_token(), tokens)
    finally:
        handle.stop()
        thread.join(60)
        assert not thread.is_alive(), "the server did not stop"


def start_serve_process(home: Path, *extra: str) -> subprocess.Popen:
    """`syncd serve --port 0` in its own process; its stderr goes to a file next to the home (the
    child's own copy of the descriptor: ours is closed at once, not leaked)."""
    with open(home.parent / f"serve-{time.monotonic_ns()}.err", "w+") as err:
        return subprocess.Popen(
            [sys.executable, "-m", "syncd", "serve", "--home", str(home), "--port", "0", *extra],
            stdout=subprocess.DEVNULL,
            stderr=err,
            text=True,
            env=os.environ.copy(),
        )


def server_url(home: Path, proc: subprocess.Popen, timeout: float = 120) -> str:
    info = Home(home).private_dir / SERVER_FILE
    wait_for(lambda: info.exists() or proc.poll() is not None, timeout, "the server to listen")
    assert proc.poll() is None, f"syncd serve exited with {proc.returncode}"
    return json.loads(info.read_text())["url"]
