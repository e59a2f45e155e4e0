"""ContextCompressor (seed API): trim an agent's context, but remember before forgetting.

When the steps in an agent's context pass the token budget, the steps about to be removed are
first **flushed**: they become one synthetic conversation turn whose facts the model is asked
for (``MemoryManager.extract_turn``, before the flush's change group opens, so no lock is held
while it answers) and then remembered in that group (``remember_extracted``), so what the agent
learnt in them lands in the user's memory (markdown, git, search). Only when that succeeded are they summarised (the
LLM, through litellm) and replaced by the summary. A failed flush compresses nothing. A flush is
keyed by a digest of the exact steps; the digests done are kept in the session's ``session.json``
(and in this object), so compressing the same steps again never flushes them twice.

A flush that silently does not fire is how agents lose what they learnt, so every flush is
observable three ways: a transcript record (``meta.event`` ``flush`` / ``flush_failed``), a log
line, and the counters in :attr:`ContextCompressor.stats`.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import json
import logging
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from ..errors import ExtractionError
from ..formats.transcripts import make_entry
from ..history.intents import Intent
from ..home import validate_id
from ..memory.extraction import ConversationTurn, ExtractedTurn, complete
from .files import SessionInfo, load_session_info, new_session_info, utc_now, write_session_info
from .serializer import agent_steps, plain_steps
from .transcripts import TranscriptManager

__all__ = ["ContextCompressor", "COMPRESS_SYSTEM"]

log = logging.getLogger(__name__)

COMPRESS_SYSTEM = (
    "You compress an AI agent's working context. Summarise the steps you are given (tasks, plans, "
    "tool calls and what they returned) in at most 150 words of plain bullet points, keeping "
    "every result, decision and open question the agent will still need. Answer with the summary only."
)


def _approx_tokens(text: str) -> int:
    """About four characters a token: a budget check needs no tokenizer."""
    return len(text) // 4 + 1


def steps_digest(steps: list[dict[str, Any]]) -> str:
    return hashlib.sha256(json.dumps(steps, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:32]


class ContextCompressor:
    """Compress one user's agent context within ``max_context_tokens``, keeping the first task and
    the last ``keep_last_steps`` steps. ``memory`` is the MemoryManager the flush writes through;
    its ``job_llm_options["compress"]`` go into the summary call."""

    def __init__(
        self,
        memory: Any,
        *,
        user_id: str | None = None,
        chat_id: str | None = None,
        session_id: str | None = None,
        max_context_tokens: int = 8000,
        keep_last_steps: int = 4,
        token_counter: Callable[[str], int] = _approx_tokens,
    ):
        if max_context_tokens < 1 or keep_last_steps < 0:
            raise ValueError("max_context_tokens must be positive and keep_last_steps not negative")
        self.memory = memory
        self.user_id = validate_id("user", user_id if user_id is not None else memory.default_user_id)
        self.chat_id = None if chat_id is None else validate_id("chat", chat_id)
        self.session_id = None if session_id is None else validate_id("session", session_id)
        self.max_context_tokens = max_context_tokens
        self.keep_last_steps = keep_last_steps
        self.count_tokens = token_counter
        self.transcripts = TranscriptManager(memory.engine, self.user_id, author=memory.author)
        self._flushed: set[str] = set()
        self.stats = {
            "checks": 0,
            "compressions": 0,
            "flushes": 0,
            "flush_failures": 0,
            "flush_skipped_repeat": 0,
            "facts_flushed": 0,
            "summary_failures": 0,
        }

    def context_tokens(self, steps: list[dict[str, Any]]) -> int:
        return sum(self.count_tokens(json.dumps(s, ensure_ascii=False)) for s in steps)

    async def compress_context(
        self,
        agent: Any,
        *,
        session_id: str | None = None,
        user_id: str | None = None,
        chat_id: str | None = None,
        now: dt.datetime | None = None,
    ) -> bool:
        """Compress ``agent``'s steps when they pass the budget (seed API). True when the context
        was compressed; False when it was within budget, there was nothing to remove, or the flush
        or the summary failed (then the context is exactly as it was). A damaged ``session.json``
        of the session raises ParseError before anything is written (it is never written over).
        ``now`` is the session's time, which a flush records (its transcript line; the session's
        ``session.json`` when the flush is its first write): the real clock unless given (a
        SessionRunner gives its own clock's, as its turns record)."""
        self.stats["checks"] += 1
        user = self.user_id if user_id is None else validate_id("user", user_id)
        chat = self.chat_id if chat_id is None else validate_id("chat", chat_id)
        session = self.session_id if session_id is None else validate_id("session", session_id)
        live = agent_steps(agent)
        steps = plain_steps(live)
        if self.context_tokens(steps) <= self.max_context_tokens:
            return False
        start = 1 if steps and steps[0].get("type") == "task" else 0
        end = len(steps) - self.keep_last_steps
        if end - start < 1:
            return False
        removed = steps[start:end]
        digest = steps_digest(removed)
        if not await self._flush(removed, digest, user, chat, session, now or utc_now()):
            return False
        try:
            summary = await self._summarise(removed)
        except ExtractionError as exc:
            self.stats["summary_failures"] += 1
            log.warning(
                "context of session %s not compressed: the summary failed (%s); its flush is kept", session, exc
            )
            return False
        live[start:end] = [self._summary_step(live, summary, len(removed))]
        self.stats["compressions"] += 1
        log.info("compressed %d steps of session %s into a summary", len(removed), session)
        return True

    async def _already_flushed(self, digest: str, user: str, session: str | None) -> bool:
        if digest in self._flushed:
            return True
        if session is None:
            return False
        # Strict: a session.json a person broke stops the flush before it writes anything (it
        # would end by recording the flush there), naming the file and the fix.
        info = load_session_info(self.memory.home, user, session)
        return info is not None and digest in info.flushed

    async def _flush(
        self,
        removed: list[dict[str, Any]],
        digest: str,
        user: str,
        chat: str | None,
        session: str | None,
        now: dt.datetime,
    ) -> bool:
        """The pre-compaction flush; True when the steps' facts are safely in memory (now or before)."""
        if await self._already_flushed(digest, user, session):
            self.stats["flush_skipped_repeat"] += 1
            log.info("steps %s of session %s were flushed before; not flushing them again", digest, session)
            return True
        intent = Intent(
            author=self.memory.author,
            summary=f"Pre-compaction flush of {len(removed)} steps",
            user=user,
            chat=chat,
            session=session,
            turn=f"flush-{digest[:12]}",
        )
        turn = ConversationTurn(
            steps=removed, session_id=session, user_message="(steps the agent is about to forget from its context)"
        )
        # The model is asked before the flush's group opens: inside it, the home's writer turn
        # would be held for the model's seconds (a runner's turn holds it anyway: see runner.py).
        try:
            extracted: ExtractedTurn | ExtractionError = await self.memory.extract_turn(turn)
        except ExtractionError as exc:
            extracted = exc
        # The key facts the flushed facts refresh: asked before the group too (see runner.py).
        key_facts = None
        if isinstance(extracted, ExtractedTurn):
            key_facts = await self.memory.key_facts_ahead(extracted.facts, user)
        async with self.memory.engine.changes(intent):
            # Looked at again in the group (the writer's turn): another process of the session,
            # its model asked at the same time, may have flushed these steps meanwhile.
            if await self._already_flushed(digest, user, session):
                self.stats["flush_skipped_repeat"] += 1
                log.info("steps %s of session %s were flushed meanwhile; not flushing them again", digest, session)
                return True
            line = None
            if session is not None:
                line = (
                    await self._record(
                        session,
                        user,
                        "flush",
                        f"pre-compaction flush of {len(removed)} steps",
                        {"digest": digest, "steps": len(removed)},
                        now,
                    )
                ).line
            if isinstance(extracted, ExtractionError):
                self.stats["flush_failures"] += 1
                log.warning(
                    "pre-compaction flush of session %s failed, context left uncompressed: %s", session, extracted
                )
                if session is not None:
                    await self._record(
                        session,
                        user,
                        "flush_failed",
                        f"pre-compaction flush failed: {extracted}",
                        {"digest": digest},
                        now,
                    )
                    await self._update_session(
                        user, chat, session, now, lambda info: replace(info, flush_failures=info.flush_failures + 1)
                    )
                return False
            facts = await self.memory.remember_extracted(
                extracted,
                chat,
                user,
                session_id=session,
                transcript_line=line,
                turn_ref=f"flush-{digest[:12]}",
                key_facts=key_facts,
            )
            if session is not None:
                await self._update_session(
                    user, chat, session, now, lambda info: replace(info, flushed=(*info.flushed, digest))
                )
        # Only once the group is kept: marked before, a group undone left the steps taken for
        # flushed, and the next compression summarised them away with their facts never kept.
        self._flushed.add(digest)
        await self.memory.key_facts_after(key_facts)
        self.stats["flushes"] += 1
        self.stats["facts_flushed"] += len(facts)
        log.info("pre-compaction flush of session %s: %d new fact(s) from %d steps", session, len(facts), len(removed))
        return True

    async def _record(self, session: str, user: str, event: str, text: str, meta: dict[str, Any], now: dt.datetime):
        entry = make_entry("system", text, None, {"event": event, **meta}, now)
        written = await asyncio.to_thread(self.transcripts.append_entries, session, [entry], user_id=user)
        return written[0]

    async def _update_session(
        self,
        user: str,
        chat: str | None,
        session: str,
        now: dt.datetime,
        change: Callable[[SessionInfo], SessionInfo],
    ) -> None:
        """Write ``change`` of the session's fields (a flush done, a flush failed) in the flush's
        group, so that it is committed, or undone, with the flush's record."""

        def update() -> None:
            info = load_session_info(self.memory.home, user, session) or new_session_info(user, session, now, chat)
            write_session_info(self.memory.engine, change(info))

        await asyncio.to_thread(update)

    async def _summarise(self, removed: list[dict[str, Any]]) -> str:
        text = "\n".join(json.dumps(s, ensure_ascii=False) for s in removed)
        reply = await complete(self.memory.settings, COMPRESS_SYSTEM, text, self.memory._llm_options("compress"))
        summary = reply.text.strip()
        if not summary:
            raise ExtractionError("the LLM returned an empty summary")
        return summary

    @staticmethod
    def _summary_step(live: list[Any], summary: str, n: int) -> Any:
        text = f"Summary of {n} earlier steps:\n{summary}"
        if all(isinstance(s, dict) for s in live):
            return {"type": "task", "task": text, "summary": True}
        try:  # a smolagents agent gets a step of its own kind
            from smolagents.memory import TaskStep  # type: ignore[import-not-found]
        except ImportError:
            return {"type": "task", "task": text, "summary": True}
        return TaskStep(task=text)
