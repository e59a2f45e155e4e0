"""The user's key facts: the summary of their most important facts that the ``facts`` core block
and MEMORY.md's "Key facts" region hold, refreshed when an important fact is remembered.

The summary is asked of the model *before* the write's change group opens, from the facts the
user has plus the ones about to be written (:class:`KeyFactsAhead`): inside the group the home's
writer turn would be held for the model's seconds, and every other agent's write would wait, past
``lock_wait_s`` refused. Inside the group the summariser's input is read again from the files as
written; when it is the input the summary was made from, the summary is written there (the turn's
facts and their summary one commit, one ``git revert``). When it is not (another writer got in
between, a fact turned out to be a duplicate, the day changed), the summary made ahead would be
wrong: nothing is written from it, and the refresh is made again after the group, as a commit of
its own (:attr:`KeyFactsAhead.due`). That refresh is asked before its own group too, and written
only if its input still holds there (else asked again), so a summary never lands over facts it
was not made from. Being a change of its own, it can fail (logged) or be cut short by a killed
process after the facts' commit: the key facts then stay as they were until the next refresh.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..formats import Fact

__all__ = [
    "SUMMARY_INPUT_FACTS",
    "KeyFactsAhead",
    "any_important",
    "importance",
    "input_digest",
    "summary_input",
    "with_key_facts",
]

_FACTS_BEGIN = "<!-- syncd:facts:begin -->"
_FACTS_END = "<!-- syncd:facts:end -->"
# Facts handed to the summariser: the most important first; beyond this the profile is full anyway.
SUMMARY_INPUT_FACTS = 80


def importance(fact: Fact) -> float:
    """A hand-written fact has no importance: it ranks as an ordinary one (the index does the same)."""
    return 0.5 if fact.importance is None else fact.importance


def summary_input(facts: Iterable[tuple[Fact, str, int]]) -> tuple[str, ...]:
    """The summariser's input lines from ``(fact, its log's date, its line)``: the most important
    first (then the newest), at most :data:`SUMMARY_INPUT_FACTS`."""
    ranked = sorted(facts, key=lambda f: (importance(f[0]), f[1], f[2]), reverse=True)
    return tuple(
        f"- [{fact.category}] {fact.content} (importance {importance(fact):.1f}, {date})"
        for fact, date, _ in ranked[:SUMMARY_INPUT_FACTS]
    )


def input_digest(lines: Sequence[str]) -> str:
    """A short name of a summariser's input, for the error that says it changed."""
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:12]


@dataclass
class KeyFactsAhead:
    """A refresh of one user's key facts, asked before the write that calls for it.

    ``lines`` is the input the summary was made from (the user's facts and the ones to be
    written, as they will read once written); ``summary`` the model's answer, None when it could
    not be had (no model configured, a failed call, an unusable reply: logged, the facts are
    written all the same, and the key facts stay as they were until the next refresh). Not
    ``asked``: the model was not asked, the important facts all looked remembered already.
    ``due``, set inside the group, says the refresh is still to be made."""

    user: str
    lines: tuple[str, ...]
    summary: str | None
    asked: bool = True
    due: bool = False


def with_key_facts(text: str, user_id: str, summary: str) -> str:
    """MEMORY.md with the syncd-managed "Key facts" region replaced; everything else stays as the
    person wrote it."""
    # The section's own markers quoted in the summary (from a fact) would end it early next time:
    # escaped, they read the same in any markdown view and mark nothing.
    for marker in (_FACTS_BEGIN, _FACTS_END):
        summary = summary.replace(marker, "&lt;" + marker.removeprefix("<"))
    section = f"{_FACTS_BEGIN}\n## Key facts\n\n{summary.rstrip()}\n{_FACTS_END}\n"
    begin, end = text.find(_FACTS_BEGIN), text.find(_FACTS_END)
    if begin != -1 and end > begin:
        tail = text[end + len(_FACTS_END) :]
        return text[:begin] + section + tail.removeprefix("\n")
    if not text.strip():
        return f"# Memory of {user_id}\n\n{section}"
    return text.rstrip("\n") + "\n\n" + section


def any_important(facts: Sequence[Fact], threshold: float) -> bool:
    """Whether one of ``facts`` is important enough to refresh the key facts."""
    return any(f.importance is not None and f.importance >= threshold for f in facts)
