"""Vector products as a loaded server makes them: the CPU one search's product costs, on one
thread and on several, measured side by side in one run.

    python benchmarks/bench_products.py [--rows 100000] [--calls 60] [--gap-ms 30]

A search scores every row (int8 codes, as RowCache does past 8,192 rows, and float32 for the
exact ranking of small indexes). Between searches the server does other work, so each call here
is followed by a pause (``--gap-ms``). With ``threads`` > 1 the product is split over OpenMP
threads, which then spin waiting for more work: the wall time of the product alone hides that,
the process's CPU time per call shows it. Prints both for threads=1 and threads=cpu count, and
their ratio.
"""

from __future__ import annotations

import argparse
import os
import resource
import time

import numpy as np
import simsimd


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def measure(matrix: np.ndarray, query: np.ndarray, threads: int, calls: int, gap_s: float) -> tuple[float, float]:
    """Mean wall time of the product and mean process CPU per call (product + what follows it)."""
    simsimd.cdist(query, matrix, metric="dot", out_dtype="float32", threads=threads)  # warm
    time.sleep(gap_s)
    busy = 0.0
    start_cpu = _cpu()
    for _ in range(calls):
        start = time.perf_counter()
        simsimd.cdist(query, matrix, metric="dot", out_dtype="float32", threads=threads)
        busy += time.perf_counter() - start
        time.sleep(gap_s)
    return busy / calls, (_cpu() - start_cpu) / calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--calls", type=int, default=60)
    parser.add_argument("--gap-ms", type=float, default=30.0)
    args = parser.parse_args()
    if args.rows < 1 or args.calls < 1 or args.gap_ms < 0:
        parser.error("--rows and --calls must be at least 1, --gap-ms at least 0")
    rng = np.random.default_rng(0)
    many = max(2, os.cpu_count() or 1)
    print(f"{args.rows} rows x 384, {args.calls} calls, {args.gap_ms:.0f} ms between calls, {os.cpu_count()} cpus")
    kinds = {
        "int8": (
            rng.integers(-127, 128, size=(args.rows, 384), dtype=np.int8),
            rng.integers(-127, 128, size=(1, 384), dtype=np.int8),
        ),
        "float32": (
            rng.standard_normal((args.rows, 384), dtype=np.float32),
            rng.standard_normal((1, 384), dtype=np.float32),
        ),
    }
    for kind, (matrix, query) in kinds.items():
        one = measure(matrix, query, 1, args.calls, args.gap_ms / 1000)
        several = measure(matrix, query, many, args.calls, args.gap_ms / 1000)
        print(f"{kind:8s} threads=1: product {one[0] * 1000:6.2f} ms, CPU per call {one[1] * 1000:6.2f} ms | "
              f"threads={many}: product {several[0] * 1000:6.2f} ms, CPU per call {several[1] * 1000:6.2f} ms | "
              f"CPU ratio {several[1] / one[1]:.1f}x, wall ratio {several[0] / one[0]:.2f}x")  # fmt: skip


if __name__ == "__main__":
    main()
