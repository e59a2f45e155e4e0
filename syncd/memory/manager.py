"""MemoryManager (seed API): what an agent calls to remember, recall and curate.

Every write is a markdown write through the backend (compare-and-swap, with an Intent that
becomes the commit's author and trailers); nothing goes straight into LanceDB. One call is one
change group: a turn's facts, the ``facts`` block and MEMORY.md they refresh land in one commit,
so one ``git revert`` undoes the whole turn (the model is asked for that refresh before the group;
when the facts changed meanwhile it is made again after it, a commit of its own: see key_facts.py).
Methods are async because agents are; the blocking
work (files, git, embedding) runs in worker threads so the caller's event loop keeps serving. When
a method returns after a write, the write is indexed and committed: a search right after it finds
it, whether this process holds the writer lock, borrows it for the change, or a daemon holds it.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ..config import Settings
from ..engine.asof import past_files
from ..engine.search import DEFAULT_LIMIT, search
from ..errors import (
    ConflictError,
    ExtractionError,
    InvalidInputError,
    NotFoundError,
)
from ..formats import Fact, decode_markdown, encode_markdown, parse_page
from ..history.intents import Intent
from ..home import Home, check_fact_content, check_query, check_text, validate_id, validate_label
from .backend import MemoryBackend
from .blocks import CORE_LABELS, CoreBlock, format_blocks, read_block, render_block, resolve_blocks
from .dedup import AddOutcome, Verdict
from .extraction import (
    ConversationTurn,
    ExtractedTurn,
    as_turn,
    extract_facts,
    summarise_facts,
    wrap_injected,
)
from .key_facts import KeyFacts, KeyFactsAhead
from .prompts import PROMPT_VERSION
from .screening import Screening
from .store import Clock, MarkdownMemoryStore, StoredFact, local_now
from .writer import MarkdownWriter

if TYPE_CHECKING:
    from ..index.search import Hit

__all__ = ["MemoryManager", "EPHEMERAL_LOOP"]

log = logging.getLogger(__name__)

# Set while a coroutine runs on a throwaway loop (asyncio.run in a tool call), so the manager does
# not adopt that loop as "its" loop: other threads would then schedule work on a loop about to close.
EPHEMERAL_LOOP: contextvars.ContextVar[bool] = contextvars.ContextVar("syncd_ephemeral_loop", default=False)

_RECALL_LINE_CHARS = 300
_COMMENT_RE = re.compile(r"<!--.*?-->", re.DOTALL)


def _tag_words(tags: Iterable[str]) -> tuple[str, ...]:
    """The tags as given; one string is refused (Fact's own rule), not spelled out as one-letter
    tags (``tags="tea"`` once tagged a fact `t e a`)."""
    if isinstance(tags, str):
        raise InvalidInputError("tags must be a sequence of words, not one string")
    return tuple(tags)


def _token(value: str) -> str:
    """A metadata value is one whitespace-free token without comment delimiters."""
    return "_".join(value.replace("<!--", "").replace("-->", "").split()) or "unknown"


def _check_generated(what: str, text: str, multiline: bool) -> None:
    """The LLM's text is checked as a caller's would be, but a bad reply is the model's fault, not
    the caller's: ExtractionError, as for any unusable reply (all or nothing, nothing written)."""
    try:
        check_text(f"the LLM {what}", text, multiline=multiline)
    except InvalidInputError as exc:
        raise ExtractionError(str(exc)) from None


class MemoryManager:
    """Remember, recall and curate one home's memory on behalf of agents.

    ``MemoryManager(home)`` opens the home itself, holding no lock between calls: each write takes
    the home lock for its change (waiting for another process's change to end), or hands the
    write to the daemon when one holds the home. ``MemoryManager(engine)`` shares an open engine
    (any MemoryBackend; a ``syncd.open(home)`` engine holds the lock for its whole life). ``llm_options`` are passed into every litellm call (api_base, api_key, ...),
    ``job_llm_options["extract"]`` / ``["summarise"]`` into that job's calls only (a cheaper model
    for one, ``max_tokens``, or in tests litellm's own ``mock_response``).
    Methods taking ``user_id=None`` act for ``default_user_id``, never for everyone; the one
    exception is the seed's ``update_memory_block(label, content)`` with neither user nor chat,
    which writes the global block.
    """

    def __init__(
        self,
        home_or_engine: MemoryBackend | Home | Path | str | None = None,
        settings: Settings | None = None,
        *,
        embedder: Any = None,
        llm_options: Mapping[str, Any] | None = None,
        job_llm_options: Mapping[str, Mapping[str, Any]] | None = None,
        default_user_id: str = "default",
        author: str = "syncd-agent",
        clock: Clock = local_now,
    ):
        if home_or_engine is None or isinstance(home_or_engine, (Home, Path, str)):
            # The one import of the engine from memory, and one way: the engine never imports us.
            from ..engine.facade import open_engine
            from ..wiki.store import follow_index

            root = home_or_engine.root if isinstance(home_or_engine, Home) else home_or_engine
            engine = open_engine(root, read_only=True, settings=settings, embedder=embedder)
            follow_index(engine)  # its writes, indexed here when no daemon holds the home
            self.engine: MemoryBackend = engine
            self._owns_engine = True
        else:
            self.engine = home_or_engine
            self._owns_engine = False
        self.settings = settings or self.engine.settings
        self.home = self.engine.home
        self.llm_options = dict(llm_options or {})
        self.job_llm_options = {job: dict(opts) for job, opts in (job_llm_options or {}).items()}
        self.default_user_id = validate_id("user", default_user_id)
        self.author = author
        self.clock = clock
        self.writer = MarkdownWriter(self.engine)
        self._loop: asyncio.AbstractEventLoop | None = None
        self.screening = Screening(self.engine, self.settings)
        self.key_facts = KeyFacts(
            self.engine,
            self.settings,
            self.screening,
            store=lambda user: self.store(user_id=user),
            clock=lambda: self.clock(),
            summarise=self._summarise,
            write_block=lambda user, summary, intent: self._write_block("facts", summary, None, user, intent),
            intent=self._key_facts_intent,
        )

    # -- lifecycle -------------------------------------------------------------------------------

    def close(self) -> None:
        if self._owns_engine:
            self.engine.close()

    def __enter__(self) -> MemoryManager:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        """The event loop this manager was last awaited on (the agent's loop), if still open."""
        loop = self._loop
        return loop if loop is not None and not loop.is_closed() else None

    def _enter(self) -> None:
        if not EPHEMERAL_LOOP.get():
            self._loop = asyncio.get_running_loop()

    def _user(self, user_id: str | None) -> str:
        return validate_id("user", self.default_user_id if user_id is None else user_id)

    @staticmethod
    def _chat(chat_id: str | None) -> str | None:
        return None if chat_id is None else validate_id("chat", chat_id)

    def users(self) -> list[str]:
        """Users with a memory folder in this home, sorted (folders whose name is not a valid id
        belong to nobody and are left out, as the index leaves them out)."""
        folder = self.home.memory_dir / "users"
        if not folder.is_dir():
            return []
        found = []
        for item in folder.iterdir():
            try:
                found.append(validate_id("user", item.name))
            except ValueError:
                continue
        return sorted(name for name in found if (folder / name).is_dir() and not (folder / name).is_symlink())

    def store(self, *, user_id: str | None = None) -> MarkdownMemoryStore:
        """The MarkdownMemoryStore of a user, sharing this manager's serialised writer."""
        return MarkdownMemoryStore(
            self.engine, self._user(user_id), writer=self.writer, clock=self.clock, author=self.author
        )

    def _llm_options(self, job: str) -> dict[str, Any]:
        return {**self.llm_options, **self.job_llm_options.get(job, {})}

    def _intent(self, summary: str, user: str | None, chat: str | None = None, **provenance: Any) -> Intent:
        return Intent(author=self.author, summary=summary, user=user, chat=chat, **provenance)

    # -- core memory -----------------------------------------------------------------------------

    def core_blocks(
        self, *, chat_id: str | None = None, user_id: str | None = None, at: str | None = None
    ) -> dict[str, CoreBlock]:
        """Blocks with where each came from (chat > user > global > default); with ``at``, as
        that commit left them (a revision git names or a date, as syncd.engine.asof reads it)."""
        user, chat = self._user(user_id), self._chat(chat_id)
        if at is None:
            return resolve_blocks(self.home, self.settings, user, chat)
        scopes = [(None, None)] + ([(user, None)] if user else []) + ([(user, chat)] if user and chat else [])
        folders = [self.home.rel(self.home.block_path(CORE_LABELS[0], u, c).parent) for u, c in scopes]
        with past_files(self.home, at, folders) as past:
            return resolve_blocks(past, self.settings, user, chat)

    async def get_core_memory(
        self, chat_id: str | None = None, user_id: str | None = None, at: str | None = None
    ) -> dict[str, str]:
        """``{label: text}`` of persona, user, facts, context (and any other block on disk);
        with ``at``, as that past commit left them."""
        self._enter()
        blocks = await asyncio.to_thread(lambda: self.core_blocks(chat_id=chat_id, user_id=user_id, at=at))
        return {label: block.content for label, block in blocks.items()}

    def _write_block(
        self, label: str, content: str, chat: str | None, user: str | None, intent: Intent, expected: str | None = None
    ) -> CoreBlock:
        rel = self.home.rel(self.home.block_path(label, user, chat))

        def change(current: bytes | None) -> bytes:
            text = None if current is None else decode_markdown(current, rel)
            if expected is not None:
                found = "" if text is None else parse_page(text).body.strip()
                if found != expected.strip():
                    raise ConflictError(rel, expected, found)
            return encode_markdown(render_block(text, label, content, self.settings))

        self.writer.update(rel, change, intent)
        return read_block(self.home, self.settings, label, user, chat)

    def _edit_block(
        self, label: str, edit: Callable[[str], str], chat: str | None, user: str | None, intent: Intent
    ) -> CoreBlock:
        rel = self.home.rel(self.home.block_path(label, user, chat))

        def change(current: bytes | None) -> bytes:
            # Run on every compare-and-swap attempt, so a retry edits the text that is there now.
            text = None if current is None else decode_markdown(current, rel)
            body = "" if text is None else parse_page(text).body.strip()
            if not body:
                # An empty scope file shows the next scope's block (chat > user > global); the
                # edit starts from that, as the person reading the block sees it.
                seen = read_block(self.home, self.settings, label, user, chat)
                body = seen.content if seen.scope != "default" else ""
            new = check_text(f"block {label!r}", edit(body), multiline=True, existing=body)
            return encode_markdown(render_block(text, label, new, self.settings))

        # One change group from the read to the write: writers of this process take turns, and
        # without a daemon other processes wait for the home lock, so the swap rarely retries.
        # Opened in this worker thread, not with ``async with`` on the loop: a group holding the
        # turn there would need a second worker to finish while others wait for the turn in theirs.
        with self.engine.changes(intent):
            self.writer.update(rel, change, intent)
        return read_block(self.home, self.settings, label, user, chat)

    def _block_scope(self, scope: str, chat_id: str | None, user_id: str | None) -> tuple[str, str | None, str | None]:
        """(scope, user, chat) of the file a block write goes to; see update_memory_block."""
        chat = self._chat(chat_id)
        if scope == "auto":
            scope = "chat" if chat is not None else "user" if user_id is not None else "global"
        if scope not in ("chat", "user", "global"):
            raise InvalidInputError(f"scope must be auto, chat, user or global, not {scope!r}")
        if scope == "chat" and chat is None:
            raise InvalidInputError("a chat-scoped block needs its chat_id")
        user = None if scope == "global" else self._user(user_id)
        return scope, user, chat if scope == "chat" else None

    async def update_memory_block(
        self,
        label: str,
        content: str,
        chat_id: str | None = None,
        user_id: str | None = None,
        *,
        scope: str = "auto",
        expected: str | None = None,
    ) -> CoreBlock:
        """Replace a block's text. ``scope`` "auto" writes the chat's block when ``chat_id`` is
        given, else the user's when ``user_id`` is, else (neither, as in the seed) the global
        block; "chat", "user" and "global" say so explicitly. Raises BlockLimitError (nothing
        written) when ``content`` is over the block's limit. With ``expected`` (the text the
        caller last saw in that scope's file, "" for none), ConflictError if it changed meanwhile."""
        self._enter()
        validate_label(label)
        if not isinstance(content, str):
            raise TypeError(f"block content must be a str, not {type(content).__name__}")
        check_text(f"block {label!r}", content, multiline=True)
        scope, user, chat = self._block_scope(scope, chat_id, user_id)
        intent = self._intent(f"Update core block {label} ({scope})", user, chat)
        return await asyncio.to_thread(self._write_block, label, content, chat, user, intent, expected)

    async def edit_memory_block(
        self,
        label: str,
        edit: Callable[[str], str],
        chat_id: str | None = None,
        user_id: str | None = None,
        *,
        scope: str = "auto",
    ) -> CoreBlock:
        """Change a block's text to ``edit(current)``, read-modify-write: ``current`` is the text
        of that scope's file, or when it is absent or empty the block as this user (in this chat)
        sees it now, the built-in default counting as empty. ``edit`` runs again on the new text
        whenever someone else wrote the file between our read and our write, so concurrent edits
        all apply (N appends leave N lines); it may raise (InvalidInputError, ConflictError) to
        write nothing when the text it needs is gone. ``scope`` as in update_memory_block;
        BlockLimitError when the result is over the limit, InvalidInputError when it adds
        control characters (other than tab and newline)."""
        self._enter()
        validate_label(label)
        if not callable(edit):
            raise TypeError(f"edit must be a function of the current text, not {type(edit).__name__}")
        scope, user, chat = self._block_scope(scope, chat_id, user_id)
        intent = self._intent(f"Update core block {label} ({scope})", user, chat)
        return await asyncio.to_thread(self._edit_block, label, edit, chat, user, intent)

    async def format_core_memory_for_context(self, chat_id: str | None = None, user_id: str | None = None) -> str:
        """The core blocks as prompt text, with where the memory workspace lives, wrapped in
        markers that extraction strips (so they are never remembered as new facts)."""
        self._enter()
        user, chat = self._user(user_id), self._chat(chat_id)
        blocks = await asyncio.to_thread(lambda: self.core_blocks(chat_id=chat, user_id=user))
        udir = f"memory/users/{user}"
        lines = [
            f"Your memory workspace is {self.home.root} (plain markdown files, kept in git).",
            f"Daily fact logs: {udir}/YYYY-MM-DD.md; long-term memory: {udir}/MEMORY.md;",
            f"core blocks: {udir}/core/<label>.md"
            + (f" and, for this chat, {udir}/chats/{chat}/core/<label>.md." if chat else "."),
            "",
            format_blocks(blocks),
        ]
        return wrap_injected("core", "\n".join(lines))

    # -- recall ----------------------------------------------------------------------------------

    async def search_memories(
        self,
        query: str,
        limit: int = DEFAULT_LIMIT,
        chat_id: str | None = None,
        user_id: str | None = None,
        use_hybrid: bool = True,
        kind: str | None = None,
        include_wiki: bool = False,
        at: str | None = None,
    ) -> list[Hit]:
        """Best hits in the user's memory (facts, MEMORY.md, blocks: theirs, this chat's and the
        global ones; the wiki too with ``include_wiki``): the one search every front end makes
        (:mod:`syncd.engine.search`, its defaults and its relevance floor), for this user. Without
        ``use_hybrid`` only the semantic score (plus importance and recency) ranks them. ``at``:
        as a past commit left the memory (syncd.engine.asof). An unrelated query finds nothing;
        an empty one raises QueryError."""
        self._enter()
        user, chat = self._user(user_id), self._chat(chat_id)
        check_query(query)
        return await asyncio.to_thread(
            lambda: search(
                self.engine,
                query,
                user_id=user,
                chat_id=chat,
                limit=limit,
                kind=kind,
                include_wiki=include_wiki,
                hybrid=use_hybrid,
                settings=self.settings,
                at=at,
            )
        )

    async def retrieve_relevant_memories(
        self, query: str, chat_id: str | None = None, user_id: str | None = None, limit: int = 5
    ) -> str:
        """One line per relevant memory, wrapped in markers, ready to put into a prompt ("" if
        nothing is relevant, and for an empty message, to which nothing is). Relevant is the one
        search's floor (syncd.engine.search.relevance_floor, ``Settings.search_floor``): the user's
        memory answers the message at all, by meaning closer than chance in a memory of its size
        or by its rare words; "what does she drink?" finds "Likes green tea.", "Tuesday" or an
        off-topic question finds nothing."""
        if not isinstance(query, str) or not query.strip():
            self._user(user_id)  # bad ids are refused all the same
            self._chat(chat_id)
            return ""
        hits = await self.search_memories(query, limit * 2, chat_id, user_id)
        lines = []
        # Core blocks are already in the prompt (format_core_memory_for_context): not again here.
        for hit in [h for h in hits if h.source != "block"][:limit]:
            text = " ".join(_COMMENT_RE.sub(" ", hit.content).split())
            if not text:
                continue
            if len(text) > _RECALL_LINE_CHARS:
                text = text[: _RECALL_LINE_CHARS - 1] + "…"
            when = f" ({hit.created_at[:10]})" if hit.created_at else ""
            label = f"[{hit.category}] " if hit.category else ""
            lines.append(f"- {label}{text}{when}")
        return wrap_injected("recall", "\n".join(lines)) if lines else ""

    # -- remembering -----------------------------------------------------------------------------

    def _remember(
        self,
        facts: Sequence[Fact],
        user: str,
        chat: str | None,
        session: str | None,
        intent_for: Callable[[int], Intent],
        verdicts: list[Verdict] | None,
    ) -> tuple[list[Fact], list[Verdict]]:
        """Write the new ones among ``facts`` as one section; ``intent_for(n)`` describes n facts.
        Returns the facts written and the verdict on each of ``facts`` (``verdicts`` from
        :meth:`Screening.screened`; None: screened here, inside the change group, whose turn makes
        check-then-write atomic)."""
        verdicts = self.screening.screen(facts, user) if verdicts is None else verdicts
        new = [v.fact for v in verdicts if v.new]
        if not new:
            return [], verdicts
        store = self.store(user_id=user)
        return store.append_daily_log(chat, new, session_id=session, intent=intent_for(len(new))), verdicts

    async def add_memory(
        self,
        content: str,
        user_id: str | None = None,
        chat_id: str | None = None,
        *,
        category: str = "context",
        importance: float = 0.5,
        tags: Iterable[str] = (),
        session_id: str | None = None,
        dedup: bool = True,
    ) -> Fact | None:
        """Remember one fact (one section of today's log, one commit, which the key facts an
        important fact refreshes join, or follow: key_facts.py). Returns it with its id, or
        None when it restates a fact already remembered (:meth:`remember` says which one). A
        correction (another number, date, name, negation...) is a new fact. Whitespace (line
        breaks and tabs too) folds into single spaces; InvalidInputError (nothing written) for any
        other control character."""
        outcome = await self.remember(
            content, user_id, chat_id, category=category, importance=importance, tags=tags,
            session_id=session_id, dedup=dedup,
        )  # fmt: skip
        return outcome.fact

    async def remember(
        self,
        content: str,
        user_id: str | None = None,
        chat_id: str | None = None,
        *,
        category: str = "context",
        importance: float = 0.5,
        tags: Iterable[str] = (),
        session_id: str | None = None,
        dedup: bool = True,
    ) -> AddOutcome:
        """:meth:`add_memory`, saying what became of the fact: ``outcome.fact`` as written, or
        None and ``outcome.duplicate_of`` the remembered fact it restates (id, content, path,
        line), which the caller can update instead (:meth:`update_memory`). With ``dedup=False``
        the fact is written whatever is remembered."""
        self._enter()
        user, chat = self._user(user_id), self._chat(chat_id)
        session = None if session_id is None else validate_id("session", session_id)
        # Line breaks and tabs fold into spaces below (a fact is one line); other controls refused.
        check_fact_content(content, multiline=True)
        fact = Fact(
            content=" ".join(content.split()),
            category=category,
            tags=_tag_words(tags),
            importance=importance,
            source_session=session,
        )
        intent = self._intent(f"Remember: {fact.content[:60]}", user, chat, session=session)
        key_facts = await self.key_facts.of_own([fact], user, dedup)
        async with self.screening.screened([fact], user, dedup) as screened, self.engine.changes(intent):
            written, verdicts = await asyncio.to_thread(
                self._remember, [fact], user, chat, session, lambda _: intent, screened
            )
            if not written:
                return AddOutcome(None, verdicts[0].duplicate_of)
            await self.key_facts.in_group(key_facts, written, user)
        await self.key_facts.after(key_facts)
        return AddOutcome(written[0], None)

    async def process_conversation_turn_for_memories(
        self,
        turn: ConversationTurn | Mapping | Sequence[Mapping] | str,
        chat_id: str | None = None,
        user_id: str | None = None,
        *,
        session_id: str | None = None,
        transcript_line: int | None = None,
    ) -> list[Fact]:
        """Extract facts from one turn (user message, agent steps, response) and remember the new
        ones as one section of today's log, one commit with the turn's provenance: the two
        halves, :meth:`extract_turn` then :meth:`remember_extracted`.
        Raises ExtractionError (nothing written) when no LLM is configured or its reply is
        unusable. Returns the facts written (empty when there was nothing new).
        """
        self._enter()
        user, chat = self._user(user_id), self._chat(chat_id)
        if session_id is not None:
            validate_id("session", session_id)
        extracted = await self.extract_turn(turn)
        return await self.remember_extracted(
            extracted, chat, user, session_id=session_id, transcript_line=transcript_line
        )

    async def extract_turn(self, turn: ConversationTurn | Mapping | Sequence[Mapping] | str) -> ExtractedTurn:
        """Ask the LLM what facts one turn holds, and embed them (into the embedding cache), writing
        nothing and taking no lock: a caller that records the turn inside a change group (a
        session's runner) asks before the group opens, so the home's writer turn is never held
        while a model answers (other agents' writes would wait the model's seconds, and past
        ``lock_wait_s`` be refused). ExtractionError when no LLM is configured or its reply is
        unusable."""
        self._enter()
        parsed = as_turn(turn)
        facts, model = await extract_facts(self.settings, parsed, self._llm_options("extract"))
        for fact in facts:
            _check_generated("extraction reply", fact.content, multiline=False)
        if facts:
            await asyncio.to_thread(self.engine.embed, [f.content for f in facts])
        return ExtractedTurn(parsed, tuple(facts), model)

    async def remember_extracted(
        self,
        extracted: ExtractedTurn,
        chat_id: str | None = None,
        user_id: str | None = None,
        *,
        session_id: str | None = None,
        transcript_line: int | None = None,
        turn_ref: str | None = None,
        key_facts: KeyFactsAhead | Literal["ask"] | None = "ask",
    ) -> list[Fact]:
        """Remember what :meth:`extract_turn` found that is new, as one section of today's log
        with the turn's provenance (``session_id``, ``transcript_line`` and ``turn_ref``, each
        defaulting to the turn's own): one commit, or part of the caller's change group.
        ``key_facts``: the refresh of the key facts these facts call for, asked by a caller that
        writes them inside its own group (:meth:`key_facts_ahead` before it, :meth:`key_facts_after`
        after it); by default asked here. Returns the facts written (empty when nothing was new)."""
        self._enter()
        user, chat = self._user(user_id), self._chat(chat_id)
        parsed = extracted.turn
        session = session_id if session_id is not None else parsed.session_id
        session = None if session is None else validate_id("session", session)
        line = transcript_line if transcript_line is not None else parsed.transcript_line
        model = extracted.model
        stamped = [
            replace(
                f,
                source_session=session,
                source_line=line if session is not None else None,
                extra=(("model", _token(model)), ("pv", PROMPT_VERSION)),
            )
            for f in extracted.facts
        ]

        def intent_for(n: int) -> Intent:
            return self._intent(
                f"Remember {n} fact{'s' if n != 1 else ''} from a conversation turn",
                user,
                chat,
                session=session,
                turn=turn_ref if turn_ref is not None else parsed.turn_id,
                transcript_line=line,
                model=model,
                prompt_version=PROMPT_VERSION,
            )

        ahead = await self.key_facts.of_own(stamped, user, True) if key_facts == "ask" else key_facts
        # The group's intent is the first write's (the section of new facts), so the commit says
        # how many facts the turn added; the key facts they refresh join the same commit.
        async with self.screening.screened(stamped, user, True) as screened, self.engine.changes():
            written, _ = await asyncio.to_thread(self._remember, stamped, user, chat, session, intent_for, screened)
            await self.key_facts.in_group(ahead, written, user)
        if key_facts == "ask":
            await self.key_facts.after(ahead)
        return written

    # -- key facts (see key_facts.py) --------------------------------------------------------------

    async def _summarise(self, lines: Sequence[str]) -> str:
        summary = await summarise_facts(self.settings, list(lines), self._llm_options("summarise"))
        _check_generated("summary", summary, multiline=True)
        return summary

    def _key_facts_intent(self, user: str) -> Intent:
        return self._intent(
            f"Refresh the key facts of {user}", user, model=self.settings.llm_model, prompt_version=PROMPT_VERSION
        )

    async def key_facts_ahead(
        self, facts: Sequence[Fact], user_id: str | None = None, *, dedup: bool = True
    ) -> KeyFactsAhead | None:
        """The refresh of the user's key facts that writing ``facts`` calls for (None: none is
        important enough), its summary asked of the model now, with no lock held. A caller that
        writes the facts inside a change group of its own asks before the group, hands it to the
        write, and calls :meth:`key_facts_after` once the group has ended.

        With ``dedup`` (as the write screens them), only the facts not remembered yet count: a
        restated important fact asks the model nothing, and the summary's input holds none that
        will not be written. That look takes no lock; the screening in the group decides, and a
        fact it writes after all gets its summary after the group."""
        return await self.key_facts.ahead(facts, self._user(user_id), dedup)

    async def key_facts_after(self, ahead: KeyFactsAhead | Literal["inside"] | None) -> None:
        """After the group that wrote the facts: the refresh its summary made ahead could not be
        (see :meth:`key_facts_ahead`), made now as a commit of its own. Never raises a SyncdError:
        the facts are committed whatever becomes of it, and a refusal is logged."""
        await self.key_facts.after(ahead)

    async def refresh_core_memory_facts(self, user_id: str | None = None) -> str | None:
        """Summarise the user's most important facts (LLM, bullet points, at most 200 words) into
        their ``facts`` block and the Key facts section of MEMORY.md. Returns the summary, or None
        when there are no facts yet.

        The model is asked before the change group that writes the summary, holding no lock (other
        agents' writes do not wait for it); inside the group the facts are read again, and the
        summary is written only if they are still the ones it was made from. Another agent may
        have committed an important fact meanwhile, with its own summary holding it: the one made
        here without it is then not written, and the model is asked again, up to
        ``key_facts.REFRESH_ATTEMPTS`` times; past them ConflictError, nothing written."""
        self._enter()
        return await self.key_facts.refresh(self._user(user_id))

    # -- forgetting ------------------------------------------------------------------------------

    def _hints(self, memory_id: str, user: str) -> list[str]:
        return [r["path"] for r in self.engine.find_fact(memory_id) if r.get("user") == user]

    def _delete(self, memory_id: str, user: str, expected: Fact | None) -> bool:
        store = self.store(user_id=user)
        intent = self._intent(f"Forget fact {memory_id}", user)
        try:
            store.delete_fact(memory_id, hint_paths=self._hints(memory_id, user), intent=intent, expected=expected)
        except NotFoundError:
            return False
        return True

    async def delete_memory(self, memory_id: str, user_id: str | None = None, *, expected: Fact | None = None) -> bool:
        """Remove one fact's line from the user's daily log (compare-and-swap, one commit).
        Works for hand-written facts by their derived id. False when there is no such fact. With
        ``expected`` (the fact as the caller last saw it), ConflictError if it changed meanwhile."""
        self._enter()
        user = self._user(user_id)
        validate_id("memory", memory_id)
        return await asyncio.to_thread(self._delete, memory_id, user, expected)

    def _update(self, memory_id: str, user: str, changes: dict[str, Any], expected: Fact | None) -> StoredFact:
        store = self.store(user_id=user)
        hints = self._hints(memory_id, user)
        current = store.find_fact(memory_id, hints).fact
        new = replace(current, **changes)
        intent = self._intent(f"Edit fact {memory_id}", user)
        return store.replace_fact(memory_id, new, hint_paths=hints, intent=intent, expected=expected or current)

    async def update_memory(
        self,
        memory_id: str,
        user_id: str | None = None,
        *,
        content: str | None = None,
        category: str | None = None,
        importance: float | None = None,
        tags: Iterable[str] | None = None,
        expected: Fact | None = None,
    ) -> Fact:
        """Change one fact in place (only its line; compare-and-swap, one commit) and return it as
        written. Arguments left None keep their value. With ``expected`` (the fact as the caller
        last saw it), ConflictError if someone changed it meanwhile: nothing is written.
        NotFoundError when the user has no such fact. A fact typed by hand has no id of its own
        (``Fact.id`` None); :meth:`change_memory` says its effective id after the change."""
        stored = await self.change_memory(
            memory_id, user_id, content=content, category=category, importance=importance, tags=tags,
            expected=expected,
        )  # fmt: skip
        return stored.fact

    async def change_memory(
        self,
        memory_id: str,
        user_id: str | None = None,
        *,
        content: str | None = None,
        category: str | None = None,
        importance: float | None = None,
        tags: Iterable[str] | None = None,
        expected: Fact | None = None,
    ) -> StoredFact:
        """:meth:`update_memory`, returning the fact as it now stands in its file: its effective
        id (a hand-written fact's derived id follows its new content), path and line."""
        self._enter()
        user = self._user(user_id)
        validate_id("memory", memory_id)
        changes: dict[str, Any] = {}
        if content is not None:
            changes["content"] = " ".join(check_fact_content(content, multiline=True).split())
        if category is not None:
            changes["category"] = category
        if importance is not None:
            changes["importance"] = importance
        if tags is not None:
            changes["tags"] = _tag_words(tags)
        return await asyncio.to_thread(self._update, memory_id, user, changes, expected)

    # -- stats -----------------------------------------------------------------------------------

    def _stats(self, user: str) -> dict[str, Any]:
        store = self.store(user_id=user)
        dates = store.list_daily_logs()
        facts = list(store.iter_facts())
        categories: dict[str, int] = {}
        for s in facts:
            categories[s.fact.category] = categories.get(s.fact.category, 0) + 1
        blocks = self.core_blocks(user_id=user)
        return {
            "user_id": user,
            "home": str(self.home.root),
            "daily_logs": len(dates),
            "first_log": dates[0] if dates else None,
            "last_log": dates[-1] if dates else None,
            "facts": len(facts),
            "categories": dict(sorted(categories.items())),
            "memory_file_chars": len(store.read_memory_file()),
            "blocks": {label: b.scope for label, b in blocks.items()},
            "read_only": self.engine.read_only,
            "as_of": self.clock().isoformat(timespec="seconds"),
        }

    async def get_memory_stats(self, user_id: str | None = None) -> dict[str, Any]:
        """Counts from the markdown itself (the truth): logs, facts per category, blocks."""
        self._enter()
        return await asyncio.to_thread(self._stats, self._user(user_id))
