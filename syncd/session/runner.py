"""The session runner (the seed's chat processor): one call per message, one commit per turn.

``await runner.process_turn(session_id, user_message, response, ...)`` first asks the model what
facts the turn holds, runs the context compression check (its pre-compaction flush is a change
of its own) and, when a fact is important, asks for the summary of the user's key facts, holding
no lock: a model's seconds inside the turn's group would hold every other agent's write back.
Then it does, inside one change group: the lifecycle check (a reset is a transcript record, fresh
lifecycle fields and an empty state), the transcript lines of the turn, the new facts with the
turn's first transcript line as provenance (so ``syncd blame <fact>`` shows the line), the key
facts, the agent-state snapshot and the lifecycle fields. The group is indexed and committed
once, so one ``git revert`` undoes the whole turn and the index follows. (Key facts whose input
changed while the model wrote them are made again after the group, as a commit of their own:
see syncd/memory/key_facts.py.)

A turn is all or nothing (syncd/writes): an exception inside it, or the death of its process
before its commit, puts every file back as it was, so the caller, who got no answer, runs the
same turn again and it lands at the same transcript lines. A caller that may run a turn again
after it *was* kept (it died before reading the answer; a daemon committed the turn after
GitBusyError said it was late) passes ``turn_id``: a turn whose id the transcript already holds
is not written again (see :meth:`SessionRunner.process_turn`).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..errors import ExtractionError, GitBusyError, HistoryError
from ..formats.agent_state import AgentState
from ..formats.transcripts import TranscriptEntry, make_entry, parse_transcript
from ..history.git import run_git
from ..history.intents import Intent
from ..home import validate_id
from ..memory.extraction import ConversationTurn, ExtractedTurn
from ..memory.key_facts import KeyFactsAhead
from ..memory.prompts import PROMPT_VERSION
from .compressor import ContextCompressor
from .files import (
    Clock,
    SessionInfo,
    load_session_info,
    new_session_info,
    read_bytes,
    read_session_info,
    utc_now,
    write_session_info,
)
from .lifecycle import SessionLifecycle, SessionPolicy
from .serializer import plain_steps, serialize_agent
from .state import StateMirror
from .transcripts import TranscriptManager

__all__ = ["SessionRunner", "TurnResult"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TurnResult:
    """What one turn did: its transcript lines, the facts it added, whether the session was
    reset first (and why), whether the context was compressed, and the session's fields after.
    ``replayed``: the turn's ``turn_id`` was recorded already; nothing was written this time, and
    ``entries`` are the lines the first run left (its facts are not looked up again); the
    caller's agent may still have been compressed (``compressed``: its flush is its own commit)."""

    entries: tuple[TranscriptEntry, ...]
    facts: tuple[Any, ...] = ()
    reset: str | None = None
    compressed: bool = False
    extraction_error: str | None = None
    session: SessionInfo | None = None
    timings: dict[str, float] = field(default_factory=dict)
    replayed: bool = False


@dataclass(frozen=True)
class _Asked:
    """What the model made of a turn before its group: its facts (or why none), whether the
    caller's agent was compressed, and the key facts those facts refresh (None: none to)."""

    extracted: ExtractedTurn | ExtractionError
    compressed: bool
    key_facts: KeyFactsAhead | None = None


