"""The one seam between the engine and an index backend, and the choice of backend by URL.

Two backends keep the same rows under the same ids and obey the same laws (incremental equals
rebuild; a user's query never reaches another user's rows): the embedded LanceDB index under
``.syncd/index`` (store.py, the default) and a PostgreSQL database with pgvector (pg_store.py),
chosen by a ``postgresql://`` URL (``syncd init --index URL`` or ``SYNCD_INDEX_URL``). The sync
pipeline, the write path and search speak only :class:`IndexBackend`.

Where a home's index lives is a setting of that home, not of the machine: ``syncd init --index``
records the URL in the home's own git configuration (``.git/config``, key ``syncd.index``: never
committed, and it outlives ``rm -rf .syncd``), with any password taken out. The password comes
from the environment (``SYNCD_INDEX_URL`` holding it, libpq's ``PGPASSWORD`` or ``~/.pgpass``),
never from a file of the home or a log line.

A home's rows live in a PostgreSQL schema of their own (see pg_store.py for why), named in the
same git configuration (``syncd.indexschema``), made once per home at its first use; a read-only
server on another machine names it with ``SYNCD_INDEX_SCHEMA`` (``syncd serve --read-only``).
"""

from __future__ import annotations

import secrets
import subprocess
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Protocol
from urllib.parse import urlsplit, urlunsplit

from ..errors import ConfigError, HomeError, IndexUnreachable
from .records import FileRecord, FileUpdate

__all__ = [
    "INDEX_UNREACHABLE",
    "IndexBackend",
    "IndexUnreachable",
    "home_index",
    "open_index",
    "record_home_index",
    "recorded_schema",
    "recorded_url",
    "redact_url",
    "validate_url",
]

# Status.index when the index's database cannot be reached: nothing can be said of what it holds.
INDEX_UNREACHABLE = IndexUnreachable.status
_URL_KEY = "syncd.index"
_SCHEMA_KEY = "syncd.indexschema"
_SCHEMES = ("postgresql", "postgres")


class IndexBackend(Protocol):
    """What the engine, the sync pipeline, the write path and search ask of an index."""

    dim: int
    model_id: str
    read_only: bool

    # -- what the index reflects
    def meta(self) -> dict: ...
    def write_meta(self, **fields: object) -> None: ...
    def compatible(self) -> bool: ...
    def on_disk(self) -> bool: ...
    def files(self, paths: Iterable[str] | None = None) -> dict[str, FileRecord]: ...
    def counts(self) -> dict[str, int]: ...
    def all_rows(self, with_vectors: bool = False): ...
    def find_fact(self, fact_id: str) -> list[dict]: ...

    # -- writing (one writer per home)
    def unchanged_rows(self, path: str, rows: Sequence) -> frozenset[str]: ...
    def apply(self, updates: Sequence[FileUpdate], defer: bool = False) -> None: ...
    def persist(self) -> None: ...
    @property
    def applied(self) -> int: ...
    def wait_written(self, applied: int) -> None: ...
    @property
    def unwritten_paths(self) -> frozenset[str]: ...
    def rebuilding(self, **meta: object) -> AbstractContextManager[IndexBackend]: ...
    def optimize(self) -> None: ...
    def close(self) -> None: ...

    # -- searching: the rows held still for one query (rowcache.RowCache's query methods);
    # ``same_model``: IndexError_ unless their vectors come from this index's model (a query's
    # or a fact's vector is compared with them), checked with the rows, as of the same moment
    def reading(self, same_model: bool = False) -> AbstractContextManager: ...


def validate_url(url: str) -> str:
    """``url`` if it names a PostgreSQL database; ConfigError saying what is wrong otherwise."""
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        raise ConfigError(f"the index URL is not a URL: {exc}") from None
    if parts.scheme not in _SCHEMES:
        shown = redact_url(url) if "://" in url else "(not a URL)"
        raise ConfigError(f"the index URL must start with postgresql:// (got {shown})")
    if "\x00" in url or any(c in url for c in "\r\n"):
        raise ConfigError("the index URL holds a control character")
    return url


def redact_url(url: str) -> str:
    """``url`` without its password: what may be written into the home, shown or logged.

    libpq takes a password after the user name and as a ``password`` parameter of the query, so
    both go. The host part is kept as written: urlsplit's hostname would lose an IPv6 address's
    brackets and a second host's port (``h1:5432,h2:5433``), recording a URL libpq cannot read."""
    parts = urlsplit(url)
    userinfo, at, hosts = parts.netloc.rpartition("@")
    netloc = f"{userinfo.partition(':')[0]}@{hosts}" if at else hosts
    query = "&".join(p for p in parts.query.split("&") if p.partition("=")[0].strip().lower() != "password")
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def _git_config(root: Path, *args: str) -> str | None:
    from ..home.disk import git_dir

    # A home with no repository of its own has recorded nothing; git would read the config of a
    # repository around it instead (or fail with words about --local that say nothing here).
    if git_dir(root) is None:
        return None
    done = subprocess.run(["git", "config", "--local", *args], cwd=root, capture_output=True, text=True, check=False)
    if done.returncode == 1:  # the key is not set
        return None
    if done.returncode != 0:
        raise ConfigError(
            f"cannot read the index setting of {root}: its git repository is unreadable "
            f"({done.stderr.strip()}); `git -C {root} status` says what is wrong"
        )
    return done.stdout.strip()


