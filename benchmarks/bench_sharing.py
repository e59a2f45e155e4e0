"""Sharing a home between two machines through a bare git remote (issue 28), on this machine:

1. add -> searchable elsewhere: ``syncd watch --remote origin --pull-every S`` runs on homes A and
   B; an add acknowledged on A (handed to A's daemon, committed) is timed until B's index answers
   it, over ``--trials`` adds (p50/p95);
2. the cost of a pull that brings ``--facts`` new facts (one daily log written and committed on
   A, pushed; B pulls with ``syncd pull``'s use case), side by side with the raw embedding of the
   same texts by the same model in the same run (the floor any index pays for them).

    .venv/bin/python benchmarks/bench_sharing.py [--trials 20] [--facts 1000] [--pull-every 1]

Prints figures; asserts nothing about time. Everything is local (no network).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import syncd
from syncd.engine.sharing import pull, push, share
from syncd.memory import MemoryManager


def pct(xs: list[float], p: float) -> float:
    return sorted(xs)[min(len(xs) - 1, int(len(xs) * p))]


def daemon(root: Path, every: float) -> subprocess.Popen:
    err = open(root.parent / f"{root.name}-daemon.err", "w")  # noqa: SIM115 - the child owns it
    return subprocess.Popen([sys.executable, "-m", "syncd", "watch", "--home", str(root), "--remote", "origin",
                             "--pull-every", str(every)], stdout=subprocess.DEVNULL, stderr=err)  # fmt: skip


def wait(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.02)


def machines(work: Path) -> tuple[Path, Path]:
    remote = work / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(remote)], check=True)
    a = syncd.init(work / "a").home
    with syncd.open(a) as engine:
        share(engine, "origin", str(remote))
        push(engine, "origin")
    subprocess.run(["git", "clone", "-q", str(remote), str(work / "b")], check=True)
    b = syncd.init(work / "b").home
    for root in (a, b):
        with syncd.open(root) as engine:
            engine.sync()
    return a, b


def add_to_searchable(a: Path, b: Path, trials: int, every: float) -> list[float]:
    procs = [daemon(a, every), daemon(b, every)]
    times = []
    try:
        for root in (a, b):
            wait(
                lambda root=root: (
                    "watching" in (root / ".syncd/daemon.log").read_text(errors="replace")
                    if (root / ".syncd/daemon.log").exists()
                    else False
                ),
                180,
                "the daemons",
            )
        with syncd.open(b, read_only=True) as reader:
            for n in range(trials):
                token = f"zq{n:03d}x{os.urandom(2).hex()}"
                started = time.monotonic()
                asyncio.run(
                    MemoryManager(a).add_memory(f"Parcel {token} waits at the post office.", "ana", dedup=False)
                )
                wait(
                    lambda token=token: any(token in h.content for h in reader.search(token, user_id="ana", limit=3)),
                    120,
                    "the add to reach b",
                )
                times.append(time.monotonic() - started)
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        for proc in procs:
            proc.wait(120)
    return times


def pull_cost(a: Path, b: Path, facts: int) -> tuple[float, float]:
    texts = [
        f"Fact {n} of the other machine: the {['red', 'blue', 'green'][n % 3]} kite number {n} flew over hill {n % 17}."
        for n in range(facts)
    ]
    log = a / "memory" / "users" / "ana" / "2026-11-20.md"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("# 2026-11-20\n\n## 10:00\n" + "".join(f"- [context] {t}\n" for t in texts))
    with syncd.open(a) as engine:
        push(engine, "origin")
    with syncd.open(b) as engine:
        started = time.monotonic()
        report = pull(engine, "origin")
        took = time.monotonic() - started
        assert report.head is not None
        raw_start = time.monotonic()
        engine.embedder.embedder.embed(texts)
        raw = time.monotonic() - raw_start
    return took, raw


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--facts", type=int, default=1000)
    parser.add_argument("--pull-every", type=float, default=1.0)
    parser.add_argument("--workdir", default=None)
    args = parser.parse_args()
    work = Path(args.workdir or tempfile.mkdtemp(prefix="bench-sharing-"))
    work.mkdir(parents=True, exist_ok=True)
    a, b = machines(work)
    times = add_to_searchable(a, b, args.trials, args.pull_every)
    print(
        f"add on A -> searchable on B through a bare remote (--pull-every {args.pull_every:g} s, {len(times)} adds): "
        f"p50 {statistics.median(times):.2f} s, p95 {pct(times, 0.95):.2f} s"
    )
    took, raw = pull_cost(a, b, args.facts)
    print(
        f"pull bringing {args.facts} new facts: {took:.2f} s; raw embedding of the same texts {raw:.2f} s "
        f"(pull / raw embedding {took / raw:.2f}x)"
    )
    print(f"load: {os.getloadavg()[0]:.2f} (1-min average) at the end; workdir {work}")


if __name__ == "__main__":
    main()
