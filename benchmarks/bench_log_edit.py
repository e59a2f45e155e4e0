"""A one-line edit in a big daily log until it is searchable: the code of another revision and
this checkout's side by side in one run (issue 30, item 5: <= 0.5 s whatever the log's size).

    python benchmarks/bench_log_edit.py [--facts 16000] [--old HEAD] [--runs 3] [--workdir DIR]

One home holds one daily log of ``--facts`` facts (indexed once). Each code then, in turns:
  fresh   a new process opens the engine after a line was edited in place, and times
          ``engine.sync([log])`` (what a one-shot ``syncd sync`` does for it) and the search that
          finds the new words (its first search loads the rows into memory);
  daemon  one engine kept open (it has searched and synced, as a daemon has): edit, sync,
          search until found, three times;
  cli     ``python -m syncd sync`` as its own process after an edit: wall and peak RSS
          (/usr/bin/time), imports and model load included, after an untimed one-shot search;
          then ``python -m syncd search`` for the new words as its own process (no daemon):
          the edit searchable one-shot; then, 2 s after the edit, ``syncd sync`` again (a no-op
          to a person; the log's mtime was too recent to trust at the first);
  beside  ``python -m syncd sync`` after an edit while ``syncd watch`` of the same code runs
          (after one untimed edit, as a daemon that has run a while has read the log): a code
          whose daemon syncs for it returns with the edit committed; one that refuses is shown so.
The model is the bundled offline one; the embedding cache holds the log's texts, as it would.
Prints medians side by side and the ratios; asserts nothing about time.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from revisions import REPO, env_for, extract

REL = "memory/users/ana/2026-05-01.md"
WORDS = (
    "theremin kayak origami falconry calligraphy beekeeping fencing pottery juggling archery "
    "woodcarving snorkelling glassblowing bouldering"
).split()


def write_log(home: Path, facts: int) -> None:
    lines = ["# 2026-05-01", ""]
    for i in range(facts):
        if i % 20 == 0:
            lines += ["", f"## {(i // 20) // 60 % 24:02d}:{(i // 20) % 60:02d} chat:c1 session:s{i // 20}"]
        lines.append(f"- [context] Ana mentioned the garden and the river (fact {i}).")
    path = home / REL
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def edit(home: Path, n: int) -> str:
    """Edit one line in place (a line near the middle, another each time); the new word."""
    path = home / REL
    text = path.read_text(encoding="utf-8")
    word = f"{WORDS[n % len(WORDS)]}"
    # A fact line of the log's second half that no earlier edit (of this run or of an earlier one
    # on the same home) replaced; edited lines keep their "- [context]" start, so the count holds.
    facts = text.count("\n- [context] ")
    middle, span = facts // 2, max(1, facts // 4)
    start = next(
        text.find(f"(fact {middle + k % span}).") for k in range(n, n + span) if f"(fact {middle + k % span})." in text
    )
    line_start = text.rindex("\n", 0, start) + 1
    line_end = text.index("\n", start)
    path.write_text(
        text[:line_start] + f"- [context] Ana took up {word} lessons (edit {n})." + text[line_end:], encoding="utf-8"
    )
    return word


def child(mode: str, home: Path, n: int) -> dict:
    import syncd

    started = time.perf_counter()
    if mode == "fresh":
        word = edit(home, n)
        with syncd.open(home) as engine:
            opened = time.perf_counter()
            cpu = time.process_time()
            report = engine.sync([REL])
            synced = time.perf_counter()
            sync_cpu = time.process_time() - cpu
            hits = engine.search(f"{word} lessons", user_id="ana", limit=1)
            done = time.perf_counter()
        return {
            "open_s": opened - started,
            "sync_s": synced - opened,
            "sync_cpu_s": sync_cpu,
            "search_s": done - synced,
            "found": bool(hits) and word in hits[0].content,
            "embedded": report.embedded_texts,
            "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        }
    times, found = [], []
    with syncd.open(home) as engine:
        engine.search("garden", user_id="ana", limit=1)
        engine.sync()
        for k in range(3):
            word = edit(home, n + k)
            started, cpu = time.perf_counter(), time.process_time()
            engine.sync([REL])
            hits = engine.search(f"{word} lessons", user_id="ana", limit=1)
            times.append((time.perf_counter() - started, time.process_time() - cpu))
            found.append(bool(hits) and word in hits[0].content)
    return {
        "searchable_s": statistics.median(t for t, _ in times),
        "searchable_cpu_s": statistics.median(c for _, c in times),
        "found": all(found),
    }


def run_child(code: Path, mode: str, home: Path, n: int) -> dict:
    done = subprocess.run(
        [sys.executable, __file__, "_child", mode, str(home), str(n)],
        env=env_for(code),
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"{mode} with {code} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _timed_cli(code: Path, home: Path, *args: str) -> tuple[float, float, float, str]:
    """(wall s, CPU s, peak RSS MB, stdout) of ``python -m syncd ARGS`` run with ``code``."""
    with tempfile.NamedTemporaryFile("r", suffix=".time") as report:
        started = time.perf_counter()
        # Run from the home: `python -m` puts the working folder first on sys.path, so started in
        # this checkout, "old" would import this checkout's syncd.
        done = subprocess.run(
            [
                "/usr/bin/time",
                "-f",
                "%U %S %M",
                "-o",
                report.name,
                sys.executable,
                "-m",
                "syncd",
                *args,
                "--home",
                str(home),
            ],
            env=env_for(code),
            capture_output=True,
            text=True,
            cwd=home,
        )
        wall = time.perf_counter() - started
        if done.returncode != 0:
            raise SystemExit(f"syncd {args[0]} with {code} failed: {done.stderr[-2000:]}")
        user, system, rss_kb = report.read().split()[-3:]
    return wall, float(user) + float(system), int(rss_kb) / 1024, done.stdout


def run_cli(code: Path, home: Path, n: int) -> dict:
    # A person who searched before the edit (untimed): what a code keeps beside the index for a
    # one-shot search is then current, as the other code's and the daemon's writes left it not.
    _timed_cli(code, home, "search", "garden", "--user", "ana", "--limit", "1")
    word = edit(home, n)
    edited = time.time()
    wall, cpu, rss, out = _timed_cli(code, home, "sync", "-q")
    embedded = int(out.split(" texts embedded")[0].rsplit(" ", 1)[-1])
    search_wall, search_cpu, search_rss, found = _timed_cli(
        code, home, "search", f"{word} lessons", "--user", "ana", "--limit", "1", "--json"
    )
    # The sync just after an edit finds its mtime too recent to trust (sync/scan.py: racy); the
    # next sync, once it is not, hashes the log again and records its stat: a no-op to a person.
    time.sleep(max(0.0, edited + 2.2 - time.time()))
    again_wall, _, again_rss, _ = _timed_cli(code, home, "sync", "-q")
    return {
        "again_wall_s": again_wall,
        "again_rss_mb": again_rss,
        "wall_s": wall,
        "cpu_s": cpu,
        "rss_mb": rss,
        "embedded": embedded,
        "search_wall_s": search_wall,
        "search_cpu_s": search_cpu,
        "search_rss_mb": search_rss,
        "found": word in found,
    }


def run_beside_daemon(code: Path, home: Path, n: int) -> dict:
    """Edit, then ``syncd sync`` while ``syncd watch`` of ``code`` holds the home."""
    log = home / ".syncd/daemon.log"
    seen = log.stat().st_size if log.exists() else 0
    daemon = subprocess.Popen(
        [sys.executable, "-m", "syncd", "watch", "--home", str(home)],
        env=env_for(code),
        cwd=home,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 300
        while "watching" not in (log.read_text(errors="replace")[seen:] if log.exists() else ""):
            if time.monotonic() > deadline or daemon.poll() is not None:
                raise SystemExit(f"the daemon of {code} did not start")
            time.sleep(0.1)  # polling the daemon's log for its start line
        edit(home, n)
        first = subprocess.run(
            [sys.executable, "-m", "syncd", "sync", "-q", "--home", str(home)],
            env=env_for(code),
            cwd=home,
            capture_output=True,
            text=True,
        )
        if first.returncode != 0:
            return {"refused": first.stderr.strip().splitlines()[-1]}
        word = edit(home, n + 1)
        wall, cpu, rss, _ = _timed_cli(code, home, "sync", "-q")
        found = _timed_cli(code, home, "search", f"{word} lessons", "--user", "ana", "--limit", "1")[3]
        committed = subprocess.run(
            ["git", "-C", str(home), "show", f"HEAD:{REL}"], capture_output=True, text=True, check=True
        ).stdout == (home / REL).read_text(encoding="utf-8")
        return {"wall_s": wall, "cpu_s": cpu, "rss_mb": rss, "found": word in found and committed}
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(timeout=120)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "_child":
        print(json.dumps(child(sys.argv[2], Path(sys.argv[3]), int(sys.argv[4]))))
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--facts", type=int, default=16_000)
    parser.add_argument("--old", default="HEAD", help="the revision to compare with (default: HEAD)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workdir", type=Path, default=None, help="keep the home here (reused by the next run)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="syncd-log-edit-") as tmp:
        work = args.workdir or Path(tmp)
        codes = {"old": extract(args.old, work / "old"), "new": REPO}
        sys.path.insert(0, str(REPO))
        import syncd

        home = work / "home"
        if not (home / ".syncd/index").exists():  # a --workdir of an earlier run keeps its home
            home = syncd.init(home).home
            write_log(home, args.facts)
        with syncd.open(home) as engine:
            started = time.perf_counter()
            engine.sync()
            engine.commit()
            facts = engine.counts()["facts"]
            print(f"indexed {facts:,} facts in one log in {time.perf_counter() - started:.1f} s", flush=True)
        results: dict[str, dict[str, list[dict]]] = {
            name: {"fresh": [], "daemon": [], "cli": [], "beside": []} for name in codes
        }
        # Each edit writes words no earlier run wrote, so its one new text always reaches the model
        # (a --workdir home keeps its embedding cache: a text an earlier run embedded would spare
        # one code the model's load and not the other, as a reused home once did).
        n = time.time_ns() // 1000
        for _ in range(args.runs):
            for name, code in codes.items():  # alternating, so both see the same machine
                results[name]["fresh"].append(run_child(code, "fresh", home, n))
                results[name]["daemon"].append(run_child(code, "daemon", home, n + 1))
                results[name]["cli"].append(run_cli(code, home, n + 4))
                n += 5
        print(
            f"\n{facts:,}-fact log, one line edited in place; median of {args.runs} runs "
            f"(old = {args.old}, new = this checkout); load average {os.getloadavg()[1]:.1f} (5 min) on "
            f"{os.cpu_count()} CPUs"
        )
        rows = [
            ("fresh engine: sync", "fresh", "sync_s"),
            ("fresh engine: sync CPU", "fresh", "sync_cpu_s"),
            ("fresh engine: then search", "fresh", "search_s"),
            ("fresh engine: open", "fresh", "open_s"),
            ("fresh engine: peak RSS MB", "fresh", "rss_mb"),
            ("daemon: edit -> searchable", "daemon", "searchable_s"),
            ("daemon: edit -> searchable CPU", "daemon", "searchable_cpu_s"),
            ("syncd sync (CLI) wall", "cli", "wall_s"),
            ("syncd sync (CLI) CPU", "cli", "cpu_s"),
            ("syncd sync (CLI) peak RSS MB", "cli", "rss_mb"),
            ("then syncd search (CLI) wall", "cli", "search_wall_s"),
            ("then syncd search (CLI) CPU", "cli", "search_cpu_s"),
            ("then syncd search (CLI) RSS MB", "cli", "search_rss_mb"),
            ("next syncd sync 2 s on, wall", "cli", "again_wall_s"),
            ("next syncd sync 2 s on, RSS MB", "cli", "again_rss_mb"),
        ]
        print(f"  {'':32} {'old':>9} {'new':>9} {'new/old':>8}")
        for label, mode, key in rows:
            old, new = (statistics.median(r[key] for r in results[name][mode]) for name in ("old", "new"))
            print(f"  {label:32} {old:9.3f} {new:9.3f} {new / old:8.2f}")
        for _ in range(args.runs):
            for name, code in codes.items():
                results[name]["beside"].append(run_beside_daemon(code, home, n))
                n += 2
        for label, key in (("wall", "wall_s"), ("CPU", "cpu_s"), ("peak RSS MB", "rss_mb")):
            cells = []
            for name in ("old", "new"):
                got = [r[key] for r in results[name]["beside"] if key in r]
                cells.append(statistics.median(got) if got else None)
            shown = " ".join(f"{c:9.3f}" if c is not None else f"{'refused':>9}" for c in cells)
            ratio = f"{cells[1] / cells[0]:8.2f}" if None not in cells else ""
            print(f"  {'syncd sync beside a daemon ' + label:32} {shown} {ratio}")
        for name in codes:
            refused = [r["refused"] for r in results[name]["beside"] if "refused" in r]
            if refused:
                print(f"  {name}: syncd sync beside its daemon refused: {refused[0]}")
        for name in codes:
            found = all(
                r["found"] for mode in ("fresh", "daemon", "cli", "beside") for r in results[name][mode] if "found" in r
            )
            embedded = [r["embedded"] for mode in ("fresh", "cli") for r in results[name][mode]]
            print(
                f"  {name}: every edit found by its search: {found}; texts embedded by each fresh and CLI "
                f"sync: {embedded}"
            )


if __name__ == "__main__":
    main()
