"""Hybrid search: vector and full-text candidates, normalised, combined with weighted parts.

score = 0.7 * semantic + 0.3 * full text + 0.5 * context + 0.2 * importance + 0.1 * recency
        + 0.2 * question + 0.15 * time + 0.1 * speaker, where

- semantic is the cosine (clamped at 0); full text is BM25 over the best BM25 in scope (both
  computed row by row for every candidate, however it was found, so the parts are comparable).
  A daily-log fact's BM25 is that of its passage: its own words and its conversation neighbours'
  (rows.py, fulltext.py). A neighbour lends its words only as far as it belongs with the fact
  (below), so the full text part is the passage's times the share of the query's words the fact
  says itself, plus the rest times how far its nearest neighbours belong with it;
- context is what the fact's conversation says about the query: the best relevance
  (0.7 * semantic + 0.3 * full text) among the facts of its section one place away, or half of
  it two places away, each times how far that neighbour belongs with the fact. Two facts belong
  together by the cosine of their own texts: the turns of one exchange do ("Where did you go?" /
  "Lyon, last spring"), while facts an agent wrote together are often about different things
  ("Likes green tea, never coffee." / "Wants to run the Lyon half marathon": a query for coffee
  found the marathon at 0.97 of the tea's score, through the tea's word and relevance both). A question is often answered by the turn after the one that matches it
  ("Where did you go?" / "Lyon, last spring"), so the neighbours of every candidate are ranked
  too. The fact just after a question (a fact whose text ends in "?", a trailing bracketed note
  such as an image's caption aside) is its reply, and takes three quarters of the question's
  relevance instead of half. Chunks and facts alone in their section have no context;
- question is minus the own relevance (0.7 * semantic + 0.3 * full text) of a fact that asks a
  question, 0 for any other row: a question asked in a conversation shares the query's words and
  its interrogative form ("What did you paint?" lies close to "What has Melanie painted?") but
  holds no answer, which is in its reply. So a question keeps 0.8 of its own relevance and its
  reply gets 0.75 where another neighbour gets 0.5. Measured on LoCoMo dev
  (benchmarks/bench_recall.py), where one turn in four is a question: recall@10 0.808 -> 0.830,
  every conversation up, leave-one-conversation-out 0.808 -> 0.841 (bench_recall_loo.py; every
  fold chose these values). The reply's share alone, or the question's discount alone, moved it
  less than half as far; a reply taking all of its question's relevance (or a question keeping
  0.7 of its own) pushed dated statements out of the top ten for "when" questions;
- importance is the fact's own (0.5 when it has none);
- recency is how new the row is (``fresh``: 1 today, halving every 30 days; a row without a date
  of its own, MEMORY.md, a block, a wiki page, gets 0.5, the middle) times the square of its
  relevance (0.7 * semantic + 0.3 * full text + 0.5 * context) over the best relevance among the
  ranked rows. Recency breaks ties between rows about as relevant as the best (a new "Works at
  Acme" over last year's "Works at Initech"); it does not lift a row that says little of the
  query over an older one that answers it. Added in full, a turn of last week that merely
  shared a word outranked the answer said months before: on LoCoMo dev (questions asked once
  the conversation is over) recall@10 0.827 -> 0.838, every conversation up (0.856/0.837/0.840/
  0.787/0.830 -> 0.871/0.856/0.849/0.803/0.833), multi-hop 0.445 -> 0.459. The relevance share
  alone (not squared) gave 0.833, and no better on any conversation; recency left out, 0.841;
  ``fresh`` carries the row's own newness beside the weighted parts;
- time is what the row's date says to what the query asks of time (syncd.formats.question_time):
  1 when the query names a period ("on 25 May, 2022", "the week before 16 November 2023", "last
  weekend") and the row was said on one of its days, or the share of what the row's relative
  time means ("yesterday", "last week") that lies inside it; for a query asking "when" and naming none,
  0.5 when the row is a fact that says a time (a date, "yesterday", "last year"): the answer to
  "when" is one.
  0 otherwise, and for every row of a query that asks nothing of time. Its weight is 0.15, not
  0.1, since replies rank higher: at 0.1 they pushed a dated statement past the tenth place for
  a "when" question more often than before (LoCoMo dev temporal recall@10 0.917 -> 0.903; 0.916
  at 0.15, and 0.808 either way without the question part);
- speaker is 1 for a fact said by someone the query names ("What does Melanie do to destress?"
  / "Melanie: I've been running farther to de-stress"), by the label a conversation's turn
  starts with (syncd.formats.speakers), 0 for every other row and for a query naming nobody.
  The name itself weighs almost nothing in full text (half of a two-person conversation's turns
  carry it), and the other person's turns addressing them ("Remember Jon, just do it!") share it
  as much. Measured on LoCoMo dev: recall@10 0.838 -> 0.844 (multi-hop 0.459 -> 0.493,
  open-domain 0.473 -> 0.513), while the questions built to mislead (asking one speaker about
  what the other said) fall 0.949 -> 0.926; at 0.2 those fall to 0.884 and the whole to 0.831.
  Left out one conversation at a time (bench_recall_loo.py --vary speaker=0,0.05,0.15,0.2), the
  weight chosen on the other four (0.05 or 0.1) held out 0.841 against 0.838 without the part.

The seed's weights (semantic, full text, importance, recency) stay the default; context (0.5,
halving per step away), question, time and speaker are new: a neighbour one place away passes on half
its relevance, so a fact outranks the turn that matched only if its own words or meaning make up
the other half. ``Weights`` (and the ``search_weight_*`` settings) change any of them; a context,
question, time or speaker weight of 0 turns it off.

Beside the weighted parts each hit carries absolute ones, which mean the same for every query
(the normalised full text is 1.0 for the best match in scope however little it holds): ``bm25``
(the raw BM25 the full text part normalises), ``coverage`` (the idf-weighted share of the query's
words the row says itself), ``rare`` (the share of it in words rare in the scope) and ``fresh``
(how new the row is, which the recency part weighs by relevance). From them
and the cosine, :func:`answered` (syncd.index.relevance, where its measures and constants are
explained) decides whether the memory in scope answers the query at all;
each hit says so in ``relevant``, and ``floor=True`` returns nothing when it does not. Never
returned, floor or not: chunks holding only headings (``## Projects``), and rows holding no word
of the query, no context and no closeness in meaning (no padding up to the limit).
"""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import numpy as np

