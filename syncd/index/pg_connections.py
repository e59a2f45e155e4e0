"""Connections to a PostgreSQL index database: the driver imported on first use, a few kept
connections with pgvector's types registered, pgvector made available or its absence said, and
every statement under a timeout. A driver's error never leaves here as itself: an unreachable
server is :class:`IndexUnreachable`, anything else the server refused an ``IndexError_``."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

from ..errors import ConfigError, IndexError_
from .backend import IndexUnreachable, redact_url

__all__ = ["STATEMENT_TIMEOUT_MS", "Connections", "check_database", "driver", "first_line"]

_CONNECT_TIMEOUT_S = 5
STATEMENT_TIMEOUT_MS = 30_000
_IDLE_CONNECTIONS = 4


def driver():
    try:
        import psycopg
        from pgvector.psycopg import register_vector
    except ImportError:
        raise ConfigError("a PostgreSQL index needs the postgres extra: pip install 'syncd[postgres]'") from None
    return psycopg, register_vector


class Connections:
    """A few open connections to one database, each with pgvector's types registered. A
    connection that failed is closed, never handed out again.

    Our own pool rather than psycopg_pool's: that pool opens its connections and runs worker
    threads from the start in every process, a one-shot ``syncd search`` or ``status`` included,
    which needs one connection once; what syncd needs of a pool is these few rules (an idle
    connection checked by one round trip before use, the other idle ones dropped when it is dead,
    nothing kept after close), with connections made on demand in the caller's thread."""

    def __init__(self, url: str):
        self.url = url
        self.shown = redact_url(url)
        self._idle: list = []
        self._lock = threading.Lock()
        # Once closed, a connection given back is closed rather than kept (a reader may still be
        # inside a query when its engine closes).
        self._closed = False

    @contextmanager
    def get(self) -> Iterator:
        psycopg, register_vector = driver()
        with self._lock:
            conn = self._idle.pop() if self._idle else None
        if conn is not None:
            # An idle connection outlives a server restart only as a dead socket: one round trip
            # (cheap beside a request) finds out, and a new connection then serves the first
            # request after it.
            try:
                conn.execute("SELECT 1")
            except psycopg.Error:
                conn.close()
                self._drop_idle()  # the other idle ones went with the same server
                conn = None
        try:
            if conn is None or conn.closed:
                conn = psycopg.connect(
                    self.url,
                    autocommit=True,
                    connect_timeout=_CONNECT_TIMEOUT_S,
                    options=f"-c statement_timeout={STATEMENT_TIMEOUT_MS}",
                )
                _ensure_vector(conn, self.shown)
                register_vector(conn)
                conn.adapters.register_loader(conn.adapters.types["vector"].oid, _vector_loader())
            yield conn
        except psycopg.OperationalError as exc:
            if conn is not None:
                conn.close()
            raise IndexUnreachable(
                f"the index database at {self.shown} cannot be reached: {first_line(exc)}{_remedy(exc)}"
            ) from None
        except psycopg.Error as exc:
            if conn is not None and not conn.closed:
                conn.close()  # a failed transaction's connection is not worth repairing
            raise IndexError_(f"the index database at {self.shown} refused: {first_line(exc)}") from None
        except BaseException:
            if conn is not None:
                conn.close()  # in a state nobody knows (a query's error, an interrupt): not reused
            raise
        else:
            with self._lock:
                if not self._closed and len(self._idle) < _IDLE_CONNECTIONS and not conn.closed:
                    self._idle.append(conn)
                    conn = None
            if conn is not None:
                conn.close()

    def _drop_idle(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    def close(self) -> None:
        """Close every connection: those idle now, and each in use once it is given back."""
        with self._lock:
            self._closed = True
        self._drop_idle()


def check_database(url: str) -> None:
    """Connect to ``url`` once and make sure pgvector is there: ConfigError or IndexUnreachable
    saying what is wrong (a bad URL, a server down, no pgvector), never a driver's traceback."""
    from .backend import validate_url

    validate_url(url)
    connections = Connections(url)
    try:
        with connections.get():
            pass
    finally:
        connections.close()


# What a person does about a server that answers but refuses the connection, by SQLSTATE; a server
# that is down or unreachable needs only time (the index catches up once it is back).
_REMEDIES = {
    "3D000": "create it (CREATE DATABASE), or point the home at another: `syncd init --index URL`",
    "28P01": "check the user and password (the URL, ~/.pgpass or PGPASSWORD)",
    "28000": "the server's pg_hba.conf does not let this user in from here: ask its owner",
}


def _remedy(exc: Exception) -> str:
    """``; <what to do>`` for a refusal a person must act on (no such database, bad password),
    found by the SQLSTATE the server sent; empty otherwise."""
    remedy = _REMEDIES.get(getattr(exc, "sqlstate", None) or "")
    if remedy is None:
        # libpq reports a refused connection's SQLSTATE on the connection only: read the text.
        text = str(exc)
        if "does not exist" in text and "database" in text:
            remedy = _REMEDIES["3D000"]
        elif "password authentication failed" in text:
            remedy = _REMEDIES["28P01"]
        elif "no pg_hba.conf entry" in text:
            remedy = _REMEDIES["28000"]
    return f"; {remedy}" if remedy else ""


def first_line(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def _ensure_vector(conn, shown: str) -> None:
    """pgvector, made available in the database if it is installed on the server."""
    if conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'").fetchone():
        return
    if not conn.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'").fetchone():
        raise ConfigError(
            f"the database at {shown} has no pgvector extension: install pgvector on the server "
            "(any PostgreSQL 15+ with pgvector serves as syncd's index)"
        )
    try:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    except driver()[0].Error as exc:
        raise ConfigError(
            f"cannot enable pgvector in the database at {shown} ({first_line(exc)}): "
            "ask its owner to run CREATE EXTENSION vector"
        ) from None


def _vector_loader():
    """A binary loader of pgvector's ``vector`` into float32 numpy arrays: what every reader
    here wants, at a tenth of the cost of pgvector's own Vector objects (a search reads hundreds)."""
    from psycopg.adapt import Loader
    from psycopg.pq import Format

    class VectorLoader(Loader):
        format = Format.BINARY

        def load(self, data) -> np.ndarray:
            # pgvector's binary form: dimension and a reserved word (uint16 each), then float32s, big-endian.
            dim = int.from_bytes(bytes(data[:2]), "big")
            return np.frombuffer(data, dtype=">f4", count=dim, offset=4).astype(np.float32)

    return VectorLoader
