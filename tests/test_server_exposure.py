"""What the server shows beyond this process: no CORS unless configured (and then only for the
origins named), and a non-loopback bind still refuses every request without a valid token.
Real uvicorn servers on a thread, real httpx requests."""

from __future__ import annotations

import socket

import httpx
import pytest

import syncd

from .daemon_helpers import isolate_git_identity
from .server_helpers import served_in_thread

APP = "http://app.example"
PREFLIGHT = {"Origin": APP, "Access-Control-Request-Method": "GET", "Access-Control-Request-Headers": "authorization"}


@pytest.fixture
def home(tmp_path, monkeypatch):
    isolate_git_identity(tmp_path, monkeypatch)
    return syncd.init(tmp_path / "home").home


def _allowed_origin(response: httpx.Response) -> str | None:
    return response.headers.get("access-control-allow-origin")


def test_no_cors_unless_configured(home, embedder):
    with served_in_thread(home, embedder) as served, served.client(served.admin) as client:
        preflight = client.options("/memory/stats", headers=PREFLIGHT)
        answer = client.get("/memory/stats", headers={"Origin": APP})
        assert answer.status_code == 200
        assert _allowed_origin(preflight) is None and _allowed_origin(answer) is None


def test_cors_answers_only_the_configured_origins(home, embedder):
    with served_in_thread(home, embedder, cors_origins=(APP,)) as served, served.client(served.admin) as client:
        preflight = client.options("/memory/stats", headers=PREFLIGHT)
        assert preflight.status_code == 200 and _allowed_origin(preflight) == APP
        assert _allowed_origin(client.get("/memory/stats", headers={"Origin": APP})) == APP
        other = client.options("/memory/stats", headers={**PREFLIGHT, "Origin": "http://evil.example"})
        assert _allowed_origin(other) is None
        # A browser page of the allowed origin still needs the token: CORS opens nothing else.
        with served.client() as anonymous:
            refused = anonymous.get("/memory/stats", headers={"Origin": APP})
        assert refused.status_code == 401


def _outside_address() -> str | None:
    """An address of this machine other than loopback, if it has one."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # TEST-NET: nothing is sent, it only picks a route
        except OSError:
            return None
        address = probe.getsockname()[0]
    return None if address.startswith("127.") or address == "0.0.0.0" else address


def test_a_non_loopback_bind_still_needs_a_token(home, embedder):
    with served_in_thread(home, embedder, host="0.0.0.0") as served:
        port = httpx.URL(served.url).port
        address = _outside_address() or "127.0.0.1"
        url = f"http://{address}:{port}"
        with httpx.Client(base_url=url, timeout=60) as anonymous:
            assert anonymous.get("/health").status_code == 200
            assert anonymous.get("/memory/stats").status_code == 401
            assert anonymous.get("/memory/stats", headers={"Authorization": "Bearer nope"}).status_code == 401
            assert anonymous.post("/mcp", json={}).status_code == 401
        with httpx.Client(base_url=url, timeout=60, headers={"Authorization": f"Bearer {served.admin}"}) as admin:
            assert admin.get("/memory/stats").status_code == 200
            user_token = served.tokens.add("ana")[1]
        with httpx.Client(base_url=url, timeout=60, headers={"Authorization": f"Bearer {user_token}"}) as ana:
            assert ana.get("/memory/stats", params={"user_id": "bob"}).status_code == 403
