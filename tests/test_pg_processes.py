"""A PostgreSQL index under real processes: the home's writer (`syncd serve`) and a `--read-only`
reader on a git clone, each in its own process, while the database stops and starts again and
the writer dies by kill -9 in the middle of a stream of adds.

Nothing acknowledged is lost: every add the writer answered (200: indexed and committed; 507 while
the database was down: saved and committed, the index behind) is in git, reaches the reader once
the database is back and a new writer has started, and the index then equals a rebuild."""

from __future__ import annotations

import json
import signal
import subprocess
import threading
import time

import httpx

import syncd
from syncd.home import Home
from syncd.server.serve import SERVER_FILE
from syncd.server.tokens import TokenStore

from .daemon_helpers import wait_for
from .helpers import write
from .pg_fixtures import start_reader
from .server_helpers import start_serve_process
from .test_pg_index import assert_same, pg_snapshot

LOG = "memory/users/ana/2026-11-28.md"
_SEEN_WITHIN_S = 60.0


def _git(cwd, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def _writer(home) -> tuple[subprocess.Popen, httpx.Client]:
    """`syncd serve` on ``home`` and an admin client of it, once it listens (its own server file:
    a killed writer's is left behind)."""
    proc = start_serve_process(home)
    info = Home(home).private_dir / SERVER_FILE

    def listening() -> bool:
        assert proc.poll() is None, f"syncd serve exited with {proc.returncode}"
        try:
            return json.loads(info.read_text())["pid"] == proc.pid
        except (OSError, ValueError):  # not written yet, or half
            return False

    wait_for(listening, 120, "the writer to listen")
    token = TokenStore.of(Home(home)).admin_token()
    url = json.loads(info.read_text())["url"]
    return proc, httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=60)


def _add(client: httpx.Client, word: str) -> int:
    answer = client.post(
        "/memory/archival", json={"content": f"Saw a {word} near the river.", "user_id": "ana", "dedup": False}
    )
    return answer.status_code


def test_kill_9_and_a_database_restart_lose_nothing_a_reader_sees_it_all(pg_server, pg_home, embedder, tmp_path):
    write(pg_home, LOG, "# 2026-11-28\n\n## 10:00\n\n- [fact] Green tea in the morning.\n")
    with syncd.open(pg_home, embedder=embedder) as engine:
        engine.sync()
        engine.commit()
        url, schema = _git(pg_home, "config", "syncd.index"), engine.index.schema
    clone = tmp_path / "clone"
    _git(tmp_path, "clone", "-q", str(pg_home), str(clone))
    reader, base = start_reader(clone, url, schema)
    writer, client = _writer(pg_home)
    kept: list[str] = []  # every add the writer answered as written (indexed, or saved while the database was down)
    token = TokenStore.of(Home(clone)).admin_token()
    readers = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=60)
    try:

        def seen(word: str) -> bool:
            answer = readers.get("/memory/archival", params={"query": word, "user_id": "ana"})
            return answer.status_code == 200 and any(word in h["content"] for h in answer.json()["hits"])

        for n in range(2):
            assert _add(client, f"quokka{n}zz") == 200
            kept.append(f"quokka{n}zz")
        # The database stops during writes: the writes are saved and committed, the index behind.
        pg_server.stop()
        try:
            for n in range(2, 4):
                status = _add(client, f"quokka{n}zz")
                assert status in (200, 507), status
                kept.append(f"quokka{n}zz")
        finally:
            pg_server.start()
        # A stream of adds, and the writer killed in its middle.
        acknowledged: list[str] = []
        stop = threading.Event()

        def stream() -> None:
            for n in range(4, 200):
                if stop.is_set():
                    return
                try:
                    status = _add(client, f"quokka{n}zz")
                except httpx.HTTPError:
                    return  # the writer is gone: this add was never acknowledged
                if status == 200:
                    acknowledged.append(f"quokka{n}zz")

        adding = threading.Thread(target=stream)
        adding.start()
        wait_for(lambda: len(acknowledged) >= 3, 120, "three acknowledged adds")
        writer.send_signal(signal.SIGKILL)
        writer.wait(30)
        stop.set()
        adding.join(60)
        kept += acknowledged
        committed = _git(pg_home, "log", "-p", "--", "memory/users/ana")
        assert [word for word in kept if word not in committed] == [], "acknowledged adds not committed"
        # A new writer catches up by itself; the reader then finds every add.
        client.close()
        writer, client = _writer(pg_home)
        started = time.monotonic()
        for word in kept:
            wait_for(lambda w=word: seen(w), _SEEN_WITHIN_S, f"the reader to see {word}")
        caught_up = time.monotonic() - started
        print(f"reader saw all {len(kept)} kept adds {caught_up:.2f} s after the new writer started")
    finally:
        client.close()
        readers.close()
        writer.terminate()
        writer.wait(60)
        reader.terminate()
        reader.wait(30)
    with syncd.open(pg_home, embedder=embedder) as engine:
        assert engine.status().fresh  # the writer brought the index level by itself
        before = pg_snapshot(engine)
        texts = {row["text"] for row in before[1]}
        assert all(f"Saw a {word} near the river." in texts for word in kept)
        engine.reindex()
        assert_same(pg_snapshot(engine), before)
