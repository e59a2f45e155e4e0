"""When a new fact is already remembered: only a true restatement is a duplicate.

A correction reads almost like the fact it corrects ("Is not allergic to peanuts." after "Is
allergic to peanuts.", "... on March 5." after "... on March 3."), and a sentence embedding puts
the two as close as two wordings of the same fact (MiniLM: cosine 0.95 and 0.94, more than many
restatements get). So closeness in meaning only picks the candidates; the words decide:

    a new fact restates a remembered one when both say the same words, in the same order or with
    one phrase moved ("Moved to Lyon in 2019." / "In 2019 moved to Lyon."), once the words that
    never change what a fact says are set aside.

What is set aside: case, Unicode form, whitespace and punctuation; articles; the subject a fact
starts with (facts are about the user: "She is", "The user is", "Is"), or a possessive it starts
with ("Her daughter" / "The user's daughter"); the present-tense copula ("is", "are", "'s"); a few filler
adverbs ("really", "also", "just"). What is unified: contractions ("isn't" = "is not"), an
auxiliary's agreement with the subject ("have" = "has", "do" = "does"), possessives ("her dog" =
"his dog"), number words and digits ("six" = "6", "twenty-one" = "21", "1,000" = "1000", "5th" =
"5"), month abbreviations.
Everything else counts, so a fact that differs in a negation, a number, a date, a name, a
quantity, a unit, a tense ("was"), a preposition ("to" / "from") or any other word is a new fact,
and two facts whose words trade places ("Ana loves Bob." / "Bob loves Ana.") are two facts. A
negation never moves: "Was at the party, not on Friday" does not restate "Was not at the party on
Friday". Storing a restatement the rule could not recognise costs a line; dropping a correction
loses a write, so every doubt goes to "new".

``benchmarks/bench_dedup.py`` measures this rule against the old one (cosine >= 0.85) on a
labelled set of restatements and corrections (``benchmarks/data/dedup_pairs.jsonl``).
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import regex

from ..formats import Fact

__all__ = [
    "CANDIDATES",
    "AddOutcome",
    "Known",
    "Verdict",
    "dedup_key",
    "restates",
    "screen",
]

# Remembered facts compared word by word with each new one: the nearest by meaning (and at least
# Settings.dedup_cosine close). A restatement embeds close to what it restates (0.7 and up with
# MiniLM), so it is among them unless this many facts are closer still, near-copies of it.
CANDIDATES = 10
# Longer texts restate one another only word for word (the search for a moved phrase grows with
# the cube of the length).
_MOVES_UP_TO = 48

_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'", "`": "'"})
_CONTRACTIONS = (
    (re.compile(r"\bcan'?t\b|\bcannot\b"), "can not"),
    (re.compile(r"\bwon't\b"), "will not"),
    (re.compile(r"\bshan't\b"), "shall not"),
    (re.compile(r"\bain't\b"), "is not"),
    (re.compile(r"n't\b"), " not"),
    (re.compile(r"'re\b"), " are"),
    (re.compile(r"'m\b"), " am"),
    (re.compile(r"'ve\b"), " have"),
    (re.compile(r"'ll\b"), " will"),
    (re.compile(r"'d\b"), " would"),
    (re.compile(r"'s\b"), " 's"),
)
_TIMES_OF_DAY = re.compile(r"\b([ap])\.\s*m\b\.?")
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
_ORDINAL_SUFFIX = re.compile(r"(?<=\d)(?:st|nd|rd|th)\b")
# Words, numbers (with their decimal point, time colon, date slashes and dashes), the possessive or
# copula 's, symbols that say what a number counts (currencies, percent, degrees), clause breaks.
_TOKEN = regex.compile(r"'s\b|\d+(?:[.:/-]\d+)*|[\p{L}\p{M}]+|[\p{Sc}%°]|[,;:()\u2013\u2014]")
_DECIMAL = re.compile(r"\d+\.\d+")
_CLOCK = re.compile(r"\d+:\d+")
_CLAUSE_BREAKS = frozenset(",;:()\u2013\u2014")

_ARTICLES = frozenset({"a", "an", "the"})
# Who a fact is about when it (or one of its clauses) opens with it: the user, however the sentence names them.
_SUBJECTS = frozenset({"i", "we", "she", "he", "they", "user", "users", "'s"})
_POSSESSIVES = frozenset({"my", "our", "your", "his", "her", "their", "its"})
_SET_ASIDE = frozenset(
    {"is", "are", "am", "'s"}  # present-tense copula: "Is allergic" = "Allergic"
    | {"really", "very", "also", "too", "just", "actually", "indeed", "definitely", "truly", "quite"}
)
_NEGATIONS = frozenset({"not", "no", "never", "none", "nobody", "nothing", "nowhere", "neither", "nor", "without"})

_UNITS = {
    w: n
    for n, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
        "sixteen seventeen eighteen nineteen".split()
    )
}
_TENS = {w: 10 * n for n, w in enumerate("twenty thirty forty fifty sixty seventy eighty ninety".split(), 2)}
_SCALES = {"hundred": 100, "thousand": 1000, "million": 1_000_000}
# "second" is left out: "a second home" is not "2 home", nor "a second" two of anything.
_ORDINALS = {
    w: n
    for n, w in enumerate(
        "first _ third fourth fifth sixth seventh eighth ninth tenth eleventh twelfth thirteenth fourteenth "
        "fifteenth sixteenth seventeenth eighteenth nineteenth twentieth".split(),
        1,
    )
    if w != "_"
} | {"thirtieth": 30}
# Auxiliaries agree with the subject a fact may or may not name ("They have" / "Has"): one form each.
_AGREEMENT = {"have": "has", "do": "does", "were": "was"}
_MONTHS = {
    "jan": "january", "feb": "february", "mar": "march", "apr": "april", "jun": "june", "jul": "july",
    "aug": "august", "sep": "september", "sept": "september", "oct": "october", "nov": "november",
    "dec": "december",
}  # fmt: skip


def _number(token: str) -> str:
    """One spelling per value: no leading zeros, no trailing decimal zeros."""
    if token.isdecimal():
        return str(int(token))
    if _DECIMAL.fullmatch(token):
        whole, _, frac = token.partition(".")
        frac = frac.rstrip("0")
        return str(int(whole)) + (f".{frac}" if frac else "")
    if _CLOCK.fullmatch(token):
        hour, _, minute = token.partition(":")
        return f"{int(hour)}:{minute}"
    return token


def _words_to_numbers(tokens: list[str]) -> list[str]:
    """Number words as digits: "twenty one" -> "21", "two hundred" -> "200", "fifth" -> "5"."""
    out: list[str] = []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token in _ORDINALS:
            out.append(str(_ORDINALS[token]))
            i += 1
            continue
        if token not in _UNITS and token not in _TENS and token not in _SCALES:
            out.append(token)
            i += 1
            continue
        total, current = 0, 0
        while i < len(tokens):
            token = tokens[i]
            if token in _UNITS:
                current += _UNITS[token]
            elif token in _TENS:
                current += _TENS[token]
            elif token in _SCALES:
                scale = _SCALES[token]
                current = max(current, 1) * scale
                if scale >= 1000:
                    total, current = total + current, 0
            elif token == "and" and i + 1 < len(tokens) and (tokens[i + 1] in _UNITS or tokens[i + 1] in _TENS):
                pass  # "two hundred and five"
            else:
                break
            i += 1
        out.append(str(total + current))
    return out


@functools.lru_cache(maxsize=4096)
def dedup_key(text: str) -> tuple[str, ...]:
    """The words of ``text`` that say what it says, in order, each in one normal spelling."""
    text = unicodedata.normalize("NFKC", text).translate(_APOSTROPHES)
    # Upper then fold: every case variant of a text folds the same way (dotless i included).
    text = unicodedata.normalize("NFKC", text.upper().casefold())
    for pattern, spelled in _CONTRACTIONS:
        text = pattern.sub(spelled, text)
    text = _TIMES_OF_DAY.sub(r"\1m", text)
    text = _THOUSANDS.sub("", text)
    text = _ORDINAL_SUFFIX.sub("", text)
    tokens = [_MONTHS.get(t) or _AGREEMENT.get(t, t) for t in _TOKEN.findall(text)]
    tokens = [_number(t) if t[:1].isdigit() else t for t in _words_to_numbers(tokens)]
    kept: list[str] = []
    opening = True  # at the start of the text or of a clause: its subject is set aside
    for t in tokens:
        if t in _CLAUSE_BREAKS:
            opening = True
        elif opening and (t in _SUBJECTS or t in _POSSESSIVES):
            continue
        elif t in _POSSESSIVES:
            # "her" is also an object ("Tom owes her"): kept, one spelling for whoever's it is.
            kept.append("poss")
            opening = False
        elif t not in _ARTICLES and t not in _SET_ASIDE:
            kept.append(t)
            opening = False
    return tuple(kept)


def _one_phrase_moved(a: Sequence[str], b: Sequence[str]) -> bool:
    """``b`` is ``a`` with one run of words moved elsewhere (two adjacent runs swapped), no
    negation among the words that moved. Texts longer than ``_MOVES_UP_TO`` words must be equal."""
    n = len(a)
    if n != len(b) or n > _MOVES_UP_TO or sorted(a) != sorted(b):
        return False
    first = next(i for i in range(n) if a[i] != b[i])
    last = next(i for i in range(n - 1, -1, -1) if a[i] != b[i])
    # The swapped runs span a[i:k] for some i <= first and k > last (they may begin or end with
    # words that happen to stand at the same place in both).
    for i in range(first + 1):
        for k in range(last + 1, n + 1):
            left, right = list(a[i:k]), list(b[i:k])
            if _NEGATIONS.isdisjoint(left) and any(left[j:] + left[:j] == right for j in range(1, k - i)):
                return True
    return False


def restates(new: str, old: str) -> bool:
    """Whether ``new`` says what ``old`` says (see the module's docstring for the rule)."""
    a, b = dedup_key(new), dedup_key(old)
    return a == b or _one_phrase_moved(a, b)


@dataclass(frozen=True)
class Known:
    """A remembered fact a new one was compared with: its id and content, where it is, and how
    close in meaning the two are."""

    id: str
    content: str
    path: str
    line: int
    cosine: float


@dataclass(frozen=True)
class Verdict:
    """What became of one new fact: ``duplicate_of`` the remembered fact it restates, or
    ``repeats`` the index of an earlier fact of the same batch it restates; new otherwise.
    ``nearest`` is the closest remembered fact it does not restate (a correction's candidate)."""

    fact: Fact
    duplicate_of: Known | None = None
    repeats: int | None = None
    nearest: Known | None = None

    @property
    def new(self) -> bool:
        return self.duplicate_of is None and self.repeats is None


@dataclass(frozen=True)
class AddOutcome:
    """What became of a fact given to ``MemoryManager.remember``: ``fact`` as written (with its
    id), or None and ``duplicate_of`` the remembered fact it restates."""

    fact: Fact | None
    duplicate_of: Known | None = None

    @property
    def duplicate(self) -> bool:
        return self.fact is None


def screen(facts: Sequence[Fact], vectors: np.ndarray, nearest: Callable[[np.ndarray], list[Known]]) -> list[Verdict]:
    """A verdict for each fact, in order: a restatement of a remembered fact (among
    ``nearest(vector)``, best first) or of an earlier fact of the batch is a duplicate; anything
    else is new."""
    verdicts: list[Verdict] = []
    for i, (fact, vector) in enumerate(zip(facts, vectors)):
        earlier = next((j for j in range(i) if verdicts[j].new and restates(fact.content, facts[j].content)), None)
        if earlier is not None:
            verdicts.append(Verdict(fact, repeats=earlier))
            continue
        near = nearest(vector)
        same = next((known for known in near if restates(fact.content, known.content)), None)
        verdicts.append(Verdict(fact, duplicate_of=same, nearest=None if same or not near else near[0]))
    return verdicts
