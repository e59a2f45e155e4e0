"""The commit step at size: a one-line edit in a daily log of 1k, 10k and 100k facts (its commit
should cost the same whatever the log's size), committing 100,000 new small files at once, and a
file above the size limit (whose commit must not read it into memory).

    PYTHONPATH=. python benchmarks/bench_history.py [--facts 1000 10000 100000] [--files 100000] [--big-mb 200]

Each case runs in its own process (a fresh home in a temp folder), so its peak RSS is its own
(shown beside the RSS it had before the commit began: the setup's share). Prints figures measured
side by side in one run; asserts nothing about time.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

LOG = "memory/users/ana/2026-11-22.md"


def _daily_log(n: int, edited: int | None = None) -> bytes:
    lines = ["# 2026-11-22", "", "## 09:30 chat:c1 session:s1"]
    for i in range(n):
        text = f"Fact number {i} about the green tea garden." if i != edited else f"Fact number {i}, edited."
        lines.append(f"- [preference] {text}")
    return ("\n".join(lines) + "\n").encode()


def _rss_mb(who: int) -> float:
    return resource.getrusage(who).ru_maxrss / 1024


def _case(kind: str, size: int) -> dict:
    import syncd
    import syncd.index.rows  # loaded in any engine already: not the commit's cost
    from syncd.history.committer import commit_changes
    from syncd.home import Home

    home = syncd.init(Path(tempfile.mkdtemp(prefix="bench-history-")) / "home").home
    settings = syncd.Settings()
    env = os.environ | {
        "GIT_AUTHOR_NAME": "b",
        "GIT_AUTHOR_EMAIL": "b@x",
        "GIT_COMMITTER_NAME": "b",
        "GIT_COMMITTER_EMAIL": "b@x",
    }
    if kind == "edit":
        (home / LOG).parent.mkdir(parents=True, exist_ok=True)
        (home / LOG).write_bytes(_daily_log(size))
        subprocess.run(["git", "add", LOG], cwd=home, check=True, env=env)
        subprocess.run(["git", "commit", "-qm", "log"], cwd=home, check=True, env=env)
        (home / LOG).write_bytes(_daily_log(size, edited=size // 2))
        paths = [LOG]
    elif kind == "files":
        paths = []
        for i in range(size):
            rel = f"memory/users/u{i % 200:03d}/notes/n{i:06d}.md"
            (home / rel).parent.mkdir(parents=True, exist_ok=True)
            (home / rel).write_bytes(f"# Note {i}\n\nSmall note number {i}.\n".encode())
            paths.append(rel)
    else:  # big: a daily log above the size limit, edited
        (home / LOG).parent.mkdir(parents=True, exist_ok=True)
        line = b"- [preference] " + b"x" * 985 + b"\n"
        with open(home / LOG, "wb") as handle:
            handle.writelines(line for _ in range(size * 1024))
        subprocess.run(["git", "add", LOG], cwd=home, check=True, env=env)
        subprocess.run(["git", "commit", "-qm", "big"], cwd=home, check=True, env=env)
        with open(home / LOG, "ab") as handle:
            handle.write(b"- [preference] One more.\n")
        paths = [LOG]
    rss_before = _rss_mb(resource.RUSAGE_SELF)
    try:
        start = time.perf_counter()
        shas = commit_changes(Home(home), settings, paths)
        seconds = time.perf_counter() - start
        subject = subprocess.run(
            ["git", "log", "-1", "--format=%s"], cwd=home, capture_output=True, text=True, check=True
        ).stdout.strip()
    finally:
        shutil.rmtree(home.parent, ignore_errors=True)  # a 100k-file or 200 MB home each: never left behind
    return {
        "kind": kind,
        "size": size,
        "seconds": seconds,
        "commits": len(shas),
        "subject": subject,
        "rss_before_mb": rss_before,
        "rss_mb": _rss_mb(resource.RUSAGE_SELF),
    }


def _run(kind: str, size: int) -> dict:
    done = subprocess.run(
        [sys.executable, __file__, "--one", kind, str(size)], capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--facts", type=int, nargs="*", default=[1000, 10000, 100000])
    parser.add_argument("--files", type=int, default=100000)
    parser.add_argument("--big-mb", type=int, default=200)
    parser.add_argument("--one", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(_case(args.one[0], int(args.one[1]))))
        return
    results = [_run("edit", n) for n in args.facts]
    if args.files:
        results.append(_run("files", args.files))
    if args.big_mb:
        results.append(_run("big", args.big_mb))
    base = results[0]["seconds"]
    print(f"{'case':<36} {'commit s':>9} {'vs first':>9} {'RSS MB':>8} {'(before)':>9}  subject")
    for r in results:
        label = {
            "edit": f"one-line edit, log of {r['size']:,} facts",
            "files": f"{r['size']:,} new small files",
            "big": f"edit of a {r['size']} MB log (over limit)",
        }[r["kind"]]
        print(
            f"{label:<36} {r['seconds']:>9.3f} {r['seconds'] / base:>8.1f}x {r['rss_mb']:>8.0f} "
            f"{r['rss_before_mb']:>9.0f}  {r['subject'][:48]}"
        )


if __name__ == "__main__":
    main()
