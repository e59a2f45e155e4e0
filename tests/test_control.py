"""The daemon's local socket: same-user only, answers search and status from the live engine, is
cleaned up on exit and replaced when stale; `syncd search` uses it and loads nothing heavy."""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

import syncd
from syncd.cli import main
from syncd.config import Settings
from syncd.control.client import ask_daemon
from syncd.control.protocol import PROTOCOL_VERSION, encode, socket_path
from syncd.daemon.control import ControlServer
from syncd.daemon.loop import Daemon
from syncd.engine.search import search
from syncd.errors import RemoteError

from .daemon_helpers import daily_log, running_daemon, wait_for, warm_embed_cache
from .helpers import write
from .test_cli_light import heavy, imported_modules

FACTS = ["Likes green tea in the morning.", "Is allergic to peanuts.", "Has a cat called Miso."]


def _same_hits(wire: list[dict], local: list) -> None:
    assert [(h["id"], h["path"], h["line"]) for h in wire] == [(h.id, h.path, h.line) for h in local]
    for got, want in zip(wire, local):
        assert got["parts"]["semantic"] == pytest.approx(want.parts["semantic"], abs=1e-6)
        assert got["snippet"] == want.snippet()


def test_the_daemon_answers_over_a_private_socket_and_removes_it_on_exit(home, embedder):
    write(home, "memory/users/ana/2026-11-22.md", daily_log(FACTS))
    with running_daemon(home, embedder) as run:
        path = socket_path(home)
        wait_for(path.exists, 30, "the socket")
        assert stat.S_ISSOCK(path.stat().st_mode)
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        run.settle()

        pong = ask_daemon(home, "ping")
        assert pong["pid"] == os.getpid() and pong["protocol"] == PROTOCOL_VERSION
        assert pong["home"] == str(home.resolve())

        params = {"query": "green tea", "user_id": "ana", "chat_id": None, "limit": 3, "kind": "fact"}
        answer = ask_daemon(home, "search", params)
        # The one search (syncd.engine.search), as every front end answers it.
        _same_hits(answer["hits"], search(run.reader, "green tea", user_id="ana", limit=3, kind="fact"))
        assert answer["stale"] == 0
        assert "green tea" in answer["hits"][0]["content"]

        status = ask_daemon(home, "status")
        assert status["fresh"] and status["facts"] == len(FACTS)

        with pytest.raises(RemoteError) as refused:
            ask_daemon(home, "search", {**params, "user_id": "../bob"})
        assert refused.value.kind == "InvalidIdError"
        run.stop()
    assert not path.exists()


def test_requests_outside_the_protocol_are_refused_with_a_reason(home, embedder):
    with syncd.open(home, read_only=True, embedder=embedder) as engine:
        server = ControlServer(engine)
        cases = {
            b"not json\n": "JSONDecodeError",
            encode({"v": 99, "method": "ping"}): "ProtocolError",
            encode({"v": PROTOCOL_VERSION, "method": "rm -rf"}): "ProtocolError",
            encode({"v": PROTOCOL_VERSION, "method": "search", "params": {"query": 3}}): "TypeError",
            encode({"v": PROTOCOL_VERSION, "method": "search", "params": {"query": "x", "evil": 1}}): "TypeError",
            encode(
                {"v": PROTOCOL_VERSION, "method": "search", "params": {"query": "x", "chat_id": "c"}}
            ): "InvalidInputError",
        }
        for line, kind in cases.items():
            answer = server.answer(line)
            assert answer["ok"] is False and answer["error"]["type"] == kind, (line, answer)


def test_syncd_search_asks_the_daemon_and_imports_no_index_or_model(home, embedder):
    write(home, "memory/users/ana/2026-11-22.md", daily_log(FACTS))
    with running_daemon(home, embedder) as run:
        run.settle()
        result, names = imported_modules(
            ["search", "peanuts", "--user", "ana", "--json", "--limit", "2", "--home", str(home)], home.parent
        )
        assert result.returncode == 0, result.stderr[-2000:]
        assert heavy(names) == [] and "numpy" not in names
        hits = json.loads(result.stdout)
        assert hits[0]["content"] == "Is allergic to peanuts."
        _same_hits(hits, search(run.reader, "peanuts", user_id="ana", limit=2))
        assert hits[0]["snippet"] == syncd.Hit(**{k: v for k, v in hits[0].items() if k != "snippet"}).snippet()


def test_search_through_the_daemon_still_says_when_the_index_is_stale(home, engine, capsys):
    engine.sync()
    with ControlServer(engine):
        write(home, "vault/New.md", "# New\n\nA page written after the sync.\n")
        assert main(["search", "page", "--wiki", "--home", str(home)]) == 0
    captured = capsys.readouterr()
    assert "1 file(s) changed since the index was updated; the running daemon is indexing them" in captured.err
    assert "vault/" in captured.out