from ..errors import InvalidInputError
from ..formats.question_time import asked_periods, asks_when, meant_periods, says_when
from ..formats.speakers import may_name, named_speakers, speaker
from ..formats.when import Period
from ..home import validate_id
from .backend import IndexBackend
from .fulltext import best_rows
from .records import page_breadcrumb
from .relevance import answered, chance_cosine, evidence
from .rowcache import ScopeMask

__all__ = ["Hit", "Weights", "answered", "chance_cosine", "hybrid_search"]

_RECENCY_HALF_LIFE_DAYS = 30.0
_DEFAULT_IMPORTANCE = 0.5
_UNDATED_RECENCY = 0.5
# Recency counts as the row's relevance over the best's, to this power (the module's docstring).
_RECENCY_RELEVANCE_POWER = 2
# Below this cosine a row has nothing of the query's meaning (unrelated texts under MiniLM sit
# around 0.0-0.15): with no word of it either, it is never returned, however few hits remain.
_NO_MEANING = 0.05
# Whether two facts side by side belong to one exchange, by the cosine of their own texts: the
# turns of a conversation follow one another ("Where did you go?" / "Lyon, last spring": 0.40;
# on LoCoMo dev, 9 neighbours in 10 lie above 0.30), while the facts one agent call wrote
# together are often about different things ("Likes green tea, never coffee." / "Wants to run the
# Lyon half marathon": 0.13), and unrelated texts under the bundled MiniLM sit around 0.0-0.15,
# an unrelated pair staying under 0.20 19 times in 20 (relevance.chance_cosine(1)). At or below
# _TIED_BELOW a neighbour lends nothing (neither its words to the fact's passage nor its
# relevance as context), from _TIED_FROM all of it, in proportion between. Fitted to the bundled
# model, as relevance.py's constants are; on LoCoMo dev they cost recall@10 0.830 -> 0.827.
_TIED_BELOW = 0.10
_TIED_FROM = 0.25
# Context flows from facts at most this many places away, halving with each step.
_CONTEXT_REACH = 2
_CONTEXT_DECAY = 0.5
# The reply to a question (the fact just after it) takes this many times what another neighbour
# one place away passes on: with the context weight of 0.5, three quarters of the question's
# relevance instead of half.
_REPLY_GAIN = 1.5
# Texts up to this long have whether they ask memoised (_ends_asking); a longer one is tested
# each time, so the memo never holds on to a huge text.
_MEMO_CHARS = 2000


