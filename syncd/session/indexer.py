"""TranscriptIndexer and MarkdownIndexer (seed API) over the engine's one pipeline.

Transcripts are indexed by the same sync as every file (``index/rows.py`` makes their rows, kind
``transcript``, scoped to the user whose folder holds them) when ``transcript_indexing_enabled``
is set; these classes only ask the engine for it and search its rows. Chunks are 400 model tokens
with 80 of overlap by default, cut at fixed token positions, so an append re-embeds only the last
chunk or two (the rest come from the embedding cache) and incremental indexing equals a rebuild.
"""

from __future__ import annotations

import time
from typing import Any

from ..errors import ConfigError
from ..home import validate_id

__all__ = ["TranscriptIndexer", "MarkdownIndexer"]


class TranscriptIndexer:
    """Index and search one home's transcripts (``engine``: a writable or read-only Engine)."""

    def __init__(self, engine: Any):
        self.engine = engine

    @property
    def enabled(self) -> bool:
        return bool(self.engine.settings.transcript_indexing_enabled)

    def _require_enabled(self) -> None:
        if not self.enabled:
            raise ConfigError(
                "transcript indexing is off: set SYNCD_TRANSCRIPT_INDEXING_ENABLED=true (then "
                "`syncd reindex`) to search transcripts"
            )

    def index_session(self, session_id: str, user_id: str) -> int:
        """Bring one session's transcript rows up to date; returns how many rows it has."""
        self._require_enabled()
        home = self.engine.home
        rel = home.rel(home.transcript_path(validate_id("user", user_id), validate_id("session", session_id)))
        self.engine.sync([rel])
        return self.engine.rows_of(rel)

    def search_transcripts(self, query: str, user_id: str, limit: int = 5, session_id: str | None = None) -> list[Any]:
        """The best transcript chunks of ``user_id``'s sessions (of one session when given). A user
        is required: transcripts are never searched across people."""
        self._require_enabled()
        user = validate_id("user", user_id)
        session = None if session_id is None else validate_id("session", session_id)
        if session is None:
            return self.engine.search(query, user_id=user, kind="transcript", limit=limit)
        # Rows are scoped by user, not by session: the user's best hits are asked for in growing
        # pools until the session has ``limit`` of them or the pool holds every hit there is (a
        # search returns fewer than asked only when nothing else matches), so a session whose
        # chunks rank below the user's other sessions' is still searched whole.
        pool = max(limit * 8, 40)
        while True:
            hits = self.engine.search(query, user_id=user, kind="transcript", limit=pool)
            mine = [h for h in hits if h.session_id == session]
            if len(mine) >= limit or len(hits) < pool:
                return mine[:limit]
            pool *= 4


class MarkdownIndexer:
    """Rebuild the whole index from the files (seed API)."""

    def __init__(self, engine: Any):
        self.engine = engine

    def reindex_from_markdown(self) -> dict[str, Any]:
        """Rebuild the index from the markdown (and transcripts); the seed's stats dict."""
        started = time.perf_counter()
        report = self.engine.reindex()
        files = self.engine.indexed_files()
        return {
            "files_processed": len(files),
            "facts_indexed": report.facts,
            "chunks_indexed": report.chunks,
            "transcripts": sum(1 for r in files.values() if r.kind == "transcript"),
            "embedded_texts": report.embedded_texts,
            "errors": dict(report.errors),
            "duration_seconds": round(time.perf_counter() - started, 3),
        }
