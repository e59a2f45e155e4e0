"""Homes read from a shared PostgreSQL index alone, by a process that holds none of them: the
engine side of a read-only server for every home of one database (``syncd serve --read-only
--index URL``, syncd.server.database_server).

A home's writer (its ``syncd serve``/``watch``) keeps the home's schema: rows, vectors, term
statistics, the whole text of its core blocks and MEMORY.md files (``texts``), and the hashes of
its server tokens (published by the writer: :func:`publish_tokens`). A reader needs nothing
else, so it answers search, stats and core-block reads for any home of the database with no copy
of its files. What it cannot answer without the files or git (a past revision, a daily log's
text, a transcript) it refuses; those belong to the home's own server.

Each home is searched exactly as its own engine searches it (:func:`ranked_search`, shared with
``Engine.search``), with this process's embedding model; a home indexed with another model is
refused, not searched with vectors that mean something else.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..config import Settings
from ..embedding.fastembed_backend import Embedder, load_embedder
from ..errors import ConfigError, InvalidInputError, NotFoundError, SyncdError
from ..home import Home, check_query
from ..home.tokens import TokenStore
from ..index.backend import IndexBackend, home_index, validate_url
from ..index.rowcache import ScopeMask
from ..index.search import Hit, Weights, hybrid_search

__all__ = [
    "DatabaseHomes",
    "IndexedHome",
    "TokenMirror",
    "publish_home_tokens",
    "publish_tokens",
    "ranked_search",
    "shares_index",
]

log = logging.getLogger(__name__)

# How old the list of the database's homes may be: a home made since is served within it.
_HOMES_TTL_S = 1.0


def ranked_search(
    index: IndexBackend,
    embed_query: Any,
    settings: Settings,
    query: str,
    *,
    user_id: str | None,
    chat_id: str | None,
    limit: int,
    kind: str | None,
    now: dt.datetime | None,
    text: bool,
    min_cosine: float | None,
    memory_only: bool,
    floor: bool,
) -> list[Hit]:
    """The index's ranking of ``query`` in the scope given (Engine.search's, without its write
    path or history): hybrid search with the settings' weights. ``embed_query``: text -> vector."""
    return hybrid_search(
        index,
        lambda: embed_query(query),
        query if text else "",
        user_id,
        chat_id,
        limit,
        kind,
        weights=Weights.from_settings(settings),
        now=now,
        min_cosine=min_cosine,
        memory_only=memory_only,
        floor=floor,
    )


def shares_index(engine: Any) -> bool:
    """Whether the engine's index is one that readers holding no copy of the home read (a
    PostgreSQL schema), so that the home's token hashes belong in it."""
    return hasattr(engine.index, "write_tokens")


def publish_tokens(engine: Any, hashes: Mapping) -> bool:
    """Publish the home's server-token hashes into its shared index, where readers of the
    database check the tokens of requests naming this home (see the module's docstring); True
    when the index held other ones. IndexUnreachable while its database is down."""
    return bool(engine.index.write_tokens(hashes))


