"""Scale benchmarks: many small files, and one huge daily log. Ratios measured side by side.

    python benchmarks/bench_scale.py files [--files 100000]   # sync of N small files and of N/10
    python benchmarks/bench_scale.py log [--facts 100000]     # one daily log of N facts, one edit

``files`` builds a home of N small markdown files spread over folders, then in a fresh process
per size: a first sync (time, peak RSS, the most memory mappings the process held, sampled), a
no-op second sync, and the raw embedding time of the same texts through the bare model (no cache)
in that process, so "sync time / embedding time" says how much the rest costs. It does so at N/10
and N and prints the per-file ratio: 1.0 is linear.

``log`` builds one daily log of N facts, indexes it, then times the index catching up with an
edit until a search finds the new text (the index side; the commit is the history's own
benchmark): a line edited in place, a line inserted (the lines after it move), a section
appended (what remembering a fact does).

Run on the offline default model. Timings on shared CPUs are noisy; the ratios are measured in
the same process so both sides of each see the same machine.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import syncd
from syncd.config import Settings
from syncd.embedding.fastembed_backend import load_embedder
from syncd.index.rows import parse_file

WORDS = (
    "tea kite river garden piano marathon sourdough chess bike yoga Lyon Kyoto nurse cat "
    "rain spring harbour lantern violin orchard"
).split()
# The raw embedding time is measured on at most this many of the same texts and scaled up.
_RAW_SAMPLE = 5000


def write_files(root: Path, n: int, seed: int = 3) -> None:
    rng = random.Random(seed)
    for i in range(n):
        folder = root / "vault" / f"area{i % 50:02d}" / f"topic{(i // 50) % 40:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        words = " ".join(rng.choice(WORDS) for _ in range(8))
        (folder / f"note{i:06d}.md").write_text(f"# Note {i}\n\nAbout {words} (note {i}).\n", encoding="utf-8")


def write_log(root: Path, facts: int, seed: int = 5) -> str:
    rng = random.Random(seed)
    rel = "memory/users/ana/2026-05-01.md"
    lines = ["# 2026-05-01", ""]
    for i in range(facts):
        if i % 20 == 0:
            lines += ["", f"## {(i // 20) // 60 % 24:02d}:{(i // 20) % 60:02d} chat:c1 session:s{i // 20}"]
        lines.append(f"- [context] Ana mentioned {rng.choice(WORDS)} and {rng.choice(WORDS)} (fact {i}).")
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return rel


class _Sampler:
    """Samples this process's memory mappings in the background; ``peak`` is the most seen."""

    def __init__(self, every: float = 0.2):
        self.peak = 0
        self._every = every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            with open("/proc/self/maps", encoding="ascii") as maps:
                self.peak = max(self.peak, sum(1 for _ in maps))
            self._stop.wait(self._every)

    def __enter__(self) -> _Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _raw_embedding_seconds(model, texts: list[str]) -> tuple[float, int]:
    """Seconds the bare model (the same instance, no cache) takes for ``texts``, from a sample
    scaled up."""
    step = max(1, len(texts) // _RAW_SAMPLE)
    sample = texts[::step]
    started = time.perf_counter()
    for start in range(0, len(sample), 1024):
        model.embed(sample[start : start + 1024])
    return (time.perf_counter() - started) * len(texts) / max(1, len(sample)), len(sample)


def child_files(home: Path, models: Path) -> dict:
    embedder = load_embedder(Settings(), cache_dir=models)
    embedder.embed(["warm up"])
    base_rss = _peak_rss_mb()
    with _Sampler() as sampler, syncd.open(home, embedder=embedder) as engine:
        started = time.perf_counter()
        report = engine.sync()
        first = time.perf_counter() - started
        started = time.perf_counter()
        again = engine.sync()
        noop = time.perf_counter() - started
        files = engine.counts()["files"]
    peak_rss = _peak_rss_mb()
    texts = []
    for path in sorted(home.glob("vault/**/*.md")):
        rel = path.relative_to(home).as_posix()
        texts += [row.embed_text for row in parse_file(rel, path.read_bytes())]
    raw, sampled = _raw_embedding_seconds(embedder, texts)
    return {
        "files": files,
        "texts": len(texts),
        "sync_s": first,
        "noop_s": noop,
        "noop_changed": not again.plan.empty,
        "raw_embed_s": raw,
        "raw_sampled": sampled,
        "peak_rss_mb": peak_rss,
        "model_rss_mb": base_rss,
        "peak_maps": sampler.peak,
        "embedded": report.embedded_texts,
    }


def child_log(home: Path, models: Path, rel: str) -> dict:
    embedder = load_embedder(Settings(), cache_dir=models)
    embedder.embed(["warm up"])
    with _Sampler() as sampler, syncd.open(home, embedder=embedder) as engine:
        started = time.perf_counter()
        report = engine.sync()
        index_s = time.perf_counter() - started
        path = home / rel

        def searchable(change, query: str, word: str) -> tuple[float, bool]:
            """Seconds from writing ``change(text)`` until a search for ``query`` finds ``word``."""
            text = path.read_text(encoding="utf-8")
            started = time.perf_counter()
            path.write_text(change(text), encoding="utf-8")
            engine.sync([rel])
            hits = engine.search(query, user_id="ana", limit=1)
            return time.perf_counter() - started, bool(hits) and word in hits[0].content

        # In place: the line count stays. Inserted (at 70%): every line after it moves down one,
        # and its row's line number with it. Appended: what remembering a fact does.
        edited = "(fact 5000)." if report.facts > 5000 else "(fact 1)."
        inserted = f"(fact {report.facts * 7 // 10 + 1})."
        edit = searchable(
            lambda t: t.replace(edited, "and now plays the theremin on Tuesdays.", 1),
            "theremin on Tuesdays",
            "theremin",
        )
        insert = searchable(
            lambda t: t.replace(inserted, inserted + "\n- [context] Ana once sailed to Tromsø in winter.", 1),
            "sailed to Tromsø",
            "Tromsø",
        )
        append = searchable(
            lambda t: t + "\n## 23:59 chat:c1 session:appended\n- [context] Ana bought a red kayak.\n",
            "red kayak",
            "kayak",
        )
    return {
        "facts": report.facts,
        "index_s": index_s,
        "edit_searchable_s": edit[0],
        "found": edit[1],
        "insert_searchable_s": insert[0],
        "insert_found": insert[1],
        "append_searchable_s": append[0],
        "append_found": append[1],
        "peak_rss_mb": _peak_rss_mb(),
        "peak_maps": sampler.peak,
    }


def _run_child(*args: str) -> dict:
    done = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"child {args} failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def bench_files(n: int, work: Path) -> None:
    results = {}
    for size in (max(1, n // 10), n):
        home = syncd.init(work / f"files{size}").home
        started = time.perf_counter()
        write_files(home, size)
        print(f"built {size} files in {time.perf_counter() - started:.1f}s", flush=True)
        r = results[size] = _run_child("_files", str(home), str(work / "models"))
        print(
            f"{size:>7} files ({r['texts']} texts): sync {r['sync_s']:.1f}s "
            f"({1000 * r['sync_s'] / size:.2f} ms/file), raw embedding of the same texts "
            f"{r['raw_embed_s']:.1f}s (from {r['raw_sampled']}), sync/embedding "
            f"{r['sync_s'] / r['raw_embed_s']:.2f}; no-op sync {r['noop_s']:.2f}s "
            f"({1e6 * r['noop_s'] / size:.0f} us/file, changed={r['noop_changed']}); peak RSS "
            f"{r['peak_rss_mb']:.0f} MB (model loaded: {r['model_rss_mb']:.0f} MB); most memory "
            f"mappings {r['peak_maps']}",
            flush=True,
        )
    small, big = (results[s] for s in sorted(results))
    ns, nb = sorted(results)
    print(
        f"per-file ratio {nb} vs {ns} (1.0 = linear): sync {big['sync_s'] / nb / (small['sync_s'] / ns):.2f}, "
        f"sync/embedding {big['sync_s'] / big['raw_embed_s']:.2f} vs {small['sync_s'] / small['raw_embed_s']:.2f}, "
        f"no-op {big['noop_s'] / nb / (small['noop_s'] / ns):.2f}; "
        f"mappings {big['peak_maps']} vs {small['peak_maps']}"
    )


def bench_log(n: int, work: Path) -> None:
    results = {}
    for size in (max(1, n // 10), n):
        home = syncd.init(work / f"log{size}").home
        rel = write_log(home, size)
        r = results[size] = _run_child("_log", str(home), str(work / "models"), rel)
        print(
            f"{size:>7} facts in one log: indexed in {r['index_s']:.1f}s "
            f"({1000 * r['index_s'] / size:.2f} ms/fact); searchable after a one-line edit in "
            f"{r['edit_searchable_s']:.2f}s (found={r['found']}), an inserted line "
            f"{r['insert_searchable_s']:.2f}s (found={r['insert_found']}), an appended section "
            f"{r['append_searchable_s']:.2f}s (found={r['append_found']}); peak RSS {r['peak_rss_mb']:.0f} MB; "
            f"most memory mappings {r['peak_maps']}",
            flush=True,
        )
    ns, nb = sorted(results)
    big, small = results[nb], results[ns]
    print(
        f"{nb} vs {ns} facts: per-fact indexing ratio "
        f"{big['index_s'] / nb / (small['index_s'] / ns):.2f} (1.0 = linear); for 10x the log a one-line "
        f"edit {big['edit_searchable_s'] / small['edit_searchable_s']:.2f}x, an inserted line "
        f"{big['insert_searchable_s'] / small['insert_searchable_s']:.2f}x, an appended section "
        f"{big['append_searchable_s'] / small['append_searchable_s']:.2f}x"
    )


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "_files":
        print(json.dumps(child_files(Path(sys.argv[2]), Path(sys.argv[3]))))
        return
    if len(sys.argv) > 1 and sys.argv[1] == "_log":
        print(json.dumps(child_log(Path(sys.argv[2]), Path(sys.argv[3]), sys.argv[4])))
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=["files", "log"])
    parser.add_argument("--files", type=int, default=100_000)
    parser.add_argument("--facts", type=int, default=100_000)
    parser.add_argument("--workdir", type=Path, default=None, help="keep the homes here")
    args = parser.parse_args()
    os.environ.setdefault("GIT_CONFIG_NOSYSTEM", "1")
    with tempfile.TemporaryDirectory(prefix="syncd-scale-") as tmp:
        work = args.workdir or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        if args.what == "files":
            bench_files(args.files, work)
        else:
            bench_log(args.facts, work)


if __name__ == "__main__":
    main()
