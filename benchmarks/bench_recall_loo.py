"""How much of recall on long conversations is tuning: leave one conversation out.

    python benchmarks/bench_recall_loo.py --data ../shared/evals/locomo-dev.json [--workdir DIR]

The home is built as ``bench_recall.py`` builds it (same facts, same dates, same questions), each
question embedded once. Every configuration of a grid over the search's tuned parameters (the
weights of full text, context, time and question, the context's decay, a reply's gain, BM25's
k1 and b) ranks every question; then, for each conversation, the configuration best on the
other conversations is chosen and measured on it. The mean of those held-out values is what the
same tuning procedure would score on conversations it never saw, by the spread of this data: if
it sits well below the default configuration's recall, the default is fitted to these
conversations.

Printed: recall@10 of the default configuration per conversation (and their spread), then per
held-out conversation the configuration chosen on the others, its recall on the others and on the
held-out one. Never part of the test suite.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime as dt
import itertools
import json
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_recall import conversation_home, sessions, user_of

from syncd.index import fulltext, search
from syncd.index.search import Weights, hybrid_search

K = 10
# The weights tuned on this data, each at its default and on both sides of it, in every
# combination; the context's decay and reach, a reply's gain, the question, recency and speaker
# weights (speaker also off) and BM25's (k1, b) on both sides of theirs at the defaults (module constants, set for the
# run). A search costs tens of milliseconds on a shared machine, so the grid is what a run can
# afford, not every combination.
JOINT: dict[str, tuple[float, ...]] = {
    "fulltext": (0.15, 0.3, 0.5),
    "context": (0.25, 0.5, 0.75),
    "time": (0.05, 0.15, 0.25),
}
ALONE: dict[str, tuple[float, ...]] = {
    "decay": (0.25, 0.75),
    "reach": (1, 3),
    "gain": (1.25, 1.75),
    "question": (0.1, 0.3),
    "recency": (0.0, 0.2),
    "bm25": (1, 2),
    "speaker": (0.0, 0.05, 0.2),
}
# (k1, b) pairs: the Lucene default, a flatter length normalisation, a stronger one.
BM25 = ((1.2, 0.75), (0.9, 0.4), (1.5, 0.9))
DEFAULT: dict[str, float] = {
    "fulltext": 0.3,
    "context": 0.5,
    "time": 0.15,
    "recency": 0.1,
    "question": 0.2,
    "decay": 0.5,
    "reach": 2,
    "gain": 1.5,
    "bm25": 0,
    "speaker": 0.1,
}
_WEIGHTS = ("fulltext", "context", "time", "recency", "question", "speaker")
# Student's t at 97.5% by degrees of freedom, for the interval of a mean over a few conversations.
_T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}


def grid(joint: dict[str, tuple[float, ...]], alone: dict[str, tuple[float, ...]]) -> list[dict[str, float]]:
    configs = [{**DEFAULT, **dict(zip(joint, values))} for values in itertools.product(*joint.values())]
    configs += [{**DEFAULT, name: value} for name, values in alone.items() for value in values]
    unique = {tuple(sorted(c.items())): c for c in [DEFAULT, *configs]}
    return list(unique.values())


@contextlib.contextmanager
def configured(config: dict[str, float]) -> Iterator[Weights]:
    k1, b = BM25[int(config["bm25"])]
    saved = (fulltext._K1, fulltext._B, search._CONTEXT_DECAY, search._CONTEXT_REACH, search._REPLY_GAIN)
    fulltext._K1, fulltext._B = k1, b
    search._CONTEXT_DECAY, search._CONTEXT_REACH = config["decay"], int(config["reach"])
    search._REPLY_GAIN = config["gain"]
    try:
        yield dataclasses.replace(Weights(), **{name: config[name] for name in _WEIGHTS})
    finally:
        fulltext._K1, fulltext._B, search._CONTEXT_DECAY, search._CONTEXT_REACH, search._REPLY_GAIN = saved


def questions(samples: list[dict]) -> list[tuple[str, str, dt.datetime, dict]]:
    out = []
    for sample in samples:
        user = user_of(sample["sample_id"])
        last = max(when for _, when, _ in sessions(sample["conversation"]))
        now = (last + dt.timedelta(days=1)).replace(tzinfo=dt.UTC)
        out.extend((sample["sample_id"], user, now, qa) for qa in sample["qa"])
    return out


def recall_of(engine, asked, vectors, dia_of, weights: Weights) -> list[float]:
    out = []
    for (_, user, now, qa), vector in zip(asked, vectors, strict=True):
        hits = hybrid_search(engine.index, vector, qa["question"], user, None, K, None, weights=weights, now=now)
        found = {dia_of.get(hit.id) for hit in hits}
        evidence = set(qa.get("evidence") or ())
        out.append(len(evidence & found) / len(evidence) if evidence else 1.0)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, type=Path, help="a LoCoMo-format JSON file")
    parser.add_argument("--workdir", type=Path, default=None, help="keep the built home here and reuse it")
    parser.add_argument("--json", type=Path, default=None, help="write every configuration's recalls here")
    parser.add_argument(
        "--vary",
        action="append",
        default=[],
        metavar="NAME=V1,V2",
        help="instead of the grid, the defaults and each named parameter alone at these values",
    )
    args = parser.parse_args()
    samples = json.loads(args.data.read_text(encoding="utf-8"))
    names = [s["sample_id"] for s in samples]
    with conversation_home(samples, args.workdir) as (engine, dia_of, *_):
        asked = questions(samples)
        vectors = [engine.embedder.embed_query(qa["question"]) for _, _, _, qa in asked]
        vary = {name: tuple(map(float, values.split(","))) for name, values in (v.split("=") for v in args.vary)}
        configs = grid({}, vary) if vary else grid(JOINT, ALONE)
        table: list[tuple[dict, list[float]]] = []
        start = time.perf_counter()
        for config in configs:
            with configured(config) as weights:
                table.append((config, recall_of(engine, asked, vectors, dia_of, weights)))
        print(f"{len(configs)} configurations x {len(asked)} questions in {time.perf_counter() - start:.0f} s")
    if args.json:
        args.json.write_text(json.dumps([[c, r] for c, r in table]), encoding="utf-8")
    report(table, [conv for conv, *_ in asked], names)


def report(table: list[tuple[dict, list[float]]], conv_of: list[str], names: list[str]) -> None:
    def mean_over(recalls: list[float], keep: set[str]) -> float:
        values = [r for r, c in zip(recalls, conv_of, strict=True) if c in keep]
        return sum(values) / len(values)

    default = next(r for c, r in table if c == DEFAULT)
    per = {name: mean_over(default, {name}) for name in names}
    print(f"default configuration {DEFAULT}: R@{K} {mean_over(default, set(names)):.3f}")
    for name in names:
        print(f"  {name:<10} {per[name]:.3f}  ({conv_of.count(name)} questions)")
    mean, sd = statistics.mean(per.values()), statistics.stdev(per.values())
    print(f"  per-conversation mean {mean:.3f}, sd {sd:.3f}")
    # What another draw of as many conversations would average, by this draw's spread alone
    # (Student's t, 95%): a half of the benchmark nobody has seen is such a draw.
    half = _T95[len(names) - 1] * sd / len(names) ** 0.5 if len(names) - 1 in _T95 else float("nan")
    print(f"  {len(names)} other conversations would average {mean:.3f} +- {half:.3f} (95%, spread alone)")
    held: list[float] = []
    print(f"leave one conversation out (R@{K}):")
    for name in names:
        rest = set(names) - {name}
        config, recalls = max(table, key=lambda row: mean_over(row[1], rest))
        held.extend(r for r, c in zip(recalls, conv_of, strict=True) if c == name)
        print(
            f"  {name:<10} chosen {config}: others {mean_over(recalls, rest):.3f}, held out "
            f"{mean_over(recalls, {name}):.3f} (default {per[name]:.3f})"
        )
    best, best_recalls = max(table, key=lambda row: mean_over(row[1], set(names)))
    print(f"held-out estimate (over questions): {sum(held) / len(held):.3f}")
    print(f"best configuration on all five: {best} {mean_over(best_recalls, set(names)):.3f}")


if __name__ == "__main__":
    main()
