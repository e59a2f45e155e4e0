"""The in-memory copy of the index's rows that queries run on: vectors, full text, payloads.

Why a copy: a pass over every row held in memory (int8, then an exact float32 rerank of a
shortlist) is exact and reads nothing from disk, while LanceDB's flat scan reads the table on
every query and its approximate (IVF-PQ) index loses recall and costs a rebuild more to build
than the rebuild itself (benchmarks/bench_scale.py times searches at scale). Full text is the
same story (see fulltext.py). So LanceDB stores the rows and this copy searches them; it is rebuilt from the table whenever another process
has written, and patched in place for our own writes. Rows keep one numbering across the vectors, the BM25 postings and the scope codes.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import simsimd

from .fulltext import TextIndex
from .records import heading_only

__all__ = [
    "RowCache",
    "ScopeMask",
    "created_posix",
    "exact_cosines",
    "exact_pair_cosines",
    "nearest_rows",
    "neighbours",
    "quantize",
    "row_columns",
    "scope_rows",
]

# Up to this many rows the float32 product is cheap enough to be the whole search.
_EXACT_UP_TO = 8192
# Past it, int8 scores pick a shortlist of this many times k, which float32 then ranks exactly.
_SHORTLIST_FACTOR = 4
_MIN_SHORTLIST = 200
# A scope holding at most 1/16 of the rows is searched over its own rows alone (nearest_rows):
# gathering them costs less than one int8 product over every row up to about 1/14 of them.
_GATHER_BELOW = 16
_QUANTIZE_BLOCK = 8192


@dataclass(frozen=True)
class ScopeMask:
    """Which rows a query may see. ``None`` user means unscoped (every row); ``memory_only``
    keeps the rows of files under ``memory/`` (facts, MEMORY.md, blocks), not the wiki's.
    ``kind`` "fact", "chunk" or "transcript"; None is facts and chunks (never transcripts)."""

    user: str | None = None
    chat: str | None = None
    kind: str | None = None
    memory_only: bool = False
    # Leave out chunks that hold only headings ("## Projects", "# Ana"): nothing a hit could say.
    content_only: bool = False


class RowCache:
    """Rows grouped by file path so that an upsert of a file replaces exactly its rows."""

    _ROW_LISTS = ("_paths", "_ids", "_users", "_chats", "_kinds", "_payloads", "_text_hashes")

    def __init__(self, dim: int):
        self.dim = dim
        self._vectors = np.zeros((0, dim), dtype=np.float32)
        # The same vectors in int8, each row scaled to its own largest component: a quarter of
        # the memory traffic for the first pass over every row (see search()).
        self._codes8 = np.zeros((0, dim), dtype=np.int8)
        self._scales = np.zeros(0, dtype=np.float32)
        # The buffers the three arrays above are views of, with unused room at the end.
        self._room: dict[str, np.ndarray] = {}
        self._paths: list[str] = []
        self._ids: list[str] = []
        self._users: list[str | None] = []
        self._chats: list[str | None] = []
        self._kinds: list[str] = []
        self._payloads: list[dict] = []
        # hash() of each row's full-text string: with the payload, what tells an unchanged row
        # from a changed one (see unchanged()) without keeping every text twice. In memory only,
        # so the per-process salt of str hashes does not matter.
        self._text_hashes: list[int] = []
        self._text_index = TextIndex()
        self._alive = np.zeros(0, dtype=bool)
        self._pending: list[tuple[np.ndarray, list[dict], list[str]]] = []
        self._rows_of_path: dict[str, list[int]] = {}
        # Alive rows by (path, id): hybrid search looks up every candidate and its neighbours.
        self._row_of_key: dict[tuple[str, str], int] = {}
        self._dead = 0
        # Scope columns as small-int codes (-1 = none) so a scoped mask is a few vector compares.
        self._codes: dict[str | None, int] = {None: -1}
        self._user_codes = np.zeros(0, dtype=np.int32)
        self._chat_codes = np.zeros(0, dtype=np.int32)
        self._fact_rows = np.zeros(0, dtype=bool)
        self._memory_rows = np.zeros(0, dtype=bool)
        self._transcript_rows = np.zeros(0, dtype=bool)
        self._heading_rows = np.zeros(0, dtype=bool)
        self._scope_cache: dict[ScopeMask, np.ndarray] = {}
        # A fact's conversation: the facts of its section (same file, same heading) in line order.
        # The row of the fact before and after it there, -1 at either end and for other rows.
        self._prev = np.zeros(0, dtype=np.int64)
        self._next = np.zeros(0, dtype=np.int64)
        # created_at as POSIX seconds (NaN without one), for recency without parsing per query.
        self._created = np.zeros(0, dtype=np.float64)

    def __len__(self) -> int:
        self._flush()
        return int(self._alive.sum())

    def clear(self) -> None:
        self.__init__(self.dim)  # type: ignore[misc]

    def remove_paths(self, paths: Iterable[str]) -> None:
        self._flush()
        for path in paths:
            for row in self._rows_of_path.pop(path, ()):
                self._row_of_key.pop((path, self._ids[row]), None)
                if self._alive[row]:
                    self._alive[row] = False
                    self._dead += 1

    def holds(self, path: str) -> bool:
        """Whether any row is held for ``path``."""
        self._flush()
        return path in self._rows_of_path

    def ids_of(self, path: str) -> set[str]:
        """Ids of the rows held for ``path``."""
        self._flush()
        return {self._ids[row] for row in self._rows_of_path.get(path, ())}

    def unchanged(self, path: str, rows: Sequence[tuple[str, dict, str]]) -> set[str]:
        """Of ``(id, payload, search text)`` rows for ``path``, the ids held exactly so already:
        same payload, same full-text string, hence the same vector (what is embedded is made of
        payload fields). Nothing when either side repeats an id: then the file is replaced whole."""
        self._flush()
        held = self._rows_of_path.get(path)
        if not held or len({self._ids[row] for row in held}) != len(held) or len({r[0] for r in rows}) != len(rows):
            return set()
        same = set()
        for row_id, payload, text in rows:
            row = self._row_of_key.get((path, row_id))
            if row is not None and self._text_hashes[row] == hash(text) and self._payloads[row] == payload:
                same.add(row_id)
        return same

    def remove_rows(self, path: str, ids: Iterable[str]) -> None:
        """Drop the rows of ``path`` with these ids; its other rows stay as and where they are."""
        self._flush()
        ids = set(ids)
        if not ids:
            return
        kept, headings = [], set()
        for row in self._rows_of_path.get(path, ()):
            if self._ids[row] in ids:
                self._row_of_key.pop((path, self._ids[row]), None)
                headings.add(self._payloads[row].get("heading") or "")
                self._alive[row] = False
                self._dead += 1
            else:
                kept.append(row)
        if kept:
            self._rows_of_path[path] = kept
        else:
            self._rows_of_path.pop(path, None)
        # The conversations that lost a fact close ranks (new rows relink theirs when they land).
        self._link(path, headings)
        self._scope_cache = {}

    def add(self, vectors: np.ndarray, rows: Sequence[dict], texts: Sequence[str]) -> None:
        """Add rows (dicts with at least path, id, user, chat, kind; kept whole as the payload
        that hits are built from) with their vectors and the text full-text search sees."""
        if len(rows) == 0:
            return
        if len(texts) != len(rows):
            raise ValueError(f"{len(rows)} rows but {len(texts)} search texts")
        vectors = np.asarray(vectors, dtype=np.float32).reshape(len(rows), self.dim)
        self._pending.append((vectors, list(rows), list(texts)))

    def _flush(self) -> None:
        """Concatenate pending additions once, not per call: many small files would otherwise copy
        the whole matrix once each."""
        if not self._pending:
            return
        start = len(self._paths)
        blocks = [vecs for vecs, _, _ in self._pending]
        added_vectors = blocks[0] if len(blocks) == 1 else np.concatenate(blocks, axis=0)
        codes, scales = quantize(added_vectors)
        # Loading a big index arrives as one block: keep it as it is rather than copy every vector
        # twice. Later additions go into room kept past the end (see _appended), so a daemon's
        # small writes do not copy the whole matrix each.
        if len(self._vectors):
            self._vectors = self._appended("_vectors", added_vectors)
            self._codes8 = self._appended("_codes8", codes)
            self._scales = self._appended("_scales", scales)
        else:
            self._vectors, self._codes8, self._scales = added_vectors, codes, scales
        added = sum(len(meta) for _, meta, _ in self._pending)
        self._alive = self._appended("_alive", np.ones(added, dtype=bool))
        row = start
        for _, rows, texts in self._pending:
            self._text_index.add(texts)
            self._text_hashes.extend(hash(text) for text in texts)
            for payload in rows:
                path = payload["path"]
                self._paths.append(path)
                self._ids.append(payload["id"])
                self._users.append(payload["user"])
                self._chats.append(payload["chat"])
                self._kinds.append(payload["kind"])
                self._payloads.append(payload)
                self._rows_of_path.setdefault(path, []).append(row)
                self._row_of_key.setdefault((path, payload["id"]), row)
                row += 1
        self._pending.clear()
        self._recode(start)
        if self._dead > 1024 and self._dead > len(self._paths) // 4:
            self._compact()

    def _appended(self, name: str, rows: np.ndarray) -> np.ndarray:
        """The array ``name`` followed by ``rows``, as the head of a buffer with room to spare.

        While the array is a view of its buffer (``_room``) and the buffer has room, ``rows`` go
        into the unused tail and no row is copied. The rows the array shows, and any older view a
        reader may still hold, are never written. Otherwise (first growth after a load, after a
        compaction, or no room left) a buffer an eighth larger (at least 4,096 rows) is filled:
        a write of a few rows then copies only those rows instead of the whole array (hundreds
        of megabytes at 100,000 rows), and the full copy comes once per eighth of growth.
        """
        array, buffer = getattr(self, name), self._room.get(name)
        start, end = len(array), len(array) + len(rows)
        if buffer is None or array.base is not buffer or len(buffer) < end:
            buffer = np.empty((end + max(end // 8, 4096), *array.shape[1:]), dtype=array.dtype)
            buffer[:start] = array
            self._room[name] = buffer
        buffer[start:end] = rows
        return buffer[:end]

    def _compact(self) -> None:
        keep = np.flatnonzero(self._alive)
        self._vectors = self._vectors[keep]
        self._codes8 = self._codes8[keep]
        self._scales = self._scales[keep]
        for name in self._ROW_LISTS:
            values = getattr(self, name)
            setattr(self, name, [values[i] for i in keep])
        self._text_index.keep(self._alive)
        self._alive = np.ones(len(keep), dtype=bool)
        self._rows_of_path = {}
        self._row_of_key = {}
        for row, path in enumerate(self._paths):
            self._rows_of_path.setdefault(path, []).append(row)
            self._row_of_key.setdefault((path, self._ids[row]), row)
        self._dead = 0
        self._recode()

    def _code(self, value: str | None) -> int:
        code = self._codes.get(value)
        if code is None:
            code = self._codes[value] = len(self._codes)
        return code

    def _recode(self, start: int = 0) -> None:
        """Codes for rows ``start:`` (all rows after a compaction, only the new ones otherwise).
        New rows go into the room past the end of each column (``_appended``): a write of one
        fact copies no column of the whole index, and the scope masks already made are extended
        by the new rows' part rather than made again over every row."""
        n = len(self._users) - start
        users = np.fromiter((self._code(u) for u in self._users[start:]), np.int32, n)
        chats = np.fromiter((self._code(c) for c in self._chats[start:]), np.int32, n)
        facts, memory, transcripts, headings, created = row_columns(self._payloads[start:])
        columns = {
            "_user_codes": users,
            "_chat_codes": chats,
            "_fact_rows": facts,
            "_memory_rows": memory,
            "_transcript_rows": transcripts,
            "_heading_rows": headings,
            "_created": created,
            "_prev": np.full(n, -1, dtype=np.int64),
            "_next": np.full(n, -1, dtype=np.int64),
        }
        appending = start == len(self._user_codes)
        for name, values in columns.items():
            if appending:
                setattr(self, name, self._appended(name, values))
            else:
                setattr(self, name, np.concatenate([getattr(self, name)[:start], values]))
        if appending:
            kinds = (transcripts, facts, memory, headings)
            self._scope_cache = {
                scope: np.concatenate([base, scope_rows(scope, self._codes, users, chats, kinds)])
                for scope, base in self._scope_cache.items()
            }
        else:
            self._scope_cache = {}
        # Relink the conversations the new rows join, with the rows of their file already held
        # (a file whose rows changed only in part keeps its other rows where they are).
        touched: dict[str, set[str]] = {}
        for row in range(start, len(self._paths)):
            touched.setdefault(self._paths[row], set()).add(self._payloads[row].get("heading") or "")
        for path, joined in touched.items():
            self._link(path, joined)

    def _link(self, path: str, headings: set[str]) -> None:
        """Chain the facts of ``path``'s conversations under ``headings`` in line order; the
        others of the file are left as they are (their members did not change)."""
        conversations: dict[str, list[int]] = {}
        for row in self._rows_of_path.get(path, ()):
            if self._alive[row] and self._kinds[row] == "fact":
                heading = self._payloads[row].get("heading") or ""
                if heading in headings:
                    conversations.setdefault(heading, []).append(row)
        for members in conversations.values():
            members.sort(key=lambda r: self._payloads[r].get("line") or 0)
            self._prev[members] = [-1, *members[:-1]]
            self._next[members] = [*members[1:], -1]

    def _mask(self, scope: ScopeMask) -> np.ndarray:
        base = self._scope_cache.get(scope)
        if base is None:
            base = scope_rows(
                scope,
                self._codes,
                self._user_codes,
                self._chat_codes,
                (self._transcript_rows, self._fact_rows, self._memory_rows, self._heading_rows),
            )
            if len(self._scope_cache) > 64:
                self._scope_cache.clear()
            self._scope_cache[scope] = base
        return base & self._alive

    def count(self, scope: ScopeMask) -> int:
        """How many rows ``scope`` reaches: a user's status counts what their searches can see."""
        self._flush()
        return int(np.count_nonzero(self._mask(scope))) if self._paths else 0

    def search(self, query: np.ndarray, scope: ScopeMask, k: int) -> list[tuple[str, str, float]]:
        """Top ``k`` (path, id, cosine) in scope, best first. Vectors are L2-normalised.

        A small index is searched exactly. A large one is first scored in int8 (the product over
        every row is memory-bound, and int8 reads a quarter of the bytes float32 does;
        benchmarks/bench_products.py shows the two side by side), then a shortlist of 4k rows (at least 200) is
        ranked by exact float32 cosines. Quantisation moves a score by a few thousandths, so an
        exact top-k row misses the shortlist only if 4k rows score within that of it: the search
        benchmark measures recall@10 against exact search (1.000 at 100,000 facts) and a test
        checks the exact top k on clustered vectors.
        """
        self._flush()
        n = len(self._paths)
        if not n or k <= 0:
            return []
        mask = self._mask(scope)
        allowed = int(mask.sum())
        if not allowed:
            return []
        rows, exact = nearest_rows(self._vectors, self._codes8, self._scales, mask, allowed, query, k)
        return [(self._paths[i], self._ids[i], float(score)) for i, score in zip(rows, exact)]

    # Row-level access for hybrid search. Row numbers are valid while the caller holds the rows
    # still (Index.reading()); everything above speaks (path, id) keys, which always are.

    def prefetch(self, query: np.ndarray, text: str, scope: ScopeMask, pool: int, reach: int) -> None:
        """Nothing to gather for a query: every row is in memory (pg_search.PgRows gathers)."""

    def search_rows(self, query: np.ndarray, scope: ScopeMask, k: int) -> np.ndarray:
        """Rows of :meth:`search`'s hits, best first."""
        return np.fromiter((self._row_of_key[(p, i)] for p, i, _ in self.search(query, scope, k)), np.int64)

    def text_signals(self, query: str, scope: ScopeMask) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every row's BM25 over its passage, its coverage of the query and the rare words' part
        of it (:meth:`syncd.index.fulltext.TextIndex.signals`), in one pass."""
        self._flush()
        return self._text_index.signals(query, self._alive, self._mask(scope))

    def around(self, rows: np.ndarray, scope: ScopeMask, reach: int) -> tuple[np.ndarray, np.ndarray]:
        """The facts at most ``reach`` places before and after each row in its conversation:
        a (rows, 2 * reach) array of row numbers, -1 where there is none (or it is out of
        ``scope``), and each column's distance. The first ``reach`` columns go back from the
        row (the fact just before it first), the others forward."""
        self._flush()
        return neighbours(self._prev, self._next, self._mask(scope), rows, reach)

    def row_cosines(self, query: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """Exact cosine of each row, computed row by row in float64: a row's score depends on its
        own vector alone, never on which other rows happen to be held (a matrix product rounds
        differently, by the last bit, with the matrix's size)."""
        self._flush()
        return exact_cosines(self._vectors, rows, query)

    def pair_cosines(self, rows: np.ndarray, others: np.ndarray) -> np.ndarray:
        """Exact cosine between each row and the row at the same place in ``others``."""
        self._flush()
        return exact_pair_cosines(self._vectors, rows, others)

    def row_created(self, rows: np.ndarray) -> np.ndarray:
        """When each row was created, in POSIX seconds (NaN when unknown)."""
        return self._created[np.asarray(rows, dtype=np.int64)]

    def row_payloads(self, rows: Iterable[int]) -> list[dict]:
        return [self._payloads[row] for row in rows]

    def _row(self, key: tuple[str, str]) -> int | None:
        return self._row_of_key.get(key)

    def payloads(self, keys: Iterable[tuple[str, str]]) -> dict[tuple[str, str], dict]:
        """The stored rows for (path, id) keys that are still alive."""
        self._flush()
        out = {}
        for key in keys:
            row = self._row(key)
            if row is not None:
                out[key] = self._payloads[row]
        return out

    def text_search(self, query: str, scope: ScopeMask, k: int) -> list[tuple[str, str, float]]:
        """Top ``k`` (path, id, BM25) in scope, best first; only rows matching a query term."""
        self._flush()
        if not len(self._paths) or k <= 0:
            return []
        hits = self._text_index.search(query, self._alive, self._mask(scope), k)
        return [(self._paths[row], self._ids[row], score) for row, score in hits]

    def image(self) -> dict:
        """The alive rows as arrays, numbered 0..m-1 in their order, for rows_image.py to
        persist: every array a query reads (vectors, scope codes, conversation links, postings),
        each row's payload, and ``key_row``, the row each row's (path, id) names (its first one:
        :meth:`search_rows` maps hits back through that key)."""
        self._flush()
        keep = np.flatnonzero(self._alive)
        renumbered = np.full(len(self._alive) + 1, -1, dtype=np.int64)
        renumbered[keep] = np.arange(len(keep))
        terms, offsets, rows, freqs, own, lengths = self._text_index.image(self._alive)
        return {
            "codes": dict(self._codes),
            "payloads": [self._payloads[i] for i in keep],
            "paths": [self._paths[i] for i in keep],
            "terms": terms,
            "arrays": {
                "vectors": self._vectors[keep],
                "codes8": self._codes8[keep],
                "scales": self._scales[keep],
                "user_codes": self._user_codes[keep],
                "chat_codes": self._chat_codes[keep],
                "fact_rows": self._fact_rows[keep],
                "memory_rows": self._memory_rows[keep],
                "transcript_rows": self._transcript_rows[keep],
                "heading_rows": self._heading_rows[keep],
                "created": self._created[keep],
                "prev": renumbered[self._prev[keep]],
                "next": renumbered[self._next[keep]],
                "key_row": renumbered[[self._row_of_key[(self._paths[i], self._ids[i])] for i in keep]],
                "term_offsets": offsets,
                "post_rows": rows,
                "post_freqs": freqs,
                "post_own": own,
                "passage_lengths": lengths,
            },
        }


def scope_rows(
    scope: ScopeMask,
    codes: Mapping[str | None, int],
    user_codes: np.ndarray,
    chat_codes: np.ndarray,
    kinds: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
) -> np.ndarray:
    """Which rows ``scope`` reaches, alive or not: scope columns as small-int codes (``codes``:
    value to code, -1 for none) and ``kinds``, the (transcript, fact, memory/, heading-only)
    flags of each row."""
    transcript_rows, fact_rows, memory_rows, heading_rows = kinds
    base = np.ones(len(user_codes), dtype=bool)
    if scope.user is not None:
        user = codes.get(scope.user, -2)
        base &= (user_codes == user) | (user_codes == -1)
        if scope.chat is not None:
            chat = codes.get(scope.chat, -2)
            base &= (chat_codes == chat) | (chat_codes == -1)
    # Transcripts are raw conversation, searched only when asked for by kind: beside the
    # facts drawn from them they would crowd recall with what was merely said.
    if scope.kind == "transcript":
        base &= transcript_rows
    else:
        base &= ~transcript_rows
        if scope.kind is not None:
            base &= fact_rows if scope.kind == "fact" else ~fact_rows
    if scope.memory_only:
        base &= memory_rows
    if scope.content_only:
        base &= ~heading_rows
    return base


def nearest_rows(
    vectors: np.ndarray,
    codes8: np.ndarray,
    scales: np.ndarray,
    mask: np.ndarray,
    allowed: int,
    query: np.ndarray,
    k: int,
) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` rows of ``mask`` (``allowed`` of them, at least one) nearest to ``query``, best
    first, with their exact cosines (:meth:`RowCache.search`)."""
    n = len(mask)
    k = min(k, allowed)
    query = np.asarray(query, dtype=np.float32)
    if allowed * _GATHER_BELOW <= n:
        # A small scope (one user's facts in a large home; every add searches one to
        # deduplicate): its own rows, gathered and ranked exactly, cost a sliver of a product
        # over every row (in proportion to the scope's rows, not the home's; bench_products.py
        # measures the product over every row).
        rows = np.flatnonzero(mask)
        scores = _products(vectors[rows], query)
        order = np.argsort(-scores, kind="stable")[:k]
        return rows[order], scores[order]
    # Otherwise one dense product over every row, then mask: gathering many allowed rows first
    # copies the matrix and costs more than the product itself.
    approximate = n > _EXACT_UP_TO
    scores = _int8_scores(codes8, scales, query) if approximate else _products(vectors, query)
    if allowed != n:
        scores = np.where(mask, scores, np.float32(-np.inf))
    width = min(allowed, max(k * _SHORTLIST_FACTOR, _MIN_SHORTLIST)) if approximate else k
    candidates = np.argpartition(-scores, width - 1)[:width]
    exact = _products(vectors[candidates], query) if approximate else scores[candidates]
    order = np.argsort(-exact, kind="stable")[:k]
    return candidates[order], exact[order]


def neighbours(
    prev: np.ndarray, next_: np.ndarray, mask: np.ndarray, rows: np.ndarray, reach: int
) -> tuple[np.ndarray, np.ndarray]:
    """:meth:`RowCache.around` from the conversation links (``prev``, ``next_``: the row before
    and after each, -1 for none) and the rows in scope (``mask``)."""
    columns, distances = [], []
    for step in (prev, next_):
        at = np.asarray(rows, dtype=np.int64)
        for distance in range(1, reach + 1):
            at = np.where(at >= 0, step[np.maximum(at, 0)], -1)
            columns.append(at)
            distances.append(distance)
    if not columns:
        return np.zeros((len(rows), 0), dtype=np.int64), np.zeros(0, dtype=np.int64)
    near = np.stack(columns, axis=1)
    near = np.where((near >= 0) & mask[np.maximum(near, 0)], near, -1)
    return near, np.array(distances, dtype=np.int64)


def exact_cosines(vectors: np.ndarray, rows: np.ndarray, query: np.ndarray) -> np.ndarray:
    """:meth:`RowCache.row_cosines` of ``rows`` of ``vectors``."""
    products = vectors[np.asarray(rows, dtype=np.int64)].astype(np.float64)
    return (products * np.asarray(query, dtype=np.float64)).sum(axis=1)


def exact_pair_cosines(vectors: np.ndarray, rows: np.ndarray, others: np.ndarray) -> np.ndarray:
    """:meth:`RowCache.pair_cosines` of ``rows`` and ``others`` of ``vectors``, in float64 as
    :func:`exact_cosines` computes them."""
    left, right = vectors[np.asarray(rows, dtype=np.int64)], vectors[np.asarray(others, dtype=np.int64)]
    # Widened a block at a time inside the product (the same sums as widening the arrays first,
    # at a sixteenth of the cost: no float64 copies of the vectors).
    return np.einsum("ij,ij->i", left, right, dtype=np.float64, casting="safe")


def _int8_scores(codes8: np.ndarray, scales: np.ndarray, query: np.ndarray) -> np.ndarray:
    """Approximate cosines of every row (in proportion to them: the query's own scale is
    left out, which changes no ranking). On the calling thread: a memory-bound product gains
    nothing from a second thread, while OpenMP's idle threads spin after it and take the CPU
    from whatever runs next (benchmarks/bench_products.py compares the two); every add runs
    such a search to deduplicate, so the spinning would be paid on every write."""
    codes, _ = quantize(query.reshape(1, -1))
    raw = simsimd.cdist(codes, codes8, metric="dot", out_dtype="float32", threads=1)
    return np.asarray(raw).reshape(-1) * scales


def row_columns(payloads: Sequence[dict]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per-row columns of ``payloads`` that scopes and recency read: (fact, under memory/,
    transcript, heading-only chunk, created_at in POSIX seconds or NaN)."""
    n = len(payloads)
    return (
        np.fromiter((p["kind"] == "fact" for p in payloads), bool, n),
        np.fromiter((p["path"].startswith("memory/") for p in payloads), bool, n),
        np.fromiter((p["kind"] == "transcript" for p in payloads), bool, n),
        np.fromiter((p["kind"] == "chunk" and heading_only(p.get("text") or "") for p in payloads), bool, n),
        np.fromiter((created_posix(p.get("created_at")) for p in payloads), np.float64, n),
    )


def created_posix(created_at: str | None) -> float:
    """An ISO date or date-time as POSIX seconds (UTC when it has no offset); NaN if it is none."""
    if not created_at:
        return math.nan
    try:
        when = dt.datetime.fromisoformat(created_at)
    except ValueError:
        return math.nan
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return when.timestamp()


def _products(matrix: np.ndarray, query: np.ndarray) -> np.ndarray:
    """``matrix @ query`` in float32, on the calling thread. numpy's ``@`` hands any larger
    product to OpenBLAS's thread pool, whose threads then spin waiting for more work: with a
    search in every add, that spinning took a large share of the server's CPU per add on a
    small machine. simsimd is as fast here on one thread, and its threads, when asked for, are
    OpenMP's, which give up the CPU far sooner."""
    if not len(matrix):
        return np.zeros(0, dtype=np.float32)
    raw = simsimd.cdist(
        np.ascontiguousarray(query).reshape(1, -1), matrix, metric="dot", out_dtype="float32", threads=1
    )
    return np.asarray(raw).reshape(-1)


def quantize(vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """int8 rows, each scaled so its largest component is 127, and the scale that undoes it.
    Done in blocks so quantising a loaded index needs no float copy of all of it."""
    codes = np.empty(vectors.shape, dtype=np.int8)
    scales = np.ones(len(vectors), dtype=np.float32)
    for start in range(0, len(vectors), _QUANTIZE_BLOCK):
        block = vectors[start : start + _QUANTIZE_BLOCK]
        peaks = np.abs(block).max(axis=1)
        block_scales = np.where(peaks > 0, peaks / 127.0, 1.0).astype(np.float32)
        codes[start : start + len(block)] = np.rint(block / block_scales[:, None])
        scales[start : start + len(block)] = block_scales
    return codes, scales
