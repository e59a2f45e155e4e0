"""Search as of a past commit (issue 29): the cost of the first and of a repeated search at a
revision, against building that revision's index from a checkout (what the first as-of design
did, and the reference an exact answer must equal), side by side in one run on one home.

    .venv/bin/python benchmarks/bench_asof.py [--facts 100000] [--commits 1000] [--workdir DIR]
                                              [--embed-cache FILE] [--old REV]

The home is generated with an append-mostly history: each commit appends facts to a few daily
logs (the logs of one day in turn), and one commit in ten also edits or deletes an older fact.
``--embed-cache`` copies a warm embedding cache (a 100,000-fact home's
``.syncd/embed_cache.sqlite``) so that generating the home does not embed 100,000 texts;
``--workdir`` keeps the home for the next run. For revisions from HEAD~1 back to the first
commit it prints: the first search at the revision (the past index made from the nearest index
and the difference), a second search there (the kept past index), a rebuild of that revision
from a checkout (rows from nothing, embeddings from the same cache), the files that differ, the
disk the kept past index takes, and whether the hits are the rebuild's (ids and scores); then
search p50/p95 now and as of HEAD~100, and the disk of the index (as it stands, and compacted:
an index without history at its least) against the index with the ``KEEP`` past revisions kept.
``--old REV`` first runs git revision REV's syncd (benchmarks/revisions.py) on the same home in a
child process, without the rebuilds, and prints both codes' numbers side by side. Asserts
nothing about time.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

# syncd before bench_index, which puts this checkout first on the path: a --old child imports
# the syncd its PYTHONPATH names, and bench_index then finds that one already imported.
import syncd
from syncd.engine import asof
from syncd.engine.facade import Engine
from syncd.home import Home

sys.path.insert(0, str(Path(__file__).parent))
from bench_index import CATEGORIES, DETAILS, SUBJECTS, VERBS, fact_text
from revisions import env_for, extract


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True).stdout


def generate(root: Path, facts: int, commits: int, seed: int = 7) -> None:
    """Daily logs of 20 users, 20 facts a file, appended over ``commits`` commits."""
    # The facts are bench_index.write_tree's, in its order (a warm cache of its home then holds
    # their vectors); the edits draw from a generator of their own so as not to shift them.
    rng, edits = random.Random(seed), random.Random(seed + 1)
    users, per_file = 20, 20
    files = -(-facts // per_file)
    appends_per_commit = max(1, -(-facts // commits))
    lines_of: dict[Path, list[str]] = {}
    written = 0
    for c in range(commits):
        for _ in range(appends_per_commit):
            if written >= facts:
                break
            k = written // per_file
            u, day = k % users, k // users
            date = f"2026-{1 + day // 28:02d}-{1 + day % 28:02d}"
            path = root / "memory/users" / f"u{u}" / f"{date}.md"
            lines = lines_of.setdefault(path, [f"# {date}", "", f"## 10:{u:02d} chat:c{u % 3} session:s{day}-{u}"])
            imp = rng.random()
            lines.append(
                f"- [{rng.choice(CATEGORIES)}] {fact_text(rng, written)} `t{written % 13}` <!-- imp:{imp:.2f} -->"
            )
            written += 1
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("\n".join(lines) + "\n")
        if c % 10 == 9 and len(lines_of) > 1:
            # Not only appends: now and then an older fact is corrected or removed.
            path = edits.choice(sorted(lines_of)[: max(1, len(lines_of) - 5)])
            lines = lines_of[path]
            at = edits.randrange(3, len(lines))
            if edits.random() < 0.5:
                lines[at] = lines[at].replace("] ", "] Corrected: ", 1)
            else:
                del lines[at]
            path.write_text("\n".join(lines) + "\n")
        git(root, "add", "-A", "memory")
        git(root, "commit", "-q", "-m", f"history {c}")
        if c % 100 == 99:
            print(f"  generated {c + 1}/{commits} commits, {written}/{files * per_file} facts", flush=True)


def rebuilt_at(engine: Engine, sha: str, workdir: Path, query: str, user: str, now) -> tuple[list, float]:
    """The reference: a fresh index of a checkout of ``sha`` (embeddings from the same cache)."""
    tree = workdir / f"checkout-{sha[:8]}"
    shutil.rmtree(tree, ignore_errors=True)
    git(engine.home.root, "worktree", "add", "--detach", "-f", str(tree), sha)
    try:
        start = time.perf_counter()
        with Engine(Home(tree), engine.settings, embedder=engine.embedder) as fresh:
            fresh.sync()
            hits = fresh.search(query, user_id=user, limit=10, now=now)
        return hits, time.perf_counter() - start
    finally:
        git(engine.home.root, "worktree", "remove", "--force", str(tree))


def compare_latency(engine: Engine, sha: str, queries: int) -> tuple[tuple[float, float], tuple[float, float]]:
    """Search p50/p95 now and at ``sha`` (its past index already made), the same queries
    alternating, so both meet the same load."""
    rng = random.Random(5)
    engine.search("warm up", user_id="u0", at=sha)  # opened again if it was closed since
    now_s, then_s = [], []
    for _ in range(queries):
        query = f"{rng.choice(VERBS)} {rng.choice(SUBJECTS)} {rng.choice(DETAILS)}"
        user = f"u{rng.randrange(20)}"
        for at, into in ((None, now_s), (sha, then_s)):
            t = time.perf_counter()
            engine.search(query, user_id=user, limit=10, at=at)
            into.append(time.perf_counter() - t)

    def pct(xs: list[float], p: float) -> float:
        return sorted(xs)[min(len(xs) - 1, int(len(xs) * p))] * 1000

    return (pct(now_s, 0.5), pct(now_s, 0.95)), (pct(then_s, 0.5), pct(then_s, 0.95))


def folder_mb(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 1e6


def key(hits: list) -> list[tuple[str, str, float]]:
    return [(h.id, h.path, round(h.score, 9)) for h in hits]


def measure(root: Path, args: argparse.Namespace, workdir: Path) -> dict:
    """Every number of one code (the syncd this process imports) on the home at ``root``."""
    out: dict = {"revisions": []}
    rng = random.Random(3)
    with syncd.open(root) as engine:
        shutil.rmtree(engine.home.state_dir / "asof", ignore_errors=True)  # no other code's past folders
        start = time.perf_counter()
        engine.sync()
        print(f"code: {Path(syncd.__file__).parent}; home: {root}, {engine.counts()['facts']} facts, {len(git(root, 'rev-list', 'HEAD').split())} "
              f"commits (synced in {time.perf_counter() - start:.1f} s)", flush=True)  # fmt: skip
        total = len(git(root, "rev-list", "HEAD").split())
        steps = [total - 1 if n == "last" else int(n) for n in args.revisions.split(",")]
        for n in steps:
            sha = git(root, "rev-parse", f"HEAD~{n}").strip()
            differ = len(git(root, "diff", "--name-only", sha).split())
            query = f"{rng.choice(VERBS)} {rng.choice(SUBJECTS)} {rng.choice(DETAILS)}"
            user = f"u{rng.randrange(20)}"
            now = dt.datetime.now(dt.UTC)  # one moment for all three: recency moves with time
            t = time.perf_counter()
            first = asof.search_at(engine, query, sha, user_id=user, limit=10, now=now)
            first_s = time.perf_counter() - t
            t = time.perf_counter()
            again = asof.search_at(engine, query, sha, user_id=user, limit=10, now=now)
            again_s = time.perf_counter() - t
            row = {"revision": f"HEAD~{n}", "differ": differ, "first": first_s, "again": again_s,
                   "kept": folder_mb(engine.home.state_dir / "asof" / sha)}  # fmt: skip
            if args.reference:
                reference, row["rebuild"] = rebuilt_at(engine, sha, workdir, query, user, now)
                row["exact"] = key(first) == key(reference) == key(again)
            row["rss"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            out["revisions"].append(row)
            print(f"  {row}", flush=True)
        out["latency"] = compare_latency(engine, git(root, "rev-parse", f"HEAD~{min(100, total - 1)}").strip(),
                                         args.queries)  # fmt: skip
        state = engine.home.state_dir
        out["index"] = folder_mb(state / "index")
        out["past"] = folder_mb(state / "asof")
        out["cache"] = (state / "embed_cache.sqlite").stat().st_size / 1e6
    out["compacted"] = compacted_mb(state / "index")
    return out


def compacted_mb(index: Path) -> float:
    """The index at its least: its tables compacted and every older version deleted (what an
    index without history takes when no write has left versions behind)."""
    import lancedb

    db = lancedb.connect(str(index / "lance"))
    with warnings.catch_warnings():  # that no other process may use the tables meanwhile: none does
        warnings.simplefilter("ignore", UserWarning)
        for name in ("entries", "files"):
            db.open_table(name).optimize(cleanup_older_than=dt.timedelta(0), delete_unverified=True)
    return folder_mb(index)


def report(results: dict[str, dict]) -> None:
    """The codes' numbers side by side."""
    names = list(results)
    print(f"{'revision':>10} {'files differ':>12}" + "".join(f" {'first ' + c:>11} {'again ' + c:>11} {'kept MB ' + c:>11}"
                                                        for c in names) + f" {'rebuild':>8} {'exact':>6}")  # fmt: skip
    rows = zip(*(r["revisions"] for r in results.values()))
    for same in rows:
        line = f"{same[0]['revision']:>10} {same[0]['differ']:>12}"
        for row in same:
            line += f" {row['first']:>10.2f}s {row['again']:>10.2f}s {row['kept']:>11.1f}"
        last = same[-1]
        line += f" {last['rebuild']:>7.1f}s {last['exact']!s:>6}" if "rebuild" in last else ""
        print(line)
    for name, r in results.items():
        (now50, now95), (at50, at95) = r["latency"]
        print(f"{name}: search now p50 {now50:.1f} ms p95 {now95:.1f} ms; as of HEAD~100 p50 {at50:.1f} ms p95 "
              f"{at95:.1f} ms ({at50 / now50:.2f}x / {at95 / now95:.2f}x)")  # fmt: skip
    for name, r in results.items():
        live, past, small, cache = r["index"], r["past"], r["compacted"], r["cache"]
        print(f"{name}: disk: the index {live:.0f} MB ({small:.0f} MB compacted), the {asof.KEEP} past revisions kept "
              f"{past:.1f} MB: {(live + past) / live:.2f}x the index as it stood, {(small + past) / small:.2f}x "
              f"compacted; with the embedding cache ({cache:.0f} MB): {(small + cache + past) / (small + cache):.2f}x")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--facts", type=int, default=100_000)
    parser.add_argument("--commits", type=int, default=1000)
    parser.add_argument("--workdir", default=None)
    parser.add_argument("--embed-cache", default=None, help="a warm embed_cache.sqlite to start from")
    parser.add_argument("--revisions", default="1,10,100,500,last", help="HEAD~N for each N ('last': the first commit)")
    parser.add_argument("--queries", type=int, default=100, help="queries for the now / as-of latency comparison")
    parser.add_argument("--old", default=None, help="also run this git revision's syncd, first, on the same home")
    parser.add_argument(
        "--no-reference",
        dest="reference",
        action="store_false",
        help="skip the rebuild from a checkout (the reference of exactness)",
    )
    parser.add_argument("--json", default=None, help=argparse.SUPPRESS)  # a child's results, for --old
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(args.workdir or tmp)
        root = workdir / "home"
        if not (root / ".git").is_dir():
            root = syncd.init(root).home
            if args.embed_cache:
                shutil.copy(args.embed_cache, Home(root).ensure_state_dir() / "embed_cache.sqlite")
            start = time.perf_counter()
            generate(root, args.facts, args.commits)
            print(f"generated {args.facts} facts in {args.commits} commits in {time.perf_counter() - start:.0f} s")
        if args.json:
            Path(args.json).write_text(json.dumps(measure(root, args, workdir)))
            return
        results = {}
        if args.old:
            # The old code in a child process on the same home (its past folders cleared first),
            # without the rebuilds: the reference is the same work for both codes.
            code = extract(args.old, workdir / "old-code")
            child = [sys.executable, __file__, "--workdir", str(workdir), "--revisions", args.revisions,
                     "--queries", str(args.queries), "--no-reference", "--json", str(workdir / "old.json")]  # fmt: skip
            print(f"old code ({args.old}):", flush=True)
            subprocess.run(child, check=True, env=env_for(code))
            results["old"] = json.loads((workdir / "old.json").read_text())
        print("new code (this checkout):", flush=True)
        results["new"] = measure(root, args, workdir)
        report(results)
    print("first: the first search at the revision; again: the next one (the past engine kept open); kept: the disk "
          "the revision's past folder takes; rebuild: a fresh index of a checkout; exact: the same hits, ids and "
          "scores, as the rebuild's.")  # fmt: skip


if __name__ == "__main__":
    main()
