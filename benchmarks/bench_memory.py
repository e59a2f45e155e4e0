"""Memory write path: sustained add_memory throughput (each fact searchable and committed on
return) with 1 and 8 concurrent writer threads, and the latency of
process_conversation_turn_for_memories with the LLM call excluded (litellm mock_response, whose
own cost is measured alone and subtracted).

    /work/venv/bin/python benchmarks/bench_memory.py [--writes 60] [--turns 20]

Prints figures measured side by side in one run; asserts nothing about time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import tempfile
import threading
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import git

import syncd
from syncd import engine as engine_module
from syncd.config import Settings
from syncd.memory import MemoryManager
from syncd.memory.extraction import complete

_WHO = [
    "My sister",
    "The landlord",
    "A colleague",
    "Grandpa",
    "The dentist",
    "Our neighbour",
    "The coach",
    "An old friend",
]
_DOES = [
    "repairs vintage",
    "collects rare",
    "paints",
    "sells handmade",
    "photographs",
    "writes poems about",
    "restores",
    "breeds",
]
_WHAT = [
    "motorcycles",
    "orchids",
    "violins",
    "typewriters",
    "lighthouses",
    "sourdough",
    "chess sets",
    "kayaks",
    "telescopes",
    "beehives",
]
_WHERE = [
    "in Porto",
    "near the harbour",
    "every winter",
    "on weekends",
    "for charity",
    "since 1998",
    "in a tiny garage",
    "with the kids",
]


def sentences(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    combos = [(a, b, c, d) for a in _WHO for b in _DOES for c in _WHAT for d in _WHERE]
    return [f"{a} {b} {c} {d}." for a, b, c, d in rng.sample(combos, n)]


def run_writers(manager: MemoryManager, home: Path, threads: int, per_thread: int, seed: int) -> dict:
    facts = sentences(threads * per_thread, seed)
    results: list[list[tuple[str, str, str]]] = [[] for _ in range(threads)]
    misses: list[int] = [0] * threads

    def writer(k: int) -> None:
        user = f"bench{seed}-{k}"
        for content in facts[k * per_thread : (k + 1) * per_thread]:
            fact = asyncio.run(manager.add_memory(content, user, category="context"))
            if fact is None:
                misses[k] += 1
            else:
                results[k].append((user, content, fact.id))

    start = time.perf_counter()
    workers = [threading.Thread(target=writer, args=(k,)) for k in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    elapsed = time.perf_counter() - start
    written = [r for rs in results for r in rs]
    # Checked after the clock stops; read-your-writes at return is what the tests pin.
    found = sum(
        any(h.id == fid for h in asyncio.run(manager.search_memories(content, 3, user_id=user)))
        for user, content, fid in written
    )
    repo = git.Repo(home)
    tree_text = "\n".join(
        b.data_stream.read().decode()
        for b in repo.head.commit.tree.traverse()
        if b.type == "blob" and b.path.endswith(".md")
    )
    return {
        "threads": threads,
        "attempted": len(facts),
        "written": len(written),
        "deduplicated": sum(misses),
        "seconds": elapsed,
        "writes_per_s": len(written) / elapsed,
        "found": found,
        "committed": sum(fid in tree_text for _, _, fid in written),
    }


class StageTimer:
    """Time spent in the engine's sync and commit and in deduplication, summed over calls."""

    def __init__(self, manager: MemoryManager):
        self.spent: dict[str, float] = {}
        self.lock = threading.Lock()
        engine = manager.engine
        # The write path calls the engine's inner steps, not its public sync/commit.
        for name, owner, attr in (
            ("dedup", manager, "_new_facts"),
            ("index", engine, "_sync"),
            ("git commit", engine, "_commit"),
            ("write check", engine_module, "check_tree_writable"),
        ):
            setattr(owner, attr, self.wrap(name, getattr(owner, attr)))

    def wrap(self, name, fn):
        def timed(*args, **kwargs):
            t = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                with self.lock:
                    self.spent[name] = self.spent.get(name, 0.0) + time.perf_counter() - t

        return timed

    def take(self) -> dict[str, float]:
        with self.lock:
            spent, self.spent = self.spent, {}
        return spent


def turn_latency(manager: MemoryManager, turns: int) -> dict:
    def reply(i: int) -> str:
        facts = [
            {"content": s, "category": "context", "importance": 0.5, "tags": ["bench"]} for s in sentences(3, 1000 + i)
        ]
        return json.dumps({"facts": facts})

    totals, llm_alone = [], []
    for i in range(turns):
        manager.job_llm_options["extract"] = {"mock_response": reply(i)}
        turn = {"user_message": f"Tell me about turn {i}.", "response": "Sure."}
        t0 = time.perf_counter()
        asyncio.run(complete(manager.settings, "s", "u", {"mock_response": reply(i)}))
        t1 = time.perf_counter()
        asyncio.run(
            manager.process_conversation_turn_for_memories(turn, "c1", "turns", session_id="bench", transcript_line=i)
        )
        t2 = time.perf_counter()
        llm_alone.append(t1 - t0)
        totals.append(t2 - t1)
    excl = [t - m for t, m in zip(totals, llm_alone)]
    return {
        "turns": turns,
        "median_total_ms": statistics.median(totals) * 1000,
        "median_mock_llm_ms": statistics.median(llm_alone) * 1000,
        "median_excluding_llm_ms": statistics.median(excl) * 1000,
        "p90_excluding_llm_ms": sorted(excl)[int(0.9 * (len(excl) - 1))] * 1000,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writes", type=int, default=64, help="facts per scenario (split across writers)")
    parser.add_argument("--turns", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        home = syncd.init(Path(tmp) / "home").home
        settings = Settings(llm_model="gpt-4o-mini", core_refresh_importance=1.0)
        with syncd.open(home, settings=settings) as engine:
            manager = MemoryManager(engine, settings=settings)
            asyncio.run(manager.add_memory("Warm-up fact about nothing in particular.", "warmup"))
            asyncio.run(complete(settings, "s", "u", {"mock_response": "{}"}))  # import litellm once
            print(f"home: {home}  cpus: {os.cpu_count()}")
            timer = StageTimer(manager)
            print("add_memory, sustained (each returns indexed + committed; dedup on):")
            for threads, seed in ((1, 1), (8, 2)):
                timer.take()
                r = run_writers(manager, home, threads, args.writes // threads, seed)
                stages = timer.take()
                print(
                    f"  {r['threads']} writer(s): {r['written']}/{r['attempted']} written "
                    f"({r['deduplicated']} deduplicated) in {r['seconds']:.2f} s = {r['writes_per_s']:.1f} writes/s; "
                    f"found by search: {r['found']}/{r['written']}; "
                    f"in git HEAD: {r['committed']}/{r['written']}"
                )
                per = {k: v / max(r["written"], 1) * 1000 for k, v in stages.items()}
                other = r["seconds"] / max(r["written"], 1) * 1000 - sum(per.values())
                print(
                    "    per write: " + ", ".join(f"{k} {v:.0f} ms" for k, v in per.items()) + f", rest {other:.0f} ms"
                )
            lat = turn_latency(manager, args.turns)
            print(f"process_conversation_turn_for_memories, 3 new facts per turn, {lat['turns']} turns:")
            print(
                f"  median {lat['median_total_ms']:.0f} ms with the mocked LLM call, which alone takes "
                f"{lat['median_mock_llm_ms']:.0f} ms -> {lat['median_excluding_llm_ms']:.0f} ms excluding the LLM "
                f"(p90 {lat['p90_excluding_llm_ms']:.0f} ms)"
            )


if __name__ == "__main__":
    main()
