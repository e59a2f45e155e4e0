"""Session layer: the runner's per-turn overhead with the LLM excluded, the transcript append rate,
and transcript indexing time over raw embedding time of the same chunks.

    .venv/bin/python benchmarks/bench_session.py [--turns 40] [--appends 400] [--entries 300]

* per-turn overhead: ``SessionRunner.process_turn`` (transcript lines, lifecycle check, state
  snapshot, session.json, indexing and ONE git commit) with extraction off, so no LLM and no
  extraction prompt; the litellm mock's own cost is not in it. p50 and p95 over ``--turns``.
* append rate: ``TranscriptManager.append_entries`` of one entry, (a) all inside one change group
  (durable append + fsync each, one commit at the end) and (b) each its own group (a commit each).
* indexing / embedding: a transcript of ``--entries`` entries indexed by the engine with transcript
  indexing on and an empty embedding cache, over the raw model embedding exactly the chunk texts
  the index holds; alternated three times, medians compared.

Prints figures measured side by side in one run; asserts nothing about time.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import tempfile
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import syncd
from syncd.config import Settings
from syncd.embedding.fastembed_backend import load_embedder
from syncd.formats.transcripts import make_entry, render_entry
from syncd.memory import MemoryManager
from syncd.session import SessionRunner, TranscriptManager

_WORDS = (
    "tea garden morning train Lisbon harbour violin sourdough marathon nurse coffee weather friday "
    "sister landlord orchid kayak telescope beehive typewriter chess garage winter weekend"
).split()


def sentence(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(n)).capitalize() + "."


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def bench_turns(root: Path, embedder, turns: int) -> dict:
    rng = random.Random(1)
    with syncd.open(root, embedder=embedder) as engine:
        engine.sync()
        runner = SessionRunner(MemoryManager(engine, default_user_id="ana"), extract=False)
        times = []
        for n in range(turns):
            state = {
                "version": 2,
                "steps": [{"type": "task", "task": sentence(rng, 12)}],
                "tools": [],
                "serialized_at": "t",
            }
            started = time.perf_counter()
            asyncio.run(runner.process_turn(f"s{n % 4}", sentence(rng, 25), sentence(rng, 40), state=state))
            times.append(time.perf_counter() - started)
    warm = times[2:]  # the first turns of a fresh home pay for its first index writes
    return {"p50_ms": 1000 * statistics.median(warm), "p95_ms": 1000 * pct(warm, 0.95)}


def bench_appends(root: Path, embedder, appends: int) -> dict:
    rng = random.Random(2)
    texts = [sentence(rng, 30) for _ in range(appends)]
    with syncd.open(root, embedder=embedder) as engine:
        engine.sync()
        transcripts = TranscriptManager(engine, "ana")
        started = time.perf_counter()
        with engine.changes(syncd.Intent(author="bench", summary="appends")):
            for text in texts:
                transcripts.append_entries("grouped", [make_entry("user", text)])
        grouped = time.perf_counter() - started
        few = texts[: max(appends // 10, 10)]
        started = time.perf_counter()
        for text in few:
            transcripts.append_entries("each", [make_entry("user", text)])
        each = time.perf_counter() - started
    return {"grouped_per_s": appends / grouped, "committed_each_per_s": len(few) / each}


def bench_indexing(base: Path, embedder, entries: int) -> dict:
    rng = random.Random(3)
    texts = [sentence(rng, rng.randint(10, 80)) for _ in range(entries)]
    index_times, embed_times, chunks = [], [], 0
    settings = Settings(transcript_indexing_enabled=True)
    for round_ in range(3):
        root = syncd.init(base / f"idx{round_}").home
        path = root / "memory/users/ana/sessions/s1/transcript.jsonl"
        path.parent.mkdir(parents=True)
        with syncd.open(root, settings=settings, embedder=embedder) as engine:
            engine.sync()  # the home's own pages first: only the transcript is timed
            path.write_bytes(
                b"".join(render_entry(make_entry("user" if i % 2 else "assistant", t)) for i, t in enumerate(texts))
            )
            started = time.perf_counter()
            engine.sync()
            index_times.append(time.perf_counter() - started)
            rows = [r["text"] for r in engine.index.all_rows().to_pylist() if r["kind"] == "transcript"]
        chunks = len(rows)
        started = time.perf_counter()
        embedder.embed(rows)  # the raw model, no cache: what the chunks cost to embed at all
        embed_times.append(time.perf_counter() - started)
    return {
        "chunks": chunks,
        "index_s": statistics.median(index_times),
        "embed_s": statistics.median(embed_times),
        "ratio": statistics.median(index_times) / statistics.median(embed_times),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=40)
    parser.add_argument("--appends", type=int, default=400)
    parser.add_argument("--entries", type=int, default=300)
    args = parser.parse_args()
    embedder = load_embedder(Settings(), cache_dir=Path(tempfile.mkdtemp()) / "models")
    embedder.embed(["warm up"])
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        turns = bench_turns(syncd.init(base / "turns").home, embedder, args.turns)
        print(
            f"runner per-turn overhead (no LLM, one commit each, {args.turns} turns): "
            f"p50 {turns['p50_ms']:.1f} ms, p95 {turns['p95_ms']:.1f} ms (target p50 <= 100 ms)"
        )
        rate = bench_appends(syncd.init(base / "appends").home, embedder, args.appends)
        print(
            f"transcript appends: {rate['grouped_per_s']:.0f}/s inside one change group (durable, fsync each); "
            f"{rate['committed_each_per_s']:.1f}/s each indexed and committed on its own"
        )
        idx = bench_indexing(base, embedder, args.entries)
        print(
            f"transcript indexing: {args.entries} entries -> {idx['chunks']} chunks of 400 tokens; index "
            f"{idx['index_s']:.2f} s vs raw embedding {idx['embed_s']:.2f} s: ratio {idx['ratio']:.2f} (target <= 1.25)"
        )


if __name__ == "__main__":
    main()
