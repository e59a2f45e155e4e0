"""Shared fixtures: the real embedding model (loaded once), fresh homes in tmp_path."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

import syncd
from syncd.config import Settings
from syncd.embedding.fastembed_backend import load_embedder

# Property tests here touch real files, LanceDB and the real model: fewer, slower examples.
settings.register_profile(
    "syncd", deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
settings.load_profile("syncd")

# Commits made by tests must not depend on the machine's git identity.
os.environ.setdefault("GIT_CONFIG_NOSYSTEM", "1")


@pytest.fixture(scope="session")
def embedder(tmp_path_factory):
    """The real default model, offline; one instance for the whole run (0.4 s to load)."""
    model = load_embedder(Settings(), cache_dir=tmp_path_factory.mktemp("models"))
    model.embed(["warm up"])
    return model


@pytest.fixture
def home(tmp_path) -> Path:
    return syncd.init(tmp_path / "home").home


@pytest.fixture
def engine(home, embedder):
    with syncd.open(home, embedder=embedder) as eng:
        yield eng


