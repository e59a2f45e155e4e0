"""Shared fixtures: the real embedding model (loaded once), fresh homes in tmp_path, an
environment of the suite's own for every test; the hypothesis profiles (``--slow`` for more)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

import syncd
from syncd.config import Settings
from syncd.embedding.fastembed_backend import load_embedder

from .daemon_helpers import new_home
from .pg_fixtures import pg_home, pg_server, pg_url  # noqa: F401  (PostgreSQL fixtures)

# Property tests here touch real files, LanceDB and the real model: fewer, slower examples. A law
# runs the profile's 100 examples unless it sets its own; one whose every example costs sets
# examples(n) from tests/strategies.py (n in CI). `pytest --slow` or SYNCD_SLOW=1 loads the profile
# with ten times as many for both: run it when changing what such a law guards.
settings.register_profile(
    "syncd",
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
settings.register_profile("syncd-slow", settings.get_profile("syncd"), max_examples=1000)
settings.load_profile("syncd")


def pytest_addoption(parser):
    parser.addoption("--slow", action="store_true", help="syncd: the laws with ten times the examples")


def pytest_configure(config):
    if config.getoption("slow") or os.environ.get("SYNCD_SLOW") == "1":
        settings.load_profile("syncd-slow")


# Who a person's commit made by a test is from (a person's git command, a human edit committed).
SUITE_GIT_NAME, SUITE_GIT_EMAIL = "Test Person", "person@example.org"


def _suite_environment(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """No SYNCD_* setting of whoever runs the suite, and a fresh HOME holding only the suite's git
    identity: nothing of the machine's ``~`` (its git config, a model cache, a syncd home found
    from there) decides what a test sees. A test of what happens without an identity points
    GIT_CONFIG_GLOBAL at an empty file (tests/daemon_helpers.py)."""
    for name in [name for name in os.environ if name.startswith("SYNCD_")]:
        monkeypatch.delenv(name)
    home = tmp_path_factory.mktemp("user-home")
    (home / ".gitconfig").write_text(f"[user]\n\tname = {SUITE_GIT_NAME}\n\temail = {SUITE_GIT_EMAIL}\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    # The processes tests start (a CLI, a daemon, a server) keep their compiled bytecode, as on
    # any Python left at its default: where the machine says not to (these machines do), each of
    # the suite's hundreds of processes would compile syncd's modules anew.
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)


@pytest.fixture(scope="session", autouse=True)
def _session_environment(tmp_path_factory):
    """The suite's environment for what module- and session-wide fixtures start (a server, a
    model), before any test's own below."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        _suite_environment(monkeypatch, tmp_path_factory)
        yield


@pytest.fixture(autouse=True)
def _own_environment(monkeypatch, tmp_path_factory):
    """Each test gets the suite's environment afresh: nothing a test before it left in HOME or
    in the SYNCD_* settings reaches it."""
    _suite_environment(monkeypatch, tmp_path_factory)
    yield
    # Set by the test without monkeypatch (which undoes only its own): gone before the next test.
    for name in [name for name in os.environ if name.startswith("SYNCD_")]:
        del os.environ[name]


@pytest.fixture(scope="session")
def embedder(tmp_path_factory):
    """The real default model, offline; one instance for the whole run (0.4 s to load)."""
    model = load_embedder(Settings(), cache_dir=tmp_path_factory.mktemp("models"))
    model.embed(["warm up"])
    return model


@pytest.fixture
def home(tmp_path, embedder) -> Path:
    """A fresh home whose embedding cache already holds the vault seed's vectors: the seed's first
    embedding costs about 1.5 s of CPU, paid once per run instead of by every test that syncs (the
    cache is derived, per home; a test of a home's very first embedding makes its own home)."""
    return new_home(tmp_path / "home", embedder)


@pytest.fixture
def engine(home, embedder):
    with syncd.open(home, embedder=embedder) as eng:
        yield eng
