"""The seed's store API over both index backends: ``PostgresMemoryStore`` and ``LanceDBMemoryStore``.

Code written against the original design opened a store on a database, called ``connect()`` and
then the store's async methods. Both classes keep those names and parameters, and differ only in
where the home's index lives (the embedded LanceDB index under ``.syncd/``, or a schema of a
PostgreSQL database with pgvector); the markdown files stay the truth in both:

- every write goes through :class:`~syncd.memory.manager.MemoryManager`, the one write path of
  the memory layer: ``add_memory`` appends a fact line to the user's daily log and returns the
  fact's id once it is indexed and committed; ``set_memory_block`` rewrites a block's file;
- blocks are read from their files (chat > user > global, per label);
- searches run in the index (in the database for PostgreSQL), over the user's facts, with the
  caller's query embedding, which must come from the home's embedding model.

The seed stored the caller's embedding beside the memory. Here the index embeds each fact itself
from its text, so that a rebuild from the markdown gives the same vector: ``add_memory`` accepts
``embedding`` for the seed's signature and does not store it. ``metadata`` keys go where the fact
line can hold them (``category``, ``tags``, ``session_id``); any other key is refused rather than
silently lost.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..config import Settings
from ..engine.index_location import check_index_url, record_postgres_index, recorded_index_url
from ..engine.search import hit_record
from ..errors import InvalidInputError, SyncdError
from ..home import validate_id
from .blocks import resolve_blocks
from .manager import MemoryManager

__all__ = ["LanceDBMemoryStore", "PostgresMemoryStore", "SeedMemoryStore", "METADATA_KEYS"]

# What a fact line carries besides its content and importance (formats/facts.py).
METADATA_KEYS = ("category", "tags", "session_id")


def _metadata(metadata: Mapping[str, Any] | None) -> dict[str, Any]:
    """``metadata`` as MemoryManager.remember's keyword arguments; InvalidInputError for a key
    the markdown has no place for, or a value of the wrong type."""
    if metadata is None:
        return {}
    if not isinstance(metadata, Mapping):
        raise InvalidInputError(f"metadata must be a mapping, not {type(metadata).__name__}")
    unknown = sorted(str(k) for k in metadata if k not in METADATA_KEYS)
    if unknown:
        raise InvalidInputError(
            f"metadata key(s) {', '.join(unknown)} have no place in a fact line; it holds {', '.join(METADATA_KEYS)}"
        )
    out: dict[str, Any] = {}
    if "category" in metadata:
        if not isinstance(metadata["category"], str):
            raise InvalidInputError("metadata category must be a word")
        out["category"] = metadata["category"]
    if "tags" in metadata:
        tags = metadata["tags"]
        if isinstance(tags, str) or not all(isinstance(t, str) for t in tags):
            raise InvalidInputError("metadata tags must be a list of words")
        out["tags"] = tuple(tags)
    if metadata.get("session_id") is not None:
        out["session_id"] = metadata["session_id"]
    return out


class SeedMemoryStore:
    """The seed's memory store over one home (see the module's docstring). Not made directly:
    :class:`PostgresMemoryStore` or :class:`LanceDBMemoryStore` say where the index lives.

    ``connect()`` opens the home (creating it when the folder holds none yet) and checks that the
    index answers; ``close()`` lets go. All methods are coroutines, as in the seed; the blocking
    work runs in worker threads. The store's own writes are indexed before they return; files
    changed by others reach the index through the home's daemon (``syncd serve``/``watch``) or
    ``syncd sync``. Writes take the home's lock for their change, or go through the daemon when
    one holds the home (MemoryManager), so a store runs beside a daemon or alone."""

    def __init__(self, home: Path | str, settings: Settings | None = None, *, embedder: Any = None):
        self.home_path = Path(home).expanduser()
        self.settings = settings or Settings()
        self.embedder = embedder
        self._manager: MemoryManager | None = None

    @property
    def backend(self) -> str:
        """``"postgresql"`` or ``"lancedb"``: where this store's index lives."""
        return "postgresql" if self.settings.index_url else "lancedb"

    # -- lifecycle -------------------------------------------------------------------------------

    def _open(self) -> MemoryManager:
        if self._manager is None:
            self._prepare_home()
            manager = MemoryManager(self.home_path, self.settings, embedder=self.embedder)
            try:
                manager.engine.counts()  # the index answers (IndexUnreachable, ConfigError otherwise)
            except BaseException:
                manager.close()
                raise
            self._manager = manager
        return self._manager

    def _prepare_home(self) -> None:
        """Make a home at ``home_path`` if there is none (the seed's connect made its tables)."""
        if not (self.home_path / ".git").exists():
            from ..engine.initialize import init

            init(self.home_path, self.settings)

    async def connect(self) -> None:
        """Open the home and its index; again changes nothing. Raises a SyncdError saying what
        is wrong (a home that cannot be made, a database that cannot be reached, no pgvector)."""
        await asyncio.to_thread(self._open)

    async def close(self) -> None:
        """Let go of the home (the files and the index stay)."""
        manager, self._manager = self._manager, None
        if manager is not None:
            await asyncio.to_thread(manager.close)

    async def __aenter__(self) -> SeedMemoryStore:
        await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def manager(self) -> MemoryManager:
        """The MemoryManager every write goes through; ``connect()`` first."""
        if self._manager is None:
            raise SyncdError("the store is not connected: await store.connect() first")
        return self._manager

    # -- core memory blocks ----------------------------------------------------------------------

    async def get_all_memory_blocks(self, chat_id: str | None = None, user_id: str | None = None) -> dict[str, str]:
        """``{label: text}`` of every block this user in this chat sees: the chat's block of a
        label over the user's over the global one (and the built-in default). Without
        ``user_id``, the global blocks (a chat needs its user)."""
        manager = self.manager
        if chat_id is not None and user_id is None:
            raise InvalidInputError("a chat's blocks need its user_id")
        user = None if user_id is None else validate_id("user", user_id)
        chat = None if chat_id is None else validate_id("chat", chat_id)
        blocks = await asyncio.to_thread(resolve_blocks, manager.home, manager.settings, user, chat)
        return {label: block.content for label, block in blocks.items()}

    async def set_memory_block(
        self, label: str, content: str, chat_id: str | None = None, user_id: str | None = None
    ) -> bool:
        """Write a block: the chat's when ``chat_id`` is given, else the user's when ``user_id``
        is, else the global one. True once the file is written, indexed and committed (under the
        same write turn as add_memory); a SyncdError (BlockLimitError, InvalidInputError, ...)
        says why nothing was written."""
        if chat_id is not None and user_id is None:
            raise InvalidInputError("a chat's block needs its user_id")
        await self.manager.update_memory_block(label, content, chat_id, user_id)
        return True

    # -- memories --------------------------------------------------------------------------------

    async def add_memory(
        self,
        content: str,
        embedding: Sequence[float] | None,
        user_id: str,
        chat_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        importance: float = 0.5,
        *,
        dedup: bool = False,
    ) -> str:
        """Append ``content`` as a fact line to the user's daily log; returns its id once it is
        acknowledged: the line is in the file (written atomically, compare-and-swap), in the
        index and in a commit, so a search right after finds it. The write holds the home's
        write turn from the file to the commit (MemoryManager.remember: the home lock for the
        change, or the daemon's when one holds the home). ``embedding`` is not stored (see the
        module's docstring). With ``dedup``, a restatement of a remembered fact writes nothing
        and returns that fact's id; by default every call writes, as the seed's did."""
        options = _metadata(metadata)
        outcome = await self.manager.remember(
            content, validate_id("user", user_id), chat_id, importance=importance, dedup=dedup, **options
        )
        written = outcome.fact.id if outcome.fact is not None else None
        return written or (outcome.duplicate_of.id if outcome.duplicate_of is not None else "")

    async def semantic_search(
        self, query_embedding: Sequence[float], user_id: str, limit: int = 10, chat_id: str | None = None
    ) -> list[dict[str, Any]]:
        """The user's facts nearest in meaning to ``query_embedding`` (this home's model), best
        first: each a hit record (``syncd.engine.search.hit_record``) with ``similarity``, the
        cosine."""
        weights = {"semantic": 1.0, "fulltext": 0.0, "context": 0.0, "importance": 0.0, "recency": 0.0}
        hits = await self._search(query_embedding, "", user_id, limit, chat_id, weights)
        return [record | {"similarity": record["parts"]["semantic"]} for record in hits]

    async def hybrid_search(
        self,
        query_embedding: Sequence[float],
        query_text: str,
        user_id: str,
        limit: int = 10,
        chat_id: str | None = None,
        semantic_weight: float = 0.7,
        fts_weight: float = 0.3,
        recency_boost: float = 0.1,
        importance_boost: float = 0.2,
    ) -> list[dict[str, Any]]:
        """The user's best facts for the query by meaning and words, best first, scored as
        ``semantic_weight * cosine + fts_weight * BM25 (normalised) + recency_boost * recency +
        importance_boost * importance`` plus the conversation context part of the home's
        settings (syncd.index.search); each a hit record with its ``score`` and ``parts``."""
        for name, value in (
            ("semantic_weight", semantic_weight),
            ("fts_weight", fts_weight),
            ("recency_boost", recency_boost),
            ("importance_boost", importance_boost),
        ):
            if not isinstance(value, (int, float)) or value != value:
                raise InvalidInputError(f"{name} must be a number")
        if not isinstance(query_text, str):
            raise InvalidInputError(f"query_text must be a str, not {type(query_text).__name__}")
        weights = {
            "semantic": semantic_weight,
            "fulltext": fts_weight,
            "recency": recency_boost,
            "importance": importance_boost,
        }
        return await self._search(query_embedding, query_text, user_id, limit, chat_id, weights)

    async def _search(
        self, vector, text: str, user_id: str, limit: int, chat_id: str | None, weights: dict[str, float]
    ) -> list[dict]:
        engine = self.manager.engine
        user = validate_id("user", user_id)
        chat = None if chat_id is None else validate_id("chat", chat_id)
        if not isinstance(limit, int) or limit < 1:
            raise InvalidInputError(f"limit must be a positive whole number, not {limit!r}")
        hits = await asyncio.to_thread(
            lambda: engine.search_by_vector(vector, text, user_id=user, chat_id=chat, limit=limit, weights=weights)
        )
        return [hit_record(hit) for hit in hits]

    # -- statistics ------------------------------------------------------------------------------

    async def get_statistics(self, user_id: str | None = None) -> dict[str, Any]:
        """What the store holds: the backend, the index's rows (of everyone, or those the user's
        searches reach), and with ``user_id`` that user's memory as the markdown counts it
        (logs, facts per category, blocks)."""
        manager = self.manager
        user = None if user_id is None else validate_id("user", user_id)

        def gather() -> dict[str, Any]:
            stats: dict[str, Any] = {
                "backend": self.backend,
                "home": str(manager.home.root),
                "users": len(manager.users()),
                "index": manager.engine.counts(user_id=user),
                "as_of": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            }
            return stats

        stats = await asyncio.to_thread(gather)
        if user is not None:
            stats["memory"] = await manager.get_memory_stats(user)
        return stats


