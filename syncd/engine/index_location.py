"""Where a home keeps its index, for the layers above the engine (the memory layer never imports
the index): a PostgreSQL URL checked and recorded in the home, or the embedded LanceDB default.
See syncd.index.backend for where the URL and the home's schema are kept and why."""

from __future__ import annotations

from pathlib import Path

from ..index.backend import record_home_index, recorded_url, validate_url

__all__ = ["check_index_url", "record_postgres_index", "recorded_index_url"]


def check_index_url(url: str) -> str:
    """``url`` if it names a PostgreSQL database (no connection made); ConfigError otherwise."""
    return validate_url(url)


def record_postgres_index(root: Path, url: str) -> None:
    """Keep the index of the home at ``root`` in ``url``'s database from now on (the URL is
    recorded in the home's ``.git/config`` without its password, as ``syncd init --index``
    does). ConfigError or IndexUnreachable, saying what is wrong, when the database cannot
    serve as an index (a bad URL, a server down, no pgvector): nothing is recorded then."""
    from ..index.pg_connections import check_database

    check_database(url)
    record_home_index(root, url)


def recorded_index_url(root: Path) -> str | None:
    """The index URL the home at ``root`` recorded (without its password), None for LanceDB."""
    return recorded_url(root)