@dataclass(frozen=True)
class Weights:
    semantic: float = 0.7
    fulltext: float = 0.3
    context: float = 0.5
    importance: float = 0.2
    recency: float = 0.1
    question: float = 0.2
    time: float = 0.15
    speaker: float = 0.1

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
    # Whether the hit is relevant to the query by a measure that means the same for every query
    # (relevant_rows): what an honest "nothing found" leaves out (hybrid_search's ``floor``).
    relevant: bool = True

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
    """Halves every 30 days of age (no boost for the future). A row without a date of its own
    (MEMORY.md, a block, a wiki page) is neither new nor old: it gets the recency of a row one
    half-life old (0.5), as a fact without an importance gets the middle one."""
    age_days = np.maximum((now.timestamp() - created) / 86400.0, 0.0)
    return np.nan_to_num(np.power(0.5, age_days / _RECENCY_HALF_LIFE_DAYS), nan=_UNDATED_RECENCY)


def _row_day(created_at: str | None) -> dt.date | None:
    """The day a row was said on, as its own timestamp writes it (the log's day, not UTC's)."""
    try:
        return dt.date.fromisoformat((created_at or "")[:10])
    except ValueError:
        return None


def _time_match(query_text: str, now: dt.datetime, payloads: list[dict], rows: np.ndarray) -> np.ndarray:
    """Each row's time part (see the module's docstring): for a query naming periods, 1 for a
    row said on one of their days, else the largest share of a period the row's words mean
    ("yesterday", "last week": syncd.formats.when) that lies inside them (a week fully inside
    is 1, a month meant by "last month" of which one day is asked is 1/30); for a query asking
    "when" and naming none, 0.5 for a fact that says a time. Only ``rows`` (a mask) are read."""
    out = np.zeros(len(payloads))
    periods = asked_periods(query_text, now.date())
    if periods:
        for n in np.flatnonzero(rows):
            row = payloads[n]
            day = _row_day(row["created_at"])
            if day is None:
                continue
            if any(period.first <= day <= period.last for period in periods):
                out[n] = 1.0
            elif row["kind"] == "fact":
                out[n] = max((_inside(meant, periods) for meant in meant_periods(row["text"], day)), default=0.0)
    elif asks_when(query_text):
        for n in np.flatnonzero(rows):
            row = payloads[n]
            if row["kind"] == "fact" and says_when(row["text"], _row_day(row["created_at"])):
                out[n] = 0.5
    return out


def _asks(row: dict) -> bool:
    """Whether a row is a fact that asks a question (:func:`_ends_asking`)."""
    if row["kind"] != "fact":
        return False
    text = row["text"]
    return _ends_asking(text) if len(text) <= _MEMO_CHARS else _ends_asking.__wrapped__(text)


@functools.lru_cache(maxsize=1 << 16)
def _ends_asking(text: str) -> bool:
    """Whether ``text`` ends in "?" once a trailing bracketed note (an image's caption, a link)
    is set aside. Memoised: a search asks it of some hundreds of rows, the same rows again and
    again (a row's text is one string object for as long as its rows are loaded, its hash
    computed once), and the lookup costs a fraction of the test."""
    text = text.rstrip()
    if text.endswith("]"):
        start = text.rfind("[")
        if start >= 0 and "]" not in text[start:-1]:
            text = text[:start].rstrip()
    return text.endswith("?")


def _said_by_named(query_text: str, payloads: list[dict]) -> np.ndarray:
    """Each row's speaker part: 1 for a fact said by someone ``query_text`` names
    (syncd.formats.speakers), else 0."""
    if not may_name(query_text):
        return np.zeros(len(payloads))
    labels = [speaker(row["text"]) if row["kind"] == "fact" else None for row in payloads]
    named = named_speakers(query_text, {label for label in labels if label is not None})
    return np.array([label is not None and label in named for label in labels], dtype=np.float64)


