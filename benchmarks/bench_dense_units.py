"""What the meaning channel would find with sentence-sized units: dense recall@10 by unit.

    python benchmarks/bench_dense_units.py --data ../shared/evals/locomo-dev.json

The vector half of hybrid search embeds a fact whole. A dialog turn often holds a greeting, an
answer and a question back ("Hey! Good to see you. I went hiking last weekend. How are you?"),
and one embedding of all three sits between them. This measures, with the home's embedding model
and no index (it asks what a change of the index's unit would buy before anyone builds it), the
share of each question's evidence turns among the 10 turns closest in meaning when a turn is
scored by: its whole text (what the index does now); the best of its sentences (each embedded
with the turn's speaker, as the fact line says it); the larger of the two; their mean.

Turns and questions as ``bench_recall.py`` writes them, each question against its own
conversation's turns. Never part of the test suite.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_recall import CATEGORIES, sessions, turn_content

from syncd.config import Settings
from syncd.embedding.fastembed_backend import load_embedder

K = 10
# A sentence ends at ".", "!" or "?" followed by space: good enough for chat turns, whose
# abbreviations ("Mr.") split a sentence in two, which only adds a unit.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def sentences(turn: str) -> list[str]:
    """The sentences of a ``Speaker: text`` turn, each said by the speaker."""
    speaker, _, body = turn.partition(": ")
    return [f"{speaker}: {piece}" for piece in _SENTENCE_END.split(body) if piece.strip()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, type=Path, help="a LoCoMo-format JSON file")
    args = parser.parse_args()
    samples = json.loads(args.data.read_text(encoding="utf-8"))
    embedder = load_embedder(Settings())
    recalls: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    start, units = time.perf_counter(), 0
    for sample in samples:
        ids, texts = [], []
        for _, _, turns in sessions(sample["conversation"]):
            ids.extend(turn["dia_id"] for turn in turns)
            texts.extend(turn_content(turn) for turn in turns)
        whole_vectors = np.asarray(embedder.embed(texts))
        pieces = [(n, piece) for n, text in enumerate(texts) for piece in sentences(text)]
        owner = np.array([n for n, _ in pieces])
        piece_vectors = np.asarray(embedder.embed([piece for _, piece in pieces]))
        units += len(pieces)
        for qa in sample["qa"]:
            query = np.asarray(embedder.embed_query(qa["question"]))
            whole = whole_vectors @ query
            best = np.full(len(texts), -1.0)
            np.maximum.at(best, owner, piece_vectors @ query)
            evidence = set(qa.get("evidence") or ())
            for name, score in (
                ("whole turn", whole),
                ("best sentence", best),
                ("larger of both", np.maximum(whole, best)),
                ("mean of both", (whole + best) / 2),
            ):
                top = {ids[i] for i in np.argsort(-score)[:K]}
                value = len(evidence & top) / len(evidence) if evidence else 1.0
                recalls[name]["all"].append(value)
                recalls[name][CATEGORIES.get(qa["category"], str(qa["category"]))].append(value)
    turns_total = sum(len(t) for s in samples for _, _, t in sessions(s["conversation"]))
    print(f"{turns_total} turns, {units} sentences, embedded and searched in {time.perf_counter() - start:.0f} s")
    columns = list(next(iter(recalls.values())))
    print(f"{'dense R@' + str(K):<16}" + " ".join(f"{c:>12}" for c in columns))
    for name, by in recalls.items():
        print(f"{name:<16}" + " ".join(f"{sum(by[c]) / len(by[c]):>12.3f}" for c in columns))


if __name__ == "__main__":
    main()
