"""Load test of ``syncd serve`` on loopback: 16 concurrent clients mixing searches and adds for a
bounded time; throughput, p50/p95 per operation, errors; meanwhile a person saves a vault page
every few seconds and waits for the daemon to commit it (how long a person's edit waits for its
commit while agents write: issue 23); then, with the server stopped (SIGTERM), every acknowledged
add is checked in the markdown, in git HEAD and in search.

    .venv/bin/python benchmarks/bench_load.py [--seconds 60] [--clients 16] [--add-share 0.2]
    .venv/bin/python benchmarks/bench_load.py --clients 4 --add-share 1 --old 289b6ee

``--old REV`` runs the same load on revision REV's server first (benchmarks/revisions.py), then on
this checkout's, each on a home of its own built the same way. Bounded in time and count
(``--max-requests``); loopback only; asserts nothing about time.
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).parent))
from bench_index import DETAILS, SUBJECTS, VERBS, write_tree
from bench_server import pct, start_server
from revisions import REPO, env_for, extract

import syncd


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--add-share", type=float, default=0.2, help="share of requests that are adds")
    parser.add_argument("--facts", type=int, default=5000, help="facts in the home before the test")
    parser.add_argument("--max-requests", type=int, default=100_000)
    parser.add_argument("--person-every", type=float, default=5.0, help="seconds between the person's pages")
    parser.add_argument("--old", metavar="REV", help="run revision REV's server first, side by side")
    parser.add_argument("--keep", type=Path, help="work here and keep it (the servers' logs: serve.err)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = args.keep or Path(tmp)
        runs = [("this checkout", env_for(REPO))]
        if args.old:
            runs.insert(0, (f"old {args.old}", env_for(extract(args.old, work / "old"))))
        for n, (name, env) in enumerate(runs):
            print(f"--- {name}", flush=True)
            run(args, work / f"run{n}", env)


def _person(root: Path, deadline: float, every: float, waits: list[float], late: list[str]) -> None:
    """Saves a vault page every ``every`` seconds and times it until git HEAD holds it."""
    n = 0
    while time.monotonic() < deadline:
        page = f"vault/Person page {n}.md"
        (root / page).write_text(f"# Person page {n}\n\nWritten while agents write.\n")
        saved = time.monotonic()
        while True:
            held = subprocess.run(["git", "-C", str(root), "cat-file", "-e", f"HEAD:{page}"],
                                  capture_output=True, check=False).returncode == 0  # fmt: skip
            if held:
                waits.append(time.monotonic() - saved)
                print(
                    f"  {page!r} saved at {time.strftime('%H:%M:%S', time.localtime(time.time() - waits[-1]))}, "
                    f"committed after {waits[-1]:.1f} s",
                    file=sys.stderr,
                    flush=True,
                )
                break
            if time.monotonic() - saved > 180:
                late.append(page)
                break
            time.sleep(0.05)
        n += 1
        time.sleep(max(0.0, every - (time.monotonic() - saved)))


def run(args, where: Path, env: dict[str, str]) -> None:
    where.mkdir(parents=True)
    root = syncd.init(where / "home").home
    write_tree(root, args.facts, 50)
    with syncd.open(root) as engine:
        engine.sync()
        engine.commit()
    proc, url, token = start_server(root, env, verbose=args.keep is not None)
    headers = {"Authorization": f"Bearer {token}"}
    latencies: dict[str, list[float]] = {"search": [], "add": []}
    errors: list[str] = []
    acked: list[tuple[str, str, str]] = []  # user, content, id
    lock = threading.Lock()
    sent = [0]
    deadline = time.monotonic() + args.seconds

    def client(k: int) -> None:
        rng = random.Random(k)
        n = 0
        with httpx.Client(base_url=url, headers=headers, timeout=120) as c:
            while time.monotonic() < deadline:
                with lock:
                    if sent[0] >= args.max_requests:
                        return
                    sent[0] += 1
                user = f"u{rng.randrange(20)}"
                t = time.perf_counter()
                try:
                    if rng.random() < args.add_share:
                        op = "add"
                        content = f"Load client {k} fact {n}: {rng.choice(VERBS)} {rng.choice(SUBJECTS)} {rng.choice(DETAILS)}."
                        n += 1
                        r = c.post("/memory/archival", json={"content": content, "user_id": user, "dedup": False})
                    else:
                        op = "search"
                        q = f"{rng.choice(VERBS)} {rng.choice(SUBJECTS)}"
                        r = c.get("/memory/archival", params={"query": q, "user_id": user, "limit": 10})
                except httpx.HTTPError as exc:
                    with lock:
                        errors.append(f"{type(exc).__name__}: {exc}")
                    continue
                elapsed = time.perf_counter() - t
                with lock:
                    if r.status_code != 200:
                        errors.append(f"{op} {r.status_code} {r.text[:120]}")
                        continue
                    latencies[op].append(elapsed)
                    if op == "add":
                        acked.append((user, content, r.json()["fact"]["id"]))

    load_before = os.getloadavg()[0]
    started = time.perf_counter()
    waits: list[float] = []
    late: list[str] = []
    threads = [threading.Thread(target=client, args=(k,)) for k in range(args.clients)]
    threads.append(threading.Thread(target=_person, args=(root, deadline, args.person_every, waits, late)))
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    wall = time.perf_counter() - started
    proc.send_signal(15)
    code = proc.wait(120)
    total = sum(len(v) for v in latencies.values())
    print(f"{args.clients} clients, {wall:.0f} s, home of {args.facts} facts; load {load_before:.2f} before")
    print(
        f"throughput: {total / wall:.1f} requests/s ({len(latencies['search']) / wall:.1f} searches/s, "
        f"{len(latencies['add']) / wall:.1f} adds/s); errors: {len(errors)}"
    )
    for op, xs in latencies.items():
        if xs:
            print(f"  {op:6s} n={len(xs):5d}  p50 {pct(xs, 0.5):7.1f} ms  p95 {pct(xs, 0.95):7.1f} ms")
    if waits:
        print(
            f"  a person's page saved -> committed: n={len(waits)}  p50 {pct(waits, 0.5):7.1f} ms  "
            f"p95 {pct(waits, 0.95):7.1f} ms  max {max(waits) * 1000:7.1f} ms; not committed in 180 s: {len(late)}"
        )
    for e in errors[:5]:
        print("  error:", e)
    print(f"server exit code after SIGTERM: {code}")

    # Afterwards: every acknowledged add in the markdown, in git HEAD, and found by search.
    on_disk = "\n".join(p.read_text() for p in (root / "memory/users").rglob("*.md"))
    head = subprocess.run(["git", "-C", str(root), "grep", "-h", "-o", "m-[0-9a-f]\\{16\\}", "HEAD", "--",
                           "memory/users"], capture_output=True, text=True, check=False).stdout  # fmt: skip
    in_md = sum(fid in on_disk for _, _, fid in acked)
    in_git = sum(fid in head for _, _, fid in acked)
    with syncd.open(root, read_only=True) as reader:
        found = sum(
            any(h.id == fid for h in reader.search(content, user_id=user, limit=5)) for user, content, fid in acked
        )
    print(f"acknowledged adds: {len(acked)}; in markdown {in_md}, in git HEAD {in_git}, found by search {found}")


if __name__ == "__main__":
    main()