def _inside(meant: Period, periods: list[Period]) -> float:
    """The largest share of ``meant``'s days that one of ``periods`` holds."""
    days = (meant.last - meant.first).days + 1
    best = 0
    for period in periods:
        first, last = max(meant.first, period.first), min(meant.last, period.last)
        best = max(best, (last - first).days + 1)
    return best / days


def _ties(rows, facts: np.ndarray, near: np.ndarray) -> np.ndarray:
    """How far each fact belongs with each of its neighbours (``near``, -1 where there is none),
    from 0 to 1 by the cosine of their own texts (_TIED_BELOW, _TIED_FROM); 0 where there is none."""
    present = near >= 0
    cosines = np.zeros(near.shape, dtype=np.float64)
    if present.any():
        pairs = np.broadcast_to(np.asarray(facts, dtype=np.int64)[:, None], near.shape)
        cosines[present] = rows.pair_cosines(pairs[present], near[present])
    ties = np.clip((cosines - _TIED_BELOW) / (_TIED_FROM - _TIED_BELOW), 0.0, 1.0)
    return np.where(present, ties, 0.0)


def _take(signal: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """``signal[rows]``, 0 for rows past its end: a backend that numbers rows as a query meets
    them (pg_search.py) numbers rows found after the full-text pass, which hold no query word."""
    inside = rows < len(signal)
    if inside.all():
        return signal[rows]
    out = np.zeros(len(rows), dtype=signal.dtype)
    out[inside] = signal[rows[inside]]
    return out


def hybrid_search(
    index: IndexBackend,
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
    floor: bool = False,
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
            raise InvalidInputError("a chat-scoped search needs its user_id")
    if kind not in (None, "fact", "chunk", "transcript"):
        raise InvalidInputError(
            f"unknown kind {kind!r}: use 'fact', 'chunk', 'transcript' or None for facts and chunks"
        )
    scope = ScopeMask(user=user_id, chat=chat_id, kind=kind, memory_only=memory_only, content_only=True)
    pool = candidates or max(limit * 4, 40)
    now = now or dt.datetime.now(dt.UTC)

    if callable(query_vector):
        query_vector = query_vector()
    # One consistent view of the rows for the whole query (a reader reloads at most once); row
    # numbers are only used inside it.
    reach = _CONTEXT_REACH if weights.context else 0
    # Only rows of the query's model: their cosines mean nothing otherwise.
    with index.reading(same_model=True) as rows:
        # Rows held in memory have all of it at hand; a database gathers what the calls below
        # ask in a round trip or two instead of one per call (pg_search.PgRows.prefetch).
        # A passage's ties read each candidate's next neighbours even with no context weight.
        rows.prefetch(query_vector, query_text, scope, pool, max(reach, 1))
        passage_all, coverage_all, rare_all = rows.text_signals(query_text, scope)
        visible = rows.count(scope)
        # Candidates by meaning, and by words said in the row or around it (its passage).
        found = np.unique(np.concatenate([rows.search_rows(query_vector, scope, pool), best_rows(passage_all, pool)]))
        # The neighbours of every candidate are candidates too, and theirs are scored for context.
        near, _ = rows.around(found, scope, reach)
        ranked = np.union1d(found, near[near >= 0])
        near, distances = rows.around(ranked, scope, reach)
        scored = np.union1d(ranked, near[near >= 0])
        # Every row's parts are computed the same way, row by row, whichever search found it.
        cosine, bm25 = rows.row_cosines(query_vector, scored), _take(passage_all, scored)
        coverage, rare = _take(coverage_all, scored), _take(rare_all, scored)
        # How far each fact and its neighbours belong together: for what a neighbour's words add
        # to a fact's passage (its two next neighbours; read only where the passage holds a word
        # of the query the fact does not say) and what its relevance passes on (context).
        lent = np.flatnonzero((bm25 > 0) & (coverage < 1.0))
        passage_ties = np.zeros(len(scored))
        passage_ties[lent] = _ties(rows, scored[lent], rows.around(scored[lent], scope, 1)[0]).max(axis=1, initial=0.0)
        context_ties = _ties(rows, ranked, near)
        created = rows.row_created(ranked)
        payloads = rows.row_payloads(ranked)
        # Whether a row asks matters for the ranked rows (their question part) and for the fact
        # just before each (the first column of ``near``: its reply's share); read for them only.
        asking = np.fromiter((_asks(row) for row in payloads), dtype=bool, count=len(payloads))
        prev = near[:, 0] if reach else np.full(len(ranked), -1)
        known = prev >= 0
        after_question = np.zeros(len(ranked), dtype=bool)
        after_question[known] = [_asks(row) for row in rows.row_payloads(prev[known])]
    best_bm25 = float(passage_all.max(initial=0.0)) or 1.0
    at = np.searchsorted(scored, ranked)
    semantic = np.maximum(cosine, 0.0)
    # A passage's words are the fact's own (``coverage``, the idf-weighted share of the query's
    # words it says itself) and its neighbours', which count as far as they belong with it.
    said = np.minimum(coverage, 1.0)
    fulltext = bm25.astype(np.float64) / best_bm25 * (said + (1.0 - said) * passage_ties)
    passed = weights.semantic * semantic + weights.fulltext * fulltext
    neighbour = np.searchsorted(scored, np.maximum(near, 0))
    shares = np.where(near >= 0, passed[neighbour], 0.0) * context_ties * _CONTEXT_DECAY ** (distances - 1)
    if reach:
        # The first column is the fact just before (rows.around): a question, when it is one.
        shares[:, 0] *= np.where(after_question, _REPLY_GAIN, 1.0)
    context = shares.max(axis=1, initial=0.0)
    fresh = _recency(created, now)
    # Recency as far as the row is as relevant as the best (module docstring): a tie-breaker
    # between answers, not a lift for whatever was said lately.
    relevance = np.maximum(passed[at] + weights.context * context, 0.0)
    recency = fresh * (relevance / (float(relevance.max(initial=0.0)) or 1.0)) ** _RECENCY_RELEVANCE_POWER
    # Whether this memory answers the query at all (relevance.py: measures that mean the same
    # for every query), by the best evidence among the candidates: they hold the closest rows in
    # meaning and the best by words.
    relevant = answered(float(evidence(cosine, rare).max(initial=0.0)), visible)
    # A row with no word of the query, nothing from its neighbours and no closeness in meaning
    # is no match at all, whatever the limit: never padding.
    keep = (fulltext[at] > 0) | (context > 0) | (cosine[at] >= _NO_MEANING)
    if min_cosine is not None:
        # No word of the query (in the row or its context window) and not close in meaning.
        keep &= (fulltext[at] > 0) | (cosine[at] >= min_cosine)
    if floor and not relevant:
        return []

    importance = np.array(
        [_DEFAULT_IMPORTANCE if row["importance"] is None else float(row["importance"]) for row in payloads]
    )
    parts = {
        "semantic": semantic[at],
        "fulltext": fulltext[at],
        "context": context,
        "importance": importance,
        "recency": recency,
        "question": -np.where(asking, passed[at], 0.0),
        "speaker": _said_by_named(query_text, payloads) if weights.speaker else np.zeros(len(payloads)),
    }
    # Summed part by part in this order, as the parts a hit shows would be: they add up exactly.
    score = sum(getattr(weights, name) * value for name, value in parts.items())
    # The time part last, and only for the rows it could carry into the best ``limit``: reading
    # a row's time expressions costs regular expressions, and a row scoring more than the
    # part's weight under the limit-th best cannot get there (its time part is then left at 0,
    # and it is no hit).
    parts["time"] = np.zeros(len(payloads))
    if weights.time and keep.any():
        kept = score[keep]
        kth = np.partition(kept, max(len(kept) - limit, 0))[max(len(kept) - limit, 0)]
        contenders = keep & (score >= kth - weights.time)
        parts["time"] = _time_match(query_text, now, payloads, contenders)
        score = score + weights.time * parts["time"]
    # Beside the weighted parts, the absolute ones: the same value means the same for any query.
    parts["bm25"] = bm25[at].astype(np.float64)
    parts["fresh"] = fresh
    parts["coverage"] = coverage[at]
    parts["rare"] = rare[at]
    order = np.flatnonzero(keep)
    if len(order) > limit:
        # Only rows scoring at least the limit-th best can make the cut (ties included).
        kth = np.partition(score[order], len(order) - limit)[len(order) - limit]
        order = order[score[order] >= kth]
    best = sorted(order, key=lambda i: (-score[i], payloads[i]["path"], payloads[i]["line"], payloads[i]["id"]))
    hits = []
    for i in best[:limit]:
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
                relevant=relevant,
            )
        )
    return hits
