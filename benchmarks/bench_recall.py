"""Recall on long conversations (LoCoMo format), measured the way memory retrievers are compared.

    python benchmarks/bench_recall.py --data ../shared/evals/locomo-dev.json [--workdir DIR]

A home is built through the public API as an agent would fill it: each conversation is one user,
each session one ``## HH:MM`` section of the daily log of the session's date, each dialog turn one
fact line ``- [dialog] Speaker: text [image: caption]`` (a shared image is remembered by its
caption), stamped with the session's date and time. The fact's id carries the turn's ``dia_id``, so
a hit maps back to the turn without the id ever being searchable. Then ``engine.sync()``, and every
question is searched within its user (``engine.search(question, user_id=..., limit=25)``) as of the
day after the conversation's last session (questions are asked once the conversation is over).

recall@k is the share of a question's evidence turns found in the top k (a question without
evidence counts as 1), averaged over questions; evidence ids the data misspells ("D:11:26") count
as missed, as they do for any retriever measured on this file. Never part of the test suite.

``--workdir`` keeps the built home (and its embedding cache): a second run reindexes it from the
markdown without re-embedding, which is how the ablation steps were measured. ``--set`` changes a
setting for the run (``--set search_weight_context=0`` ranks without conversation context).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import random
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import syncd
from syncd.config import Settings
from syncd.formats import Fact, append_section, new_daily_log, parse_daily_log, render_daily_log

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
KS = (5, 10, 25)


def session_time(text: str) -> dt.datetime:
    """LoCoMo's "1:56 pm on 8 May, 2023"."""
    return dt.datetime.strptime(" ".join(text.split()), "%I:%M %p on %d %B, %Y")


def sessions(conversation: dict) -> list[tuple[int, dt.datetime, list[dict]]]:
    numbers = sorted(
        int(key.split("_")[1])
        for key, value in conversation.items()
        if key.startswith("session_") and isinstance(value, list)
    )
    return [(n, session_time(conversation[f"session_{n}_date_time"]), conversation[f"session_{n}"]) for n in numbers]


def turn_fact_id(sample: str, dia_id: str) -> str:
    """An id in the home's id charset that names the turn: ``conv-26.D1.3`` for D1:3."""
    return f"{sample}.{dia_id.replace(':', '.')}"


def turn_content(turn: dict) -> str:
    text = f"{turn['speaker']}: {turn['text']}"
    if turn.get("blip_caption"):
        text += f" [image: {turn['blip_caption']}]"
    return " ".join(text.split())


def user_of(sample: str) -> str:
    return sample.replace("_", "-")


def write_home(root: Path, samples: list[dict]) -> dict[str, str]:
    """Daily logs for every conversation; returns fact id -> dia_id."""
    dia_of: dict[str, str] = {}
    logs: dict[Path, object] = {}
    for sample in samples:
        user = user_of(sample["sample_id"])
        for number, when, turns in sessions(sample["conversation"]):
            path = root / "memory" / "users" / user / f"{when.date().isoformat()}.md"
            log = logs.get(path) or new_daily_log(when.date())
            facts = []
            for turn in turns:
                fact_id = turn_fact_id(sample["sample_id"], turn["dia_id"])
                dia_of[fact_id] = turn["dia_id"]
                facts.append(
                    Fact(
                        content=turn_content(turn),
                        category="dialog",
                        id=fact_id,
                        source_session=f"session{number}",
                        timestamp=when.isoformat(timespec="seconds"),
                    )
                )
            logs[path] = append_section(log, when.time(), session=f"session{number}", facts=facts)
    for path, log in logs.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        text = render_daily_log(log)
        assert parse_daily_log(text).facts(), path
        path.write_text(text, encoding="utf-8")
    return dia_of


@contextlib.contextmanager
def conversation_home(samples: list[dict], workdir: Path | None, settings: Settings | None = None) -> Iterator[tuple]:
    """The home of ``samples`` (write_home) opened and indexed: ``(engine, dia_of, report,
    seconds, reused)``. A ``workdir`` that holds one already is reindexed from its markdown (its
    embedding cache kept); without one the home lives in a temporary folder for the block."""
    with tempfile.TemporaryDirectory() as tmp:
        root = (workdir or Path(tmp)) / "home"
        reused = (root / ".syncd").is_dir()
        if not reused:
            root = syncd.init(root).home
        dia_of = write_home(root, samples)
        with syncd.open(root, settings=settings or Settings()) as engine:
            start = time.perf_counter()
            report = engine.reindex() if reused else engine.sync()
            yield engine, dia_of, report, time.perf_counter() - start, reused


def evaluate(engine, samples: list[dict], dia_of: dict[str, str]) -> tuple[dict, list[float]]:
    recalls: dict[str, dict[int, list[float]]] = defaultdict(lambda: {k: [] for k in KS})
    latencies = []
    for sample in samples:
        user = user_of(sample["sample_id"])
        last = max(when for _, when, _ in sessions(sample["conversation"]))
        now = (last + dt.timedelta(days=1)).replace(tzinfo=dt.UTC)
        for qa in sample["qa"]:
            start = time.perf_counter()
            hits = engine.search(qa["question"], user_id=user, limit=max(KS), now=now)
            latencies.append(time.perf_counter() - start)
            found = [dia_of.get(hit.id) for hit in hits]
            evidence = set(qa.get("evidence") or ())
            for k in KS:
                value = len(evidence & set(found[:k])) / len(evidence) if evidence else 1.0
                recalls["all"][k].append(value)
                recalls[CATEGORIES.get(qa["category"], str(qa["category"]))][k].append(value)
    return recalls, latencies