class TokenMirror:
    """Keeps the home's token hashes published in its shared index, run by the home's writer
    whichever it is (the daemon of ``syncd serve``, ``watch`` and ``mcp``: Daemon.run): at its
    start, then once every ``every_s``, so a token added or revoked while no writer ran, or while
    the database was down, reaches the readers once both are up again, and a database rebuilt or
    restarted meanwhile gets them again. ``syncd token add|revoke`` publish at once besides
    (:func:`publish_home_tokens`); this is the catch-up, never the only way."""

    def __init__(self, engine: Any, tokens: TokenStore | None = None, every_s: float = 1.0):
        self.engine = engine
        self.tokens = tokens or TokenStore.of(engine.home)
        self.every_s = every_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._failing: str | None = None

    def publish(self) -> None:
        """Publish now; a failure is logged once while it lasts (the next round retries)."""
        try:
            if self.tokens.publish(lambda hashes: publish_tokens(self.engine, hashes)):
                log.info("published the home's token hashes for the readers of its index")
            self._failing = None
        except (SyncdError, OSError) as exc:
            if str(exc) != self._failing:
                log.warning("cannot publish the home's token hashes for the readers of its index: %s", exc)
            self._failing = str(exc)

    def start(self) -> TokenMirror:
        """Publish on a thread of its own, at once and then every round: a database that does not
        answer (a connect timeout) never holds up the writer's start."""
        self._thread = threading.Thread(target=self._run, name="syncd-token-mirror", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        self.publish()
        while not self._stop.wait(self.every_s):
            self.publish()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()


def publish_home_tokens(root: Path, settings: Settings) -> bool | None:
    """Publish the token hashes of the home at ``root`` into its PostgreSQL index now, for
    ``syncd token add|revoke`` (no engine, no lock, no model: only the schema's ``meta`` is
    written). None when the home's index is LanceDB (no reader to tell). IndexUnreachable while
    the database is down, IndexError_ while the home's writer has not made its schema yet: either
    way its writer's TokenMirror publishes them once it runs."""
    from ..index.pg_store import PgIndex

    location = home_index(root, settings)
    if location is None:
        return None
    # Read-only: a writer of the meta row alone, which never makes tables (their vector width is
    # the writer's model's, unknown here) nor changes a schema of another layout.
    index = PgIndex(*location, dim=1, model_id="", read_only=True)
    try:
        return TokenStore.of(Home(root)).publish(index.write_tokens)
    finally:
        index.close()


class IndexedHome:
    """One home of a database, read from its schema alone (the module's docstring)."""

    read_only = True

    def __init__(self, name: str, index: Any, embedder: Any, settings: Settings):
        self.name = name
        self.index = index
        self.embedder = embedder
        self.settings = settings

    def search(
        self,
        query: str,
        *,
        user_id: str | None = None,
        chat_id: str | None = None,
        limit: int = 10,
        kind: str | None = None,
        now: dt.datetime | None = None,
        text: bool = True,
        min_cosine: float | None = None,
        memory_only: bool = False,
        floor: bool = False,
        at: str | None = None,
    ) -> list[Hit]:
        """Engine.search over this home's index; ``at`` is refused (a past revision needs git)."""
        check_query(query)
        if at is not None:
            raise InvalidInputError(
                "a reader of the shared index has no history: ask the home's own server "
                "for a search as of a past revision"
            )
        return ranked_search(
            self.index,
            self.embedder.embed_query,
            self.settings,
            query,
            user_id=user_id,
            chat_id=chat_id,
            limit=limit,
            kind=kind,
            now=now,
            text=text,
            min_cosine=min_cosine,
            memory_only=memory_only,
            floor=floor,
        )

    def counts(self, *, user_id: str) -> dict[str, int]:
        """The facts and chunks ``user_id``'s searches reach (Engine.counts)."""
        with self.index.reading() as rows:
            return {
                "facts": rows.count(ScopeMask(user=user_id, kind="fact")),
                "chunks": rows.count(ScopeMask(user=user_id, kind="chunk")),
            }

    def texts(self, folders: Sequence[str]) -> dict[str, str]:
        """The kept texts of the core blocks and MEMORY.md files directly in ``folders``."""
        return self.index.texts(folders)

    def files_in(self, folder: str, kind: str) -> list[str]:
        return self.index.files_in(folder, kind)

    def fact_categories(self, user_id: str) -> dict[str, int]:
        return self.index.fact_categories(user_id)


class DatabaseHomes:
    """Every home of one PostgreSQL database, for a reader holding none of them. Homes are named
    by their schema (``git config syncd.indexschema`` in the home)."""

    def __init__(self, url: str, settings: Settings, embedder: Embedder | None = None):
        from ..index.pg_store import PgDatabase

        self.settings = settings
        self.database = PgDatabase(validate_url(url))
        self.embedder: Any = embedder or load_embedder(settings)  # FastEmbedBackend: embed_query too
        self._homes: dict[str, IndexedHome] = {}
        self._lock = threading.Lock()
        self._held: tuple[float, dict[str, dict]] = (float("-inf"), {})

    @property
    def where(self) -> str:
        """The database, for messages (its URL without the password)."""
        return self.database.shown

    def _held_homes(self) -> dict[str, dict]:
        """``{name: meta}`` of the database's homes, asked at most once a second (a request naming
        no home must not cost a look at every schema)."""
        at, held = self._held
        if time.monotonic() - at > _HOMES_TTL_S:
            held = self.database.homes()
            self._held = (time.monotonic(), held)
        return held

    def names(self) -> list[str]:
        """The homes whose index this database holds, by name."""
        return sorted(self._held_homes())

    def token_hashes(self, name: str) -> dict | None:
        """The token hashes home ``name``'s writer published (None: none yet, so no token opens
        it), whatever model its index was made with: a request is checked against them before it is told anything of the home, so to a
        token of another home one this reader cannot search is one that does not exist.
        NotFoundError when the database holds no such home."""
        if name not in self._held_homes():
            raise NotFoundError(f"the database holds no home {name!r} (GET /homes lists them)")
        return self.database.tokens(name)

    def home(self, name: str) -> IndexedHome:
        """The home ``name``; NotFoundError when the database holds no such home, ConfigError
        when its index was made with another embedding model than this reader's."""
        with self._lock:
            held = self._homes.get(name)
        if held is not None:
            return held
        meta = self._held_homes().get(name)
        if meta is None:
            raise NotFoundError(f"the database holds no home {name!r} (GET /homes lists them)")
        model = self.embedder.model_id
        if meta.get("model_id") != model or meta.get("dim") != self.embedder.dim:
            raise ConfigError(
                f"home {name!r} is indexed with the model {meta.get('model_id')!r}; this reader "
                f"embeds queries with {model!r}: start it with that home's model"
            )
        index = self.database.index(name, self.embedder.dim, model, self.settings.vector_index_min_rows)
        with self._lock:
            return self._homes.setdefault(name, IndexedHome(name, index, self.embedder, self.settings))

    def warm(self) -> None:
        """Load the embedding model now, so the first search does not pay for it."""
        self.embedder.embed_query("warm")

    def close(self) -> None:
        self.database.close()
