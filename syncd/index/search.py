"""Hybrid search: vector and full-text candidates, normalised, combined with the seed's weights.

score = 0.7 * semantic + 0.3 * full text + 0.2 * importance + 0.1 * recency, where semantic is the
cosine (clamped at 0), full text is BM25 over the best BM25 among the candidates, importance is the
fact's own (0.5 when it has none) and recency halves every 30 days. Every candidate gets its exact
semantic score, including those only full-text search found, so the parts are comparable.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import numpy as np

from ..layout import validate_id
from .rowcache import ScopeMask
from .store import Index

__all__ = ["Hit", "Weights", "hybrid_search"]

_RECENCY_HALF_LIFE_DAYS = 30.0
_DEFAULT_IMPORTANCE = 0.5


@dataclass(frozen=True)
class Weights:
    semantic: float = 0.7
    fulltext: float = 0.3
    importance: float = 0.2
    recency: float = 0.1


@dataclass(frozen=True)
class Hit:
    """One search result, with where it came from so a person can jump to it."""

    id: str
    content: str
    score: float
    parts: dict[str, float]
    kind: str
    source: str
    path: str
    line: int
    user_id: str | None
    chat_id: str | None
    category: str | None
    tags: tuple[str, ...] = ()
    created_at: str | None = None
    heading: str = ""
    importance: float | None = None
    session_id: str | None = None
    provenance: str = ""
    extra: dict = field(default_factory=dict)

    def snippet(self, width: int = 100) -> str:
        """The first line worth showing: a chunk's heading line is already in ``heading``."""
        lines = [line.strip() for line in self.content.splitlines() if line.strip()]
        body = [line for line in lines if not line.startswith("#")] or lines or [""]
        text = body[0]
        return text if len(text) <= width else text[: width - 1] + "…"

    def to_dict(self) -> dict:
        out = asdict(self)
        out["tags"] = list(self.tags)
        return out


def _recency(created_at: str | None, now: dt.datetime) -> float:
    if not created_at:
        return 0.0
    try:
        when = dt.datetime.fromisoformat(created_at.replace("Z", "+00:00"))
    except ValueError:
        return 0.0
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.timezone.utc)
    age_days = max((now - when).total_seconds() / 86400.0, 0.0)
    return math.pow(0.5, age_days / _RECENCY_HALF_LIFE_DAYS)


def hybrid_search(
    index: Index,
    query_vector: np.ndarray | Callable[[], np.ndarray],
    query_text: str,
    user_id: str | None = None,
    chat_id: str | None = None,
    limit: int = 10,
    kind: str | None = None,
    weights: Weights = Weights(),
    now: dt.datetime | None = None,
    candidates: int | None = None,
) -> list[Hit]:
    """Best ``limit`` hits for the query within the user's (and chat's) scope.

    ``query_vector`` may be a callable: it is called only once the scope is validated, so a
    refused query never pays for an embedding.
    """
    if limit <= 0:
        return []
    if user_id is not None:
        validate_id("user", user_id)
    if chat_id is not None:
        validate_id("chat", chat_id)
        if user_id is None:
            raise ValueError("a chat-scoped search needs its user_id")
    if kind not in (None, "fact", "chunk"):
        raise ValueError(f"unknown kind {kind!r}: use 'fact', 'chunk' or None for both")
    scope = ScopeMask(user=user_id, chat=chat_id, kind=kind)
    pool = candidates or max(limit * 4, 40)
    now = now or dt.datetime.now(dt.timezone.utc)

    if callable(query_vector):
        query_vector = query_vector()
    # One consistent view of the rows for the whole query (a reader reloads at most once).
    with index.reading() as rows:
        found = [(p, i) for p, i, _ in rows.search(query_vector, scope, pool)]
        text_hits = rows.text_search(query_text, scope, pool)
        found += [(p, i) for p, i, _ in text_hits]
        # Every candidate's parts are computed the same way, row by row, whichever search found it.
        exact = rows.scores(query_vector, query_text, scope, dict.fromkeys(found))
        payloads = rows.payloads(exact)
    best_bm25 = max((s for *_, s in text_hits), default=0.0) or 1.0
    semantic = {key: cosine for key, (cosine, _) in exact.items()}
    fulltext = {key: bm25 for key, (_, bm25) in exact.items()}

    hits = []
    for key, row in payloads.items():
        importance = row["importance"]
        parts = {
            "semantic": max(semantic.get(key, 0.0), 0.0),
            "fulltext": fulltext.get(key, 0.0) / best_bm25,
            "importance": _DEFAULT_IMPORTANCE if importance is None else float(importance),
            "recency": _recency(row["created_at"], now),
        }
        score = (
            weights.semantic * parts["semantic"]
            + weights.fulltext * parts["fulltext"]
            + weights.importance * parts["importance"]
            + weights.recency * parts["recency"]
        )
        hits.append(
            Hit(
                id=row["id"],
                content=row["text"],
                score=score,
                parts=parts,
                kind=row["kind"],
                source=row["source"],
                path=row["path"],
                line=row["line"],
                user_id=row["user"],
                chat_id=row["chat"],
                category=row["category"],
                tags=tuple(row["tags"] or ()),
                created_at=row["created_at"],
                heading=row["heading"] or "",
                importance=importance,
                session_id=row["session"],
                provenance=row["provenance"] or "",
            )
        )
    hits.sort(key=lambda h: (-h.score, h.path, h.line, h.id))
    return hits[:limit]