def test_a_socket_left_by_a_killed_daemon_is_ignored_then_replaced(home, engine, capsys):
    engine.sync()
    path = socket_path(home)
    # What kill -9 leaves behind: the socket file, with nobody listening on it.
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(str(path))
    dead.close()
    assert path.exists()
    assert ask_daemon(home, "ping") is None
    assert main(["search", "schema", "--wiki", "--home", str(home), "--limit", "1"]) == 0
    assert "vault/schema.md" in capsys.readouterr().out
    with ControlServer(engine):
        assert ask_daemon(home, "ping")["pid"] == os.getpid()
    assert not path.exists()


def test_searches_during_index_writes_see_whole_batches(home, embedder):
    """Many searches on the socket while the daemon applies batch after batch: every answer is
    complete, and a file is either wholly in it or not at all."""
    with running_daemon(home, embedder) as run:
        run.settle()
        answers: list[dict] = []
        failures: list[BaseException] = []
        done = threading.Event()

        def search_until_done() -> None:
            params = {"query": "gardening fact", "user_id": "ana", "chat_id": None, "limit": 50, "kind": "fact"}
            while not done.is_set():
                try:
                    answers.append(ask_daemon(home, "search", params))
                except BaseException as exc:  # noqa: BLE001 - reported below
                    failures.append(exc)

        searchers = [threading.Thread(target=search_until_done) for _ in range(2)]
        for thread in searchers:
            thread.start()
        try:
            for day in range(1, 9):
                facts = [f"Gardening fact {day}-{n}: plants need water." for n in range(5)]
                write(home, f"memory/users/ana/2026-10-{day:02d}.md", daily_log(facts, f"2026-10-{day:02d}"))
                wait_for(
                    lambda d=day: run.engine.index.files().get(f"memory/users/ana/2026-10-{d:02d}.md"),
                    60,
                    f"day {day} indexed",
                )
        finally:
            done.set()
            for thread in searchers:
                thread.join(timeout=60)
        assert not failures, failures
        assert answers and all(a is not None for a in answers)
        for answer in answers:
            per_file: dict[str, int] = {}
            for hit in answer["hits"]:
                per_file[hit["path"]] = per_file.get(hit["path"], 0) + 1
            assert all(count == 5 for count in per_file.values()), per_file
        final = ask_daemon(home, "search", {"query": "gardening fact", "user_id": "ana", "limit": 50, "kind": "fact"})
        assert len(final["hits"]) == 40


def test_the_daemon_loads_the_model_at_start(home, embedder):
    """Nothing to embed at start (all cached), yet the model is ready before the first change."""
    warm_embed_cache(home, embedder)
    with syncd.open(home, embedder=embedder) as first:
        first.sync()
    settings = Settings()
    with syncd.open(home, settings=settings) as engine:
        backend = engine.embedder.embedder
        assert not backend.loaded
        daemon = Daemon(engine, settings, serve=False)
        thread = threading.Thread(target=daemon.run, daemon=True)
        thread.start()
        try:
            wait_for(lambda: daemon.reconciles >= 1, 120, "the startup reconcile")
            assert engine.embedder.calls == 0  # the reconcile embedded nothing ...
            assert backend.loaded  # ... and still the model is in memory
        finally:
            daemon.stop()
            thread.join(timeout=60)


def test_the_client_imports_nothing_heavy():
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import syncd.control.client"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    names = {line.rsplit("|", 1)[1].strip() for line in result.stderr.splitlines() if line.startswith("import time:")}
    assert "syncd.control.client" in names
    assert not {n.split(".")[0] for n in names} & {"lancedb", "numpy", "pyarrow", "pydantic", "git", "fastembed"}


_PING_AS_NOBODY = """
import json, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sys.argv[1])
try:
    s.sendall(json.dumps({"v": 1, "method": "ping", "params": {}}).encode() + b"\\n")
    print(repr(s.recv(65536)))
except (BrokenPipeError, ConnectionResetError):
    print("b''")  # closed on us before we were done asking
"""


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None or not Path("/usr/bin/python3").exists(),
    reason="needs root, setpriv and a system python to act as another user",
)
def test_another_user_is_refused_even_when_the_socket_is_opened_to_them(embedder):
    top = Path(tempfile.mkdtemp(prefix="syncd-peer-"))
    try:
        home = syncd.init(top / "home").home
        with syncd.open(home, embedder=embedder) as engine, ControlServer(engine):
            path = socket_path(home)
            # Undo every filesystem guard, so only the server's own peer check stands.
            for folder in (top, home, home / ".git", path.parent):
                folder.chmod(0o755)
            path.chmod(0o666)
            as_nobody = ["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups", "/usr/bin/python3"]
            result = subprocess.run(
                [*as_nobody, "-c", _PING_AS_NOBODY, str(path)], capture_output=True, text=True, timeout=60
            )
            assert result.returncode == 0, result.stderr
            assert result.stdout.strip() == "b''"  # closed without an answer
            assert ask_daemon(home, "ping")["pid"] == os.getpid()  # while its owner is answered
    finally:
        shutil.rmtree(top, ignore_errors=True)
