"""The user's key facts: the summary of their most important facts that the ``facts`` core block
and MEMORY.md's "Key facts" region hold, refreshed when an important fact is remembered.

The summary is asked of the model *before* the write's change group opens, from the facts the
user has plus the ones about to be written that the index does not know yet (:class:`KeyFactsAhead`;
a restated important fact asks nothing): inside the group the home's writer turn would be held
for the model's seconds, and every other agent's write would wait, past ``lock_wait_s`` refused.
Inside the group the summariser's input is read again from the files as written; when it is the
input the summary was made from, the summary is written there (the turn's facts and their summary
one commit, one ``git revert``). When it is not (another writer got in between, the screening in
the group judged a fact otherwise, the day changed), the summary made ahead would be wrong:
nothing is written from it, and the refresh is made again after the group, as a commit of its own
(:attr:`KeyFactsAhead.due`). That refresh is asked before its own group too, and written only if
its input still holds there (else asked again), so a summary never lands over facts it was not
made from. Being a change of its own, it can fail (logged) or be cut short by a killed process
after the facts' commit: the key facts then stay as they were until the next refresh.
:class:`KeyFacts` does all this for MemoryManager; the rest here is pure.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import logging
import sys
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from ..config import Settings
from ..errors import BlockLimitError, ConflictError, ExtractionError, InvalidInputError, ParseError, SyncdError
from ..formats import Fact, decode_markdown
from ..history.intents import Intent
from ..home import check_text, read_memory_file
from .backend import MemoryBackend
from .blocks import render_block
from .screening import Screening
from .store import MarkdownMemoryStore

__all__ = [
    "SUMMARY_INPUT_FACTS",
    "KeyFacts",
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
# How often a refresh asks the model again when the facts it summarised changed meanwhile (each
# change being another writer's commit, three in a row while one model call runs is a storm).
REFRESH_ATTEMPTS = 3
# What stops a summary, never the facts that call for it: written in their group, it is tried
# before either of its files is written (KeyFacts.write).
UNWRITABLE = (BlockLimitError, ParseError, InvalidInputError)

log = logging.getLogger(__name__)


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


class KeyFacts:
    """The key facts of one manager's users (the module doc tells the story). ``store(user)`` is
    the user's MarkdownMemoryStore, ``summarise(lines)`` the model's checked summary,
    ``write_block(user, summary, intent)`` writes the user's ``facts`` block and ``intent(user)``
    is a refresh's provenance: the manager's own, so the commits read as before."""

    def __init__(
        self,
        engine: MemoryBackend,
        settings: Settings,
        screening: Screening,
        *,
        store: Callable[[str], MarkdownMemoryStore],
        clock: Callable[[], dt.datetime],
        summarise: Callable[[Sequence[str]], Awaitable[str]],
        write_block: Callable[[str, str, Intent], object],
        intent: Callable[[str], Intent],
    ):
        self.engine = engine
        self.home = engine.home
        self.settings = settings
        self.screening = screening
        self.store = store
        self.clock = clock
        self.summarise = summarise
        self.write_block = write_block
        self.intent = intent

    def input(self, user: str, to_write: Sequence[Fact] = ()) -> tuple[str, ...]:
        """The summariser's input: the user's facts as their logs hold them, and ``to_write`` as
        they will read once appended to today's log (after every line there)."""
        facts = [(s.fact, s.date, s.line) for s in self.store(user).iter_facts()]
        today = self.clock().date().isoformat()
        facts += [(fact, today, sys.maxsize - len(to_write) + n) for n, fact in enumerate(to_write)]
        return summary_input(facts)

    async def ahead(self, facts: Sequence[Fact], user: str, dedup: bool) -> KeyFactsAhead | None:
        """See MemoryManager.key_facts_ahead."""
        threshold = self.settings.core_refresh_importance
        if not any_important(facts, threshold):
            return None
        if dedup:
            facts = [v.fact for v in await asyncio.to_thread(self.screening.screen, facts, user) if v.new]
            if not any_important(facts, threshold):
                return KeyFactsAhead(user, (), None, asked=False)
        lines = await asyncio.to_thread(self.input, user, facts)
        try:
            summary: str | None = await self.summarise(lines)
        except ExtractionError as exc:
            # The facts are written all the same; a stale summary is refreshed next time.
            log.warning("the key facts of %s will not be refreshed: %s", user, exc)
            summary = None
        return KeyFactsAhead(user, lines, summary)

    async def of_own(self, facts: Sequence[Fact], user: str, dedup: bool) -> KeyFactsAhead | Literal["inside"] | None:
        """:meth:`ahead` for a write that opens its own group; "inside" in a caller's group,
        which holds the writer's turn already: the refresh is then made inside it."""
        if self.engine.in_change_group():
            return "inside"
        return await self.ahead(facts, user, dedup)

    async def in_group(
        self, ahead: KeyFactsAhead | Literal["inside"] | None, written: Sequence[Fact], user: str
    ) -> None:
        """Inside the group, once ``written`` are: the summary made ahead is written if its input
        is still what the files say, else marked due (made after the group). "inside": the write
        is nested in a caller's group that asked nothing ahead, so the model is asked here, inside
        that group, as its caller chose."""
        if not any_important(written, self.settings.core_refresh_importance):
            return
        if ahead == "inside":
            try:
                await self.refresh(user)
            except (ExtractionError, *UNWRITABLE) as exc:
                # The facts themselves are safely written; a stale summary is refreshed next time.
                log.warning("facts of %s remembered, but the core summary was not refreshed: %s", user, exc)
            return
        if ahead is None:
            return
        if ahead.summary is None:
            ahead.due = not ahead.asked  # a fact that looked remembered was not: made after the group
            return
        try:
            if not await asyncio.to_thread(self.write_if_current, ahead.user, ahead.lines, ahead.summary):
                ahead.due = True  # another write got in between, or the day changed
        except UNWRITABLE as exc:
            log.warning("facts of %s remembered, but the key facts were not refreshed: %s", ahead.user, exc)

    async def after(self, ahead: KeyFactsAhead | Literal["inside"] | None) -> None:
        """See MemoryManager.key_facts_after."""
        if not (isinstance(ahead, KeyFactsAhead) and ahead.due):
            return
        try:
            await self.refresh(ahead.user)
        except SyncdError as exc:
            # The group's facts are committed: no refusal of this change of its own (the home
            # held past lock_wait_s, git busy, ...) may report the write of them failed.
            log.warning("facts of %s remembered, but the key facts were not refreshed: %s", ahead.user, exc)

    def write_if_current(self, user: str, lines: Sequence[str], summary: str) -> bool:
        """Inside a change group (the writer's turn, which every agent's write of facts takes):
        write ``summary`` if the summariser's input read now from the files is ``lines``, the input
        it was made from. False, nothing written, when the facts changed since that read: a
        summary made without a fact committed meanwhile must never overwrite the one with it."""
        if self.input(user) != tuple(lines):
            return False
        self.write(user, summary)
        return True

    def write(self, user: str, summary: str) -> None:
        """The ``facts`` block and MEMORY.md's Key facts region, both tried on the files as they
        are before either is written: a block over its limit (BlockLimitError), a file syncd
        cannot rewrite (ParseError: not UTF-8, a symbolic link) leaves neither half written, so
        a write of facts can go on without its summary (:data:`UNWRITABLE`)."""

        def current(rel: str) -> str | None:
            data = read_memory_file(self.home.root, rel)
            return None if data is None else decode_markdown(data, rel)

        render_block(current(self.home.rel(self.home.block_path("facts", user))), "facts", summary, self.settings)
        memory = current(self.home.rel(self.home.memory_md_path(user))) or ""
        check_text("MEMORY.md", with_key_facts(memory, user, summary), multiline=True, existing=memory)
        intent = self.intent(user)
        self.write_block(user, summary, intent)
        self.store(user).write_memory_file(lambda text: with_key_facts(text, user, summary), intent=intent)

    async def refresh(self, user: str) -> str | None:
        """See MemoryManager.refresh_core_memory_facts."""
        for _ in range(REFRESH_ATTEMPTS):
            lines = await asyncio.to_thread(self.input, user)
            if not lines:
                return None
            summary = await self.summarise(lines)
            async with self.engine.changes():
                if await asyncio.to_thread(self.write_if_current, user, lines, summary):
                    return summary
            log.info("the facts of %s changed while their summary was made: it is not written", user)
        now = await asyncio.to_thread(self.input, user)
        raise ConflictError(self.home.rel(self.home.user_dir(user)), input_digest(lines), input_digest(now))
