"""Benchmarks of `syncd watch` (a real daemon process, real observer, LanceDB, git and model).

    python benchmarks/bench_watch.py [--edits 200] [--burst 5000] [--idle 60] [--watched 10000]
                                     [--vault DIR] [--only latency|burst|idle]

Prints four figures:
  1. edit-to-searchable latency, p50 / p99 over single-line edits, default settings: from the
     moment an edit is written until a read-only reader in another process sees its rows;
  2. a burst (`git checkout` of a branch with N changed files) to convergence, side by side with
     an in-process `Engine.reindex()` of the same tree, both with a warm embedding cache;
  3. CPU time the daemon uses while idle (utime + stime from /proc), as a share of one core;
  4. the daemon's peak and steady resident memory (VmHWM / VmRSS) while watching M files.
With ``--vault DIR`` (any folder of markdown, e.g. an Obsidian vault) figures 1, 3 and 4 are taken
on a home whose ``vault/`` is a copy of that folder instead of generated daily logs: the edits are
single-line edits of one page of the vault (its largest), figure 1 also gives the first edit's
latency and the reader's in-process search p50/p95 over the vault's page names as queries, and
figures 3 and 4 watch the vault (``--watched`` is then ignored). The burst (2) stays generated.
Ratios and figures only: nothing here asserts a timing.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import syncd
from syncd.config import Settings
from syncd.embedding.fastembed_backend import load_embedder
from syncd.home import blob_sha

FACTS = [
    "Likes green tea in the morning.",
    "Works as a nurse in Lyon.",
    "Is allergic to peanuts.",
    "Has a cat called Miso.",
    "Prefers short answers.",
    "Runs on Sundays.",
    "Plays the cello.",
    "Reads science fiction.",
    "Learns Japanese.",
    "Bakes sourdough bread.",
]
GIT_ENV = {
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "b@b",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "b@b",
}
TICKS = os.sysconf("SC_CLK_TCK")


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=root, env=os.environ | GIT_ENV, check=True, capture_output=True)


def daily_log(facts: list[str]) -> str:
    return "# 2026-11-22\n\n## 09:30 chat:c1 session:s1\n" + "".join(f"- [preference] {f}\n" for f in facts)


def populate(root: Path, count: int, prefix: str = "bulk") -> None:
    """``count`` small daily logs (two facts from a shared pool: the cache embeds each once)."""
    for i in range(count):
        user, day = divmod(i, 300)
        path = root / f"memory/users/{prefix}{user}/2026-{1 + day // 28:02d}-{1 + day % 28:02d}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(daily_log([FACTS[i % 10], FACTS[(i * 7 + 3) % 10]]))


def wait_for(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.02)
    return value


class DaemonProcess:
    def __init__(self, home: Path):
        self.home = home
        self.err = open(home.parent / "daemon.err", "a")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "syncd", "watch", "--home", str(home)], stdout=subprocess.DEVNULL, stderr=self.err
        )
        log = home / ".syncd/daemon.log"
        wait_for(lambda: log.exists() and "watching" in log.read_text(), 120, "the daemon to start")

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICKS  # utime + stime

    def memory_kb(self) -> dict[str, int]:
        out = {}
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmHWM", "VmRSS"):
                out[key] = int(value.split()[0])
        return out

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout=120)
        self.err.close()
        return code


def settled(reader) -> bool:
    status = reader.status()
    return status.fresh and not status.uncommitted


def copy_vault(home: Path, vault: Path) -> list[str]:
    """``vault``'s markdown copied into ``home``'s ``vault/``; the pages' home-relative paths."""
    shutil.copytree(vault, home / "vault", dirs_exist_ok=True)
    return sorted(str(p.relative_to(home)) for p in (home / "vault").rglob("*.md"))


def search_percentiles(reader, queries: list[str]) -> tuple[float, float]:
    """In-process search p50 / p95 (ms) of ``queries`` on ``reader``, after one untimed warm-up."""
    reader.search(queries[0], limit=5)
    ms = []
    for query in queries:
        started = time.perf_counter()
        reader.search(query, limit=5)
        ms.append((time.perf_counter() - started) * 1000)
    ms.sort()
    return statistics.median(ms), ms[min(len(ms) - 1, round(0.95 * len(ms)) - 1)]


