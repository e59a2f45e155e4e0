"""A folder of markdown, indexed cold and searched, by two codes side by side in one run (issue 30).

    python benchmarks/bench_vault.py (--vault DIR | --generate PAGES) [--old REV] [--runs 3]
                                     [--big-page-kb KB] [--workdir DIR]

``--vault DIR`` is any folder of markdown (an Obsidian vault, a docs tree); ``--generate PAGES``
writes one of that many pages from the prose of this repository's own markdown (README, skills,
the vault seed), of lengths from a paragraph to many sections, plus with ``--big-page-kb`` one page
of that size. For each code (this checkout, and with ``--old REV`` that revision's, extracted by
revisions.py) a fresh home gets a copy of the folder as its ``vault/``, and then, each command its
own ``python -m syncd`` process measured by /usr/bin/time (wall, CPU, peak RSS):
  1. cold index: the first ``syncd sync`` of the home (an empty embedding cache: every text
     embedded), with its texts embedded per wall and per CPU second;
  2. a no-op ``syncd sync``;
  3. ``syncd search`` without a daemon (its first run untimed: it writes the rows image);
  4. ``syncd search`` while ``syncd watch`` runs (the client process asks the daemon).
The codes take turns at every step, so both see the same machine. Prints medians side by side and
new/old ratios; asserts nothing about time.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench_cli import BYTECODE, child_env, daemon_running, run
from revisions import REPO, extract

sys.path.insert(0, str(REPO))

QUERIES = ["how do I search my memory", "what changed in the history", "links between pages"]


def prose() -> list[str]:
    """Paragraphs of this repository's own markdown: real prose, code and lists to cut pages from."""
    sources = [
        REPO / "README.md",
        *sorted((REPO / "skills").rglob("*.md")),
        *sorted((REPO / "vault_template").rglob("*.md")),
    ]
    paragraphs = []
    for source in sources:
        for block in re.split(r"\n\s*\n", source.read_text(encoding="utf-8")):
            if block.strip() and not block.lstrip().startswith("#"):
                paragraphs.append(block.strip())
    return paragraphs


def generate(folder: Path, pages: int, big_page_kb: int, seed: int = 11) -> None:
    rng = random.Random(seed)
    paragraphs = prose()
    for p in range(pages):
        sections = []
        for s in range(rng.choice([1, 1, 2, 3, 5, 8])):
            body = "\n\n".join(rng.choice(paragraphs) for _ in range(rng.randint(1, 4)))
            link = f"[[Page {rng.randrange(pages)}]]"
            sections.append(f"## Part {s}\n\n{body}\n\nSee {link}.")
        path = folder / f"area{p % 12}" / f"Page {p}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# Page {p}\n\n" + "\n\n".join(sections) + "\n", encoding="utf-8")
    if big_page_kb:
        parts, size, s = [], 0, 0
        while size < big_page_kb * 1024:
            part = f"## Section {s}\n\n" + "\n\n".join(rng.choice(paragraphs) for _ in range(3)) + "\n"
            parts.append(part)
            size, s = size + len(part.encode()), s + 1
        (folder / "Big page.md").write_text("# Big page\n\n" + "\n".join(parts), encoding="utf-8")


def fresh_home(root: Path, vault: Path, code: Path) -> Path:
    """A new home made by ``code``'s own ``syncd init``, holding a copy of ``vault`` as its wiki."""
    home = root / f"home-{code.name}"
    shutil.rmtree(home, ignore_errors=True)
    # Run from the work folder: from this checkout, its syncd would shadow ``code``'s (sys.path[0]).
    subprocess.run(
        [sys.executable, "-m", "syncd", "init", str(home)],
        cwd=root,
        env=child_env(code),
        check=True,
        capture_output=True,
    )
    shutil.copytree(vault, home / "vault", dirs_exist_ok=True)
    return home


def texts_embedded(stdout: str) -> int:
    found = re.search(r"([\d,]+) texts embedded", stdout)
    return int(found.group(1).replace(",", "")) if found else 0


