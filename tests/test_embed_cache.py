"""The embedding cache (syncd.index.embed_cache): vectors kept by text and model, and the
embedder that embeds only what the cache misses, with the real bundled model."""

from __future__ import annotations

import logging
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import syncd
from syncd.embedding.fastembed_backend import Embedder
from syncd.errors import EmbeddingError
from syncd.index.embed_cache import CachedEmbedder, EmbeddingCache, text_key

from .helpers import run_concurrently, write


def test_cache_round_trip_and_model_separation(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    texts = [f"text {i}" for i in range(2500)]
    vectors = rng.standard_normal((2500, 8)).astype(np.float32)
    with EmbeddingCache(tmp_path / "cache.sqlite") as cache:
        cache.put_many("m1", texts, vectors)
        got = cache.get_many("m1", texts + ["never stored"])
        assert sorted(got) == list(range(2500))
        np.testing.assert_array_equal(np.stack([got[i] for i in range(2500)]), vectors)
        assert cache.get_many("m2", texts) == {}
        assert cache.count("m1") == 2500 and cache.count() == 2500
        assert cache.delete_model("m1") == 2500
        assert cache.count() == 0
    db = sqlite3.connect(tmp_path / "cache.sqlite")
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    db.close()


def test_cache_rejects_mismatched_vectors(tmp_path: Path) -> None:
    with EmbeddingCache(tmp_path / "c.sqlite") as cache, pytest.raises(ValueError):
        cache.put_many("m", ["a", "b"], np.zeros((3, 4), np.float32))


def test_closed_cache_says_so(tmp_path: Path) -> None:
    cache = EmbeddingCache(tmp_path / "c.sqlite")
    cache.close()
    with pytest.raises(EmbeddingError, match="closed"):
        cache.get_many("m", ["a"])


def _set_aside(path: Path) -> list[Path]:
    """The cache files set aside beside ``path`` (their -wal and -shm, when any, go with them)."""
    return sorted(p for p in path.parent.glob(f"{path.name}.corrupt-*") if not p.name.endswith(("-wal", "-shm")))


def test_a_corrupt_cache_file_is_set_aside_with_one_warning_and_a_new_one_started(tmp_path: Path, caplog) -> None:
    path = tmp_path / "c.sqlite"
    garbage = b"this is not a database" * 100
    path.write_bytes(garbage)
    with caplog.at_level(logging.WARNING, logger="syncd.index.embed_cache"), EmbeddingCache(path) as cache:
        cache.put_many("m", ["a"], np.ones((1, 4), np.float32))
        assert sorted(cache.get_many("m", ["a", "b"])) == [0]
    (aside,) = _set_aside(path)
    assert aside.read_bytes() == garbage  # kept for diagnosis, not deleted
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and "is corrupt" in warnings[0] and aside.name in warnings[0]


def _corrupt_pages(path: Path) -> None:
    """Overwrite every page but the first (the header stays sound, so the file opens and reads its
    schema version; a lookup then meets the damage), as a bad disk block would."""
    page = 8192  # the cache's page size (_init_schema)
    size = path.stat().st_size
    assert size > 2 * page, "the cache must hold pages past the first to damage"
    with open(path, "r+b") as handle:
        handle.seek(page)
        handle.write(np.random.default_rng(7).bytes(size - page))


def test_a_cache_found_corrupt_by_a_lookup_never_fails_search_or_sync(home: Path, embedder: Embedder, caplog) -> None:
    cache_file = home / ".syncd" / "embed_cache.sqlite"
    with syncd.open(home, embedder=embedder) as engine:
        write(home, "vault/bees.md", "# Bees\n\nThe hives on the roof hold three colonies.\n")
        engine.sync()
    _corrupt_pages(cache_file)
    damaged = cache_file.read_bytes()
    with caplog.at_level(logging.WARNING, logger="syncd.index.embed_cache"):
        with syncd.open(home, embedder=embedder) as engine:
            engine.reindex()  # every text looked up in the damaged file, then embedded afresh
            write(home, "vault/wasps.md", "# Wasps\n\nA wasp nest sits under the eaves.\n")
            engine.sync()
            hits = engine.search("roof hives colonies")
            assert any(h.path == "vault/bees.md" for h in hits)
            assert engine.embedder.cache.count(embedder.model_id) > 0  # the new cache is filled
    (aside,) = _set_aside(cache_file)
    assert aside.read_bytes() == damaged
    assert sum("is corrupt" in r.getMessage() for r in caplog.records) == 1


def _newer_cache(path: Path) -> bytes:
    """A cache file as a newer syncd might write it: schema version 2, a table this one does not
    know, a rollback journal (not WAL). Returns its bytes."""
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE vectors2 (model TEXT, key BLOB, vector BLOB, norm REAL)")
    db.execute("INSERT INTO vectors2 VALUES ('m', x'00', x'0102', 1.0)")
    db.execute("PRAGMA user_version = 2")
    db.commit()
    db.close()
    return path.read_bytes()


def test_a_cache_of_a_newer_syncd_is_left_untouched_and_never_called_deletable(
    home: Path, embedder: Embedder, caplog
) -> None:
    """A cache whose schema is newer than this syncd's stopped every open with "delete the file
    (it is only a cache)": advice to destroy what the newer syncd still uses (a person going
    back and forth between two versions). It is now left byte for byte as it is, this syncd
    goes on without it, and the one warning says a newer syncd wrote it: upgrade, or move it
    aside."""
    cache_file = home / ".syncd" / "embed_cache.sqlite"
    cache_file.unlink()
    written = _newer_cache(cache_file)
    with caplog.at_level(logging.WARNING, logger="syncd.index.embed_cache"):
        with syncd.open(home, embedder=embedder) as engine:
            write(home, "vault/bees.md", "# Bees\n\nThe hives on the roof hold three colonies.\n")
            engine.sync()
            assert any(h.path == "vault/bees.md" for h in engine.search("roof hives colonies"))
    assert cache_file.read_bytes() == written
    assert sorted(p.name for p in cache_file.parent.glob("embed_cache.sqlite*")) == ["embed_cache.sqlite"]
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1, warnings
    said = warnings[0].lower()
    assert "newer syncd" in said and "schema version 2" in said
    assert "upgrade syncd" in said and "move it aside" in said and "delet" not in said


_HOLD_A_WRITE = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
conn.execute("DELETE FROM vectors WHERE model_id = 'nothing'")
print("holding", flush=True)
sys.stdin.read()  # until the test closes our stdin
conn.execute("COMMIT")
"""


def test_a_cache_another_process_is_writing_is_not_taken_for_corrupt(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    with EmbeddingCache(path) as cache:
        cache.put_many("m", ["a"], np.ones((1, 4), np.float32))
    writer = subprocess.Popen(
        [sys.executable, "-c", _HOLD_A_WRITE, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert writer.stdout is not None and writer.stdout.readline() == "holding\n"
        with EmbeddingCache(path) as cache:
            assert sorted(cache.get_many("m", ["a"])) == [0]  # WAL: readers go on beside a writer
            # White-box: a short busy timeout instead of the cache's 30 s, so the write meets
            # the other process's lock at once.
            assert cache._conn is not None
            cache._conn.execute("PRAGMA busy_timeout = 50")
            with pytest.raises(EmbeddingError, match="locked"):
                cache.put_many("m", ["b"], np.ones((1, 4), np.float32))
    finally:
        writer.communicate("", timeout=60)
    assert writer.returncode == 0 and not _set_aside(path)
    with EmbeddingCache(path) as cache:
        assert cache.count("m") == 1


_OPEN_AND_PUT = """
import sys
import numpy as np
from syncd.index.embed_cache import EmbeddingCache
with EmbeddingCache(sys.argv[1]) as cache:
    cache.put_many("m", [sys.argv[2]], np.ones((1, 4), np.float32))
"""


def test_processes_finding_the_same_corrupt_cache_set_it_aside_once_and_share_the_new_one(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    path.write_bytes(b"not a database" * 1000)
    names = [f"text {n}" for n in range(4)]
    procs = [subprocess.Popen([sys.executable, "-c", _OPEN_AND_PUT, str(path), name]) for name in names]
    assert [p.wait(timeout=120) for p in procs] == [0] * len(procs)
    assert len(_set_aside(path)) == 1
    with EmbeddingCache(path) as cache:
        assert sorted(cache.get_many("m", names)) == [0, 1, 2, 3]


def test_text_key_is_sha256_and_survives_lone_surrogates() -> None:
    expected = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    assert text_key("abc").hex() == expected
    assert len(text_key("bad \udcff byte")) == 32


def test_cached_embedder_embeds_only_misses(tmp_path: Path, embedder: Embedder) -> None:
    path = tmp_path / "cache.sqlite"
    cached = CachedEmbedder(embedder, EmbeddingCache(path))
    assert isinstance(cached, Embedder)
    assert cached.model_id == embedder.model_id and cached.dim == 384

    texts = ["alpha", "beta", "gamma", "alpha"]
    first = cached.embed(texts)
    assert (cached.calls, cached.embedded_texts) == (1, 3), "duplicates are embedded once"
    np.testing.assert_allclose(first, embedder.embed(texts), atol=1e-6)

    again = cached.embed(texts)
    assert (cached.calls, cached.embedded_texts) == (1, 3), "a repeat must not reach the model"
    np.testing.assert_array_equal(again, first)

    mixed = cached.embed(["beta", "delta", "alpha", "epsilon", "delta"])
    assert (cached.calls, cached.embedded_texts) == (2, 5), "only delta and epsilon are new"
    np.testing.assert_allclose(mixed, embedder.embed(["beta", "delta", "alpha", "epsilon", "delta"]), atol=1e-6)

    assert cached.embed([]).shape == (0, 384)
    assert cached.calls == 2
    cached.cache.close()

    reopened = CachedEmbedder(embedder, EmbeddingCache(path))
    np.testing.assert_array_equal(reopened.embed(texts), first)
    assert reopened.calls == 0 and reopened.embedded_texts == 0

    assert reopened.cache.get_many("some-other-model@1", texts) == {}
    assert len(reopened.cache.get_many(embedder.model_id, texts)) == 4

    query = reopened.embed_query("alpha")
    np.testing.assert_allclose(query, first[0], atol=1e-6)
    assert reopened.calls == 1
    reopened.reset_counters()
    assert (reopened.calls, reopened.embedded_texts) == (0, 0)
    reopened.cache.close()


def test_cached_embedder_from_many_threads(tmp_path: Path, embedder: Embedder) -> None:
    cached = CachedEmbedder(embedder, EmbeddingCache(tmp_path / "cache.sqlite"))
    batches = [[f"thread {t} text {i}" for i in range(10)] + ["shared"] for t in range(6)]
    results: dict[int, np.ndarray] = {}
    run_concurrently(lambda n: results.update({n: cached.embed(batches[n])}), 6)
    for n, batch in enumerate(batches):
        np.testing.assert_allclose(results[n], embedder.embed(batch), atol=1e-6)
    assert cached.cache.count(embedder.model_id) == 61
    cached.cache.close()
