"""Many servers, one index: a `syncd serve --read-only` process over a git clone of the home reads
the PostgreSQL index the home's writer keeps, sees each acknowledged write within a bounded
delay, answers stats and core blocks, refuses writes, and answers 503 while the database is down."""

from __future__ import annotations

import asyncio
import subprocess
import time

import httpx

import syncd
from syncd.config import Settings
from syncd.home import Home
from syncd.memory import MemoryManager
from syncd.server.tokens import TokenStore

from .helpers import wait_for, write
from .pg_fixtures import start_reader

LOG = "memory/users/ana/2026-11-28.md"
# Far above the delays measured (benchmarks/bench_postgres.py: tens of milliseconds): a bound that
# only a reader that never sees the write breaks.
_SEEN_WITHIN_S = 30.0


def _git(cwd, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def test_a_read_only_server_sees_every_acknowledged_write(pg_server, pg_home, embedder, tmp_path):
    write(pg_home, LOG, "# 2026-11-28\n\n## 10:00\n\n- [fact] Green tea in the morning.\n")
    write(pg_home, "memory/users/ana/core/user.md", "Ana, a nurse in Lyon.\n")
    with syncd.open(pg_home, embedder=embedder) as writer:
        writer.sync()
        writer.commit()
        url, schema = _git(pg_home, "config", "syncd.index"), writer.index.schema
        clone = tmp_path / "clone"
        _git(tmp_path, "clone", "-q", str(pg_home), str(clone))
        reader, base = start_reader(clone, url, schema)
        token = TokenStore.of(Home(clone)).admin_token()
        client = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=60)
        try:
            delays = []
            for n in range(4):
                word = f"quokka{n}zz"
                size = (pg_home / LOG).stat().st_size
                writer.append_file(LOG, f"- [fact] Saw a {word} today.\n".encode(), size)
                acknowledged = time.monotonic()

                def seen(word: str = word) -> bool:
                    hits = client.get("/memory/archival", params={"query": word, "user_id": "ana"}).json()["hits"]
                    return any(word in hit["content"] for hit in hits)

                wait_for(seen, _SEEN_WITHIN_S, f"the reader to see {word}", every=0.01)
                delays.append(time.monotonic() - acknowledged)
            stats = client.get("/memory/stats", params={"user_id": "ana"})
            assert stats.status_code == 200, stats.text
            core = client.get("/memory/core", params={"user_id": "ana"})
            assert core.status_code == 200 and "nurse in Lyon" in core.text, core.text
            refused = client.post("/memory/archival", json={"content": "Likes miso.", "user_id": "ana"})
            assert refused.status_code == 403 and "only reads" in refused.text, refused.text
            # The reader wrote nothing: the clone is as it was cloned, and the shared index holds
            # exactly the writer's rows.
            assert _git(clone, "status", "--porcelain") == ""
            assert writer.index.counts()["facts"] == 5
            # The database down: a reader says so (503, retry later), then answers again once it is back.
            pg_server.stop()
            try:
                down = client.get("/memory/archival", params={"query": "tea", "user_id": "ana"})
            finally:
                pg_server.start()
            assert down.status_code == 503 and "cannot be reached" in down.text, down.text
            assert down.headers.get("retry-after") == "1"
            back = client.get("/memory/archival", params={"query": "tea", "user_id": "ana"})
            assert back.status_code == 200 and back.json()["hits"], back.text
        finally:
            client.close()
            reader.terminate()
            reader.wait(30)


def test_an_agent_s_memory_manager_on_a_postgresql_home_indexes_what_it_writes(pg_home, embedder):
    """``MemoryManager(home)`` opens a read-only engine whose changes borrow the home's lock and
    index what they wrote (no daemon holds the home). Its PostgreSQL index was opened as a
    reader's, which refuses every write: each fact was saved, then answered "saved but not
    indexed: this index was opened read-only"; and on a new home (`syncd init --index`, no
    writer run yet) its first use said "there is no index ... yet". The agent makes the schema
    then, as the writer would; `syncd search` and `status` still never do (test_pg_faults)."""
    settings = Settings(core_refresh_importance=0.99)
    with MemoryManager(pg_home, settings, embedder=embedder, default_user_id="ana") as memory:
        for text in ("Cycles to work every day.", "Keeps bees on the roof."):
            assert asyncio.run(memory.add_memory(text)) is not None
        hits = memory.engine.search("bees on the roof", user_id="ana", kind="fact")
        assert hits and hits[0].content == "Keeps bees on the roof."
