"""MarkdownMemoryStore (seed API): one user's daily logs and MEMORY.md, read and written as files.

Daily logs are append-mostly: a write appends one ``## HH:MM chat:… session:…`` section and leaves
every existing byte alone; a delete removes exactly one fact line. Facts syncd writes carry a
generated id and their provenance in the line's comment; hand-written facts keep their derived id.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
import secrets
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, replace

from ..errors import ConflictError, NotFoundError
from ..formats import (
    DailyLog,
    Fact,
    LocatedFact,
    append_section,
    decode_markdown,
    decode_markdown_lossy,
    encode_markdown,
    new_daily_log,
    parse_daily_log,
    render_daily_log,
    render_fact_line,
)
from ..formats.reparse import LogMemo
from ..history.intents import Intent
from ..home import check_fact_content, check_text, read_regular, validate_id
from .backend import MemoryBackend
from .writer import MarkdownWriter

__all__ = ["MarkdownMemoryStore", "DailyLogFile", "StoredFact", "Clock", "new_fact_id", "local_now", "stored_facts"]

logger = logging.getLogger(__name__)

_DATE_NAME_RE = re.compile(r"\d{4}-\d{2}-\d{2}\.md\Z")

Clock = Callable[[], dt.datetime]

# The logs this process last wrote, by (home, path): an agent appends to today's log again and
# again, and each append then re-reads only what changed since (most often nothing), not the log.
_RECENT_LOGS = LogMemo(logs=64, chars=4_000_000)


def local_now() -> dt.datetime:
    """Aware local time: people read their logs in their own day, and the offset keeps it exact."""
    return dt.datetime.now().astimezone()


def new_fact_id() -> str:
    return "m-" + secrets.token_hex(8)


@dataclass(frozen=True)
class DailyLogFile:
    """One daily log as read from disk."""

    date: str
    path: str
    text: str

    @property
    def log(self) -> DailyLog:
        return parse_daily_log(self.text)


@dataclass(frozen=True)
class StoredFact:
    """A fact as it stands in a file: its effective id, where it is, and the parsed line."""

    id: str
    fact: Fact
    path: str
    line: int
    date: str
    chat_id: str | None = None
    session_id: str | None = None

    @property
    def content(self) -> str:
        return self.fact.content

    def to_dict(self) -> dict:
        f = self.fact
        return {
            "id": self.id,
            "content": f.content,
            "category": f.category,
            "tags": list(f.tags),
            "importance": f.importance,
            "timestamp": f.timestamp,
            "path": self.path,
            "line": self.line,
            "date": self.date,
            "chat_id": self.chat_id,
            "session_id": self.session_id or f.source_session,
        }


def _as_fact(item: Fact | Mapping | str) -> Fact:
    if isinstance(item, Fact):
        return item
    if isinstance(item, str):
        return Fact(content=item, category="context")
    if isinstance(item, Mapping):
        known = ("content", "category", "tags", "importance", "id", "source_session", "source_line", "timestamp")
        values = {k: item[k] for k in known if k in item}
        values.setdefault("category", "context")
        if "tags" in values:
            values["tags"] = tuple(values["tags"])
        return Fact(**values)
    raise ValueError(f"a fact is a Fact, a mapping or a string, not {type(item).__name__}")


class MarkdownMemoryStore:
    """A user's memory files: ``memory/users/<user>/YYYY-MM-DD.md`` and ``MEMORY.md``.

    Writes go through ``writer`` (shared with a MemoryManager, so their writes never interleave);
    ``MarkdownMemoryStore(engine, user_id)`` makes its own. ``engine`` is any MemoryBackend.
    """

    def __init__(
        self,
        engine: MemoryBackend,
        user_id: str,
        *,
        writer: MarkdownWriter | None = None,
        clock: Clock = local_now,
        author: str = "syncd-agent",
    ):
        self.engine = engine
        self.user_id = validate_id("user", user_id)
        self.writer = writer or MarkdownWriter(engine)
        self.clock = clock
        self.author = author
        self.home = engine.home

    # -- paths -----------------------------------------------------------------------------------

    def daily_log_rel(self, date: dt.date | str) -> str:
        return self.home.rel(self.home.daily_log_path(self.user_id, date))

    @property
    def memory_file_rel(self) -> str:
        return self.home.rel(self.home.memory_md_path(self.user_id))

    def _intent(self, summary: str, intent: Intent | None, chat_id: str | None = None) -> Intent:
        return intent or Intent(author=self.author, summary=summary, user=self.user_id, chat=chat_id)

    # -- daily logs ------------------------------------------------------------------------------

    def append_daily_log(
        self,
        chat_id: str | None,
        facts: Iterable[Fact | Mapping | str],
        date: dt.date | str | None = None,
        *,
        session_id: str | None = None,
        intent: Intent | None = None,
    ) -> list[Fact]:
        """Append one section holding ``facts`` to the day's log (today by default); one commit.

        Facts without an id get a generated one and, without a timestamp, the current time.
        Returns the facts as written; nothing is written for an empty list.
        """
        if chat_id is not None:
            validate_id("chat", chat_id)
        if session_id is not None:
            validate_id("session", session_id)
        now = self.clock()
        day = date if date is not None else now.date()
        rel = self.daily_log_rel(day)
        stamp = now.isoformat(timespec="seconds")
        written = [replace(f, id=f.id or new_fact_id(), timestamp=f.timestamp or stamp) for f in map(_as_fact, facts)]
        if not written:
            return []
        for fact in written:
            check_fact_content(fact.content)

        def change(current: bytes | None) -> bytes:
            log = self._read_log(rel, current) if current is not None else new_daily_log(day)
            return self._render_log(rel, append_section(log, now.time(), chat_id, session_id, written))

        summary = f"Remember {len(written)} fact{'s' if len(written) != 1 else ''} for {self.user_id}"
        self.writer.update(rel, change, self._intent(summary, intent, chat_id))
        return written

    def list_daily_logs(self) -> list[str]:
        """Dates (``YYYY-MM-DD``) of this user's daily logs, oldest first."""
        folder = self.home.user_dir(self.user_id)
        if not folder.is_dir():
            return []
        return sorted(p.name[:-3] for p in folder.iterdir() if _DATE_NAME_RE.match(p.name) and p.is_file())

    def read_daily_log(self, date: dt.date | str) -> DailyLogFile | None:
        """The day's log, for reading: bytes that are not UTF-8 read as U+FFFD (a rewrite of that
        file refuses instead), and a log that is a symbolic link or unreadable reads as absent, so
        one bad file never stops this user's memory. Both are reported by ``syncd status``."""
        rel = self.daily_log_rel(date)
        try:
            data = read_regular(self.home.root, rel)
        except OSError as exc:
            logger.warning("daily log %s is not read: %s", rel, exc.strerror or exc)
            return None
        if data is None:
            return None
        day = date if isinstance(date, str) else date.isoformat()
        text, warning = decode_markdown_lossy(data, rel)
        if warning:
            logger.info("daily log %s: %s", rel, warning)
        return DailyLogFile(day, rel, text)

    def get_recent_logs(self, days: int = 2) -> list[DailyLogFile]:
        """The logs of the last ``days`` calendar days, today included, oldest first."""
        today = self.clock().date()
        dates = [today - dt.timedelta(days=n) for n in range(max(days, 0) - 1, -1, -1)]
        return [f for f in (self.read_daily_log(d) for d in dates) if f is not None]

    def iter_facts(self) -> Iterator[StoredFact]:
        """Every fact in this user's daily logs, oldest first, with its effective id."""
        for date in self.list_daily_logs():
            found = self.read_daily_log(date)
            if found is None:
                continue
            yield from stored_facts(found.log, found.path, date)

    def find_fact(self, fact_id: str, hint_paths: Iterable[str] = ()) -> StoredFact:
        """The fact with this id (engine-written or derived); ``hint_paths`` are looked at first."""
        own = set(self.list_daily_logs())
        for rel in hint_paths:
            date = rel.rsplit("/", 1)[-1][:-3]
            if date in own and rel == self.daily_log_rel(date):
                found = self.read_daily_log(date)
                for stored in stored_facts(found.log, rel, date) if found else ():
                    if stored.id == fact_id:
                        return stored
        for stored in self.iter_facts():
            if stored.id == fact_id:
                return stored
        raise NotFoundError(f"no fact {fact_id!r} in the memory of {self.user_id}")

    def delete_fact(
        self,
        fact_id: str,
        *,
        hint_paths: Iterable[str] = (),
        intent: Intent | None = None,
        expected: Fact | None = None,
    ) -> StoredFact:
        """Remove exactly the line of one fact (compare-and-swap, one commit). NotFoundError if
        no daily log of this user holds it (any more). With ``expected`` (the fact as the caller
        last saw it), ConflictError if someone changed that fact meanwhile: nothing is deleted."""
        stored = self.find_fact(fact_id, hint_paths)
        rel = stored.path

        def change(current: bytes | None) -> bytes:
            log = self._current_log(current, rel, fact_id, expected)
            return self._render_log(rel, log.remove_fact(fact_id, rel_path=rel))

        summary = f"Forget fact {fact_id} of {self.user_id}"
        self.writer.update(rel, change, self._intent(summary, intent, stored.chat_id))
        return stored

    def replace_fact(
        self,
        fact_id: str,
        new_fact: Fact,
        *,
        hint_paths: Iterable[str] = (),
        intent: Intent | None = None,
        expected: Fact | None = None,
    ) -> StoredFact:
        """Rewrite exactly the line of one fact (compare-and-swap, one commit) and return it as
        written; the rest of the file stays byte for byte. The fact keeps its effective id: give
        ``new_fact`` the old id (a hand-written fact's derived id follows its content). With ``expected`` (the fact as the
        caller last saw it), ConflictError if someone changed that fact meanwhile: edits elsewhere
        in the file are kept, a concurrent edit of this fact is never overwritten."""
        check_fact_content(new_fact.content)
        stored = self.find_fact(fact_id, hint_paths)
        rel = stored.path
        written: list[StoredFact] = []

        def change(current: bytes | None) -> bytes:
            log = self._current_log(current, rel, fact_id, expected)
            new_log = log.replace_fact(fact_id, new_fact, rel_path=rel)
            # The fact as this attempt writes it: a hand-written fact's id follows its new content.
            written[:] = [list(stored_facts(new_log, rel, stored.date))[log.fact_ids(rel).index(fact_id)]]
            return self._render_log(rel, new_log)

        summary = f"Edit fact {fact_id} of {self.user_id}"
        self.writer.update(rel, change, self._intent(summary, intent, stored.chat_id))
        return written[0]

    def _read_log(self, rel: str, data: bytes) -> DailyLog:
        """``parse_daily_log`` of the log's bytes, from this process's last read of it."""
        return _RECENT_LOGS.parse((self.home.root, rel), decode_markdown(data, rel))

    def _render_log(self, rel: str, log: DailyLog) -> bytes:
        """The bytes of ``log``, remembered as the latest version of ``rel``."""
        text = render_daily_log(log)
        _RECENT_LOGS.remember((self.home.root, rel), text, log)
        return encode_markdown(text)

    def _current_log(self, current: bytes | None, rel: str, fact_id: str, expected: Fact | None) -> DailyLog:
        """The log as it is now, checked to still hold the fact as the caller saw it."""
        if current is None:
            raise NotFoundError(f"{rel} disappeared before fact {fact_id!r} could be changed")
        log = self._read_log(rel, current)
        if expected is not None:
            found = dict(zip(log.fact_ids(rel), (located.fact for located in log.facts()))).get(fact_id)
            if found != expected:
                raise ConflictError(rel, render_fact_line(expected), None if found is None else render_fact_line(found))
        return log

    # -- MEMORY.md -------------------------------------------------------------------------------

    def read_memory_file(self) -> str:
        data = self.writer.read(self.memory_file_rel)
        return "" if data is None else decode_markdown(data, self.memory_file_rel)

    def write_memory_file(self, content: str | Callable[[str], str], *, intent: Intent | None = None) -> str | None:
        """Replace MEMORY.md with ``content``, or with ``content(current_text)`` when it is a
        function (re-applied if the file changes under us). Returns the new sha, None if unchanged.
        InvalidInputError (nothing written) for control characters other than tab and newline
        that the new text adds."""
        rel = self.memory_file_rel
        if not callable(content):
            check_text("MEMORY.md", content, multiline=True)

        def change(current: bytes | None) -> bytes:
            text = "" if current is None else decode_markdown(current, rel)
            if not callable(content):
                return encode_markdown(content)
            return encode_markdown(check_text("MEMORY.md", content(text), multiline=True, existing=text))

        return self.writer.update(rel, change, self._intent(f"Update MEMORY.md of {self.user_id}", intent))


def stored_facts(log: DailyLog, rel: str, date: str) -> Iterator[StoredFact]:
    """The facts of the daily log ``log`` (the file ``rel`` of day ``date``) with their ids and
    where each sits, as the API shows them."""
    located: LocatedFact
    for located, fact_id in zip(log.facts(), log.fact_ids(rel)):
        section = located.section
        yield StoredFact(
            id=fact_id,
            fact=located.fact,
            path=rel,
            line=located.line,
            date=date,
            chat_id=section.chat if section else None,
            session_id=(section.session if section else None) or located.fact.source_session,
        )
