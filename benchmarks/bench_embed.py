"""How fast the bundled offline model loads and embeds, and what the embedding cache saves.

Run: ``python benchmarks/bench_embed.py [--sentences N] [--threads T]``. Prints measurements side by
side from one run; asserts nothing about time.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from syncd.config import Settings
from syncd.embedding.fastembed_backend import FastEmbedBackend, load_embedder
from syncd.index.embed_cache import CachedEmbedder, EmbeddingCache

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sentences", type=int, default=2000)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--batch-size", type=int, default=64)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        settings = Settings(embed_threads=args.threads, embed_batch_size=args.batch_size)
        started = time.perf_counter()
        embedder = load_embedder(settings, cache_dir=root / "models")
        assert isinstance(embedder, FastEmbedBackend)
        resolved = time.perf_counter()
        embedder.load()
        loaded = time.perf_counter()
        print(f"model          {embedder.model_id}")
        print(f"resolve        {resolved - started:8.3f} s  (what `syncd status` pays)")
        print(f"load           {loaded - resolved:8.3f} s  (import fastembed, sha256, session)")

        texts = sentences(args.sentences)
        embedder.embed(texts[:64])
        started = time.perf_counter()
        embedder.embed(texts)
        raw = time.perf_counter() - started
        rate = args.sentences / raw
        print(f"embed          {rate:8.0f} sentences/s  ({raw:.2f} s for {args.sentences})")

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


if __name__ == "__main__":
    main()
