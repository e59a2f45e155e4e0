"""Search latency of another revision and this checkout side by side, on one home, in one run
(issue 25: search p95 at 100,000 facts must not rise by more than 20%).

    python benchmarks/bench_search_latency.py [--facts 100000] [--old HEAD] [--rounds 3] [--workdir DIR]

The home is bench_index.py's generated tree of ``--facts`` facts (20 users, sections of 20 facts,
so every fact has neighbours), indexed once by this checkout (``--workdir`` keeps it for the next
run). Then, ``--rounds`` times, the old code and this checkout's each run in a child process of
their own, in turns: open the home, one untimed query (which loads the rows), then ``--queries``
timed ``engine.search`` calls, unscoped and scoped to a user. A round's order alternates, so
neither side always runs on a warmer machine. Prints the median over rounds of each side's p50
and p95 and the ratios; asserts nothing about time.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from revisions import REPO, env_for, extract

sys.path.insert(0, str(REPO))


def child(home: Path, queries: int) -> dict:
    import time

    from bench_index import DETAILS, SUBJECTS, VERBS

    import syncd

    rng = random.Random(1)
    texts = [f"{rng.choice(VERBS)} {rng.choice(SUBJECTS)} {rng.choice(DETAILS)}" for _ in range(queries)]
    out: dict[str, list[float]] = {"unscoped": [], "user": []}
    with syncd.open(home, read_only=True) as engine:
        engine.search(texts[0], limit=10)
        for text in texts:
            for name, user in (("unscoped", None), ("user", "u3")):
                start = time.perf_counter()
                engine.search(text, user_id=user, limit=10)
                out[name].append(time.perf_counter() - start)
    return {name: [_pct(times, 0.5), _pct(times, 0.95)] for name, times in out.items()}


def _pct(times: list[float], p: float) -> float:
    return sorted(times)[min(len(times) - 1, int(len(times) * p))] * 1000


def run_child(code: Path, home: Path, queries: int) -> dict:
    done = subprocess.run(
        [sys.executable, __file__, "--child", str(home), "--queries", str(queries)],
        env=env_for(code),
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode:
        sys.exit(f"child failed ({code}):\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--facts", type=int, default=100_000)
    parser.add_argument("--old", default="HEAD", help="the revision to compare with (default: HEAD)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--workdir", type=Path, default=None, help="keep the home here (reused by the next run)")
    parser.add_argument("--child", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.queries)))
        return
    from bench_index import write_tree

    import syncd

    with tempfile.TemporaryDirectory() as tmp:
        workdir = args.workdir or Path(tmp)
        home = workdir / "home"
        if not (home / ".syncd").is_dir():
            home = syncd.init(home).home
            write_tree(home, args.facts, 0)
            with syncd.open(home) as engine:
                engine.sync()
        old = extract(args.old, Path(tmp) / "old")
        results: dict[str, list[dict]] = {"old": [], "new": []}
        for n in range(args.rounds):
            sides = [("old", old), ("new", REPO)]
            for name, code in sides if n % 2 == 0 else sides[::-1]:
                results[name].append(run_child(code, home, args.queries))
        print(f"{args.facts:,} facts; median of {args.rounds} rounds of {args.queries} queries (old = {args.old})")
        print(f"  {'':26}{'old':>9}{'new':>9}{'new/old':>9}")
        for scope in ("unscoped", "user"):
            for i, label in enumerate(("p50 ms", "p95 ms")):
                old_ms = statistics.median(r[scope][i] for r in results["old"])
                new_ms = statistics.median(r[scope][i] for r in results["new"])
                print(f"  {scope + ' ' + label:26}{old_ms:9.1f}{new_ms:9.1f}{new_ms / old_ms:9.2f}")


if __name__ == "__main__":
    main()