def bench_latency(base: Path, embedder, edits: int, vault: Path | None = None) -> None:
    home = syncd.init(base / "latency").home
    if vault is None:
        rel = "memory/users/ana/2026-11-22.md"
        (home / rel).parent.mkdir(parents=True, exist_ok=True)
        (home / rel).write_text(daily_log(FACTS))
        pages: list[str] = []
    else:
        pages = copy_vault(home, vault)
        rel = max(pages, key=lambda page: (home / page).stat().st_size)
    daemon = DaemonProcess(home)
    reader = syncd.open(home, read_only=True, embedder=embedder)
    wait_for(lambda: settled(reader), 1200, "startup")
    if pages:
        queries = [Path(page).stem for page in pages]
        p50, p95 = search_percentiles(reader, queries)
        print(f"search in-process (read-only reader): p50 {p50:.1f} ms, p95 {p95:.1f} ms over {len(queries)} queries")
    rng = random.Random(7)
    latencies = []
    lines = (home / rel).read_text().splitlines()
    if pages:
        lines += ["", "placeholder"]  # the edited line: a paragraph of its own at the page's end
    for n in range(edits):
        # One line changes: a new fact replaces one of the ten (a unique text: one embedding).
        text = f"Edit {n}: now fond of {rng.choice(['oolong', 'mate', 'rooibos'])} no. {n}."
        if pages:
            lines[-1] = text
        else:
            lines[3 + n % 10] = f"- [preference] {text}"
        data = ("\n".join(lines) + "\n").encode()
        sha = blob_sha(data)
        started = time.perf_counter()
        with open(home / rel, "wb") as handle:
            handle.write(data)
        if not reader.wait_indexed(rel, sha, timeout=30):
            raise SystemExit(f"edit {n} was not indexed within 30 s")
        latencies.append(time.perf_counter() - started)
        if n % 50 == 0:
            query = text if pages else f"Edit {n}"  # a vault has other pages that say "Edit"
            assert any(f"Edit {n}:" in h.content for h in reader.search(query, limit=5)), "not searchable"
        time.sleep(rng.uniform(0.0, 0.4))  # a person (or an agent) edits again soon, not instantly
    wait_for(lambda: settled(reader), 60, "the last commit")
    commits = subprocess.run(
        ["git", "rev-list", "--count", "HEAD"], cwd=home, capture_output=True, text=True, check=True
    ).stdout.strip()
    reader.close()
    daemon.stop()
    ms = sorted(x * 1000 for x in latencies)
    p99 = ms[min(len(ms) - 1, round(0.99 * len(ms)) - 1)]
    p95 = ms[min(len(ms) - 1, round(0.95 * len(ms)) - 1)]
    print(
        f"edit-to-searchable over {edits} single-line edits of {rel} (default settings): "
        f"first {latencies[0] * 1000:.0f} ms, p50 {statistics.median(ms):.0f} ms, p95 {p95:.0f} ms, "
        f"p99 {p99:.0f} ms, max {ms[-1]:.0f} ms ({commits} commits in the history)"
    )


