"""What the servers do, once: each operation takes who asks (a :class:`Principal`) and a shared
input model (``syncd.api.schemas``) and returns a shared output model. The REST routes, the MCP tools
and the control socket's ``call`` method are thin over it, so scoping is decided in one place.

Scoping: a user token acts for its own user, and a request naming another user is refused
(:class:`AccessError`, 403) whatever else it carries; the admin names the user. Reads come from
the live index of the engine this process holds (the daemon's); writes go through
``MemoryManager(engine)``: markdown first, one change group, one commit.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from ..api import schemas as s
from ..engine import audit
from ..engine.asof import resolve_revision
from ..engine.search import hit_record, search
from ..engine.status import is_fresh
from ..engine.visibility import readable
from ..errors import AccessError, InvalidInputError, NotFoundError
from ..home import read_regular
from ..memory import MemoryManager
from ..memory.tools import update_block
from ..session.files import list_sessions
from ..session.files import readable as encodable
from ..session.state import read_state_file
from ..session.transcripts import read_transcript_file
from .tokens import Principal

__all__ = ["LOCAL_ADMIN", "OPERATIONS", "MemoryService", "Operation", "user_for"]

log = logging.getLogger(__name__)

# Who a process of the home's own account is (stdio MCP, the control socket: same uid only).
LOCAL_ADMIN = Principal(None, "local")

# Writes waiting for their turn at once. The engine runs one change group at a time, and a
# group waiting for its turn blocks a worker thread of the event loop (asyncio.to_thread): with
# every worker blocked so, the group holding the turn could not get a thread to finish, and all
# writes would wait forever. Past this many, a write waits on the loop, holding no thread. Each
# write holds one thread at most, so this stays well below WORKER_THREADS; as many as there are
# concurrent clients, so that their writes can share the engine's commit passes.
WRITERS_IN_FLIGHT = 16
# The event loop's worker threads (asyncio.to_thread): the waiting writers plus reads beside them.
WORKER_THREADS = 32


def user_for(principal: Principal, requested: str | None, default: str) -> str:
    """The user a request acts for: a user token's own (AccessError when the request names
    another), else the user the admin names, else ``default``."""
    if principal.user is not None:
        if requested is not None and requested != principal.user:
            raise AccessError(f"this token belongs to user {principal.user!r}; it cannot act for {requested!r}")
        return principal.user
    if requested is None:
        return default
    return requested


def _hit(hit) -> s.MemoryHit:
    return s.MemoryHit.model_validate(hit_record(hit))


def _fact(fact, fact_id: str | None = None) -> s.FactOut:
    """``fact`` as the API shows it; ``fact_id`` is its effective id when it has none of its own
    (typed by hand)."""
    return s.FactOut(
        id=fact_id or fact.id,
        content=fact.content,
        category=fact.category,
        tags=list(fact.tags),
        importance=fact.importance,
        timestamp=fact.timestamp,
    )


def _block(block) -> s.BlockOut:
    return s.BlockOut(label=block.label, content=block.content, scope=block.scope, path=block.path, limit=block.limit)


def _log_entry(entry) -> s.LogEntryOut:
    return s.LogEntryOut(**{**entry.to_dict(), "files": list(entry.files)})


def _session(info) -> s.SessionOut:
    return s.SessionOut(
        user_id=info.user,
        session_id=info.session,
        created_at=info.created_at,
        last_active_at=info.last_active_at,
        turn_count=info.turn_count,
        resets=info.resets,
        chat_id=info.chat,
    )


# Why a `syncd serve --read-only` refuses a write.
READ_ONLY_SERVER = "this server only reads (syncd serve --read-only): send writes to the home's own server"


class MemoryService:
    """The operations of the servers over one open engine (the one holding the home)."""

    def __init__(
        self, engine, manager: MemoryManager | None = None, read_only: bool = False, refusal: str = READ_ONLY_SERVER
    ):
        self.engine = engine
        self.home = engine.home
        self.settings = engine.settings
        self.manager = manager or MemoryManager(engine, author="syncd-server")
        # `syncd serve --read-only`: one of many servers reading a shared index; the home's one
        # writer (its `syncd serve` or `syncd watch`) takes every write. `syncd mcp` on a home it
        # may not write: reads only, every write refused saying why (``refusal``).
        self.read_only = read_only
        self.refusal = refusal
        self._writers: asyncio.Semaphore | None = None

    @contextlib.asynccontextmanager
    async def _writing(self):
        if self.read_only:
            raise AccessError(self.refusal)
        if self._writers is None:
            self._writers = asyncio.Semaphore(WRITERS_IN_FLIGHT)
        async with self._writers:
            yield

    # -- scoping ---------------------------------------------------------------------------------

    def user_for(self, principal: Principal, requested: str | None) -> str:
        """The user a request acts for."""
        return user_for(principal, requested, self.manager.default_user_id)

    def reader_for(self, principal: Principal, requested: str | None) -> str | None:
        """Whose view of the shared home a request gets (history, the past): the user it acts
        for, or None for the admin naming no user, who sees the whole home."""
        return None if principal.admin and requested is None else self.user_for(principal, requested)

    async def past(self, principal: Principal, q: s.SearchInput | s.CoreInput | s.VaultSearchInput) -> str | None:
        """The commit ``q.at`` names for the reader of the request (None: now). Every read of the
        past resolves it here, so a user's token names only pasts it may know of
        (asof.resolve_revision's ``reader``)."""
        if q.at is None:
            return None
        return await asyncio.to_thread(resolve_revision, self.home.root, q.at, self.reader_for(principal, q.user_id))

    @staticmethod
    def require_admin(principal: Principal, what: str) -> None:
        if not principal.admin:
            raise AccessError(f"{what} needs the admin token: it touches every user's memory")

    # -- memory ----------------------------------------------------------------------------------

    async def search(self, p: Principal, q: s.SearchInput) -> s.SearchResult:
        user = self.user_for(p, q.user_id)
        at = await self.past(p, q)
        hits = await self.manager.search_memories(
            q.query, q.limit, q.chat_id, user, kind=q.kind, include_wiki=q.include_wiki, at=at
        )
        return s.SearchResult(hits=[_hit(h) for h in hits])

    async def add(self, p: Principal, q: s.AddInput) -> s.AddResult:
        user = self.user_for(p, q.user_id)
        async with self._writing():
            outcome = await self._add(q, user)
        known = outcome.duplicate_of
        return s.AddResult(
            fact=None if outcome.fact is None else _fact(outcome.fact),
            duplicate=outcome.duplicate,
            duplicate_of=None
            if known is None
            else s.KnownFactOut(id=known.id, content=known.content, path=known.path, line=known.line),
        )

    async def _add(self, q: s.AddInput, user: str):
        return await self.manager.remember(
            q.content,
            user,
            q.chat_id,
            category=q.category,
            importance=q.importance,
            tags=q.tags,
            session_id=q.session_id,
            dedup=q.dedup,
        )

    async def update(self, p: Principal, q: s.UpdateInput) -> s.FactOut:
        user = self.user_for(p, q.user_id)
        async with self._writing():
            stored = await self.manager.change_memory(
                q.memory_id, user, content=q.content, category=q.category, importance=q.importance, tags=q.tags
            )
        return _fact(stored.fact, stored.id)

    async def process_turn(self, p: Principal, q: s.TurnInput) -> s.TurnResult:
        user = self.user_for(p, q.user_id)
        turn = {"user_message": q.user_message, "steps": q.steps, "response": q.response, "turn_id": q.turn_id}
        async with self._writing():
            facts = await self.manager.process_conversation_turn_for_memories(
                turn, q.chat_id, user, session_id=q.session_id, transcript_line=q.transcript_line
            )
        return s.TurnResult(facts=[_fact(f) for f in facts])

    async def delete(self, p: Principal, q: s.DeleteInput) -> s.DeleteResult:
        user = self.user_for(p, q.user_id)
        async with self._writing():
            deleted = await self.manager.delete_memory(q.memory_id, user)
        if not deleted:
            # As memory_update answers a missing id (the store's words), over REST and MCP alike:
            # a {"deleted": false} beside it read as a different kind of answer.
            raise NotFoundError(f"no fact {q.memory_id!r} in the memory of {user}")
        return s.DeleteResult(deleted=True, memory_id=q.memory_id)

    async def core(self, p: Principal, q: s.CoreInput) -> s.CoreMemory:
        user = self.user_for(p, q.user_id)
        at = await self.past(p, q)
        blocks = await asyncio.to_thread(self.manager.core_blocks, chat_id=q.chat_id, user_id=user, at=at)
        return s.CoreMemory(user_id=user, chat_id=q.chat_id, blocks={k: _block(b) for k, b in blocks.items()})

    async def update_block(self, p: Principal, q: s.BlockUpdateInput) -> s.BlockOut:
        user = self.user_for(p, q.user_id)
        async with self._writing():
            return _block(await update_block(self.manager, q, user))

    def _daily(self, store, found) -> s.DailyLog:
        from ..memory.store import stored_facts

        facts = [s.StoredFactOut(**f.to_dict()) for f in stored_facts(found.log, found.path, found.date)]
        return s.DailyLog(date=found.date, path=found.path, text=found.text, facts=facts)

    async def recent_logs(self, p: Principal, q: s.RecentLogsInput) -> s.DailyLogs:
        user = self.user_for(p, q.user_id)
        store = self.manager.store(user_id=user)
        found = await asyncio.to_thread(store.get_recent_logs, q.days)
        return s.DailyLogs(user_id=user, logs=[self._daily(store, f) for f in found])

    async def daily_log(self, p: Principal, q: s.DailyLogInput) -> s.DailyLog:
        user = self.user_for(p, q.user_id)
        store = self.manager.store(user_id=user)
        found = await asyncio.to_thread(store.read_daily_log, q.date)
        if found is None:
            raise NotFoundError(f"no daily log of {q.date} for user {user!r}")
        return self._daily(store, found)

    async def memory_file(self, p: Principal, q: s.StatusInput) -> s.MemoryFile:
        user = self.user_for(p, q.user_id)
        store = self.manager.store(user_id=user)
        content = await asyncio.to_thread(store.read_memory_file)
        return s.MemoryFile(user_id=user, path=store.memory_file_rel, content=content)

    # -- sessions (read from their files: transcripts are append-only, so no lock is needed) -----

    async def sessions(self, p: Principal, q: s.SessionsInput) -> s.SessionsOut:
        user = self.user_for(p, q.user_id)
        damaged: list[str] = []
        found = await asyncio.to_thread(list_sessions, self.home, user, None, damaged)
        return s.SessionsOut(user_id=user, sessions=[_session(info) for info in found], warnings=damaged)

    def _session_rel(self, user: str, session: str, path) -> str:
        if not self.home.session_dir(user, session).is_dir():
            raise NotFoundError(f"no session {session!r} for user {user!r}")
        return self.home.rel(path)

    @staticmethod
    async def _read_session_file(read, user: str, session: str, *args):
        # A folder or a symbolic link where a session's file (or folder) belongs is the home's
        # state, not a bug: say which, as `syncd sessions show` does, instead of a 500.
        try:
            return await asyncio.to_thread(read, *args)
        except OSError as exc:
            raise NotFoundError(f"session {session!r} of {user!r} cannot be read: {exc.strerror or exc}") from None

    async def transcript(self, p: Principal, q: s.TranscriptInput) -> s.TranscriptOut:
        user = self.user_for(p, q.user_id)
        rel = self._session_rel(user, q.session_id, self.home.transcript_path(user, q.session_id))
        entries = await self._read_session_file(
            read_transcript_file, user, q.session_id, self.home, user, q.session_id, q.last_n
        )
        return s.TranscriptOut(
            user_id=user, session_id=q.session_id, path=rel, entries=[s.TranscriptEntryOut(**e) for e in entries]
        )

    async def session_state(self, p: Principal, q: s.SessionStateInput) -> s.SessionStateOut:
        user = self.user_for(p, q.user_id)
        rel = self._session_rel(user, q.session_id, self.home.state_path(user, q.session_id))
        state = await self._read_session_file(read_state_file, user, q.session_id, self.home, user, q.session_id)
        return s.SessionStateOut(user_id=user, session_id=q.session_id, path=rel, state=state)

    async def stats(self, p: Principal, q: s.StatusInput) -> s.Stats:
        user = self.user_for(p, q.user_id)
        raw = await self.manager.get_memory_stats(user)
        return s.Stats(**{k: v for k, v in raw.items() if k in s.Stats.model_fields})

    # -- the home --------------------------------------------------------------------------------

    async def status(self, p: Principal, q: s.StatusInput) -> s.StatusOut:
        status = (await asyncio.to_thread(self.engine.status)).to_dict()
        if not p.admin or q.user_id is not None:
            # A user sees what concerns them: their files and the shared ones, never who else has
            # memory here: not their files, not their rows in the counts, not the commit the
            # index is aligned with (it moves with every user's writes).
            user = self.user_for(p, q.user_id)
            status["stale"] = {
                k: [x for x in v if all(readable(part, user) for part in x.split(" -> "))]
                for k, v in status["stale"].items()
            }
            status["errors"] = {k: v for k, v in status["errors"].items() if readable(k, user)}
            status["uncommitted"] = [x for x in status["uncommitted"] if readable(x, user)]
            status.update(await asyncio.to_thread(self._counts_of, user))
            status["fresh"] = is_fresh(status["index"], status["compatible"], status["stale"])
            status["healthy"] = status["fresh"] and not status["errors"]
            status["aligned_commit"] = None
        return s.StatusOut(**{k: v for k, v in status.items() if k in s.StatusOut.model_fields})

    def _counts_of(self, user: str) -> dict[str, int]:
        """Files, facts and chunks of the index that ``user``'s searches can reach: theirs and the shared ones."""
        files = sum(1 for rel in self.engine.indexed_files() if readable(rel, user))
        return {"files": files, **self.engine.counts(user_id=user)}

    async def log(self, p: Principal, q: s.LogInput) -> s.LogOut:
        user = self.reader_for(p, q.user_id)
        entries = await asyncio.to_thread(audit.log, self.home.root, q.path, q.limit, user_id=user)
        return s.LogOut(entries=[_log_entry(e) for e in entries])

    async def blame(self, p: Principal, q: s.BlameInput) -> s.BlameOut:
        user = self.reader_for(p, q.user_id)
        histories = await asyncio.to_thread(audit.blame, self.engine, q.fact_id, user_id=user)
        return s.BlameOut(
            fact_id=q.fact_id,
            histories=[
                s.FactHistoryOut(
                    path=h.path,
                    line=h.line,
                    text=h.text,
                    uncommitted=h.uncommitted,
                    introduced=_log_entry(h.introduced) if h.introduced else None,
                    edits=[_log_entry(e) for e in h.edits],
                )
                for h in histories
            ],
        )

    async def revert(self, p: Principal, q: s.RevertInput) -> s.RevertResult:
        self.require_admin(p, "revert")
        # After every change acknowledged before it is committed (Engine.revert).
        async with self._writing():
            return s.RevertResult(reverted=q.commit, commit=await asyncio.to_thread(self.engine.revert, q.commit))

    async def reindex(self, p: Principal) -> s.ReindexResult:
        self.require_admin(p, "reindex")

        def run():
            with self.engine.exclusive():
                return self.engine.reindex()

        async with self._writing():
            report = await asyncio.to_thread(run)
        return s.ReindexResult(summary=report.plan.summary(), errors=dict(report.errors))

    # -- the vault -------------------------------------------------------------------------------

    async def vault_search(self, p: Principal, q: s.VaultSearchInput) -> s.SearchResult:
        user = self.reader_for(p, q.user_id)
        at = await self.past(p, q)
        # The vault is shared; a user's scope holds it plus their own rows, which are dropped here.
        hits = await asyncio.to_thread(
            lambda: search(
                self.engine, q.query, user_id=user, limit=q.limit * 4 + 20, kind="chunk", include_wiki=True, at=at
            )
        )
        pages = [h for h in hits if h.source == "vault_page"][: q.limit]
        return s.SearchResult(hits=[_hit(h) for h in pages])

    async def page(self, p: Principal, q: s.PageInput) -> s.PageOut:
        rel = f"vault/{q.path}"
        try:
            data = await asyncio.to_thread(read_regular, self.home.root, rel)
        except OSError as exc:
            raise NotFoundError(f"{rel} cannot be read: {exc.strerror or exc}") from None
        if data is None:
            raise NotFoundError(f"no page {q.path!r} in the vault")
        return s.PageOut(path=rel, content=data.decode("utf-8", errors="replace"))

    async def lint(self, p: Principal, q: s.LintInput) -> s.LintResult:
        from ..wiki.manager import WikiManager

        wiki = WikiManager.for_home(self.home.root, max_file_bytes=self.settings.max_file_bytes)
        # A page's sources may name files of one user: the others are told nothing of them.
        reader = self.reader_for(p, q.user_id)
        shown = None if reader is None else (lambda rel: readable(rel, reader))
        findings = await asyncio.to_thread(wiki.lint, shown)
        # A file name that is not UTF-8 (a lone surrogate, as Python reads it) failed the whole
        # answer in JSON: it reads as U+FFFD, the rest of the finding as it is.
        return s.LintResult(findings=[s.Finding.model_validate(encodable(f.to_dict())) for f in findings])


@dataclass(frozen=True)
class Operation:
    """One operation as the MCP tools and the control socket name it."""

    name: str
    input: type[BaseModel]
    run: Callable[[MemoryService, Principal, Any], Awaitable[BaseModel]]
    description: str
    fixed: tuple[tuple[str, Any], ...] = ()  # input fields the tool sets itself (not shown)
    read_only: bool = True


def _op(name, model, method, description, fixed=(), read_only=True) -> Operation:
    return Operation(name, model, lambda svc, p, q: getattr(svc, method)(p, q), description, tuple(fixed), read_only)


OPERATIONS: dict[str, Operation] = {
    op.name: op
    for op in (
        _op("memory_search", s.SearchInput, "search",
            "Search long-term memory (facts, MEMORY.md, core blocks; the wiki too with include_wiki) "
            "and get the relevant memories with their ids and sources; an unrelated query finds nothing."),
        _op("memory_add", s.AddInput, "add",
            "Remember one fact (one line in today's log, one commit). Returns it with its id; a "
            "correction of a remembered fact (another number, date, name, a negation) is a new fact. "
            "When it only restates a remembered fact nothing is written: duplicate=true and "
            "duplicate_of names that fact (id, content), to update instead.", read_only=False),
        _op("memory_update", s.UpdateInput, "update",
            "Change one remembered fact in place by its id (its line in the daily log, one commit; "
            "the old text stays in the history). Fields left out keep their value.", read_only=False),
        _op("memory_delete", s.DeleteInput, "delete",
            "Forget one fact by its id (its line leaves the daily log, one commit). NotFoundError when "
            "the memory holds no fact of that id.", read_only=False),
        _op("core_memory_get", s.CoreInput, "core",
            "The core memory blocks (persona, user, facts, context, ...) with the scope each comes from."),
        _op("core_memory_replace", s.BlockUpdateInput, "update_block",
            "Replace the whole text of one core memory block.", fixed=[("operation", "replace")], read_only=False),
        _op("core_memory_append", s.BlockUpdateInput, "update_block",
            "Append a line to one core memory block.", fixed=[("operation", "append")], read_only=False),
        _op("core_memory_search_replace", s.BlockUpdateInput, "update_block",
            "Replace one exact passage (old_content) of a core memory block with content.",
            fixed=[("operation", "search_replace")], read_only=False),
        _op("daily_logs_recent", s.RecentLogsInput, "recent_logs",
            "The daily fact logs of the last few days, today included, with their facts."),
        _op("memory_blame", s.BlameInput, "blame",
            "Where a fact came from: the commit (agent, session, turn) that introduced it, and later edits."),
        _op("memory_status", s.StatusInput, "status",
            "What the index reflects: counts, and every file that is stale, in error or not committed yet."),
        _op("session_list", s.SessionsInput, "sessions",
            "The user's conversation sessions: when each began and was last active, turns, resets."),
        _op("session_transcript", s.TranscriptInput, "transcript",
            "A session's transcript (the last N entries with last_n), each entry with its line number."),
        _op("vault_search", s.VaultSearchInput, "vault_search",
            "Search the wiki vault's pages (heading-sized chunks, with their heading path)."),
        _op("vault_page_read", s.PageInput, "page", "Read one page of the wiki vault (a path such as index.md)."),
        _op("vault_lint", s.LintInput, "lint",
            "Check the wiki vault: broken links, orphans, missing sources, log problems."),
    )
}  # fmt: skip


async def call(service: MemoryService, principal: Principal, name: str, arguments: dict) -> dict:
    """Run the operation ``name`` with raw ``arguments`` (validated by its input model); the
    result as plain JSON. The control socket's ``call`` method."""
    op = OPERATIONS.get(name)
    if op is None:
        raise NotFoundError(f"no operation {name!r}")
    if not isinstance(arguments, dict):
        raise InvalidInputError("arguments must be an object")
    try:
        request = op.input.model_validate({**arguments, **dict(op.fixed)})
    except ValidationError as exc:
        # One line per field, whichever way the call came (MCP in this process or through the
        # daemon's socket): pydantic's own report spans lines and ends in a link.
        raise InvalidInputError(f"invalid arguments: {s.describe_invalid(exc)}") from None
    result = await op.run(service, principal, request)
    return result.model_dump(mode="json")
