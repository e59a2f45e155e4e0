"""Adds over REST with 8 clients, codes side by side: acknowledged adds/s and the CPU each add costs
(the server's own and its git children's, read from /proc), and REST search p50/p95 before the adds,
this checkout against an older revision, alternated on copies of one home.

    .venv/bin/python benchmarks/bench_adds.py --home HOME [--old REV] [--new REV|DIR] [--adds 240]
                                              [--rounds 2] [--queries 100]

``HOME`` is an indexed home to copy for every run (e.g. the one ``bench_server.py --workdir DIR``
keeps: DIR/home); each run starts ``syncd serve`` of its code on a fresh copy, warms it with one
search and one add per client, times ``--queries`` user-scoped searches one after another (the same
queries for every code), then ``--adds`` adds split over 8 clients. ``--new`` measures a
revision (or a folder holding a ``syncd`` package) in place of this checkout: the working tree
is shared, and what others have not committed yet would otherwise be measured too. The older code
must read the home's index as it is (a revision with another index layout rebuilds it first,
which this does not time but you will wait for). Prints figures side by side; asserts nothing
about time. Loopback only.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).parent))
from bench_index import DETAILS, SUBJECTS, VERBS
from bench_server import pct, run_writers, sentences, start_server
from revisions import REPO, env_for, extract

CLIENTS = 8


def _cpu(pid: int) -> tuple[float, float]:
    """CPU seconds of ``pid`` itself and of its children it has waited for (git's processes)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / tick, (int(fields[13]) + int(fields[14])) / tick


def measure(code: Path, home: Path, work: Path, adds: int, seed: int, queries: int) -> tuple[float, ...]:
    """(adds/s, server CPU ms per add, git CPU ms per add, search p50 ms, search p95 ms) of
    ``code``'s server on a copy of ``home``."""
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    shutil.copytree(home, work / "home", symlinks=True)
    proc, url, token = start_server(work / "home", env=env_for(code))
    headers = {"Authorization": f"Bearer {token}"}
    try:
        with httpx.Client(base_url=url, headers=headers, timeout=300) as client:
            client.get("/memory/archival", params={"query": "warm", "user_id": "w0"})
            for k in range(CLIENTS):
                client.post("/memory/archival", json={"content": f"warm up fact {k} {seed}", "user_id": f"w{k}"})
            rng = random.Random(1)
            took = []
            for _ in range(queries):
                query = f"{rng.choice(VERBS)} {rng.choice(SUBJECTS)} {rng.choice(DETAILS)}"
                start = time.perf_counter()
                client.get("/memory/archival", params={"query": query, "user_id": "u3", "limit": 10}).raise_for_status()
                took.append(time.perf_counter() - start)
        own, kids = _cpu(proc.pid)
        per_client = max(adds // CLIENTS, 1)

        def writer(k: int) -> None:
            with httpx.Client(base_url=url, headers=headers, timeout=300) as client:
                for text in sentences(per_client, 1000 * seed + k):
                    answer = client.post("/memory/archival", json={"content": text, "user_id": f"w{k}"})
                    answer.raise_for_status()

        elapsed = run_writers(writer, CLIENTS)
        own_after, kids_after = _cpu(proc.pid)
    finally:
        proc.terminate()
        proc.wait(60)
    done = per_client * CLIENTS
    searched = (pct(took, 0.5), pct(took, 0.95)) if took else (float("nan"), float("nan"))
    return done / elapsed, 1000 * (own_after - own) / done, 1000 * (kids_after - kids) / done, *searched


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--home", type=Path, required=True, help="an indexed home, copied for every run")
    parser.add_argument("--old", metavar="REV", help="a revision to run side by side with this checkout")
    parser.add_argument("--new", metavar="REV|DIR", help="the code to measure instead of this checkout")
    parser.add_argument("--adds", type=int, default=240, help="adds per run, split over 8 clients")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--queries", type=int, default=100, help="REST searches per run, before the adds")
    args = parser.parse_args()
    if not (args.home / ".git").exists():
        parser.error(f"{args.home} is not a home (no .git in it)")
    with tempfile.TemporaryDirectory(prefix="bench-adds-") as folder:
        codes = {"this checkout": REPO}
        if args.new:
            given = Path(args.new)
            code = given if (given / "syncd").is_dir() else extract(args.new, Path(folder) / "new")
            codes = {args.new if code is not given else given.name: code}
        if args.old:
            codes = {args.old: extract(args.old, Path(folder) / "old"), **codes}
        for round_ in range(args.rounds):
            for name, code in codes.items():
                rate, server, git, p50, p95 = measure(
                    code, args.home, Path(folder) / "run", args.adds, round_, args.queries
                )
                load = os.getloadavg()[0]
                print(
                    f"round {round_}  {name:>14}  {rate:5.1f} adds/s  CPU per add: server {server:5.1f} ms"
                    f" + git {git:4.1f} ms = {server + git:5.1f} ms  REST search p50 {p50:5.1f} ms"
                    f" p95 {p95:5.1f} ms  (load {load:.1f})",
                    flush=True,
                )


if __name__ == "__main__":
    main()