FLOORS = (0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4)


def _kept(hits, floor: float) -> list:
    """The hits a relevance floor keeps: a word of the query, or a cosine of at least ``floor``
    (the rule hybrid_search applies with min_cosine)."""
    return [h for h in hits if h.parts["fulltext"] > 0 or h.parts["semantic"] >= floor]


def nonsense_queries(samples: list[dict], seed: int = 5) -> list[tuple[str, str]]:
    """(user, query) pairs that should find nothing: made-up words, and every dev question with
    the letters of each word shuffled (same length and letters, no meaning)."""
    rng = random.Random(seed)
    consonants, vowels = "bcdfghjklmnpqrstvwxz", "aeiou"

    def word() -> str:
        return "".join(rng.choice(consonants) + rng.choice(vowels) for _ in range(rng.randint(2, 4)))

    out = []
    for sample in samples:
        user = user_of(sample["sample_id"])
        for qa in sample["qa"]:
            out.append((user, " ".join(word() for _ in range(rng.randint(2, 6))) + "?"))
            shuffled = []
            for token in qa["question"].split():
                letters = list(token)
                rng.shuffle(letters)
                shuffled.append("".join(letters))
            out.append((user, " ".join(shuffled)))
    return out


def calibrate(engine, samples: list[dict], dia_of: dict[str, str]) -> None:
    """How a relevance floor would trade answers kept against nonsense answered."""
    answerable = []
    for sample in samples:
        user = user_of(sample["sample_id"])
        for qa in sample["qa"]:
            hits = engine.search(qa["question"], user_id=user, limit=10)
            answerable.append((hits, set(qa.get("evidence") or ())))
    nonsense = [engine.search(query, user_id=user, limit=10) for user, query in nonsense_queries(samples)]

    def pct(xs: list[float], p: float) -> float:
        return sorted(xs)[min(len(xs) - 1, int(len(xs) * p))]

    best = [max((h.parts["semantic"] for h in hits), default=0.0) for hits, _ in answerable]
    best_nonsense = [max((h.parts["semantic"] for h in hits), default=0.0) for hits in nonsense]
    print("best-hit cosine   " + "  ".join(f"p{int(p * 100):02d}" for p in (0.01, 0.05, 0.5, 0.95, 0.99)))
    for name, xs in (("questions", best), ("nonsense", best_nonsense)):
        print(f"{name:<17} " + "  ".join(f"{pct(xs, p):.2f}" for p in (0.01, 0.05, 0.5, 0.95, 0.99)))
    # A made-up or shuffled word can still be a real one ("eon", a number): those queries match
    # by words, which no floor should undo. The floor is about the rest.
    wordless = [hits for hits in nonsense if not any(h.parts["fulltext"] > 0 for h in hits)]
    print(f"nonsense queries sharing no word with any row: {len(wordless)}/{len(nonsense)}")
    print(f"{'floor':>5}  {'R@10 dev':>8}  {'questions left with no hit':>26}  {'word-less nonsense with a hit':>29}")
    for floor in FLOORS:
        recall = [
            len(evidence & {dia_of.get(h.id) for h in _kept(hits, floor)}) / len(evidence) if evidence else 1.0
            for hits, evidence in answerable
        ]
        empty = sum(not _kept(hits, floor) for hits, _ in answerable)
        answered = sum(bool(_kept(hits, floor)) for hits in wordless)
        print(
            f"{floor:>5.2f}  {sum(recall) / len(recall):>8.3f}  {empty:>26}  "
            f"{answered:>18}/{len(wordless)} ({answered / max(len(wordless), 1):.1%})"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, type=Path, help="a LoCoMo-format JSON file")
    parser.add_argument("--workdir", type=Path, default=None, help="keep the built home here and reuse it")
    parser.add_argument("--calibrate", action="store_true", help="print the relevance floor's trade-off")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a Settings field for the run, e.g. --set search_weight_context=0",
    )
    args = parser.parse_args()
    samples = json.loads(args.data.read_text(encoding="utf-8"))
    settings = Settings(**dict(item.split("=", 1) for item in args.set))

    with conversation_home(samples, args.workdir, settings) as (engine, dia_of, report, built, reuse):
        counts = engine.index.counts()
        print(
            f"{len(samples)} conversations, {counts['facts']} facts, {counts['chunks']} chunks; "
            f"{'re' if reuse else ''}indexed in {built:.1f} s ({report.plan.summary()})"
        )
        engine.search("warm up", user_id=user_of(samples[0]["sample_id"]), limit=1)
        if args.calibrate:
            calibrate(engine, samples, dia_of)
            return
        recalls, latencies = evaluate(engine, samples, dia_of)

    def pct(xs: list[float], p: float) -> float:
        return sorted(xs)[min(len(xs) - 1, int(len(xs) * p))] * 1000

    print(f"{'category':<12} {'n':>5} " + " ".join(f"{'R@' + str(k):>6}" for k in KS))
    order = ["all", *(name for name in CATEGORIES.values() if name in recalls)]
    for name in order:
        by_k = recalls[name]
        print(f"{name:<12} {len(by_k[KS[0]]):>5} " + " ".join(f"{sum(v) / len(v):>6.3f}" for v in by_k.values()))
    print(
        f"search latency over {len(latencies)} queries: p50 {pct(latencies, 0.5):.1f} ms, "
        f"p95 {pct(latencies, 0.95):.1f} ms"
    )


if __name__ == "__main__":
    main()
