"""Deduplication of new facts: the old rule and the new one side by side, on labelled pairs.

    python benchmarks/bench_dedup.py [--data benchmarks/data/dedup_pairs.jsonl] [--show-errors]

Each line of the data is ``{"old", "new", "duplicate", "kind"}``: a remembered fact, a new one, and
whether the new one only restates the old (``duplicate``: true) or says something else (a
correction: another negation, number, date, time, name, quantity, unit, tense, role...). The pairs
were written by hand for this benchmark, over everyday domains (health, family, work, travel,
money, hobbies, a computer's setup); they are not taken from any evaluation set.

For "is a duplicate", it prints precision (of the facts a rule drops, the share that were
restatements: 1 - precision is the share of dropped writes that were corrections) and recall (of
the restatements, the share a rule recognises; a restatement it misses is stored twice), for:

- old: cosine >= 0.85 with the bundled model, or the same words (syncd before issue 25);
- new: what ``MemoryManager`` applies to the nearest facts: cosine >= Settings.dedup_cosine (0.7)
  picks the candidates, ``syncd.memory.dedup.restates`` decides.

and the share each rule gets right by kind of pair. Never part of the test suite.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from syncd.config import Settings
from syncd.embedding.fastembed_backend import load_embedder
from syncd.memory.dedup import restates
from syncd.memory.extraction import normalise_text

DEFAULT_DATA = Path(__file__).resolve().parent / "data" / "dedup_pairs.jsonl"
OLD_COSINE = 0.85


def load(path: Path) -> list[dict]:
    pairs = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    for pair in pairs:
        assert {"old", "new", "duplicate", "kind"} <= pair.keys(), pair
    return pairs


def scores(said: list[bool], truth: list[bool]) -> tuple[float, float, int, int]:
    """(precision, recall, corrections dropped, restatements missed) for "is a duplicate"."""
    tp = sum(s and t for s, t in zip(said, truth))
    fp = sum(s and not t for s, t in zip(said, truth))
    fn = sum(t and not s for s, t in zip(said, truth))
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / (tp + fn) if tp + fn else 1.0
    return precision, recall, fp, fn


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--show-errors", action="store_true", help="List the pairs each rule gets wrong.")
    args = parser.parse_args()

    pairs = load(args.data)
    settings = Settings()
    embedder = load_embedder(settings, cache_dir=Path(tempfile.mkdtemp(prefix="syncd-bench-dedup-")))
    olds = embedder.embed([p["old"] for p in pairs])
    news = embedder.embed([p["new"] for p in pairs])
    cosines = [float(a @ b) for a, b in zip(olds, news)]
    truth = [bool(p["duplicate"]) for p in pairs]
    rules = {
        f"old (cosine >= {OLD_COSINE})": [
            c >= OLD_COSINE or normalise_text(p["new"]) == normalise_text(p["old"]) for c, p in zip(cosines, pairs)
        ],
        "new (restates)": [c >= settings.dedup_cosine and restates(p["new"], p["old"]) for c, p in zip(cosines, pairs)],
    }

    restatements = sum(truth)
    print(
        f"{len(pairs)} pairs: {restatements} restatements, {len(pairs) - restatements} corrections "
        f"({args.data.name}; model {embedder.model_id})\n"
    )
    print(f"{'rule':28} {'precision':>9} {'recall':>7} {'corrections dropped':>20} {'restatements kept twice':>24}")
    for name, said in rules.items():
        precision, recall, fp, fn = scores(said, truth)
        print(
            f"{name:28} {precision:9.3f} {recall:7.3f} {fp:>14} of {len(pairs) - restatements:<3} "
            f"{fn:>17} of {restatements:<3}"
        )

    by_kind: dict[tuple[bool, str], list[int]] = defaultdict(list)
    for i, pair in enumerate(pairs):
        by_kind[(pair["duplicate"], pair["kind"])].append(i)
    print(f"\nright by kind of pair   {'pairs':>5} " + " ".join(f"{name.split()[0]:>6}" for name in rules))
    for (duplicate, kind), members in sorted(by_kind.items(), key=lambda item: (not item[0][0], item[0][1])):
        label = f"{'restatement' if duplicate else 'correction'}: {kind}"
        right = [sum(rules[name][i] == duplicate for i in members) / len(members) for name in rules]
        print(f"  {label:24} {len(members):5} " + " ".join(f"{r:6.2f}" for r in right))

    if args.show_errors:
        for name, said in rules.items():
            print(f"\nwrong under {name}:")
            for i, pair in enumerate(pairs):
                if said[i] != truth[i]:
                    what = "dropped a correction" if said[i] else "missed a restatement"
                    print(f"  {what:22} cos {cosines[i]:.2f}  {pair['old']!r} / {pair['new']!r}")


if __name__ == "__main__":
    main()