def record_home_index(root: Path, url: str) -> None:
    """Record ``url`` (without its password) as where the home at ``root`` keeps its index."""
    validate_url(url)
    done = subprocess.run(
        ["git", "config", "--local", _URL_KEY, redact_url(url)], cwd=root, check=False, capture_output=True, text=True
    )
    if done.returncode != 0:
        raise ConfigError(f"cannot record the index URL in {root}: {done.stderr.strip()}")


def recorded_url(root: Path) -> str | None:
    """The index URL the home at ``root`` recorded (``syncd init --index``), None for LanceDB."""
    return _git_config(root, "--get", _URL_KEY) or None


def recorded_schema(root: Path) -> str | None:
    """The PostgreSQL schema the home at ``root`` recorded as its own, None if none yet."""
    return _git_config(root, "--get", _SCHEMA_KEY) or None


def home_index(root: Path, settings) -> tuple[str, str] | None:
    """``(url, schema)`` of the home's PostgreSQL index, or None for the embedded LanceDB one.

    ``SYNCD_INDEX_URL`` wins (it may carry the password the recorded URL lacks); then the URL
    the home recorded. The schema is ``SYNCD_INDEX_SCHEMA``, else the one the home recorded,
    else a new one, recorded now (a clone records none: a reader on it is told the schema)."""
    url = settings.index_url or _git_config(root, "--get", _URL_KEY)
    if not url:
        return None
    validate_url(url)
    schema = settings.index_schema or _git_config(root, "--get", _SCHEMA_KEY)
    if not schema:
        schema = f"syncd_{_slug(root.name)}_{secrets.token_hex(4)}"
        done = subprocess.run(
            ["git", "config", "--local", _SCHEMA_KEY, schema], cwd=root, check=False, capture_output=True, text=True
        )
        if done.returncode != 0:
            raise ConfigError(f"cannot record the index schema in {root}: {done.stderr.strip()}")
    return url, schema


def _slug(name: str) -> str:
    """A folder name as a short identifier piece (the schema name stays readable in psql)."""
    kept = "".join(c if c.isascii() and c.isalnum() else "_" for c in name.lower()).strip("_")
    return kept[:24] or "home"


def open_index(
    state_dir: Path,
    dim: int,
    model_id: str,
    *,
    shared: bool,
    read_only: bool = False,
    location: tuple[str, str] | None = None,
    ann_min_rows: int | None = None,
    looks_only: bool = False,
) -> IndexBackend:
    """The home's index: LanceDB under ``state_dir/index`` or, with ``location`` (``home_index``),
    its PostgreSQL schema (whose scopes of ``ann_min_rows`` rows or more search through its
    HNSW index: pg_ann.py)."""
    if location is None:
        from .store import Index

        _check_lance_path(state_dir)
        return Index(state_dir / "index", dim, model_id, read_only=read_only, shared=shared)
    from .pg_store import PgIndex

    url, schema = location
    # ``shared``: beside the home's writer (an agent's engine, whose changes borrow the home's
    # lock and write their rows). The schema is the writer's, and many machines read it: such an
    # index never makes it anew when it finds another layout (a reader of another syncd version
    # dropped the writer's whole index, over and over). ``looks_only`` (`syncd search`, `status`,
    # a read-only server over a clone) never makes a schema not there yet either.
    index = PgIndex(url, schema, dim, model_id, read_only=read_only, ann_min_rows=ann_min_rows, reader=shared,
                    looks_only=looks_only)  # fmt: skip
    if not read_only:
        # A database that cannot serve as an index (no pgvector) will not get better by waiting:
        # the writer refuses to start, saying so. One that is down may come back: the writer
        # starts, writes the markdown, and catches the index up then.
        try:
            index.check_database()
        except BaseException:
            index.close()
            raise
    return index


def _check_lance_path(state_dir: Path) -> None:
    """LanceDB takes a folder's path as UTF-8 text only: a home whose path holds a byte that is
    not (a folder named on a Latin-1 system) would fail deep inside it, in its own words."""
    try:
        str(state_dir).encode("utf-8")
    except UnicodeEncodeError:
        raise HomeError(
            f"{state_dir.parent}: its path is not UTF-8, and LanceDB cannot keep the index in a "
            "folder so named; rename the folder (or the one above it that is so named), or keep "
            "the index in PostgreSQL (SYNCD_INDEX_URL)"
        ) from None


def iter_chunks(values: Sequence, size: int) -> Iterator[Sequence]:
    for start in range(0, len(values), size):
        yield values[start : start + size]
