"""How fast the bundled offline model loads and embeds, and what the embedding cache saves.

Run: ``python benchmarks/bench_embed.py [--sentences N] [--threads T] [--old REV] [--rounds R]``.
Prints measurements side by side from one run; asserts nothing about time.

The mixed corpus is what a home's index embeds: the chunks of the help pages shipped with syncd
(README.md, the skills, the vault template) and a generated daily log of facts of varied lengths
(a few words to a paragraph, words drawn from the README). Each code (this checkout, and with
``--old`` another revision's, benchmarks/revisions.py) embeds it in a child process of its own,
the codes alternating round by round so a noisy neighbour hits both alike; each prints texts per
wall second and per CPU second of the embedding (model loaded before), the lowest cosine between
its vectors and the first code's, and a one-query process (what a one-shot ``syncd search`` pays
for its model: imports, load, one query): wall, CPU, peak RSS.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from revisions import REPO, env_for, extract

WORDS = (
    "tea server memory agent garden river note project meeting deadline coffee python index "
    "search user morning budget travel music vector sync commit file"
).split()


def sentences(n: int) -> list[str]:
    """Short, distinct, sentence-like texts (8 to 14 words), like one fact line each."""
    out = []
    for i in range(n):
        k = 8 + i % 7
        words = [WORDS[(i * 7 + j * 3) % len(WORDS)] for j in range(k)]
        out.append(f"Fact {i}: " + " ".join(words) + ".")
    return out


def mixed_corpus(facts: int, seed: int = 3) -> list[str]:
    """The texts the index embeds for the help pages and a daily log of ``facts`` facts."""
    from syncd.index.rows import parse_file

    pages = sorted([*REPO.glob("vault_template/*.md"), *REPO.glob("skills/**/*.md"), REPO / "README.md"])
    texts = [row.embed_text for p in pages for row in parse_file(f"vault/{p.name}", p.read_bytes())]
    rng = random.Random(seed)
    words = (REPO / "README.md").read_text(encoding="utf-8").split()
    lines = ["# 2026-03-04", "", "## 10:00 chat:c1 session:s1"]
    for i in range(facts):
        n = 3 + int(rng.lognormvariate(2.5, 0.7))
        start = rng.randrange(len(words) - n)
        lines.append(f"- [context] {' '.join(words[start : start + n])} (note {i})")
    log = ("\n".join(lines) + "\n").encode()
    return texts + [row.embed_text for row in parse_file("memory/users/u1/2026-03-04.md", log)]


# Run by a child process with the code under test first on sys.path: only names both codes have.
_CORPUS_CHILD = """
import json, sys, time
from pathlib import Path
import numpy as np
from syncd.config import Settings
from syncd.embedding.fastembed_backend import load_embedder
corpus, models, out, threads = sys.argv[1:5]
texts = json.loads(Path(corpus).read_text())
embedder = load_embedder(Settings(embed_threads=int(threads) or None), cache_dir=Path(models))
embedder.embed(texts[:8])
wall, cpu = time.perf_counter(), time.process_time()
# 256 at a time, as the index's embedding cache hands texts to the model
vectors = np.concatenate([embedder.embed(texts[i : i + 256]) for i in range(0, len(texts), 256)])
print(time.perf_counter() - wall, time.process_time() - cpu)
np.save(out, vectors)
"""

_QUERY_CHILD = """
import resource, sys, time
from pathlib import Path
from syncd.config import Settings
from syncd.embedding.fastembed_backend import load_embedder, release_after_query
embedder = load_embedder(Settings(), cache_dir=Path(sys.argv[1]))
release_after_query(embedder)
embedder.embed_query("what does the user like to drink in the morning")
print(time.process_time(), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
"""


def _child(code: Path, script: str, *args: str) -> tuple[float, str]:
    """(wall s, stdout) of ``python -c script args`` importing syncd from ``code``."""
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", script, *args],
        env=env_for(code),
        cwd=tempfile.gettempdir(),
        capture_output=True,
        text=True,
        check=True,
    )
    return time.perf_counter() - started, done.stdout


def compare(args: argparse.Namespace, root: Path) -> None:
    """The mixed corpus and one query, for each code, alternating (see the module docstring)."""
    import numpy as np

    codes = {"new": REPO}
    if args.old:
        codes = {args.old: extract(args.old, root / "old"), **codes}
    corpus = root / "corpus.json"
    texts = mixed_corpus(args.facts)
    corpus.write_text(json.dumps(texts))
    print(f"mixed corpus: {len(texts)} texts, {sum(map(len, texts)):,} characters; load {os.getloadavg()[0]:.1f}")
    runs: dict[str, list[tuple[float, float]]] = {name: [] for name in codes}
    queries: dict[str, list[tuple[float, float, float]]] = {name: [] for name in codes}
    cosines: dict[str, float] = {}
    first = next(iter(codes))
    for rnd in range(args.rounds):
        for name, code in codes.items():
            out = root / f"{name}-{rnd}.npy"
            _, stdout = _child(code, _CORPUS_CHILD, str(corpus), str(root / "models"), str(out), str(args.threads or 0))
            wall, cpu = map(float, stdout.split())
            runs[name].append((wall, cpu))
            mine, theirs = np.load(out), np.load(root / f"{first}-0.npy")
            cosines[name] = min(cosines.get(name, 1.0), float(np.min(np.sum(mine * theirs, axis=1))))
            for _ in range(args.queries):
                qwall, stdout = _child(code, _QUERY_CHILD, str(root / "models"))
                qcpu, peak = map(float, stdout.split())
                queries[name].append((qwall, qcpu, peak))
            print(f"  round {rnd + 1} {name}: embed {wall:.1f} s wall, {cpu:.1f} s CPU (load {os.getloadavg()[0]:.1f})")
    print(f"{'code':>10}  texts/wall-s  texts/CPU-s  cos min vs {first}   query wall  CPU  peak RSS (medians)")
    for name in codes:
        wall = statistics.median(w for w, _ in runs[name])
        cpu = statistics.median(c for _, c in runs[name])
        q = [statistics.median(x[k] for x in queries[name]) for k in range(3)] if queries[name] else [0.0] * 3
        print(
            f"{name:>10}  {len(texts) / wall:12.1f}  {len(texts) / cpu:11.1f}  {cosines[name]:15.7f}   "
            f"{q[0]:8.2f} s {q[1]:5.2f} s {q[2]:5.0f} MB"
        )
    if args.old:
        old_cpu = statistics.median(c for _, c in runs[args.old])
        new_cpu = statistics.median(c for _, c in runs["new"])
        old_wall = statistics.median(w for w, _ in runs[args.old])
        new_wall = statistics.median(w for w, _ in runs["new"])
        print(
            f"new / {args.old}: texts per CPU second x{old_cpu / new_cpu:.2f}, per wall second x{old_wall / new_wall:.2f}"
        )


def cache_figures(args: argparse.Namespace, root: Path) -> None:
    """This checkout's load, raw and cached embedding of short sentences, and cache lookups."""
    from syncd.config import Settings
    from syncd.embedding.fastembed_backend import FastEmbedBackend, load_embedder
    from syncd.index.embed_cache import CachedEmbedder, EmbeddingCache

    settings = Settings(embed_threads=args.threads, embed_batch_size=args.batch_size)
    started = time.perf_counter()
    embedder = load_embedder(settings, cache_dir=root / "models")
    assert isinstance(embedder, FastEmbedBackend)
    resolved = time.perf_counter()
    embedder.load()
    loaded = time.perf_counter()
    print(f"model          {embedder.model_id}")
    print(f"resolve        {resolved - started:8.3f} s  (what `syncd status` pays)")
    print(f"load           {loaded - resolved:8.3f} s  (import onnxruntime, sha256, session)")

    texts = sentences(args.sentences)
    embedder.embed(texts[:64])
    started = time.perf_counter()
    embedder.embed(texts)
    raw = time.perf_counter() - started
    print(f"embed          {args.sentences / raw:8.0f} sentences/s  ({raw:.2f} s for {args.sentences})")

    with EmbeddingCache(root / "cache.sqlite") as cache:
        cached = CachedEmbedder(embedder, cache)
        started = time.perf_counter()
        cached.embed(texts)
        cold = time.perf_counter() - started
        started = time.perf_counter()
        cached.embed(texts)
        warm = time.perf_counter() - started
        print(f"cached, cold   {args.sentences / cold:8.0f} sentences/s")
        print(
            f"cached, warm   {args.sentences / warm:8.0f} sentences/s  "
            f"({cold / warm:.0f}x the cold run, {cached.calls} model call in all)"
        )

    # 10,000 cached texts, as a reindex of an unchanged tree sees them, from a reopened file.
    many = sentences(10_000)
    vectors = embedder.embed(many[:1]).repeat(len(many), axis=0)
    with EmbeddingCache(root / "cache.sqlite") as cache:
        cache.put_many(embedder.model_id, many, vectors)
    with EmbeddingCache(root / "cache.sqlite") as cache:
        cached = CachedEmbedder(embedder, cache)
        timings = []
        for _ in range(5):
            started = time.perf_counter()
            cached.embed(many)
            timings.append(time.perf_counter() - started)
        started = time.perf_counter()
        hits = cache.get_many(embedder.model_id, many)
        lookup = time.perf_counter() - started
        print(
            f"warm 10,000    {min(timings) * 1000:8.1f} ms best, "
            f"{sorted(timings)[2] * 1000:.1f} ms median  (CachedEmbedder.embed, "
            f"{cached.calls} model calls)"
        )
        print(f"get_many 10,000 {lookup * 1000:7.1f} ms  ({len(hits)} hits, dict of rows)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sentences", type=int, default=2000)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--facts", type=int, default=1500, help="mixed corpus: generated facts")
    parser.add_argument("--old", default=None, help="another revision to compare with, e.g. 37186b8")
    parser.add_argument("--rounds", type=int, default=3, help="mixed corpus: alternating rounds")
    parser.add_argument("--queries", type=int, default=3, help="one-query processes per code and round")
    parser.add_argument("--skip-cache", action="store_true", help="only the mixed corpus and the query")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        compare(args, root)
        if not args.skip_cache:
            cache_figures(args, root)
    print(f"peak RSS of this process {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


if __name__ == "__main__":
    main()
