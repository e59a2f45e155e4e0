"""In-memory BM25 full-text search over the index's rows.

LanceDB's native full-text index has a fixed cost per query (planning, an async runtime, fetching
the hit rows' columns), paid even by a one-word query that matches almost nothing and more with a
scope filter; measured at 100,000 rows, it was most of the search budget. The same BM25 over
postings held in numpy arrays costs a fraction of that (bench_index.py search measures it),
scoped by the same mask as the vector search, so the rows LanceDB stores are indexed here
instead, in the row numbering of the in-memory vector matrix.

Text analysis is close to LanceDB's default one: Unicode compatibility forms unified (NFKD),
lower-cased, Latin-style accents folded ("café" is "cafe"), words are runs of letters, digits and
combining marks (so Devanagari or Thai words stay whole, unlike a split on "not alphanumeric"),
NLTK's English stop words dropped (a fuller list than Lucene's: see _STOP_WORDS), Snowball
(Porter 2) English stems, words over 40 characters dropped. BM25 with k1 = 1.2, b = 0.75 and the
Lucene idf, ln(1 + (N - df + 0.5) / (df + 0.5)). N, df and the average length are counted over
the rows the query may see (alive and in its scope), not over the whole index: a user's scores
then depend only on their own memory and the shared rows, which is both the better estimate of
how rare a word is for them and a privacy property (no word of bo's moves ana's ranking).
Only the first ``MAX_ANALYZED_CHARS`` (1,000,000) characters of a row are analysed: analysis is
linear but not cheap (its time and memory grow with the row's distinct words, and a 19 MB
single-line fact of mostly distinct words pays them all), and a word a million characters into
one row is past what BM25 can rank anyway (the row's length drowns it). The row's whole text is
still stored and returned.

Rows are added in segments (one per batch of additions) and removed by the matrix's alive mask, so
an edit never rebuilds the postings of the whole index; when the matrix compacts, the postings are
renumbered, not rebuilt.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import regex
from py_rust_stemmers import SnowballStemmer

from .records import NEIGHBOURS

__all__ = ["MAX_ANALYZED_CHARS", "TextIndex", "analyze", "best_rows", "passage_terms", "query_signals", "term_signals"]

MAX_ANALYZED_CHARS = 1_000_000
# A term is rare in the rows a query sees when its idf is at least this share of an unseen term's.
RARE_IDF_SHARE = 0.5

_K1 = 1.2
_B = 0.75
_MAX_TOKEN_CHARS = 40
_MAX_CACHED_STEMS = 500_000
# A new segment is merged into the one before it while it holds at least a quarter as many
# postings: segment sizes then fall by 4x down the list, so a daemon making endless small writes
# keeps a handful of segments (one numpy call each per query term) and every posting is merged
# only a logarithmic number of times.
_MERGE_RATIO = 4

_WORD = regex.compile(r"[\p{L}\p{N}\p{M}]+")
_ASCII_WORD = re.compile(r"[a-z0-9]+")
# The combining diacritics that accent folding drops (after NFKD has split them from their letter);
# marks of other scripts (vowel signs, viramas) are part of their words and stay.
_DIACRITICS = regex.compile(r"[\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f]+")
# NLTK's English stop words (nltk_data corpora/stopwords/english, 179 words: the Snowball
# project's English list plus the pieces its contractions leave when split at the apostrophe). The
# 26 entries holding an apostrophe ("don't", "you're") are left out: the word pattern splits them,
# and each piece ("don", "t", "re") is in the list itself. Lucene's 33-word list kept the question
# words ("what", "when", "did", "does", "how"), so a natural-language question's BM25 was mostly
# about them; questions are how agents search.
_STOP_WORDS = frozenset(
    """
    i me my myself we our ours ourselves you your yours yourself yourselves he him his himself she
    her hers herself it its itself they them their theirs themselves what which who whom this that
    these those am is are was were be been being have has had having do does did doing a an the and
    but if or because as until while of at by for with about against between into through during
    before after above below to from up down in out on off over under again further then once here
    there when where why how all any both each few more most other some such no nor not only own
    same so than too very s t can will just don should now d ll m o re ve y ain aren couldn didn
    doesn hadn hasn haven isn ma mightn mustn needn shan shouldn wasn weren won wouldn
    """.split()
)
_stemmer = SnowballStemmer("english")
# Stems are cached: a corpus has far fewer distinct words than words.
_stems: dict[str, str] = {}


def _words(text: str) -> list[str]:
    """Case-folded words without accents: "Café", "CAFE" and "ｃａｆｅ" are one word, "Straße" is
    "strasse". ASCII text, most of any index, takes the stdlib pattern, which is faster and
    finds exactly the same words there."""
    if text.isascii():
        return _ASCII_WORD.findall(text.lower())
    return _WORD.findall(_DIACRITICS.sub("", unicodedata.normalize("NFKD", text)).casefold())


def analyze(text: str) -> list[str]:
    """The terms of ``text`` (its first ``MAX_ANALYZED_CHARS``) as the index sees them, in order
    (repeats kept)."""
    global _stems
    head = text[:MAX_ANALYZED_CHARS]
    words = [w for w in _words(head) if w not in _STOP_WORDS and len(w) <= _MAX_TOKEN_CHARS]
    stems = _stems  # this call's own reference: another thread may replace the cache meanwhile
    unknown = {w for w in words if w not in stems}
    if unknown:
        if len(stems) > _MAX_CACHED_STEMS:
            # A daemon that sees endless new words (ids, numbers) starts a fresh cache, which
            # must then learn every word of this text, not only the ones the old one lacked.
            stems = _stems = {}
            unknown = set(words)
        ordered = list(unknown)
        stems.update(zip(ordered, _stemmer.stem_words(ordered)))
    return [stems[w] for w in words]


@dataclass
class _Segment:
    """Postings of some rows: for term t, rows[offsets[t]:offsets[t+1]] (row numbers, ascending)
    with their term frequencies. Terms added to the vocabulary later have no postings here."""

    offsets: np.ndarray
    rows: np.ndarray
    # The term's frequency in the row's passage (its own words and its neighbours'), and in its
    # own words alone.
    freqs: np.ndarray
    own: np.ndarray

    def pairs(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(term, row, passage freq, own freq) of every posting."""
        terms = np.repeat(np.arange(len(self.offsets) - 1), np.diff(self.offsets))
        return terms, self.rows, self.freqs, self.own

    def postings(self, term: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if term + 1 >= len(self.offsets):
            return self.rows[:0], self.freqs[:0], self.own[:0]
        lo, hi = self.offsets[term], self.offsets[term + 1]
        return self.rows[lo:hi], self.freqs[lo:hi], self.own[lo:hi]


class TextIndex:
    """BM25 over rows numbered 0..n-1; which rows are alive and in scope is the caller's mask."""

    def __init__(self) -> None:
        self._vocabulary: dict[str, int] = {}
        self._segments: list[_Segment] = []
        self._lengths = np.zeros(0, dtype=np.float32)  # own words
        self._passage_lengths = np.zeros(0, dtype=np.float32)  # own and neighbours' words
        self._pending: list[tuple[list[str], list[str]]] = []

    def __len__(self) -> int:
        return len(self._lengths) + len(self._pending)

    def add(self, texts: Sequence[str]) -> None:
        """Index the next ``len(texts)`` rows; postings are built on the next search. Words after
        a line holding only the NEIGHBOURS mark are the row's neighbours' (a fact's conversation,
        rows.py): they count in the row's passage, not as its own (see :meth:`signals`)."""
        self._pending.extend(passage_terms(text) for text in texts)

    def keep(self, alive: np.ndarray) -> None:
        """Drop the rows where ``alive`` is false and number the rest 0..m-1 in their order, as
        the matrix does when it compacts. Postings are renumbered; no text is analysed again."""
        self._flush()
        alive = alive[: len(self._lengths)]
        renumbered = np.cumsum(alive) - 1
        segments = []
        for segment in self._segments:
            terms, rows, freqs, own = segment.pairs()
            kept = alive[rows]
            terms = terms[kept]  # still sorted by term, then row: no new sort needed
            offsets = np.searchsorted(terms, np.arange(len(segment.offsets)))
            segments.append(_Segment(offsets=offsets, rows=renumbered[rows[kept]], freqs=freqs[kept], own=own[kept]))
        self._segments = segments
        self._lengths = self._lengths[alive]
        self._passage_lengths = self._passage_lengths[alive]

    def _flush(self) -> None:
        if not self._pending:
            return
        docs, self._pending = self._pending, []
        start = len(self._lengths)
        counts = np.fromiter((len(own) + len(around) for own, around in docs), np.int64, len(docs))
        vocabulary = self._vocabulary
        terms = np.fromiter(
            (vocabulary.setdefault(term, len(vocabulary)) for own, around in docs for term in (*own, *around)),
            np.int64,
            int(counts.sum()),
        )
        own = np.fromiter(
            (w for mine, around in docs for w in (*([1.0] * len(mine)), *([0.0] * len(around)))),
            np.float64,
            int(counts.sum()),
        )
        rows = np.repeat(np.arange(start, start + len(docs), dtype=np.int64), counts)
        own_lengths = np.fromiter((len(mine) for mine, _ in docs), np.float32, len(docs))
        self._lengths = np.concatenate([self._lengths, own_lengths])
        self._passage_lengths = np.concatenate([self._passage_lengths, counts.astype(np.float32)])
        self._segments.append(_postings(terms, rows, len(vocabulary), np.ones(len(own)), own))
        while len(self._segments) > 1 and len(self._segments[-1].rows) * _MERGE_RATIO >= len(self._segments[-2].rows):
            newer, older = self._segments.pop().pairs(), self._segments.pop().pairs()
            merged = [np.concatenate(columns) for columns in zip(older, newer)]
            self._segments.append(_postings(merged[0], merged[1], len(vocabulary), merged[2], merged[3]))

    def search(self, query: str, alive: np.ndarray, allowed: np.ndarray, k: int) -> list[tuple[int, float]]:
        """Top ``k`` (row, BM25) among rows both alive and ``allowed``, best first; rows that match
        no query term are never returned. Corpus statistics (row count, document frequencies,
        average length) come from those same rows, the ones the query may see: its scores depend
        on nothing outside its scope, so no word in another user's memory moves them."""
        scores = self.scores(query, alive, allowed)
        return [(int(row), float(scores[row])) for row in best_rows(scores, k)]

    def scores(self, query: str, alive: np.ndarray, allowed: np.ndarray) -> np.ndarray:
        """BM25 of every row as :meth:`search` ranks them (0 for a row that matches no query term
        or is not visible), over its own words and its neighbours' together (the passage): one
        pass over the postings that also scores rows found some other way, such as a hit's
        neighbours."""
        return self.signals(query, alive, allowed)[0]

    def signals(self, query: str, alive: np.ndarray, allowed: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Three per-row arrays (0 where a row is not visible or matches nothing):

        - BM25 of its passage: its own words and its neighbours' (a daily-log fact's
          conversation; see rows.py), which finds a turn by words said around it;
        - its coverage of the query, over its own words: the idf of the query's distinct terms
          the row holds over the idf of all of them, a term no visible row holds counting as the
          rarest possible (idf with df 0). Unlike BM25 over the best BM25 it means the same for
          every query: 1.0 holds every word asked, 0.3 words worth three tenths of the question
          (a common word's share is small, an unseen word's large);
        - the part of that coverage made of rare words: terms whose idf is at least half that of
          an unseen term (with N visible rows, held by fewer than about sqrt(N / 2) of them; in
          a memory of 550 rows, 16). A weekday or "world" said all over a memory is not rare
          there, so a query sharing only such words with a row is not answered by it.

        BM25 takes its statistics (row count, document frequencies, average length) from the rows
        the query may see, over the same words it scores; coverage's idf counts the rows whose own
        words hold the term."""
        self._flush()
        n = len(self._lengths)
        return query_signals(query, self.postings, alive[:n] & allowed[:n], self._passage_lengths)

    def postings(self, term: str) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """The postings of ``term`` as (rows, passage freqs, own freqs), rows ascending within
        each segment; None when no row ever held it."""
        at = self._vocabulary.get(term)
        if at is None:
            return None
        hits = [segment.postings(at) for segment in self._segments]
        return tuple(np.concatenate([h[part] for h in hits]) for part in range(3))  # type: ignore[return-value]

    def image(self, alive: np.ndarray) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The postings of the rows where ``alive`` is true, numbered 0..m-1 in their order, as
        one segment whose terms are in sorted order: (terms, offsets, rows, passage freqs, own
        freqs, passage lengths), what rows_image.py persists. Nothing here changes."""
        self._flush()
        alive = alive[: len(self._lengths)]
        renumbered = np.cumsum(alive) - 1
        terms = sorted(self._vocabulary)
        rank = np.empty(len(self._vocabulary), dtype=np.int64)
        rank[[self._vocabulary[t] for t in terms]] = np.arange(len(terms))
        parts = [segment.pairs() for segment in self._segments]
        term_ids, rows, freqs, own = (np.concatenate([p[i] for p in parts]) if parts else np.zeros(0) for i in range(4))
        kept = alive[rows.astype(np.int64)] if len(rows) else np.zeros(0, dtype=bool)
        term_ids, rows = rank[term_ids[kept].astype(np.int64)], renumbered[rows[kept].astype(np.int64)]
        order = np.lexsort((rows, term_ids))
        offsets = np.searchsorted(term_ids[order], np.arange(len(terms) + 1))
        return (
            terms,
            offsets,
            rows[order],
            freqs[kept][order].astype(np.float32),
            own[kept][order].astype(np.float32),
            self._passage_lengths[alive],
        )


def query_signals(
    query: str,
    postings: Callable[[str], tuple[np.ndarray, np.ndarray, np.ndarray] | None],
    visible: np.ndarray,
    lengths: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:meth:`TextIndex.signals` over any store of postings: ``postings(term)`` gives a term's
    (rows, passage freqs, own freqs) or None, ``visible`` which of the n rows the query sees,
    ``lengths`` their passage lengths. The rows in memory and their persisted image
    (rows_image.py) both answer through here, so they agree to the last bit."""
    n = len(lengths)
    # Terms in sorted order, not vocabulary order, so the float sums (and so the scores) do
    # not depend on the order rows were added in: incremental equals rebuilt, bit for bit.
    asked = sorted(set(analyze(query)))
    docs = int(np.count_nonzero(visible)) if n else 0
    found = [(term, postings(term)) for term in asked] if docs else []
    held = [p for _, p in found if p is not None]
    if not held or not docs:
        return term_signals(n, len(asked), [], 0, lengths, 1.0)
    avgdl = float(lengths[visible].mean()) or 1.0
    kept = []
    for rows, freqs, own in held:
        keep = visible[rows]
        kept.append((rows[keep], freqs[keep], own[keep]))  # freqs: own words and neighbours'
    return term_signals(n, len(asked), kept, docs, lengths, avgdl)


def passage_terms(text: str) -> tuple[list[str], list[str]]:
    """A row's own terms and its neighbours' (the words after a line holding only the NEIGHBOURS
    mark), as full text indexes them: in memory here, in term tables by the PostgreSQL index."""
    own, mark, around = text.partition(f"\n{NEIGHBOURS}\n")
    if not mark and text.startswith(f"{NEIGHBOURS}\n"):
        own, mark, around = "", NEIGHBOURS, text[len(NEIGHBOURS) + 1 :]
    return analyze(own), analyze(around) if mark else []


def term_signals(
    n: int,
    asked: int,
    postings: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray]],
    docs: int,
    lengths: np.ndarray,
    avgdl: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:meth:`TextIndex.signals` from its statistics, shared by both index backends so their
    full-text parts agree to the last bit: ``n`` rows, ``asked`` distinct query terms, and for
    each of them the index holds (in sorted term order: float sums depend on the order) the
    visible postings as (rows, passage freqs, own freqs), float32 freqs; ``docs`` visible rows,
    ``lengths`` every row's passage length (float32), ``avgdl`` their mean over visible rows."""
    passage_scores = np.zeros(n, dtype=np.float32)
    shares = np.zeros(n, dtype=np.float64)
    rare = np.zeros(n, dtype=np.float64)
    if not postings or not docs:
        return passage_scores, shares, rare
    unseen_idf = float(np.log1p((docs + 0.5) / 0.5))
    # A term no visible row holds counts as unseen, whether or not another scope's rows hold
    # it: summed the same way in both cases, so no word of another user's moves a score, not
    # even in its last bit.
    held_total, held = 0.0, 0
    for rows, freqs, own in postings:
        holders = rows[own > 0]
        if len(holders):
            idf = float(np.log1p((docs - len(holders) + 0.5) / (len(holders) + 0.5)))
            held_total += idf
            held += 1
            shares[holders] += idf
            if idf >= RARE_IDF_SHARE * unseen_idf:
                rare[holders] += idf
        if len(rows):
            passage_idf = np.float32(np.log1p((docs - len(rows) + 0.5) / (len(rows) + 0.5)))
            # Length normalisation for the posting rows only, not for every row of the index.
            norm = _K1 * (1.0 - _B + _B * lengths[rows] / avgdl)
            passage_scores[rows] += passage_idf * freqs * (_K1 + 1.0) / (freqs + norm)  # each row once per term
    total = unseen_idf * (asked - held) + held_total
    if total > 0:
        shares /= total
        rare /= total
    return passage_scores, shares, rare


def best_rows(scores: np.ndarray, k: int) -> np.ndarray:
    """The ``k`` best rows of a :meth:`TextIndex.scores` array that match at all, best first."""
    matched = np.flatnonzero(scores)
    if k <= 0 or not len(matched):
        return matched[:0]
    return _best(matched, scores[matched], k)


def _best(rows: np.ndarray, scores: np.ndarray, k: int) -> np.ndarray:
    """The ``k`` best of ``rows`` (ascending) by score, best first. Ties, common in BM25 (same
    words, same length), go to the lower row number, so a result never depends on chance."""
    if k < len(rows):
        kth = np.partition(scores, len(scores) - k)[len(scores) - k]
        better = rows[scores > kth]
        tied = rows[scores == kth][: k - len(better)]
        keep = np.isin(rows, np.concatenate([better, tied]), assume_unique=True)
        rows, scores = rows[keep], scores[keep]
    return rows[np.lexsort((rows, -scores))]


def _postings(
    terms: np.ndarray, rows: np.ndarray, vocabulary_size: int, freqs: np.ndarray, own: np.ndarray
) -> _Segment:
    """CSR postings from (term, row, passage freq, own freq): sorted by term then row, repeats summed."""
    stride = int(rows.max(initial=0)) + 1
    unique, inverse = np.unique(terms * stride + rows, return_inverse=True)
    summed = np.bincount(inverse, weights=freqs, minlength=len(unique)).astype(np.float32)
    summed_own = np.bincount(inverse, weights=own, minlength=len(unique)).astype(np.float32)
    unique_terms = unique // stride
    offsets = np.searchsorted(unique_terms, np.arange(vocabulary_size + 1))
    return _Segment(offsets=offsets, rows=(unique % stride).astype(np.int64), freqs=summed, own=summed_own)
