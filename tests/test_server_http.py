"""The HTTP connection of `syncd serve` (syncd/server/http.py) over raw sockets: a request's line
and headers are bounded in size, count and time, its body in time; every refusal is JSON in the
API's error shape; and a few clients trickling or flooding do not slow anyone else down."""

from __future__ import annotations

import json
import socket
import statistics
import threading
import time
from urllib.parse import urlsplit

import httpx
import pytest

import syncd
from syncd.server.http import MAX_HEAD_BYTES, MAX_HEADERS, MAX_URL_BYTES

from .daemon_helpers import isolate_git_identity
from .server_helpers import served_in_thread

HEADER_S, BODY_S = 2.0, 2.0


@pytest.fixture(scope="module")
def server(tmp_path_factory, embedder):
    mp = pytest.MonkeyPatch()
    isolate_git_identity(tmp_path_factory.mktemp("git"), mp)
    home = syncd.init(tmp_path_factory.mktemp("http") / "home").home
    try:
        with served_in_thread(home, embedder, server_header_timeout_s=HEADER_S, server_body_timeout_s=BODY_S) as s:
            yield s
    finally:
        mp.undo()


def _connect(server) -> socket.socket:
    parts = urlsplit(server.url)
    return socket.create_connection((parts.hostname, parts.port), timeout=30)


def _read_answer(sock: socket.socket, deadline: float) -> bytes:
    """Everything the server sends until it closes the connection (or ``deadline``)."""
    out = b""
    while time.monotonic() < deadline:
        sock.settimeout(max(0.05, deadline - time.monotonic()))
        try:
            data = sock.recv(65536)
        except (TimeoutError, ConnectionResetError):
            break
        if not data:
            break
        out += data
    return out


def _status_and_error(answer: bytes) -> tuple[int, dict]:
    head, _, body = answer.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    assert b"content-type: application/json" in head.lower(), head
    return status, json.loads(body)["error"]


def _ask(server, request: bytes, wait: float = 10) -> tuple[int, dict]:
    with _connect(server) as sock:
        try:
            sock.sendall(request)
        except (BrokenPipeError, ConnectionResetError):
            pass  # refused before it was all sent: the answer is still there to read
        return _status_and_error(_read_answer(sock, time.monotonic() + wait))


@pytest.mark.parametrize(
    ("request_bytes", "status"),
    [
        (b"GET /health?" + b"x" * (MAX_URL_BYTES + 10) + b" HTTP/1.1\r\nHost: x\r\n\r\n", 414),
        (b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (MAX_HEAD_BYTES * 3) + b"\r\n\r\n", 431),
        (b"GET /health HTTP/1.1\r\n" + b"".join(b"X-%d: 1\r\n" % i for i in range(MAX_HEADERS + 5)) + b"\r\n", 431),
        (b"NOT HTTP AT ALL\r\n\r\n", 400),
    ],
    ids=["long-url", "big-header", "many-headers", "garbage"],
)
def test_an_oversized_or_broken_request_is_refused_in_json(server, request_bytes, status):
    got, error = _ask(server, request_bytes)
    assert got == status and error["type"] and error["message"], error
    assert httpx.get(f"{server.url}/health").status_code == 200


