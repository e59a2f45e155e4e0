"""The servers: REST search latency next to the same searches in-process (one run, same home,
same queries), add throughput over REST with 8 clients (each add acknowledged only once it is
indexed and committed), and the MCP tool-call round trip over streamable HTTP.

    .venv/bin/python benchmarks/bench_server.py [--facts 100000] [--queries 200] [--adds 160]
                                                [--workdir DIR]

``--workdir`` keeps the generated, indexed home, so a second run measures at once. Prints
figures side by side; asserts nothing about time. Loopback only.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).parent))
from bench_index import DETAILS, SUBJECTS, VERBS, write_tree

import syncd
from syncd.home import Home
from syncd.server.serve import SERVER_FILE
from syncd.server.tokens import ADMIN_FILE, TokenStore


def pct(xs: list[float], p: float) -> float:
    return sorted(xs)[min(len(xs) - 1, int(len(xs) * p))] * 1000


def start_server(
    root: Path, env: dict[str, str] | None = None, verbose: bool = False
) -> tuple[subprocess.Popen, str, str]:
    """``syncd serve`` on the home (``env``: another revision's code, benchmarks/revisions.py;
    ``verbose``: its debug log in ``serve.err`` beside the home). A server that does not start
    within 600 s is stopped."""
    home = Home(root)
    # Where this code says where it serves, and where codes before the private folder said it
    # (.syncd/, with their admin token beside it): an --old revision may be either.
    places = [home.private_dir / SERVER_FILE, home.state_dir / SERVER_FILE]
    for place in places:
        place.unlink(missing_ok=True)
    err = open(root.parent / "serve.err", "w")  # noqa: SIM115 - the child owns it
    command = [
        sys.executable,
        "-m",
        "syncd",
        *(["-vv"] if verbose else []),
        "serve",
        "--home",
        str(root),
        "--port",
        "0",
    ]
    # Started beside the home, not in the checkout: `python -m` puts the working folder first on
    # sys.path, which would run this checkout's syncd whatever ``env`` names.
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=err, env=env, cwd=root.parent)
    deadline = time.monotonic() + 600
    while (info := next((place for place in places if place.exists()), None)) is None:
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            proc.wait()
            raise SystemExit(f"syncd serve did not start; see {root.parent / 'serve.err'}")
        time.sleep(0.1)
    import json

    url = json.loads(info.read_text())["url"]
    if info == places[1]:
        return proc, url, (info.parent / ADMIN_FILE).read_text(encoding="utf-8").strip()
    return proc, url, TokenStore.of(home).admin_token()


_RUN = os.urandom(3).hex()  # a rerun on a kept home must not find its facts already remembered
_WORDS = ["amber", "basalt", "cedar", "delta", "ember", "fjord", "garnet", "harbor", "indigo", "juniper"]


def sentences(n: int, seed: int) -> list[str]:
    """Distinct facts: far enough apart in meaning that deduplication keeps every one."""
    rng = random.Random(f"{_RUN}-{seed}")
    return [
        f"Writer {seed} ({_RUN}) filed {rng.choice(_WORDS)} {rng.choice(_WORDS)} crate {i}: "
        f"{rng.choice(VERBS)} {rng.choice(SUBJECTS)} {rng.choice(DETAILS)}."
        for i in range(n)
    ]


def run_writers(writer, clients: int = 8) -> float:
    """Run ``writer(k)`` on ``clients`` threads at once; the seconds until the last one ends."""
    threads = [threading.Thread(target=writer, args=(k,)) for k in range(clients)]
    t = time.perf_counter()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return time.perf_counter() - t


def add_in_process(engine, per_thread: int) -> float:
    """Acknowledged adds/s of MemoryManager(engine) with 8 writer threads (the same write path
    the server takes, without HTTP): the in-process figure next to the REST one."""
    from syncd.memory import MemoryManager

    manager = MemoryManager(engine)
    done = [0]

    def writer(k: int) -> None:
        for text in sentences(per_thread, 100 + k):
            if asyncio.run(manager.add_memory(text, f"p{k}")) is not None:
                done[0] += 1

    elapsed = run_writers(writer)  # first: done[0] is read once the writers are through
    return done[0] / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--facts", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--adds", type=int, default=160, help="adds over REST, split across 8 clients")
    parser.add_argument("--mcp-calls", type=int, default=100)
    parser.add_argument("--workdir", default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(args.workdir or tmp) / "home"
        if not (root / ".syncd").is_dir():
            root = syncd.init(root).home
            write_tree(root, args.facts, 0)
        rng = random.Random(1)
        queries = [f"{rng.choice(VERBS)} {rng.choice(SUBJECTS)} {rng.choice(DETAILS)}" for _ in range(args.queries)]
        with syncd.open(root) as engine:
            start = time.perf_counter()
            engine.sync()
            engine.commit()
            facts = engine.counts()["facts"]
            print(
                f"home: {root}, {facts} facts (indexed in {time.perf_counter() - start:.0f} s), cpus {os.cpu_count()}"
            )
            engine.search(queries[0], user_id="u3", limit=10)
            local = []
            for q in queries:
                t = time.perf_counter()
                engine.search(q, user_id="u3", limit=10)
                local.append(time.perf_counter() - t)
            # The very call the server makes for GET /memory/archival, on a loop of its own:
            # the REST figure minus this one is what HTTP, auth and JSON cost.
            from syncd.memory import MemoryManager

            manager = MemoryManager(engine)
            loop = asyncio.new_event_loop()
            managed = []
            for q in queries:
                t = time.perf_counter()
                loop.run_until_complete(manager.search_memories(q, 10, user_id="u3"))
                managed.append(time.perf_counter() - t)
            loop.close()
            local_adds = add_in_process(engine, max(args.adds // 8, 1))
        proc, url, token = start_server(root)
        try:
            headers = {"Authorization": f"Bearer {token}"}
            with httpx.Client(base_url=url, headers=headers, timeout=120) as client:
                client.get("/memory/archival", params={"query": queries[0], "user_id": "u3", "limit": 10})
                remote = []
                for q in queries:
                    t = time.perf_counter()
                    r = client.get("/memory/archival", params={"query": q, "user_id": "u3", "limit": 10})
                    remote.append(time.perf_counter() - t)
                    r.raise_for_status()
            print(f"search, user-scoped, limit 10, {len(queries)} queries, sequential:")
            print(
                f"  in-process Engine.search                 p50 {pct(local, 0.5):6.1f} ms  p95 {pct(local, 0.95):6.1f} ms"
            )
            print(
                f"  in-process MemoryManager.search_memories p50 {pct(managed, 0.5):6.1f} ms  p95 {pct(managed, 0.95):6.1f} ms"
            )
            print(
                f"  REST GET /memory/archival                p50 {pct(remote, 0.5):6.1f} ms  p95 {pct(remote, 0.95):6.1f} ms  "
                f"(+{pct(remote, 0.5) - pct(managed, 0.5):.1f} ms at p50, +{pct(remote, 0.95) - pct(managed, 0.95):.1f} ms "
                f"at p95 over the same call in-process)"
            )

            per_client = max(args.adds // 8, 1)
            acked: list[tuple[str, str]] = []
            errors: list[str] = []
            duplicates: list[str] = []
            lock = threading.Lock()

            def writer(k: int) -> None:
                with httpx.Client(base_url=url, headers=headers, timeout=300) as c:
                    for text in sentences(per_client, k):
                        r = c.post("/memory/archival", json={"content": text, "user_id": f"w{k}"})
                        with lock:
                            if r.status_code != 200:
                                errors.append(f"{r.status_code} {r.text[:100]}")
                            elif r.json()["fact"]:
                                acked.append((f"w{k}", r.json()["fact"]["id"]))
                            else:
                                duplicates.append(text)

            elapsed = run_writers(writer)
            from subprocess import run

            tree = run(["git", "-C", str(root), "grep", "-h", "-o", "m-[0-9a-f]\\{16\\}", "HEAD", "--", "memory/users"],
                       capture_output=True, text=True, check=False).stdout  # fmt: skip
            committed = sum(fid in tree for _, fid in acked)
            print(f"add in-process (MemoryManager(engine)), 8 threads: {local_adds:.1f} acknowledged adds/s")
            print(
                f"add over REST, 8 clients, {len(acked) + len(errors)} adds: {len(acked) / elapsed:.1f} acknowledged adds/s "
                f"({elapsed:.1f} s); in git HEAD: {committed}/{len(acked)}; already remembered: {len(duplicates)}; "
                f"errors: {len(errors)} {errors[:3]}"
            )

            async def mcp_round_trips() -> list[float]:
                import httpx2
                from mcp import Client
                from mcp.client.streamable_http import streamable_http_client

                http = httpx2.AsyncClient(headers=headers, timeout=120)
                times = []
                async with Client(streamable_http_client(f"{url}/mcp", http_client=http)) as client:
                    await client.call_tool("memory_search", {"query": queries[0], "user_id": "u3"})
                    for q in queries[: args.mcp_calls]:
                        t = time.perf_counter()
                        await client.call_tool("memory_search", {"query": q, "user_id": "u3", "limit": 10})
                        times.append(time.perf_counter() - t)
                    status = []
                    for _ in range(20):
                        t = time.perf_counter()
                        await client.call_tool("core_memory_get", {"user_id": "u3"})
                        status.append(time.perf_counter() - t)
                return times, status

            mcp_search, mcp_core = asyncio.run(mcp_round_trips())
            print(
                f"MCP over streamable HTTP, tool-call round trip: memory_search p50 {pct(mcp_search, 0.5):.1f} ms "
                f"p95 {pct(mcp_search, 0.95):.1f} ms; core_memory_get p50 {pct(mcp_core, 0.5):.1f} ms"
            )
        finally:
            proc.terminate()
            code = proc.wait(120)
            print(f"server stopped with exit code {code}")
    print(
        f"load: {os.getloadavg()[0]:.2f} (1-min average) at the end; median of in-process search "
        f"{statistics.median(local) * 1000:.1f} ms"
    )


if __name__ == "__main__":
    main()
