"""No-answer behaviour: how often a search answers a query its memory cannot answer.

    python benchmarks/bench_no_answer.py --data ../shared/evals/locomo-dev.json [--workdir DIR] [--old REV]

Two homes are searched. The LoCoMo home of ``bench_recall.py`` (each conversation one user, one
fact per dialog turn), built from the file given by path; and a generated one made here, with a
user who has remembered five short facts (the README's kind of memory) and one with two hundred
facts written from templates. Three kinds of query that should find nothing are written below:

- off-topic: questions about things no personal memory of these users holds (general knowledge,
  software, science), including questions that share one common word with them;
- common words only: queries whose only words the memory holds are everyday ones ("world",
  "Tuesday", "today");
- gibberish: made-up words (fixed seed).

A query is "answered" when the search returns at least one hit. Before (the code this benchmark was
written against, run with that tree on ``sys.path``): ``min_cosine=Settings.recall_min_cosine``, the
floor MemoryManager applied; after: ``floor=True``, the relevance floor of hybrid_search. Beside
them, recall@10 on the LoCoMo questions with and without the floor (the floor must not cost
answers), and for the generated home the share of on-topic paraphrases still answered.
``--old REV`` first runs git revision REV's syncd (benchmarks/revisions.py) on the same homes and
queries, in a child process, and prints its shares beside this checkout's.
Never part of the test suite.
"""

from __future__ import annotations

import argparse
import datetime as dt
import inspect
import json
import random
import subprocess
import sys
import tempfile
from pathlib import Path

# syncd before bench_recall, which puts this checkout first on the path: a --old child imports
# the syncd its PYTHONPATH names, and bench_recall then finds that one already imported.
import syncd
from syncd.config import Settings

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_recall import sessions, user_of, write_home
from revisions import env_for, extract

OFF_TOPIC = [
    "What is the capital of Australia?",
    "How many moons does Jupiter have?",
    "Who wrote the Critique of Pure Reason?",
    "What is the boiling point of nitrogen?",
    "How do I configure a Kubernetes ingress controller?",
    "What does the Rust borrow checker do?",
    "Explain the Krebs cycle.",
    "What is the airspeed velocity of an unladen swallow?",
    "Who won the 1954 football world cup?",
    "How do I compile a Linux kernel module?",
    "What is the half-life of carbon-14?",
    "How does a transistor amplify current?",
    "What is the GDP of Luxembourg?",
    "What is the derivative of the tangent function?",
    "Which enzyme breaks down lactose?",
    "How do you reset a BIOS password?",
    "What is the population of Reykjavik?",
    "Who discovered penicillin?",
    "How far is Mars from the Sun?",
    "What is the chemical formula of sulfuric acid?",
    "How do I set up a PostgreSQL replication slot?",
    "What is the tallest mountain in South America?",
    "Which language is spoken in Mozambique?",
    "What is a Fourier transform used for?",
    "How many bones are in the human hand?",
    "What caused the fall of the Byzantine empire?",
    "How does TCP congestion control work?",
    "What is the speed of sound in water?",
    "Who painted the Garden of Earthly Delights?",
    "What is the atomic number of tungsten?",
    "How do I write a Makefile for a C project?",
    "What is the main export of Chile?",
    "When was the printing press invented?",
    "What is quantum entanglement?",
    "How do glaciers form?",
    "What is the largest desert in Asia?",
    "What is the difference between TCP and UDP?",
    "Who was the first emperor of Rome?",
    "What is the function of the pancreas?",
    "How is steel galvanized?",
]

COMMON_ONLY = [
    "world",
    "Tuesday",
    "What happened on Tuesday?",
    "hello world",
    "today",
    "What about the world?",
    "Anything on Monday?",
    "this year",
    "the thing",
    "something else",
    "people",
    "What is new?",
    "Tell me more.",
    "ok thanks",
    "yes or no",
    "good",
    "What time is it?",
    "Is it Friday yet?",
    "one two three",
    "a lot",
]

SMALL_FACTS = [
    "Likes green tea.",
    "Is allergic to peanuts.",
    "Works as a nurse at the hospital in Lyon.",
    "Has a cat called Miso.",
    "Wants to run a half marathon in spring.",
]
SMALL_QUESTIONS = [  # (query, the fact it should find)
    ("what does she drink?", "Likes green tea."),
    ("green tea", "Likes green tea."),
    ("Which foods must she avoid?", "Is allergic to peanuts."),
    ("food allergies", "Is allergic to peanuts."),
    ("What is her job?", "Works as a nurse at the hospital in Lyon."),
    ("Does she have any pets?", "Has a cat called Miso."),
    ("What is the name of her cat?", "Has a cat called Miso."),
    ("running goals", "Wants to run a half marathon in spring."),
    ("Where does she work?", "Works as a nurse at the hospital in Lyon."),
    ("peanuts", "Is allergic to peanuts."),
]

