"""One search: what every front end answers a query with.

``syncd search`` (itself or through the daemon's socket), the REST API, the MCP tools, the
workbench, the agent tools and ``MemoryManager.search_memories`` all call :func:`search` and
show each hit as :func:`hit_record`, so the same query, scope and kind give the same hits with
the same fields wherever it is asked. The defaults, in one place:

- ``limit`` 5 (:data:`DEFAULT_LIMIT`);
- the memory only (facts, MEMORY.md, core blocks, notes under ``memory/``); the wiki vault too
  with ``include_wiki``;
- facts and text chunks (``kind`` None); ``"fact"``, ``"chunk"`` or ``"transcript"`` for one kind;
- the relevance floor of :func:`relevance_floor`: a query the memory in scope does not answer at
  all (words it does not hold or holds everywhere, no meaning closer than chance) gets no hits;
- hybrid ranking (meaning and words); ``hybrid=False`` ranks by meaning only.

Who a query acts for is the front end's to decide before it gets here (a token's user, the
``--user`` of a command): ``user_id`` None searches every user's memory, which only the home's own
tools (the command line, the workbench) do. ``Engine.search`` stays what it was, the index's
ranking with no floor and the wiki included, for code that wants exactly that.

This module imports nothing heavy: the command line reads its defaults without loading the index.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..home import check_query

if TYPE_CHECKING:
    from ..index.search import Hit

__all__ = ["DEFAULT_LIMIT", "KINDS", "hit_record", "relevance_floor", "search", "search_answer"]

DEFAULT_LIMIT = 5
KINDS = ("fact", "chunk", "transcript")


def relevance_floor(settings: Any) -> dict[str, Any]:
    """The keyword arguments of ``Engine.search`` that make up the relevance floor every front
    end applies: the one place to change it. The ranking's own floor (``Settings.search_floor``,
    syncd.index.search.answered): nothing when the memory in scope does not answer the query at
    all, by meaning closer than chance for a memory of its size or by its rare words."""
    return {"floor": settings.search_floor}


def search(
    backend: Any,
    query: str,
    *,
    user_id: str | None,
    chat_id: str | None = None,
    limit: int = DEFAULT_LIMIT,
    kind: str | None = None,
    include_wiki: bool = False,
    hybrid: bool = True,
    now: dt.datetime | None = None,
    settings: Any = None,
    at: str | None = None,
) -> list[Hit]:
    """The best hits for ``query`` in ``backend`` (an open engine, or any MemoryBackend) within
    the scope given, with the defaults above; the floor is that of ``settings`` (default: the
    backend's). ``at``: the memory as that commit left it (a revision git names, or a date/time;
    an engine only, see syncd.engine.asof). QueryError for an empty query; InvalidIdError for a
    bad id; ValueError for an unknown kind or a chat without its user; NotFoundError for a
    revision that names no commit."""
    check_query(query)
    if kind is not None and kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r}: use {', '.join(KINDS)}, or none for facts and chunks")
    if at is not None:
        from .asof import past_engine

        with past_engine(backend, at) as past:
            return search(
                past,
                query,
                user_id=user_id,
                chat_id=chat_id,
                limit=limit,
                kind=kind,
                include_wiki=include_wiki,
                hybrid=hybrid,
                now=now,
                settings=settings or backend.settings,
            )
    return backend.search(
        query,
        user_id=user_id,
        chat_id=chat_id,
        limit=limit,
        kind=kind,
        now=now,
        text=hybrid,
        memory_only=not include_wiki,
        **relevance_floor(settings or backend.settings),
    )


def search_answer(engine: Any, query: str, *, stale: Callable[[], int] | None = None, **scope: Any) -> dict[str, Any]:
    """What ``syncd search`` shows, wherever it is computed (in its own process or by the daemon
    asked over the socket): ``{"hits": [hit_record, ...], "stale": n}``, the hits of
    :func:`search` (``scope``: its keyword arguments) and how many files changed since the index
    was updated, which the answer may miss. ``stale`` counts them (the daemon reuses a count
    while nothing changed); by default ``engine.stale_count``."""
    hits = search(engine, query, **scope)
    # A past commit's memory is exactly that commit's tree: nothing of it can be stale.
    stale_count = 0 if scope.get("at") is not None else (stale or engine.stale_count)()
    return {"hits": [hit_record(h) for h in hits], "stale": stale_count}


def hit_record(hit: Hit) -> dict[str, Any]:
    """A hit as every front end gives it (``syncd.api.schemas.MemoryHit``): its fields and the
    first line worth showing."""
    return hit.to_dict() | {"snippet": hit.snippet()}
