"""The embedding cache (syncd.index.embed_cache): vectors kept by text and model, and the
embedder that embeds only what the cache misses, with the real bundled model."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest

from syncd.embedding.fastembed_backend import Embedder
from syncd.errors import EmbeddingError
from syncd.index.embed_cache import CachedEmbedder, EmbeddingCache, text_key

from .helpers import run_concurrently


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


def test_corrupt_cache_file_is_an_embedding_error(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    path.write_bytes(b"this is not a database" * 100)
    with pytest.raises(EmbeddingError, match="deleting it is safe"):
        EmbeddingCache(path)


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
