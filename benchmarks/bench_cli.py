"""How fast the `syncd` command answers, measured side by side in one run.

    python benchmarks/bench_cli.py [--files 10000] [--runs 5] [--workdir DIR] [--old REV]

Builds a home of real markdown files (daily logs of many users; the default is 10,000 files),
indexes it, then runs each command as its own process (`python -m syncd ...`) and reports the
median wall time, its CPU time and its peak resident memory (from /usr/bin/time):
  1. `syncd --help`;
  2. `syncd status` on the whole home;
  3. `syncd search` without a daemon (the process reads the index and runs the model itself);
  4. a no-op `syncd sync` without a daemon (nothing changed since the last sync);
  5. a `syncd sync` of one edited file, then `syncd search` (the search timed: what a person
     running the two in turn waits for), and a search after the rows image beside the index was
     deleted (the search that loads the rows from LanceDB and writes the image again);
  6. `syncd search` while `syncd watch` runs (the process asks the daemon over .syncd/daemon.sock).
Each code runs each command once untimed first, on a copy of the home of its own (a code keeps its rows image beside the index,
written by its first search), which also leaves its compiled bytecode in the work folder, as an
installed package has it (``--compile-each-run``: every process compiles syncd again, as under
PYTHONDONTWRITEBYTECODE, which this machine's environment sets). With ``--old REV`` the commands
without a daemon also run on the code of revision REV, in turns with this checkout's, and the two
are printed side by side. Ratios against the targets of issue 9 (search with a daemon <= 0.3 s and
<= 60 MB for the client process; status <= 1 s at 10,000 files) and issue 30 (without a daemon:
search <= 1.0 s and <= 250 MB, a no-op sync <= 0.5 s). Nothing
here asserts a timing.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from revisions import REPO, env_for, extract

sys.path.insert(0, str(REPO))
import syncd
from syncd.control.client import ask_daemon

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
    "Drinks dark roast coffee.",
    "Deploys with Docker on a small VPS.",
]
TARGETS = {
    "search with daemon": (0.3, 60.0),
    "status": (1.0, None),
    "search without daemon": (1.0, 250.0),
    "no-op sync": (0.5, None),
}


def build_home(root: Path, files: int) -> Path:
    home = syncd.init(root / "home").home
    users = max(1, files // 100)
    for n in range(files):
        user = f"u{n % users:04d}"
        day = f"2025-{1 + (n // users) // 28 % 12:02d}-{1 + (n // users) % 28:02d}"
        facts = [FACTS[(n + k) % len(FACTS)] for k in range(3)]
        text = f"# {day}\n\n## 09:30 chat:c1 session:s{n}\n" + "".join(f"- [note] {f}\n" for f in facts)
        path = home / "memory/users" / user / f"{day}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    with syncd.open(home) as engine:
        started = time.perf_counter()
        engine.sync()
        engine.commit()
        print(f"indexed {engine.counts()['files']} files in {time.perf_counter() - started:.1f} s")
    return home


# Where the commands' compiled bytecode is kept (None: compiled again by every process); set by main.
BYTECODE: dict[str, Path | None] = {"cache": None}


def child_env(code: Path) -> dict[str, str]:
    """The environment of a measured process: ``code``'s syncd, and its bytecode cached as an
    installed package has it (pip compiles a wheel's modules when it installs them) unless
    --compile-each-run; kept outside the tree, apart for each code."""
    env = env_for(code)
    cache = BYTECODE["cache"]
    if cache is None:
        return env | {"PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env | {"PYTHONPYCACHEPREFIX": str(cache / code.name)}


def run(args: list[str], cwd: Path, code: Path = REPO) -> tuple[float, float, float, str]:
    """(wall s, CPU s, peak RSS MB, stdout) of one `python -m syncd ARGS` process running the
    syncd at ``code``, measured by /usr/bin/time: a child forked from this (large) process would
    count our memory as its own."""
    with tempfile.NamedTemporaryFile("r", suffix=".time") as report:
        started = time.perf_counter()
        result = subprocess.run(
            ["/usr/bin/time", "-f", "%U %S %M", "-o", report.name, sys.executable, "-m", "syncd", *args],
            cwd=cwd,
            capture_output=True,
            text=True,
            env=child_env(code),
        )
        wall = time.perf_counter() - started
        if result.returncode != 0:
            raise SystemExit(f"syncd {' '.join(args)} failed with {result.returncode}: {result.stderr[-500:]}")
        user, system, rss_kb = report.read().split()[-3:]
    return wall, float(user) + float(system), int(rss_kb) / 1024, result.stdout


@contextmanager
def daemon_running(home: Path, code: Path, cwd: Path) -> Iterator[None]:
    """``syncd watch`` of ``code`` on ``home`` for the length of the block, once it answers on its
    socket; stopped with SIGTERM after. Run from ``cwd`` (not this checkout: see child_env)."""
    daemon = subprocess.Popen(
        [sys.executable, "-m", "syncd", "watch", "--home", str(home)],
        cwd=cwd,
        env=child_env(code),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 300
        while ask_daemon(home, "ping") is None:
            if time.monotonic() > deadline or daemon.poll() is not None:
                raise SystemExit("the daemon did not come up")
            time.sleep(0.2)
        yield
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(timeout=120)


def measure(
    name: str,
    args: list[str] | Callable[[Path], list[str]],
    cwd: Path,
    runs: int,
    results: dict,
    codes: dict[str, Path] | None = None,
    before: Callable[[Path], object] | None = None,
) -> None:
    """Median wall and CPU, peak RSS of ``runs`` runs of each code in ``codes`` (this checkout's
    alone by default), the codes taking turns so that each sees the same machine, after one
    untimed run each; ``before(code)`` runs untimed before every run. ``args`` may be a function
    of the code (each code has a home of its own: see main)."""
    codes = codes or {"new": REPO}
    samples: dict[str, list] = {label: [] for label in codes}
    for turn in range(runs + 1):
        for label, code in codes.items():
            if before is not None:
                before(code)
            taken = run(args(code) if callable(args) else args, cwd, code)
            if turn:
                samples[label].append(taken)
    for label, taken in samples.items():
        wall = statistics.median(s[0] for s in taken)
        cpu = statistics.median(s[1] for s in taken)
        rss = max(s[2] for s in taken)
        results[name if label == "new" else f"{name} ({label})"] = (wall, rss, cpu)
        shown = name if len(codes) == 1 else f"{name} ({label})"
        print(f"  {shown:<30} {wall * 1000:8.0f} ms wall  {cpu * 1000:8.0f} ms CPU  {rss:6.1f} MB", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--workdir", type=Path, default=None, help="keep the home here (default: a temp dir)")
    parser.add_argument(
        "--old", default=None, metavar="REV", help="also run the commands without a daemon on REV's code"
    )
    parser.add_argument(
        "--compile-each-run",
        action="store_true",
        help="no cached bytecode: every process compiles syncd's modules again (PYTHONDONTWRITEBYTECODE)",
    )
    args = parser.parse_args()

    root = args.workdir or Path(tempfile.mkdtemp(prefix="syncd-bench-cli-"))
    BYTECODE["cache"] = None if args.compile_each_run else root / "bytecode"
    home = root / "home"
    if not (home / ".syncd/index").exists():
        build_home(root, args.files)
    codes = {"old": extract(args.old, root / "old-code"), "new": REPO} if args.old else None
    # Each code has a copy of the home: a one-shot search believes the rows image beside the index
    # only when the code that made it wrote it, so codes taking turns on one home would each
    # rebuild the other's image and the search row would time that instead.
    homes = {REPO: home}
    if codes:
        homes[codes["old"]] = root / "home-old"
        if not homes[codes["old"]].exists():
            shutil.copytree(home, homes[codes["old"]], symlinks=True)

    def query(code: Path) -> list[str]:
        return [
            "search",
            "what does she drink in the morning",
            "--user",
            "u0001",
            "--limit",
            "5",
            "--home",
            str(homes[code]),
        ]

    results: dict[str, tuple[float, float, float]] = {}
    print(
        f"home {home}, {args.runs} runs each (median wall and CPU, peak RSS of the command's process); "
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; bytecode "
        + ("compiled by every process" if BYTECODE["cache"] is None else f"cached in {BYTECODE['cache']}")
    )
    try:
        measure("--help", ["--help"], root, args.runs, results, codes)
        measure("status", lambda code: ["status", "--home", str(homes[code])], root, args.runs, results, codes)
        measure("search without daemon", query, root, args.runs, results, codes)
        measure("no-op sync", lambda code: ["sync", "-q", "--home", str(homes[code])], root, args.runs, results, codes)
        edits = iter(range(10**6))

        def edit_and_sync(code: Path) -> None:
            """A person who searched, edits a log and syncs it (each code after its own search:
            the other code's sync may leave this one's image behind)."""
            run(query(code), root, code)
            log = homes[code] / "memory/users/u0001/2025-01-02.md"
            log.write_text(log.read_text() + f"- [note] Took up the theremin, lesson {next(edits)}.\n")
            run(["sync", "-q", "--home", str(homes[code])], root, code)

        measure("search after a 1-file sync", query, root, args.runs, results, codes, before=edit_and_sync)
        measure(
            "search, image deleted",
            query,
            root,
            args.runs,
            results,
            codes,
            before=lambda code: (homes[code] / ".syncd/index/rows.image").unlink(missing_ok=True),
        )
        with daemon_running(home, REPO, root):
            run(query(REPO), root)  # let the daemon finish its startup reconcile before timing
            measure("search with daemon", query(REPO), root, args.runs, results)
    finally:
        if args.workdir is None:
            shutil.rmtree(root, ignore_errors=True)

    without, with_daemon = results["search without daemon"], results["search with daemon"]
    print("\nratios")
    print(
        f"  search: without / with daemon   wall {without[0] / with_daemon[0]:5.1f}x   "
        f"RSS {without[1] / with_daemon[1]:5.1f}x"
    )
    if codes:
        for name in (
            "--help",
            "status",
            "search without daemon",
            "no-op sync",
            "search after a 1-file sync",
            "search, image deleted",
        ):
            (old_wall, old_rss, old_cpu), (new_wall, new_rss, new_cpu) = results[f"{name} (old)"], results[name]
            print(
                f"  {name:<26} new/old: wall {new_wall / old_wall:5.2f}   CPU {new_cpu / old_cpu:5.2f}   "
                f"RSS {new_rss / old_rss:5.2f}"
            )
    print(f"load average at the end {os.getloadavg()[0]:.1f}")
    for name, (wall_target, rss_target) in TARGETS.items():
        wall, rss, _ = results[name]
        line = f"  {name:<22} wall {wall:.3f} s / target {wall_target} s = {wall / wall_target:.2f}"
        if rss_target:
            line += f";  RSS {rss:.1f} MB / target {rss_target:.0f} MB = {rss / rss_target:.2f}"
        print(line)


if __name__ == "__main__":
    main()
