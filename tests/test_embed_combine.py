"""Concurrent embedding calls share one model call (syncd/embedding/combine.py)."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from syncd.config import Settings
from syncd.embedding.combine import CallCombiner
from syncd.embedding.fastembed_backend import FastEmbedBackend, load_embedder

from .helpers import run_concurrently, wait_for


def test_callers_queued_behind_a_run_share_the_next_run() -> None:
    runs: list[list[str]] = []
    first_running, release = threading.Event(), threading.Event()

    def run(texts: list[str]) -> list[np.ndarray]:
        runs.append(list(texts))
        if len(runs) == 1:
            first_running.set()
            release.wait(30)
        return [np.array([float(len(t)), float(t.count("x"))]) for t in texts]

    combiner = CallCombiner(run)
    answers: dict[int, list[np.ndarray]] = {}

    def caller(n: int) -> None:
        if n:
            first_running.wait(30)
        answers[n] = combiner(["x" * n, "y" * (n + 1)])

    threads = [threading.Thread(target=caller, args=(n,)) for n in range(6)]
    threads[0].start()
    first_running.wait(30)
    for thread in threads[1:]:
        thread.start()
    wait_for(lambda: combiner.waiting == 5, 30, "the five callers queued behind the first run")
    release.set()
    for thread in threads:
        thread.join(30)
    assert len(runs) == 2 and len(runs[1]) == 10  # the five queued callers' texts, in one run
    for n in range(6):
        assert [row.tolist() for row in answers[n]] == [[n, n], [n + 1, 0]]


def test_an_error_reaches_every_caller_of_its_run_and_the_next_run_goes_on() -> None:
    calls = 0
    running, release = threading.Event(), threading.Event()

    def run(texts: list[str]) -> list[np.ndarray]:
        nonlocal calls
        calls += 1
        if calls == 1:
            running.set()
            release.wait(30)
            return [np.zeros(1) for _ in texts]
        if calls == 2:
            raise ValueError("model failed")
        return [np.ones(1) for _ in texts]

    combiner = CallCombiner(run)
    errors: list[BaseException] = []

    def failing(_: int) -> None:
        try:
            combiner(["a"])
        except ValueError as exc:
            errors.append(exc)

    first = threading.Thread(target=combiner, args=(["first"],))
    first.start()
    running.wait(30)
    others = [threading.Thread(target=failing, args=(n,)) for n in range(3)]
    for thread in others:
        thread.start()
    wait_for(lambda: combiner.waiting == 3, 30, "the three callers queued behind the failing run")
    release.set()
    first.join(30)
    for thread in others:
        thread.join(30)
    assert len(errors) == 3 and calls == 2
    assert [row.tolist() for row in combiner(["after"])] == [[1.0]]


@pytest.fixture(scope="module")
def backend(tmp_path_factory: pytest.TempPathFactory) -> FastEmbedBackend:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        embedder = load_embedder(Settings(), cache_dir=tmp_path_factory.mktemp("models"))
        assert isinstance(embedder, FastEmbedBackend)
        embedder.load()
    return embedder


def test_concurrent_embeds_get_the_vectors_each_gets_alone(backend: FastEmbedBackend) -> None:
    texts = [f"Agent {n} remembers that the {'very ' * n}old lighthouse keeper likes tea." for n in range(8)]
    alone = [backend.embed([text]) for text in texts]
    together: dict[int, np.ndarray] = {}
    for _ in range(5):
        run_concurrently(lambda n: together.__setitem__(n, backend.embed([texts[n]])), len(texts))
        for n, vector in enumerate(alone):
            np.testing.assert_array_equal(together[n], vector)