_PEOPLE = ["Ana", "Ben", "Chloe", "Dev", "Eli", "Fay", "Gus", "Hana", "Ivo", "June"]
_TEMPLATES = [
    ("{p} plays the {x} every weekend.", ["violin", "cello", "guitar", "piano", "drums"]),
    ("{p} is learning {x} at evening classes.", ["Japanese", "pottery", "welding", "salsa", "chess"]),
    ("{p} bought a new {x} last month.", ["bicycle", "kayak", "laptop", "sofa", "camera"]),
    ("{p} visited {x} with the family.", ["Lisbon", "Kyoto", "Oslo", "Marrakesh", "Quebec"]),
    ("{p} cooks {x} on Sundays.", ["lasagna", "ramen", "paella", "curry", "pancakes"]),
    ("{p} is reading a novel about {x}.", ["pirates", "dragons", "detectives", "astronauts", "spies"]),
    ("{p} volunteers at the {x}.", ["animal shelter", "food bank", "library", "school", "hospice"]),
    ("{p} is training for a {x}.", ["triathlon", "marathon", "boxing match", "climbing trip", "swim meet"]),
]
LARGE_QUESTIONS = [
    ("Who plays the cello?", "cello"),
    ("Which city did Oslo travellers visit?", "Oslo"),
    ("What instrument does Ana play?", "Ana plays"),
    ("Who volunteers with animals?", "animal shelter"),
    ("What does anyone cook on Sundays?", "on Sundays"),
    ("Who is learning a language?", "Japanese"),
    ("What did someone buy recently?", "bought"),
    ("Who is preparing for an endurance race?", "training for a"),
]


def gibberish(count: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    consonants, vowels = "bcdfghjklmnpqrstvwxz", "aeiou"

    def word() -> str:
        return "".join(rng.choice(consonants) + rng.choice(vowels) for _ in range(rng.randint(2, 4)))

    return [" ".join(word() for _ in range(rng.randint(1, 5))) + rng.choice(["", "?"]) for _ in range(count)]


def large_facts(seed: int = 3) -> list[str]:
    rng = random.Random(seed)
    facts = []
    for person in _PEOPLE:
        for template, options in _TEMPLATES:
            facts.append(template.format(p=person, x=rng.choice(options)))
    for n in range(200 - len(facts)):
        facts.append(f"{rng.choice(_PEOPLE)} mentioned the meeting number {n} about the budget.")
    return facts


def write_generated(root: Path) -> None:
    """Two users of a generated home: ``small`` (five facts, each remembered on its own, as
    add_memory writes them) and ``large`` (two hundred facts over ten days)."""
    day = dt.date(2026, 3, 2)
    lines = [f"# {day}\n"]
    for n, fact in enumerate(SMALL_FACTS):
        lines.append(f"\n## 09:{n:02d} session:s{n}\n- [note] {fact}\n")
    path = root / "memory/users/small" / f"{day}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(lines), encoding="utf-8")
    facts = large_facts()
    for d in range(10):
        when = day + dt.timedelta(days=d)
        body = "".join(
            f"\n## 1{n % 10}:{n:02d} session:d{d}n{n}\n- [note] {fact}\n"
            for n, fact in enumerate(facts[d * 20 : (d + 1) * 20])
        )
        path = root / "memory/users/large" / f"{when}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# {when}\n{body}", encoding="utf-8")


def searcher(engine, mode: str):
    """search(query, user, now) -> hits under the 'before' floor, the 'after' floor or none."""
    params = inspect.signature(engine.search).parameters
    recall_floor = Settings().recall_min_cosine

    def search(query: str, user: str, limit: int = 10, now=None):
        kwargs = {"user_id": user, "limit": limit, "now": now}
        if "memory_only" in params:
            kwargs["memory_only"] = True
        if mode == "after":
            if "floor" not in params:
                raise SystemExit("this tree's search has no relevance floor: run it as 'before'")
            kwargs["floor"] = True
        elif mode == "before":
            kwargs["min_cosine"] = recall_floor
        return engine.search(query, **kwargs)

    return search


def answered(search, queries: list[str], users: list[str]) -> tuple[int, int, list[str]]:
    hits_for = [(q, u, search(q, u)) for q in queries for u in users]
    yes = [f"{u}: {q} -> {h[0].content[:60]!r}" for q, u, h in hits_for if h]
    return len(yes), len(hits_for), yes


