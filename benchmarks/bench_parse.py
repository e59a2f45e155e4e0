"""How fast daily logs and vault pages are read, decoded and parsed.

Run: ``python benchmarks/bench_parse.py [--mb 50] [--pages-mb 10] [--repeat 3]``. Writes a
realistic tree of daily logs (sections, engine facts with comments, hand-written facts, prose,
task lists, code fences) and of vault pages into a temporary directory, then prints MB/s for
read+decode+parse and for parse alone, side by side with a bare ``str.split`` over the same
text so the ratio shows what the grammar costs. Asserts nothing about time.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path

from syncd.formats import decode_markdown, parse_daily_log, parse_page, render_daily_log

WORDS = (
    "tea server memory agent garden river note project meeting deadline coffee python index "
    "search user morning budget travel music vector sync commit file likes prefers wants "
    "sister flight berlin dentist marathon spring book recipe allergy nuts piano"
).split()
CATEGORIES = ["preference", "goal", "fact", "relationship", "health", "work", "event", "habit"]


def sentence(rng: random.Random, lo: int = 6, hi: int = 16) -> str:
    words = rng.choices(WORDS, k=rng.randint(lo, hi))
    return " ".join(words).capitalize() + "."


def daily_log(rng: random.Random, date: str, target: int) -> str:
    out = [f"# {date}\n"]
    size = 0
    turn = 0
    while size < target:
        turn += 1
        hh, mm = divmod(480 + turn * 7, 60)
        session = f"s-{rng.randrange(16**6):06x}"
        lines = [f"\n## {hh % 24:02d}:{mm:02d} chat:telegram-{rng.randint(1, 99)} session:{session}\n"]
        for i in range(rng.randint(1, 6)):
            cat = rng.choice(CATEGORIES)
            text = sentence(rng)
            stamp = f"{date}T{hh % 24:02d}:{mm:02d}:{rng.randint(0, 59):02d}+01:00"
            roll = rng.random()
            if roll < 0.65:  # extracted by the engine: everything, as store.py writes it
                tags = " ".join(rng.sample(WORDS, rng.randint(1, 3)))
                lines.append(
                    f"- [{cat}] {text} `{tags}` <!-- id:m-{rng.randrange(16**16):016x} "
                    f"imp:{rng.random():.2f} src:{session}#{i * 2 + 1} ts:{stamp} -->\n"
                )
            elif roll < 0.75:  # remembered through the API without a session or importance
                lines.append(f"- [{cat}] {text} <!-- id:m-{rng.randrange(16**16):016x} ts:{stamp} -->\n")
            else:
                lines.append(f"- [{cat}] {text}\n")
        roll = rng.random()
        if roll < 0.3:
            lines.append(" ".join(sentence(rng) for _ in range(rng.randint(1, 4))) + "\n")
        elif roll < 0.4:
            lines.append(f"- [ ] {sentence(rng, 3, 6)}\n- [x] {sentence(rng, 3, 6)}\n")
        elif roll < 0.45:
            lines.append("```python\n- [preference] not a fact, code\nprint('hi')\n```\n")
        chunk = "".join(lines)
        out.append(chunk)
        size += len(chunk)
    return "".join(out)


def vault_page(rng: random.Random, n: int, target: int) -> str:
    out = [
        (
            f"---\ntitle: Page {n}\ntags: [{rng.choice(WORDS)}, {rng.choice(WORDS)}]\n"
            f"created: 2026-01-{n % 28 + 1:02d}\n---\n# Page {n}\n"
        )
    ]
    size = 0
    while size < target:
        level = rng.choice(["##", "##", "###"])
        para = " ".join(sentence(rng) for _ in range(rng.randint(2, 6)))
        link = f"[[Page {rng.randrange(1000)}#Intro|see]] and #{rng.choice(WORDS)}"
        block = f"\n{level} {sentence(rng, 2, 4)}\n{para} {link}\n"
        if rng.random() < 0.2:
            block += "\n```bash\n# a comment, not a heading\nmake test\n```\n"
        out.append(block)
        size += len(block)
    return "".join(out)


def write_tree(root: Path, total: int, page_total: int, seed: int) -> tuple[list[Path], list[Path]]:
    rng = random.Random(seed)
    logs: list[Path] = []
    written = 0
    day = 0
    while written < total:
        user = f"u{day % 40}"
        date = f"20{24 + day // 365 % 3}-{day % 12 + 1:02d}-{day % 28 + 1:02d}"
        path = root / "memory" / "users" / user / f"{date}-{day}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        data = daily_log(rng, date, rng.randint(2_000, 16_000)).encode()
        path.write_bytes(data)
        logs.append(path)
        written += len(data)
        day += 1
    pages: list[Path] = []
    written = 0
    while written < page_total:
        path = root / "vault" / f"page-{len(pages)}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        data = vault_page(rng, len(pages), rng.randint(1_000, 12_000)).encode()
        path.write_bytes(data)
        pages.append(path)
        written += len(data)
    return logs, pages


def best_of(repeat: int, fn) -> tuple[float, float]:
    """Best wall time and best CPU time of ``repeat`` runs.

    CPU time is printed too because on a shared machine wall time mostly measures the neighbours.
    """
    walls, cpus = [], []
    for _ in range(repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        fn()
        cpus.append(time.process_time() - cpu)
        walls.append(time.perf_counter() - wall)
    return min(walls), min(cpus)


def rate(label: str, mb: float, times: tuple[float, float], extra: str = "") -> None:
    wall, cpu = times
    print(f"  {label:<19}{mb / wall:8.1f} MB/s wall {mb / cpu:8.1f} MB/s cpu  ({wall:.2f} s){extra}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mb", type=float, default=50.0, help="daily logs to generate, in MB")
    parser.add_argument("--pages-mb", type=float, default=10.0, help="vault pages, in MB")
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement (best kept)")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        started = time.perf_counter()
        logs, pages = write_tree(root, int(args.mb * 1e6), int(args.pages_mb * 1e6), args.seed)
        print(f"generated      {len(logs)} daily logs, {len(pages)} pages in {time.perf_counter() - started:.1f} s")

        log_bytes = [p.read_bytes() for p in logs]
        log_texts = [decode_markdown(b) for b in log_bytes]
        mb = sum(map(len, log_bytes)) / 1e6
        facts = sum(len(parse_daily_log(t).facts()) for t in log_texts)
        assert all(render_daily_log(parse_daily_log(t)) == t for t in log_texts[:200])

        def read_decode_parse() -> None:
            for p in logs:
                parse_daily_log(decode_markdown(p.read_bytes(), p))

        def parse_only() -> None:
            for t in log_texts:
                parse_daily_log(t)

        def split_only() -> None:
            for t in log_texts:
                t.split("\n")

        full = best_of(args.repeat, read_decode_parse)
        parse = best_of(args.repeat, parse_only)
        split = best_of(args.repeat, split_only)
        print(f"daily logs     {mb:.1f} MB, {facts} facts")
        rate("read+decode+parse", mb, full, f", {facts / full[0]:,.0f} facts/s")
        rate("parse only", mb, parse)
        rate("str.split baseline", mb, split, f", parse costs {parse[1] / split[1]:.0f}x a split")

        page_bytes = [p.read_bytes() for p in pages]
        page_texts = [decode_markdown(b) for b in page_bytes]
        pmb = sum(map(len, page_bytes)) / 1e6
        chunks = sum(len(parse_page(t).chunks) for t in page_texts)

        def pages_full() -> None:
            for p in pages:
                parse_page(decode_markdown(p.read_bytes(), p))

        def pages_parse() -> None:
            for t in page_texts:
                parse_page(t)

        pfull = best_of(args.repeat, pages_full)
        pparse = best_of(args.repeat, pages_parse)
        print(f"vault pages    {pmb:.1f} MB, {len(pages)} pages, {chunks} chunks")
        rate("read+decode+parse", pmb, pfull, f", {len(pages) / pfull[0]:,.0f} pages/s")
        rate("parse only", pmb, pparse)


if __name__ == "__main__":
    main()
