"""Who said a fact, and whether a question names them.

A memory of a conversation often keeps each turn as one fact labelled with who said it:
"Melanie: I just signed up for a pottery class yesterday." A question about one of its people
names them ("What activities does Melanie partake in?"), and the answer is nearly always in
what that person said: in the LoCoMo development conversations, 95% of the evidence turns of
questions naming one of the two speakers were said by that speaker. Yet the name weighs almost
nothing in full-text scoring (half of the turns carry it, so its idf is tiny), and the other
speaker's turns that merely address the person ("Remember Jon, just do it!") share it as much.
:func:`speaker` reads a fact's label; :func:`named_speakers` says which labels a query names.

The rules, kept narrow so an ordinary fact is never read as said by someone:

- a label is one or two words, each starting with an upper-case letter and made of letters,
  apostrophes or hyphens, at the very start of the text, followed by a colon and a space, and
  at most ``MAX_LABEL_CHARS`` long ("Melanie: ...", "Mary Ann: ...", "José: ...");
- a query names a label when the label's words appear in it, in the same case, as whole words
  (a possessive "Melanie's" names Melanie), anywhere but as the query's first word: a question
  begins with a capital whatever its first word is, so "Note: ..." is not named by "Note the
  date?", while "Which books has Note read?" would be.
"""

from __future__ import annotations

import functools
import re

__all__ = ["MAX_LABEL_CHARS", "may_name", "named_speakers", "speaker"]

MAX_LABEL_CHARS = 40

_NAME_WORD = r"[^\W\d_][^\W\d_'’-]*(?:['’-][^\W\d_]+)*"
_LABEL = re.compile(rf"({_NAME_WORD}(?: {_NAME_WORD})?): ")
_WORD = re.compile(r"[^\W\d_]+(?:[-][^\W\d_]+)*")
# Texts up to this long have their label memoised: a search reads the labels of the same few
# hundred rows query after query; a longer text is read each time, so the memo holds no huge one.
_MEMO_CHARS = 2000


def speaker(text: str) -> str | None:
    """The label of who said ``text`` ("Melanie" for "Melanie: I painted a sunset."), or None
    when it starts with none (the module's rules)."""
    if len(text) > _MEMO_CHARS:
        return _speaker.__wrapped__(text)
    return _speaker(text)


@functools.lru_cache(maxsize=1 << 16)
def _speaker(text: str) -> str | None:
    match = _LABEL.match(text)
    if match is None or len(match.group(1)) > MAX_LABEL_CHARS:
        return None
    label = match.group(1)
    if not all(word[0].isupper() for word in label.split(" ")):
        return None
    return label


def may_name(query: str) -> bool:
    """Whether ``query`` could name a speaker at all: a word after its first starts with an
    upper-case letter. Most queries of an agent have none, and need no label read."""
    return any(word[0].isupper() for word in _WORD.findall(query)[1:])


def named_speakers(query: str, labels: set[str]) -> set[str]:
    """The ``labels`` (as :func:`speaker` reads them) that ``query`` names: each of a label's
    words appears in the query in the same case, after its first word, in the label's order."""
    words = _WORD.findall(query)[1:]
    if not words or not labels:
        return set()
    said = " ".join(words)
    return {label for label in labels if re.search(rf"(?<!\w){re.escape(label)}(?!\w)", said)}