def test_headers_and_bodies_have_a_deadline(server):
    with _connect(server) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")  # and never the blank line
        started = time.monotonic()
        status, error = _status_and_error(_read_answer(sock, started + HEADER_S + 10))
        assert status == 408 and "headers" in error["message"] and time.monotonic() - started < HEADER_S + 5
    with _connect(server) as sock:
        head = (b"POST /memory/archival HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b"Authorization: Bearer " + server.admin.encode() + b"\r\nContent-Length: 100\r\n\r\n{")  # fmt: skip
        sock.sendall(head)
        started = time.monotonic()
        status, error = _status_and_error(_read_answer(sock, started + BODY_S + 10))
        assert status == 408 and "body" in error["message"] and time.monotonic() - started < BODY_S + 5
    assert httpx.get(f"{server.url}/health").status_code == 200


def _health_latencies(server, n: int) -> list[float]:
    times = []
    with httpx.Client(base_url=server.url, timeout=60) as client:
        for _ in range(n):
            started = time.monotonic()
            assert client.get("/health").status_code == 200
            times.append(time.monotonic() - started)
            time.sleep(0.02)  # samples spread over the attack, not a burst of back-to-back requests
    return times


def _p95(times: list[float]) -> float:
    return statistics.quantiles(times, n=20)[-1]


def test_a_few_slow_or_flooding_clients_do_not_slow_the_others(server):
    """Two clients trickle headers, two trickle a body, one streams a 100 MB header as fast as it
    can: each is cut off within its deadline, and /health answers the others as fast as before."""
    baseline = _p95(_health_latencies(server, 40))
    outcomes: dict[str, tuple[float, bytes]] = {}
    attacking = {name: threading.Event() for name in ("headers-1", "headers-2", "body-1", "body-2", "flood")}

    def trickle(name: str, head: bytes, drip: bytes) -> None:
        with _connect(server) as sock:
            started = time.monotonic()
            sock.sendall(head)
            attacking[name].set()
            sock.setblocking(False)
            answer = b""
            while time.monotonic() - started < 15:  # the client's own deadline
                try:
                    sock.sendall(drip)
                    answer += sock.recv(65536)
                    if answer:
                        break
                except BlockingIOError:
                    pass
                except OSError:
                    break
                time.sleep(0.05)  # a slow client's drip: the slowness is the attack
            sock.setblocking(True)
            answer += _read_answer(sock, time.monotonic() + 2)
            outcomes[name] = (time.monotonic() - started, answer)

    def flood() -> None:
        with _connect(server) as sock:
            started = time.monotonic()
            chunk = b"a" * 65536
            try:
                sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Flood: ")
                attacking["flood"].set()
                for _ in range(100 * 16):  # 100 MB, unless the server stops reading
                    sock.sendall(chunk)
                    if time.monotonic() - started > 20:
                        break
            except OSError:
                pass
            outcomes["flood"] = (time.monotonic() - started, _read_answer(sock, time.monotonic() + 2))

    body_head = (b"POST /memory/archival HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nAuthorization: Bearer "
                 + server.admin.encode() + b"\r\nContent-Length: 100000\r\n\r\n")  # fmt: skip
    attackers = [
        threading.Thread(target=trickle, args=("headers-1", b"GET /health HTTP/1.1\r\n", b"X")),
        threading.Thread(target=trickle, args=("headers-2", b"GET /health HTTP/1.1\r\nHost: x\r\n", b"Y")),
        threading.Thread(target=trickle, args=("body-1", body_head, b" ")),
        threading.Thread(target=trickle, args=("body-2", body_head, b" ")),
        threading.Thread(target=flood),
    ]
    for a in attackers:
        a.start()
    # /health is measured once every attacker is connected and sending.
    assert all(event.wait(30) for event in attacking.values()), [n for n, e in attacking.items() if not e.is_set()]
    during = _p95(_health_latencies(server, 40))
    for a in attackers:
        a.join(40)
    print(f"/health p95: {baseline * 1000:.1f} ms alone, {during * 1000:.1f} ms beside the slow clients")
    assert set(outcomes) == {"headers-1", "headers-2", "body-1", "body-2", "flood"}
    for name, (took, answer) in outcomes.items():
        limit = HEADER_S if name.startswith("headers") else BODY_S
        assert answer, f"{name} was never cut off (the client gave up after {took:.1f} s)"
        status, _ = _status_and_error(answer)
        assert status == (431 if name == "flood" else 408), (name, answer[:300])
        assert took < (5 if name == "flood" else limit + 4), (name, took)
    # Generous: the point is seconds of stall (14 s before the bounds), not milliseconds.
    assert during < max(0.5, 10 * baseline), (baseline, during)