class SessionRunner:
    """Runs the turns of one home's sessions through a MemoryManager (which may share an engine)."""

    def __init__(
        self,
        memory: Any,
        *,
        policy: SessionPolicy | None = None,
        compressor: ContextCompressor | None = None,
        clock: Clock = utc_now,
        extract: bool = True,
    ):
        self.memory = memory
        self.engine = memory.engine
        self.home = memory.home
        self.lifecycle = SessionLifecycle(policy, clock)
        self.compressor = compressor
        self.extract = extract
        self.transcripts = TranscriptManager(self.engine, memory.default_user_id, author=memory.author)
        self.states = StateMirror(self.engine, memory.default_user_id, author=memory.author)

    async def process_turn(
        self,
        session_id: str,
        user_message: str,
        response: str,
        *,
        user_id: str | None = None,
        chat_id: str | None = None,
        steps: Sequence[Any] = (),
        agent: Any = None,
        state: Any = None,
        turn_id: str | None = None,
    ) -> TurnResult:
        """Record one turn (see the module doc). ``steps`` are the agent's steps of this turn
        (plain dicts or smolagents steps), kept in the transcript as the answer's actions;
        ``agent`` (compressed when over budget, and snapshotted) or ``state`` (JSON v2 bytes, a
        dict or an AgentState) becomes ``state.json``. An extraction failure (no LLM, a bad
        reply) does not fail the turn: it is in ``extraction_error`` and the log.

        ``turn_id`` (the caller's id of this turn, e.g. its message id; the id charset of
        sessions) is kept on the person's transcript line. Run again with an id the transcript
        already holds, the turn writes nothing and answers ``replayed`` once HEAD holds those
        lines; while they are saved but not committed yet (a daemon commits them once git is
        free) it raises GitBusyError, and the caller retries later."""
        user = validate_id("user", self.memory.default_user_id if user_id is None else user_id)
        chat = None if chat_id is None else validate_id("chat", chat_id)
        session = validate_id("session", session_id)
        turn_id = None if turn_id is None else validate_id("turn", turn_id)
        actions = plain_steps(steps)
        # The model is asked before the group opens: inside it, the home's writer turn would be
        # held for the model's seconds, and other agents' writes refused past lock_wait_s.
        asked: _Asked | None = None
        if not await self._seems_recorded(user, session, turn_id):
            asked = await self._ask(user_message, actions, response, agent, user, chat, session)
        result = await self._record_turn(
            user_message, response, user, chat, session, turn_id, actions, agent, state, asked
        )
        if result is None:
            # It seemed recorded (saved, not committed), and inside the group it was not: that
            # run was put back meanwhile (its group failed, or its process died and the group's
            # start undid it). Nothing was written: asked now, outside the group as for any
            # turn (the agent compressed too), and recorded then (or answered as recorded, if
            # yet another run recorded it meanwhile).
            asked = await self._ask(user_message, actions, response, agent, user, chat, session)
            result = await self._record_turn(
                user_message, response, user, chat, session, turn_id, actions, agent, state, asked
            )
        assert result is not None  # asked: recorded, or answered as recorded
        return result

    async def _ask(
        self,
        user_message: str,
        actions: list,
        response: str,
        agent: Any,
        user: str,
        chat: str | None,
        session: str,
    ) -> _Asked:
        """The model's part of a turn, holding no lock: its facts, and the compression check of
        the caller's agent (a flush asks the model twice, its facts and the summary; it is a
        change of its own, its steps' facts kept whatever the turn becomes, and never made twice
        for the same steps)."""
        extracted = await self._extract(user_message, actions, response, session)
        compressed = False
        if agent is not None and self.compressor is not None:
            compressed = await self.compressor.compress_context(
                agent, session_id=session, user_id=user, chat_id=chat, now=self.lifecycle.now()
            )
        # Last, after the flush's facts: the summary of the user's key facts these facts refresh,
        # asked now for the same reason (written in the group, or after it when the files
        # changed meanwhile: syncd/memory/key_facts.py).
        key_facts = None
        if isinstance(extracted, ExtractedTurn):
            key_facts = await self.memory.key_facts_ahead(extracted.facts, user)
        return _Asked(extracted, compressed, key_facts)

    async def _record_turn(
        self,
        user_message: str,
        response: str,
        user: str,
        chat: str | None,
        session: str,
        turn_id: str | None,
        actions: list,
        agent: Any,
        state: Any,
        asked: _Asked | None,
    ) -> TurnResult | None:
        """The turn's group: answered as recorded when the transcript and HEAD hold ``turn_id``;
        else, with the model ``asked``, the turn written and committed; None (nothing written)
        when the model was not asked (the turn seemed recorded before the group)."""
        # The session's fields, its reset and the turn's first line are read inside the group (the
        # home's write turn): read before it, two processes running turns of one session both
        # counted from the same turn_count (one turn lost of every two) and named the same line.
        # So the group opens without an intent and adopts the turn's before its first write.
        compressed = asked is not None and asked.compressed
        async with self.engine.changes() as group:
            if turn_id is not None:
                # Looked for inside the group: a run of the same turn in this engine has ended by
                # now, kept or put back.
                recorded = await asyncio.to_thread(self._recorded, user, session, turn_id)
                if recorded:
                    latest = await asyncio.to_thread(read_session_info, self.home, user, session)
                    return TurnResult(recorded, compressed=compressed, session=latest, replayed=True)
            if asked is None:
                return None  # nothing written: the group ends with no commit
            now = self.lifecycle.now()  # once the turn may run: a wait for another is not idleness
            info, reset, entries = await asyncio.to_thread(self._begin, user, session, chat, now)
            # The commit names the line the turn's facts come from.
            expected_line = await asyncio.to_thread(self.transcripts.next_line, session, user_id=user) + len(entries)
            group.adopt(
                Intent(
                    author=self.memory.author,
                    summary=f"Turn {info.turn_count + 1} of session {session}",
                    user=user,
                    chat=chat,
                    session=session,
                    turn=f"{session}#{expected_line}",
                    transcript_line=expected_line,
                    model=self.memory.settings.llm_model if self.extract else None,
                    prompt_version=PROMPT_VERSION if self.extract else None,
                )
            )
            meta = {k: v for k, v in (("chat", chat), ("turn_id", turn_id)) if v is not None}
            entries.append(make_entry("user", user_message, None, meta or None, now))
            entries.append(make_entry("assistant", response, actions or None, None, now))
            written = await asyncio.to_thread(self.transcripts.append_entries, session, entries, user_id=user)
            line = written[-2].line  # the person's message: where the turn's facts come from
            facts, error = await self._remember(asked.extracted, user, chat, session, line, asked.key_facts)
            snapshot = serialize_agent(agent) if agent is not None else state
            if reset is not None and snapshot is None:
                snapshot = AgentState(serialized_at=now.isoformat(timespec="seconds"))
            if snapshot is not None:
                await asyncio.to_thread(self.states.write_state, session, snapshot, user_id=user)
            # Re-read: the compressor may have recorded a flush (or a failed one) meanwhile.
            latest = await asyncio.to_thread(read_session_info, self.home, user, session)
            if latest is not None:
                info = replace(info, flushed=latest.flushed, flush_failures=latest.flush_failures)
            info = replace(
                info,
                turn_count=info.turn_count + 1,
                compressions=info.compressions + (1 if compressed else 0),
                last_active_at=now.isoformat(timespec="milliseconds"),
                chat=chat or info.chat,
            )
            await asyncio.to_thread(write_session_info, self.engine, info)
        await self.memory.key_facts_after(asked.key_facts)
        return TurnResult(tuple(written), tuple(facts), reset, compressed, error, info)

    def _begin(
        self, user: str, session: str, chat: str | None, now: dt.datetime
    ) -> tuple[SessionInfo, str | None, list[TranscriptEntry]]:
        """The session's fields as the turn starts, the reason of a reset due now (None: none),
        and the reset's transcript record. A session.json a person broke stops the turn here,
        before anything is written: fresh fields in its place would lose what they typed
        (ParseError names the file and the fix)."""
        info = load_session_info(self.home, user, session)
        if info is None:
            return new_session_info(user, session, now, chat), None, []
        due, reason = self.lifecycle.should_reset(info.last_active, info.turn_count, info.created, now)
        if not due:
            return info, None, []
        entry = make_entry("system", f"session reset ({reason})", None, {"event": "reset", "reason": reason}, now)
        stamp = now.isoformat(timespec="milliseconds")
        # ``compressions`` counts turns of this run of the session, as ``turn_count`` does (the
        # remote merge adds them up alike): kept across a reset, it passed the turn count.
        info = replace(
            info,
            created_at=stamp,
            turn_count=0,
            compressions=0,
            resets=info.resets + 1,
            last_reset_at=stamp,
            last_reset_reason=reason,
        )
        return info, reason, [entry]

    def _recorded(self, user: str, session: str, turn_id: str) -> tuple[TranscriptEntry, ...]:
        """The lines of turn ``turn_id`` (the person's and the answer after it) if the transcript
        holds them and so does HEAD; GitBusyError if only the file holds them (not committed yet:
        a group still under way, or saved and waiting for the daemon's commit); () if neither."""
        path = self.home.transcript_path(user, session)
        rel = self.home.rel(path)
        found = _turn_lines(read_bytes(self.home, path), turn_id)
        if not found:
            return ()
        try:
            committed = run_git(self.home.root, "cat-file", "blob", f"HEAD:{rel}")
        except (GitBusyError, HistoryError):
            committed = None
        if _turn_lines(committed, turn_id) != found:
            raise GitBusyError(
                f"turn {turn_id} of session {session} is saved but not committed yet (git is "
                "busy, or its run is still under way); nothing was written, retry later"
            )
        return found

    async def _seems_recorded(self, user: str, session: str, turn_id: str | None) -> bool:
        """Whether the transcript holds turn ``turn_id`` already (a run again after it was kept,
        committed or not): the group then answers it, and the model is not asked for nothing.
        Looked at before the group, so only to spare that question: the group looks again."""
        if turn_id is None:
            return False
        try:
            return bool(await asyncio.to_thread(self._recorded, user, session, turn_id))
        except GitBusyError:
            return True

    async def _extract(
        self, message: str, actions: list, response: str, session: str
    ) -> ExtractedTurn | ExtractionError:
        """What the model makes of the turn (an ExtractionError: no LLM, a bad reply), asked with
        no lock held."""
        if not self.extract:
            return ExtractedTurn(ConversationTurn(), (), "")
        turn = ConversationTurn(user_message=message, steps=actions, response=response, session_id=session)
        try:
            return await self.memory.extract_turn(turn)
        except ExtractionError as exc:
            return exc

    async def _remember(
        self,
        extracted: ExtractedTurn | ExtractionError,
        user: str,
        chat: str | None,
        session: str,
        line: int,
        key_facts: KeyFactsAhead | None,
    ) -> tuple[list, str | None]:
        """The new facts of the turn written with the person's line as provenance (inside the
        turn's group), or the extraction's error. ``key_facts``: the refresh asked before the
        group (see :meth:`MemoryManager.remember_extracted`)."""
        if isinstance(extracted, ExtractionError):
            log.warning("turn %s#%d recorded, but no facts extracted: %s", session, line, extracted)
            return [], str(extracted)
        if not extracted.facts:
            return [], None
        facts = await self.memory.remember_extracted(
            extracted,
            chat,
            user,
            session_id=session,
            transcript_line=line,
            turn_ref=f"{session}#{line}",
            key_facts=key_facts,
        )
        return facts, None


def _turn_lines(data: bytes | None, turn_id: str) -> tuple[TranscriptEntry, ...]:
    """The person's line carrying ``turn_id`` and the answer right after it, from transcript
    bytes (() when they hold no such line)."""
    # Most turns are new: spare parsing the whole transcript unless the id, as a JSON string (its
    # charset needs no escaping), is in it at all.
    if not data or f'"{turn_id}"'.encode() not in data:
        return ()
    entries = parse_transcript(data).entries
    for n, entry in enumerate(entries):
        if entry.role == "user" and isinstance(entry.meta, dict) and entry.meta.get("turn_id") == turn_id:
            after = entries[n + 1 : n + 2]
            return (entry, *(e for e in after if e.role == "assistant"))
    return ()
