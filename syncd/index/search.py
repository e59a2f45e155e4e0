"""Hybrid search: vector and full-text candidates, normalised, combined with weighted parts.

score = 0.7 * semantic + 0.3 * full text + 0.5 * context + 0.2 * importance + 0.1 * recency, where

- semantic is the cosine (clamped at 0); full text is BM25 over the best BM25 in scope (both
  computed row by row for every candidate, however it was found, so the parts are comparable);
- context is what the fact's conversation says about the query: the best relevance
  (0.7 * semantic + 0.3 * full text) among the facts of its section one place away, or half of
  it two places away. A question is often answered by the turn after the one that matches it
  ("Where did you go?" / "Lyon, last spring"), so the neighbours of every candidate are ranked
  too. Chunks and facts alone in their section have no context;
- importance is the fact's own (0.5 when it has none); recency halves every 30 days.

The first four weights are the seed's and stay the default; context (0.5, halving per step away)
is new: a neighbour one place away passes on half its relevance, so a fact outranks the turn
that matched only if its own words or meaning make up the other half. ``Weights`` (and the
``search_weight_*`` settings) change any of them; a context weight of 0 turns it off.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import numpy as np

from ..layout import validate_id
from .fulltext import best_rows
from .records import page_breadcrumb
from .rowcache import ScopeMask
from .store import Index

__all__ = ["Hit", "Weights", "hybrid_search"]

_RECENCY_HALF_LIFE_DAYS = 30.0
_DEFAULT_IMPORTANCE = 0.5
# Context flows from facts at most this many places away, halving with each step.
_CONTEXT_REACH = 2
_CONTEXT_DECAY = 0.5


@dataclass(frozen=True)
class Weights:
    semantic: float = 0.7
    fulltext: float = 0.3
    context: float = 0.5
    importance: float = 0.2
    recency: float = 0.1

    @classmethod
    def from_settings(cls, settings) -> Weights:
        """The weights a ``Settings`` names (``search_weight_<part>``)."""
        return cls(**{name: getattr(settings, f"search_weight_{name}") for name in cls.__dataclass_fields__})


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
    # A wiki hit's page (frontmatter title, first H1 or file name); None outside the vault.
    title: str | None = None
    # Where the hit sits: ``Page > Section > Subsection`` for a wiki page, the heading path for
    # other chunks, the section heading for a fact. A field, not a property, so the dict a hit
    # travels as (the control socket, ``--json``) says it and still makes the same Hit again.
    breadcrumb: str = ""

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


def _recency(created: np.ndarray, now: dt.datetime) -> np.ndarray:
    """Halves every 30 days of age (no boost for the future, none without a date)."""
    age_days = np.maximum((now.timestamp() - created) / 86400.0, 0.0)
    return np.nan_to_num(np.power(0.5, age_days / _RECENCY_HALF_LIFE_DAYS), nan=0.0)


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
    min_cosine: float | None = None,
    memory_only: bool = False,
) -> list[Hit]:
    """Best ``limit`` hits for the query within the user's (and chat's) scope.

    ``memory_only`` searches the files under ``memory/`` alone, not the wiki. With
    ``min_cosine``, a row that holds no word of the query (in its text or its context window)
    and whose cosine is below it is no match and is left out, however few hits remain.

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
    if kind not in (None, "fact", "chunk", "transcript"):
        raise ValueError(f"unknown kind {kind!r}: use 'fact', 'chunk', 'transcript' or None for facts and chunks")
    scope = ScopeMask(user=user_id, chat=chat_id, kind=kind, memory_only=memory_only)
    pool = candidates or max(limit * 4, 40)
    now = now or dt.datetime.now(dt.timezone.utc)

    if callable(query_vector):
        query_vector = query_vector()
    # One consistent view of the rows for the whole query (a reader reloads at most once); row
    # numbers are only used inside it.
    with index.reading() as rows:
        bm25_all = rows.text_scores(query_text, scope)
        found = np.unique(np.concatenate([rows.search_rows(query_vector, scope, pool), best_rows(bm25_all, pool)]))
        reach = _CONTEXT_REACH if weights.context else 0
        # The neighbours of every candidate are candidates too, and theirs are scored for context.
        near, _ = rows.around(found, scope, reach)
        ranked = np.union1d(found, near[near >= 0])
        near, distances = rows.around(ranked, scope, reach)
        scored = np.union1d(ranked, near[near >= 0])
        # Every row's parts are computed the same way, row by row, whichever search found it.
        cosine, bm25 = rows.row_cosines(query_vector, scored), bm25_all[scored]
        created = rows.row_created(ranked)
        payloads = rows.row_payloads(ranked)
    best_bm25 = float(bm25_all.max(initial=0.0)) or 1.0
    at = np.searchsorted(scored, ranked)
    semantic = np.maximum(cosine, 0.0)
    fulltext = bm25.astype(np.float64) / best_bm25
    relevance = weights.semantic * semantic + weights.fulltext * fulltext
    shares = np.where(near >= 0, relevance[np.searchsorted(scored, np.maximum(near, 0))], 0.0)
    context = (shares * _CONTEXT_DECAY ** (distances - 1)).max(axis=1, initial=0.0)
    recency = _recency(created, now)
    keep = np.ones(len(ranked), dtype=bool)
    if min_cosine is not None:
        # No word of the query (in the row or its context window) and not close in meaning.
        keep = (bm25[at] > 0) | (cosine[at] >= min_cosine)

    importance = np.array(
        [_DEFAULT_IMPORTANCE if row["importance"] is None else float(row["importance"]) for row in payloads]
    )
    parts = {
        "semantic": semantic[at],
        "fulltext": fulltext[at],
        "context": context,
        "importance": importance,
        "recency": recency,
    }
    # Summed part by part in this order, as the parts a hit shows would be: they add up exactly.
    score = sum(getattr(weights, name) * value for name, value in parts.items())
    order = np.flatnonzero(keep)
    if len(order) > limit:
        # Only rows scoring at least the limit-th best can make the cut (ties included).
        kth = np.partition(score[order], len(order) - limit)[len(order) - limit]
        order = order[score[order] >= kth]
    order = sorted(order, key=lambda i: (-score[i], payloads[i]["path"], payloads[i]["line"], payloads[i]["id"]))
    hits = []
    for i in order[:limit]:
        row = payloads[i]
        hits.append(
            Hit(
                id=row["id"],
                content=row["text"],
                score=float(score[i]),
                parts={name: float(value[i]) for name, value in parts.items()},
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
                importance=row["importance"],
                session_id=row["session"],
                provenance=row["provenance"] or "",
                title=row.get("title"),
                breadcrumb=page_breadcrumb(row.get("title"), row["heading"] or ""),
            )
        )
    return hits
