"""The workbench on a big home, in a real browser: time to first render and to answer a search.

    python benchmarks/bench_workbench.py [--facts 100000] [--home PATH]

Builds (or reuses, with --home) a home of N facts (20 users, 50 days each, one daily log per day),
indexes and commits it, then starts JupyterLab and Debian's chromium (tests/workbench_browser.py),
runs the notebook and measures, side by side in one run:
- first render: Run All Cells until the workbench's widgets show (opening the home included);
- search: Enter in the query box until the first hit shows (the first search loads the index's
  rows; the second is the steady state), against the same search in-process (``engine.search``).
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import syncd
from tests import workbench_browser as wbb

WORDS = (
    "tea kite river garden piano marathon sourdough chess bike yoga Lyon Kyoto nurse cat "
    "rain spring harbour lantern violin orchard"
).split()
CATEGORIES = ("preference", "goal", "context", "plan", "technical", "personal")
USERS, DAYS = 20, 50


def build(home: Path, facts: int) -> None:
    syncd.init(home)
    rng = random.Random(7)
    per_log = max(facts // (USERS * DAYS), 1)
    n = 0
    for u in range(USERS):
        folder = home / "memory" / "users" / f"user{u:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        for d in range(DAYS):
            date = f"2026-{1 + d // 28:02d}-{1 + d % 28:02d}"
            lines = [f"# {date}", "", f"## 09:00 chat:c{d % 3} session:s-{u}-{d}"]
            for _ in range(per_log):
                words = " ".join(rng.choice(WORDS) for _ in range(7))
                lines.append(f"- [{rng.choice(CATEGORIES)}] Fact {n} about {words}.")
                n += 1
            (folder / f"{date}.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (home / "memory" / "users" / "user00" / "2026-02-23.md").write_text(
        "# 2026-02-23\n\n- [preference] Likes smoked lapsang souchong tea.\n", encoding="utf-8"
    )
    t = time.monotonic()
    with syncd.open(home) as engine:
        engine.sync()
        engine.commit()
        print(f"indexed {engine.status().facts} facts in {time.monotonic() - t:.0f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--facts", type=int, default=100_000)
    parser.add_argument("--home", type=Path, default=None, help="reuse (or build once) this home")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-workbench-"))
    home = args.home or work / "home"
    if not (home / ".syncd").is_dir():
        build(home, args.facts)
    else:
        with syncd.open(home) as engine:  # a reused home is brought up to date (an interrupted build too)
            t = time.monotonic()
            engine.sync()
            engine.commit()
            print(f"synced the reused home in {time.monotonic() - t:.0f} s")
    with syncd.open(home, read_only=True) as engine:
        engine.search("warm up", limit=1)
        t = time.monotonic()
        engine.search("lapsang souchong", limit=20)
        in_process = time.monotonic() - t
        facts = engine.status().facts
    with wbb.jupyterlab(work, home, timeout=120) as url, wbb.chromium() as page:
        first = wbb.run_all(page, url, timeout_ms=300_000)
        search1 = wbb.search(page, "lapsang souchong", "lapsang", timeout_ms=300_000)
        search2 = wbb.search(page, "smoked tea lapsang", "lapsang", timeout_ms=300_000)
        page.screenshot(path=str(work / "search.png"))
    print(f"home: {facts} facts ({home})")
    print(f"first render (Run All -> widgets shown): {first:.2f} s")
    print(f"search in the browser: first {search1:.2f} s (loads the rows), then {search2:.2f} s")
    print(
        f"the same search in-process: {in_process * 1000:.0f} ms "
        f"(browser/in-process: {search2 / max(in_process, 1e-6):.1f}x)"
    )


if __name__ == "__main__":
    main()
