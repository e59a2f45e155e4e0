"""Whether the memory in scope answers a query at all: the relevance floor of hybrid search.

A hit's score ranks rows against each other; it cannot say whether anything is relevant (the
normalised full text is 1.0 for the best match in scope however little it holds). The floor asks
a question that means the same for every query and memory: does the best row lie closer to the
query than the best of that many unrelated rows would by chance? Its evidence is the row's cosine
to the query plus a bonus for holding the query's rare words (:func:`evidence`);
:func:`chance_cosine` is what the best of n unrelated rows reaches.

The constants are fitted to the bundled all-MiniLM-L6-v2 (another model needs its own:
benchmarks/bench_no_answer.py prints what its queries give). What was measured, and tried:

- Queries of everyday words alone ("What is new?", "people", "Anything on Monday?", "Is it Friday
  yet?") lie closest to a conversation by chance: short, generic, they are near every short
  turn. The best of a 400-700 turn conversation reached 0.41-0.48 for them, above the 0.39 that a
  centre of 0.02 allowed (10 of 100 such queries were answered on LoCoMo). Centred on 0.04, the
  best of 550 is expected under 0.41: 4 of 100; the real questions whose evidence turn is found
  keep their answer but for a handful (recall@10 with the floor 0.804 -> 0.805 of 0.807 without).
- Made-up words lie close to a few rows of any memory: short rows with a name or an odd spelling
  ("Has a cat called Miso.", "Gina: ;)") share word pieces with them (cosines 0.26-0.40, where a
  typical row sits near 0.07). Taking each row's closeness to made-up words off its evidence
  (cohort normalisation of the row's side, as Z-norm in speaker verification or CSLS for hubs in
  embedding retrieval) cut made-up queries answered in the generated five-fact memory from 6 to
  2 of 200, but cost the README's own example its margin ("what does she drink?" -> "Likes green
  tea.", 0.285 against a chance of 0.272 for five rows): not kept. Normalising the query's side
  by its cosines to a cohort of unrelated sentences separated worse than the raw cosine: real
  questions lie close to any conversation too.
"""

from __future__ import annotations

from statistics import NormalDist

import numpy as np

__all__ = ["answered", "chance_cosine", "evidence"]

# How close unrelated texts lie under the bundled all-MiniLM-L6-v2, fitted to the off-topic,
# everyday-word and made-up queries of benchmarks/bench_no_answer.py (written for it, about
# nothing the memories hold): pooled over every row their cosines have a 95th percentile of
# 0.11-0.19 (one row's chance), and the best of a conversation's 400-700 rows reaches 0.41-0.48
# for everyday words (see above). A normal centred on 0.04 with spread 0.10 puts the 95th
# percentile of the best of 1, 5 and 550 draws at 0.20, 0.27 and 0.41 (the measured spread
# within a query is 0.06, but the tails are fatter than a normal's).
_CHANCE_COSINE = 0.04
_CHANCE_SPREAD = 0.10
_CHANCE_KEPT = 0.95
_NORMAL = NormalDist()
# A row holding all of the query's rare words: worth one spread of chance in evidence().
_RARE_WORDS = _CHANCE_SPREAD


def chance_cosine(rows: int) -> float:
    """The cosine that the best of ``rows`` rows having nothing to do with a query stays under
    19 times in 20: unrelated texts' cosines under the bundled MiniLM are taken as normal around
    ``_CHANCE_COSINE`` with spread ``_CHANCE_SPREAD``, and the best of n draws stays under the
    quantile 0.95 ** (1 / n). One row: 0.20; five: 0.27; 550 (a long conversation): 0.41;
    100,000: 0.53. A memory's best row is evidence of meaning only above this: the larger the
    memory, the closer something lies by chance."""
    rows = max(rows, 1)
    return _CHANCE_COSINE + _CHANCE_SPREAD * _NORMAL.inv_cdf(_CHANCE_KEPT ** (1.0 / rows))


def evidence(cosine: np.ndarray, rare: np.ndarray) -> np.ndarray:
    """How strongly each row speaks to the query, on a scale that means the same for every
    query: its cosine, plus up to one spread of chance (``_RARE_WORDS``) for holding the query's
    rare words (its rare coverage: the idf-weighted share of the query made of words that fewer
    than about one row in sqrt(2N) holds, fulltext.py). A weekday or "world" said all over a
    memory is not rare there and adds nothing."""
    return cosine + _RARE_WORDS * rare


def answered(best_evidence: float, rows: int) -> bool:
    """Whether a memory of ``rows`` rows answers a query at all: its best row's
    :func:`evidence` is above what the best of that many unrelated rows reaches by chance
    (:func:`chance_cosine`). A query of words the memory does not hold, or holds everywhere,
    and of no meaning close to it is answered by nothing."""
    return best_evidence >= chance_cosine(rows)
