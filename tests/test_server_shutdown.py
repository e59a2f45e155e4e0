"""`syncd serve` as its own process: SIGTERM answers the requests in flight, commits, releases the
lock and exits 0 (a request it had not read yet is refused and leaves nothing); a second server on
the same home is refused, naming the first."""

from __future__ import annotations

import datetime as dt
import re
import signal
import subprocess
import sys
import threading
import time

import httpx

import syncd
from syncd.control.protocol import socket_path
from syncd.home import Home
from syncd.server.serve import SERVER_FILE
from syncd.server.tokens import TokenStore

from .daemon_helpers import git, isolate_git_identity, warm_embed_cache
from .helpers import wait_for
from .server_helpers import server_url, start_serve_process


def _kite_adders(client: httpx.Client, count: int, answers: list, unread: list) -> list[threading.Thread]:
    """``count`` threads, each adding one fact over REST: its answer goes to ``answers``, or its
    number to ``unread`` when the server closed the connection before reading the request."""

    def add(n: int) -> None:
        try:
            answers.append(
                client.post(
                    "/memory/archival",
                    json={"content": f"Fact number {n} about kites.", "user_id": "ana", "dedup": False},
                )
            )
        except httpx.TransportError:
            unread.append(n)

    return [threading.Thread(target=add, args=(n,)) for n in range(count)]


def test_sigterm_answers_in_flight_requests_commits_and_exits_0(tmp_path, monkeypatch, embedder):
    isolate_git_identity(tmp_path, monkeypatch)
    home = syncd.init(tmp_path / "home").home
    warm_embed_cache(home, embedder)
    proc = start_serve_process(home)
    try:
        url = server_url(home, proc)
        token = TokenStore.of(Home(home)).admin_token()
        second = subprocess.run(
            [sys.executable, "-m", "syncd", "serve", "--home", str(home), "--port", "0"],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert second.returncode == 1 and "only one writer" in second.stderr and str(proc.pid) in second.stderr
        answers: list[httpx.Response] = []
        # Requests the server had not read when the signal came: uvicorn closes a connection with
        # no request begun on it as it stops, and the client sees it reset. Not in flight, so not
        # answered; what such a request must not have done is write anything (checked below).
        unread: list[int] = []
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=60) as client:
            client.post("/memory/archival", json={"content": "Warm-up fact.", "user_id": "ana"})

            writers = _kite_adders(client, 6, answers, unread)
            for w in writers:
                w.start()
            # Once the server is busy with them, ask it to stop: each request is still answered.
            log = home / f"memory/users/ana/{dt.date.today()}.md"
            wait_for(lambda: "kites" in log.read_text(), 60, "the server's first add in the daily log", every=0.01)
            proc.send_signal(signal.SIGTERM)
            for w in writers:
                w.join(60)
            assert proc.wait(60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    acknowledged = [r.json()["fact"]["id"] for r in answers if r.status_code == 200]
    assert acknowledged, [r.text for r in answers]  # the request in flight at the signal, at least
    assert len(answers) + len(unread) == 6
    committed = git(home, "show", f"HEAD:memory/users/ana/{dt.date.today()}.md")
    assert all(fid in committed for fid in acknowledged)
    on_disk = (home / f"memory/users/ana/{dt.date.today()}.md").read_text()
    assert not [n for n in unread if f"Fact number {n} about" in committed + on_disk], (unread, on_disk)
    assert git(home, "status", "--porcelain", "memory") == ""
    assert not (Home(home).private_dir / SERVER_FILE).exists() and not socket_path(home).exists()
    with syncd.open(home, embedder=embedder) as engine:  # the lock is free again
        assert engine.status().fresh


def _unindexed_logs(home, files: int, facts_per_file: int) -> dict[str, bytes]:
    """Daily logs a person wrote and committed while no daemon ran: the server's first reconcile
    must index them, embedding every fact (none is in the embedding cache)."""
    written = {}
    for n in range(files):
        day = dt.date(2025, 1, 1) + dt.timedelta(days=n)
        lines = [f"# {day}", "", "## 09:00"]
        lines += [f"- [note] Shelf {n} holds jar {k} of {k * 7 + n} dried herbs from plot {n}-{k}." for k in range(facts_per_file)]  # fmt: skip
        rel = f"memory/users/bo/{day}.md"
        (home / rel).parent.mkdir(parents=True, exist_ok=True)
        (home / rel).write_text("\n".join(lines) + "\n")
        written[rel] = (home / rel).read_bytes()
    git(home, "add", "-A")
    git(home, "commit", "-q", "-m", "Bo's shelves")
    return written


def test_sigterm_during_the_startup_reconcile_gives_it_up_answers_the_writes_and_exits_promptly(
    tmp_path, monkeypatch, embedder
):
    """A server stopped while its first reconcile indexes a large tree (thousands of facts to
    embed: in a home of 100,000 facts on a busy machine it ran for tens of seconds) gives the
    reconcile up at its next slice of work instead of finishing it, so the adds in flight, which
    wait for the write turn the reconcile holds, are answered and committed at once, and the
    process exits. The person's files stay as they are, to be indexed by the next start."""
    isolate_git_identity(tmp_path, monkeypatch)
    home = syncd.init(tmp_path / "home").home
    warm_embed_cache(home, embedder)
    logs = _unindexed_logs(home, files=200, facts_per_file=30)
    proc = start_serve_process(home)
    answers: list[httpx.Response] = []
    unread: list[int] = []
    try:
        url = server_url(home, proc)
        token = TokenStore.of(Home(home)).admin_token()
        daemon_log = home / ".syncd" / "daemon.log"
        # The reconcile logs what it plans before it embeds anything (the vault's seed pages too).
        wait_for(lambda: re.search(r"sync: \d+ new", daemon_log.read_text()), 60, "the startup reconcile to begin")
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=120) as client:
            writers = _kite_adders(client, 4, answers, unread)
            for w in writers:
                w.start()
            # Let the adds reach the server, where they wait for the write turn the reconcile holds.
            time.sleep(1.0)
            signalled = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(120) == 0
            stop_s = time.monotonic() - signalled
            for w in writers:
                w.join(60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(60)
    told = daemon_log.read_text()
    acknowledged = [r.json()["fact"]["id"] for r in answers if r.status_code == 200]
    assert len(answers) + len(unread) == 4 and acknowledged, ([r.text for r in answers], unread)
    committed = git(home, "show", f"HEAD:memory/users/ana/{dt.date.today()}.md")
    assert all(fid in committed for fid in acknowledged)
    assert git(home, "status", "--porcelain", "memory") == ""
    assert all((home / rel).read_bytes() == data for rel, data in logs.items())
    with syncd.open(home, embedder=embedder) as engine:  # the lock is free again
        status = engine.status()
        # What the reconcile had not reached is left for the next start to index, not lost.
        stale = set().union(*status.stale.values())
        assert stale & set(logs), (stop_s, status)
    assert "left a reconcile of" in told and "request(s) in flight to answer" in told, told[-3000:]