def measure(args: argparse.Namespace, base: Path) -> dict:
    """Every share this benchmark reports, for the syncd this process imports."""
    rows = []
    # The generated home.
    root = base / "generated"
    reuse = (root / ".syncd").is_dir()
    if not reuse:
        root = syncd.init(root).home
    write_generated(root)
    with syncd.open(root) as engine:
        engine.reindex() if reuse else engine.sync()
        mode = args.mode or ("after" if "floor" in inspect.signature(engine.search).parameters else "before")
        search = searcher(engine, mode)
        for name, queries in (
            ("off-topic", OFF_TOPIC),
            ("common words", COMMON_ONLY),
            ("gibberish", gibberish(100)),
        ):
            yes, total, listed = answered(search, queries, ["small", "large"])
            rows.append((f"generated {name}", yes, total, listed))
        found = sum(any(h.content == fact for h in search(q, "small", limit=3)) for q, fact in SMALL_QUESTIONS)
        found += sum(any(text in h.content for h in search(q, "large", limit=10)) for q, text in LARGE_QUESTIONS)
        small_readme = [h.content for h in search("what does she drink?", "small")]
    recall = {}
    if args.data:
        samples = json.loads(args.data.read_text(encoding="utf-8"))
        root = base / "locomo"
        reuse = (root / ".syncd").is_dir()
        if not reuse:
            root = syncd.init(root).home
        dia_of = write_home(root, samples)
        users = [user_of(s["sample_id"]) for s in samples]
        with syncd.open(root) as engine:
            engine.reindex() if reuse else engine.sync()
            search = searcher(engine, mode)
            for name, queries in (
                ("off-topic", OFF_TOPIC),
                ("common words", COMMON_ONLY),
                ("gibberish", gibberish(100)),
            ):
                yes, total, listed = answered(search, queries, users)
                rows.append((f"LoCoMo {name}", yes, total, listed))
            plain = searcher(engine, "none")
            values: dict[str, list[float]] = {"none": [], mode: []}
            for sample in samples:
                user = user_of(sample["sample_id"])
                last = max(when for _, when, _ in sessions(sample["conversation"]))
                now = (last + dt.timedelta(days=1)).replace(tzinfo=dt.UTC)
                for qa in sample["qa"]:
                    evidence = set(qa.get("evidence") or ())
                    for name, run in (("none", plain), (mode, search)):
                        top = {dia_of.get(h.id) for h in run(qa["question"], user, 10, now)}
                        values[name].append(len(evidence & top) / len(evidence) if evidence else 1.0)
            recall = {name: sum(v) / len(v) for name, v in values.items()}
    on_topic = len(SMALL_QUESTIONS) + len(LARGE_QUESTIONS)
    return {"mode": mode, "rows": rows, "found": found, "on_topic": on_topic, "readme": small_readme, "recall": recall}


def report(new: dict, old: dict | None, show: bool, old_rev: str | None) -> None:
    print(f"floor: {new['mode']}" + (f" (old {old_rev}: {old['mode']})" if old else ""))
    if old:
        print(f"{'queries':<24} {'answered, old':>22} {'answered, new':>22}")
    else:
        print(f"{'queries':<24} {'answered':>14}")
    before = {name: (yes, total) for name, yes, total, _ in old["rows"]} if old else {}
    for name, yes, total, listed in new["rows"]:
        share = f"{yes:>5}/{total:<5} {yes / total:>6.1%}"
        if old:
            was = before.get(name)
            past = f"{was[0]:>5}/{was[1]:<5} {was[0] / was[1]:>6.1%}" if was else "-"
            print(f"{name:<24} {past:>22} {share:>22}")
        else:
            print(f"{name:<24} {share}")
        if show:
            for line in listed:
                print(f"    {line}")
    for label, result in (("old", old), ("new", new)):
        if result is None:
            continue
        prefix = f"{label}: " if old else ""
        print(f"{prefix}generated on-topic questions answered with their fact: {result['found']}/{result['on_topic']}")
        print(f"{prefix}'what does she drink?' -> {result['readme'][:1]}")
        for name, value in result["recall"].items():
            print(f"{prefix}LoCoMo R@10 floor={name}: {value:.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, help="a LoCoMo-format JSON file (else the generated home only)")
    parser.add_argument("--workdir", type=Path, default=None, help="keep the built homes here and reuse them")
    parser.add_argument(
        "--mode",
        choices=["before", "after", "none"],
        default=None,
        help="which floor to apply (default: after if this tree has one, else before)",
    )
    parser.add_argument("--show", action="store_true", help="list the off-topic queries that were answered")
    parser.add_argument("--old", default=None, help="also run this git revision's syncd, first, on the same homes")
    parser.add_argument("--json", type=Path, default=None, help=argparse.SUPPRESS)  # a child's results, for --old
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        base = args.workdir or Path(tmp)
        old = None
        if args.old:
            code = extract(args.old, base / "old-code")
            child = [sys.executable, __file__, "--workdir", str(base), "--json", str(base / "old.json")]
            child += ["--data", str(args.data)] if args.data else []
            child += ["--mode", args.mode] if args.mode else []
            subprocess.run(child, check=True, env=env_for(code))
            old = json.loads((base / "old.json").read_text(encoding="utf-8"))
        new = measure(args, base)
    if args.json:
        args.json.write_text(json.dumps(new), encoding="utf-8")
        return
    report(new, old, args.show, args.old)


if __name__ == "__main__":
    main()