def with_daemon(home: Path, code: Path, query: list[str], runs: int) -> list[tuple[float, float, float, str]]:
    with daemon_running(home, code, home.parent):
        run(query, home, code)  # the daemon's startup reconcile first
        return [run(query, home, code) for _ in range(runs)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--vault", type=Path, help="a folder of markdown to index")
    source.add_argument("--generate", type=int, metavar="PAGES", help="generate a vault of this many pages")
    parser.add_argument("--big-page-kb", type=int, default=0, help="with --generate: one page of this size too")
    parser.add_argument("--old", metavar="REV", help="also run revision REV's code, in turns with this checkout's")
    parser.add_argument("--runs", type=int, default=3, help="timed runs of each command but the cold index (1)")
    parser.add_argument("--cold-runs", type=int, default=1, help="cold indexes per code (each a fresh home)")
    parser.add_argument("--workdir", type=Path, help="keep the homes here (default: a temp dir, removed)")
    args = parser.parse_args()

    root = args.workdir or Path(tempfile.mkdtemp(prefix="syncd-bench-vault-"))
    root.mkdir(parents=True, exist_ok=True)
    BYTECODE["cache"] = root / "bytecode"
    vault = args.vault
    if vault is None:
        vault = root / "generated-vault"
        if not vault.exists():
            generate(vault, args.generate, args.big_page_kb)
    if not vault.is_dir():
        raise SystemExit(f"{vault} is not a folder")
    notes = sum(1 for _ in vault.rglob("*.md"))
    size_mb = sum(p.stat().st_size for p in vault.rglob("*.md")) / 1e6
    codes = {"new": REPO}
    if args.old:
        codes = {"old": extract(args.old, root / "old-code"), "new": REPO}
    print(
        f"vault {vault}: {notes} notes, {size_mb:.1f} MB; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
    )

    try:
        rows, texts = measure(codes, vault, root, args)
    finally:
        if args.workdir is None:
            shutil.rmtree(root, ignore_errors=True)
    report(rows, texts, list(codes))


Samples = dict[str, dict[str, list[tuple[float, float, float]]]]


def measure(codes: dict[str, Path], vault: Path, root: Path, args: argparse.Namespace):
    """Each step for each code in turns: (wall, CPU, RSS) samples by step and code, and the cold
    indexes' (texts embedded, wall, CPU) by code."""
    rows: Samples = {}
    texts: dict[str, list[tuple[int, float, float]]] = {label: [] for label in codes}
    homes: dict[str, Path] = {}
    for _ in range(args.cold_runs):
        for label, code in codes.items():
            homes[label] = fresh_home(root, vault, code)
            wall, cpu, rss, out = run(["sync", "--home", str(homes[label])], root, code)
            rows.setdefault("cold index", {}).setdefault(label, []).append((wall, cpu, rss))
            texts[label].append((texts_embedded(out), wall, cpu))
    query = ["search", QUERIES[0], "--limit", "5", "--home"]
    steps = {
        "no-op sync": lambda home: ["sync", "-q", "--home", str(home)],
        "search without daemon": lambda home: [*query, str(home)],
    }
    for name, argv in steps.items():
        for turn in range(args.runs + 1):
            for label, code in codes.items():
                taken = run(argv(homes[label]), root, code)
                if turn:  # the first of each is untimed: the search's first writes the rows image
                    rows.setdefault(name, {}).setdefault(label, []).append(taken[:3])
    for label, code in codes.items():
        taken = with_daemon(homes[label], code, [*query, str(homes[label])], args.runs)
        rows.setdefault("search with daemon", {})[label] = [t[:3] for t in taken]
    return rows, texts


def report(rows: Samples, texts: dict[str, list[tuple[int, float, float]]], labels: list[str]) -> None:
    print("\nmedians: wall s / CPU s / peak RSS MB" + ("   (new/old)" if len(labels) > 1 else ""))
    for name, by_code in rows.items():
        shown = [
            (
                statistics.median(t[0] for t in by_code[label]),
                statistics.median(t[1] for t in by_code[label]),
                max(t[2] for t in by_code[label]),
            )
            for label in labels
        ]
        line = f"  {name:<22}" + "".join(
            f"  {lab}: {w:7.2f} {c:7.2f} {r:7.1f}" for lab, (w, c, r) in zip(labels, shown)
        )
        if len(shown) == 2:
            (ow, oc, orss), (nw, nc, nrss) = shown
            line += f"   wall {nw / ow:4.2f}  CPU {nc / oc:4.2f}  RSS {nrss / orss:4.2f}"
        print(line)
    for label in labels:
        n, wall, cpu = (statistics.median(t[i] for t in texts[label]) for i in range(3))
        print(
            f"  texts embedded by the cold index ({label}): {n:.0f}: {n / wall:.1f} per wall s, {n / cpu:.1f} per CPU s"
        )
    print(f"load average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