def bench_burst(base: Path, embedder, files: int) -> None:
    home = syncd.init(base / "burst").home
    git(home, "checkout", "-q", "-b", "burst")
    populate(home, files)
    git(home, "add", "-A")
    git(home, "commit", "-q", "-m", "burst")
    # Warm the embedding cache with this tree's texts: both sides then pay only for the work
    # that is theirs (scan, parse, write), not for the model.
    with syncd.open(home, embedder=embedder) as engine:
        engine.reindex()
    git(home, "checkout", "-q", "main")
    with syncd.open(home, embedder=embedder) as engine:
        engine.sync()
    daemon = DaemonProcess(home)
    reader = syncd.open(home, read_only=True, embedder=embedder)
    wait_for(lambda: settled(reader), 120, "startup")
    expected = len(reader.indexed_files()) + files
    # The daemon logs "indexed ..." the moment a sync's rows and file records are committed to
    # LanceDB. Watching its log costs nothing, where polling the index from here would take a
    # core away from the daemon on a 2-core machine; the reader confirms convergence after.
    log = home / ".syncd/daemon.log"
    offset = log.stat().st_size
    started = time.perf_counter()
    git(home, "checkout", "-q", "burst")
    checked_out = time.perf_counter()
    converged = None
    while converged is None:
        with open(log, "rb") as handle:
            handle.seek(offset)
            chunk = handle.read()
        if b"indexed " in chunk and b"\n" in chunk:
            seen = time.perf_counter()
            offset += chunk.rindex(b"\n") + 1
            if len(reader.indexed_files()) == expected and reader.status().fresh:
                converged = seen
        if time.perf_counter() - started > 600:
            raise SystemExit("the burst did not converge in 600 s")
        time.sleep(0.01)
    reader.close()
    daemon.stop()
    with syncd.open(home, embedder=embedder) as engine:
        t0 = time.perf_counter()
        engine.reindex()
        reindex = time.perf_counter() - t0
    burst = converged - checked_out
    print(
        f"burst of {files} files: checkout took {checked_out - started:.2f} s; daemon converged "
        f"{burst:.2f} s after it ({converged - started:.2f} s from its start); Engine.reindex of the same "
        f"tree {reindex:.2f} s; ratio {burst / reindex:.2f} (from checkout start: "
        f"{(converged - started) / reindex:.2f})"
    )


def bench_idle_and_memory(base: Path, embedder, idle_s: float, watched: int, vault: Path | None = None) -> None:
    home = syncd.init(base / "idle").home
    if vault is None:
        populate(home, watched, prefix="w")
        rel = "memory/users/w0/2026-01-01.md"
    else:
        pages = copy_vault(home, vault)
        watched = len(pages)
        rel = "vault/Memory probe.md"
    with syncd.open(home, embedder=embedder) as engine:
        engine.sync()
    daemon = DaemonProcess(home)
    reader = syncd.open(home, read_only=True, embedder=embedder)
    wait_for(lambda: settled(reader), 300, "startup")
    reader.close()
    time.sleep(2)
    cpu0, t0 = daemon.cpu_seconds(), time.monotonic()
    time.sleep(idle_s)
    cpu1, t1 = daemon.cpu_seconds(), time.monotonic()
    for n in range(20):
        probe = f"Memory probe edit {n}."
        (home / rel).write_text(daily_log([probe]) if vault is None else f"# Memory probe\n\n{probe}\n")
        time.sleep(0.3)
    time.sleep(2)
    memory = daemon.memory_kb()
    daemon.stop()
    share = (cpu1 - cpu0) / (t1 - t0) * 100
    print(
        f"idle: {cpu1 - cpu0:.2f} s of CPU over {t1 - t0:.0f} s = {share:.2f} % of one core (watching {watched} files)"
    )
    print(
        f"memory watching {watched} files (after startup reconcile and 20 edits): "
        f"peak RSS {memory['VmHWM'] / 1024:.0f} MiB, current RSS {memory['VmRSS'] / 1024:.0f} MiB"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--edits", type=int, default=200, help="single-line edits for the latency figure")
    parser.add_argument("--burst", type=int, default=5000, help="files changed by the checkout")
    parser.add_argument("--idle", type=float, default=60.0, help="seconds of idle to measure")
    parser.add_argument("--watched", type=int, default=10000, help="files watched for idle CPU and memory")
    parser.add_argument("--only", choices=["latency", "burst", "idle"], default=None, help="run one part")
    parser.add_argument("--vault", type=Path, default=None, help="a folder of markdown for figures 1, 3 and 4")
    args = parser.parse_args()
    if args.vault is not None and not args.vault.is_dir():
        parser.error(f"{args.vault} is not a folder")
    base = Path(tempfile.mkdtemp(prefix="syncd-bench-watch-"))
    embedder = load_embedder(Settings(), cache_dir=base / "models")
    print(f"cores: {os.cpu_count()}, load average: {os.getloadavg()[0]:.1f}")
    try:
        if args.only in (None, "latency"):
            bench_latency(base, embedder, args.edits, args.vault)
        if args.only in (None, "burst"):
            bench_burst(base, embedder, args.burst)
        if args.only in (None, "idle"):
            bench_idle_and_memory(base, embedder, args.idle, args.watched, args.vault)
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