class LanceDBMemoryStore(SeedMemoryStore):
    """The seed's store with the home's index embedded under ``.syncd/`` (LanceDB: nothing to
    run). ``LanceDBMemoryStore(home)``; ``await store.connect()``."""

    def __init__(self, home: Path | str, settings: Settings | None = None, *, embedder: Any = None):
        settings = (settings or Settings()).model_copy(update={"index_url": None, "index_schema": None})
        super().__init__(home, settings, embedder=embedder)

    def _prepare_home(self) -> None:
        super()._prepare_home()
        if recorded_index_url(self.home_path) is not None:
            raise SyncdError(
                f"the home at {self.home_path} keeps its index in PostgreSQL: open it with "
                "PostgresMemoryStore(home, url)"
            )


class PostgresMemoryStore(SeedMemoryStore):
    """The seed's store with the home's index in a PostgreSQL database with pgvector (any
    PostgreSQL 15+ with the extension). ``PostgresMemoryStore(home, "postgresql://...")``;
    ``await store.connect()`` makes the home if needed and records the URL in it (without its
    password) as ``syncd init --index`` does, so the home's daemon and commands use it too.
    ``schema`` names the home's schema in that database (default: the one the home recorded,
    else a new one)."""

    def __init__(
        self,
        home: Path | str,
        url: str,
        settings: Settings | None = None,
        *,
        schema: str | None = None,
        embedder: Any = None,
    ):
        check_index_url(url)
        update: dict[str, Any] = {"index_url": url}
        if schema is not None:
            update["index_schema"] = schema
        super().__init__(home, (settings or Settings()).model_copy(update=update), embedder=embedder)

    def _prepare_home(self) -> None:
        super()._prepare_home()
        record_postgres_index(self.home_path, self.settings.index_url or "")
