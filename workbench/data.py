"""The workbench's read model: what its tabs show, built from syncd's public API only.

``HomeData`` opens the home read-only (no lock: it works beside ``syncd watch`` and agents) and
writes through the memory API (``syncd.memory.MemoryManager``, compare-and-swap, committed with the
workbench as the author). Everything here is plain Python with no widget in sight, so the tabs stay
thin and the tests can check the answers directly. Lists are returned whole (they are cheap: file
names, one day's facts); the widgets page them.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import logging
import os
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import syncd
import syncd.engine.asof
import syncd.engine.audit
import syncd.engine.conflicts
import syncd.engine.search
from syncd.errors import IndexError_
from syncd.formats import Page, decode_markdown_lossy, parse_page
from syncd.home import common_git_dir, git_dir, read_memory_file, read_regular, validate_id
from syncd.memory import MemoryManager, StoredFact

__all__ = ["HomeData", "BlockRow", "Provenance", "DayCounts", "AUTHOR"]

log = logging.getLogger(__name__)

AUTHOR = "workbench"
SCOPES = ("chat", "user", "global")
_T = TypeVar("_T")


@dataclass(frozen=True)
class BlockRow:
    """One block label: its text at each scope (None: no file there) and which one is in effect."""

    label: str
    texts: dict[str, str | None]
    resolved: str  # "chat", "user", "global" or "default"
    content: str
    limit: int
    problems: dict[str, str] = field(default_factory=dict)  # scope -> why its file is not used


@dataclass(frozen=True)
class Provenance:
    """Where a line came from: the session and transcript line its metadata names, and the commit
    that introduced it (None while it is not committed yet)."""

    path: str
    line: int
    session: str | None
    transcript_line: int | None
    history: syncd.engine.audit.FactHistory | None
    error: str | None = None


@dataclass(frozen=True)
class DayCounts:
    """Facts per category in one daily log, and the log's size in bytes."""

    user: str
    date: str
    categories: dict[str, int]
    size: int


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


def _valid_chat(name: str) -> bool:
    try:
        validate_id("chat", name)
    except ValueError:
        return False
    return True


def parse_provenance(text: str) -> tuple[str | None, int | None]:
    """``session#line`` (a fact's ``src:``) as (session, line); either may be absent."""
    if not text:
        return None, None
    session, _, line = text.partition("#")
    return session or None, int(line) if line.isdigit() else None


class HomeData:
    """One home, read for people: users, chats, logs, facts, blocks, pages, history, health."""

    def __init__(self, home: Path | str, *, settings: Any = None, embedder: Any = None, author: str = AUTHOR):
        self.engine = syncd.open(home, read_only=True, settings=settings, embedder=embedder)
        self._embedder = embedder
        self.settings = self.engine.settings
        self.root: Path = self.engine.home.root
        try:
            self.memory = MemoryManager(self.engine, author=author)
            self.wiki = syncd.WikiManager.for_home(self.root)
        except BaseException:
            self.engine.close()  # nobody else holds it to close it
            raise
        # The memory API is async; a kernel's loop is already running in this thread, so its
        # coroutines run to completion on a worker thread's own loop.
        self._pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="workbench")
        self._headings: dict[str, tuple[tuple[int, int] | None, frozenset[str]]] = {}
        self._counts: dict[str, tuple[tuple[int, int] | None, DayCounts]] = {}
        # What the reading methods read (users, logs, facts, search, blocks): the memory now, or
        # as a past commit left it (set_at). Writes always go to now, through self.memory.
        self.at: str | None = None
        self._reader = self.memory
        self._past = contextlib.ExitStack()

    def close(self) -> None:
        self._past.close()
        self._pool.shutdown(wait=True)
        self.engine.close()
        # The tabs hold this object for as long as anything holds them (IPython keeps a cell's
        # output): the index and the model it loaded go now, not then.
        del self.engine, self.memory, self._reader

    # -- when ------------------------------------------------------------------------------------

    def set_at(self, at: str | None) -> str | None:
        """Read the memory as commit ``at`` left it (anything git names, or a date/time: the last
        commit at or before it), or as it is now (None). Search, browse and core memory then
        answer from that commit's own files and a past index (syncd.engine.asof), which the
        first look at a revision builds from the nearest index. The commit's sha, or None.
        NotFoundError / InvalidInputError for a revision that names no commit (nothing changes)."""
        if at is None:
            self._past.close()
            self.at, self._reader = None, self.memory
            return None
        sha = syncd.engine.asof.resolve_revision(self.root, at)
        past = contextlib.ExitStack()
        engine = past.enter_context(syncd.engine.asof.past_engine(self.engine, sha, files=True))
        self._past.close()
        self._past, self.at, self._reader = past, sha, MemoryManager(engine, author=AUTHOR)
        self._headings.clear()
        self._counts.clear()
        return sha

    def at_label(self) -> str | None:
        """Which past the reading methods show (``<sha10> <date> <subject>``), None when now."""
        return None if self.at is None else syncd.engine.asof.describe_revision(self.root, self.at)

    @property
    def _read_root(self) -> Path:
        return self._reader.engine.home.root

    def run(self, coro: Coroutine[Any, Any, _T]) -> _T:
        return self._pool.submit(asyncio.run, coro).result()

    # -- who and where ---------------------------------------------------------------------------

    def users(self) -> list[str]:
        return self._reader.users()

    def store(self, user: str):
        return self._reader.store(user_id=user)

    def dates(self, user: str) -> list[str]:
        """The user's daily logs, newest first (what a person looks at first)."""
        return self.store(user).list_daily_logs()[::-1]

    def chats(self, user: str) -> list[str]:
        """Chats of a user: folders with chat blocks, and chats named in daily-log headings
        (each log parsed once, then again only when it changes)."""
        found: set[str] = set()
        chats_dir = self._read_root / "memory" / "users" / user / "chats"
        if chats_dir.is_dir():
            # A folder whose name is no valid chat id belongs to no chat (the engine indexes none
            # of it, and refuses it as a chat): offered, picking it raised InvalidIdError.
            found.update(p.name for p in chats_dir.iterdir() if p.is_dir() and _valid_chat(p.name))
        store = self.store(user)
        for date in store.list_daily_logs():
            rel = store.daily_log_rel(date)
            stamp = _stamp(self._read_root / rel)
            cached = self._headings.get(rel)
            if cached is None or cached[0] != stamp:
                day = store.read_daily_log(date)
                names = frozenset(s.chat for s in day.log.sections if s.chat) if day else frozenset()
                cached = self._headings[rel] = (stamp, names)
            found |= cached[1]
        return sorted(found)

    # -- facts -----------------------------------------------------------------------------------

    def day_facts(self, user: str, date: str) -> list[StoredFact]:
        """The facts of one daily log in file order, with their effective ids."""
        store = self.store(user)
        day = store.read_daily_log(date)
        if day is None:
            return []
        log_ = day.log
        return [
            StoredFact(
                id=fid,
                fact=located.fact,
                path=day.path,
                line=located.line,
                date=date,
                chat_id=located.section.chat if located.section else None,
                session_id=(located.section.session if located.section else None) or located.fact.source_session,
            )
            for located, fid in zip(log_.facts(), log_.fact_ids(day.path))
        ]

    def find_fact(self, user: str, fact_id: str) -> StoredFact:
        """The fact as it is now, whatever past the reading methods show: it is loaded to be
        edited, and an edit is of now (loaded as a past left it, its save found it "changed")."""
        # The index only hints where to look; with none on disk, asking it would make empty
        # tables there (after which Health says "stale", not "missing"): the files answer alone.
        found = self.engine.find_fact(fact_id) if self.engine.index_on_disk() else []
        hints = [r["path"] for r in found if r.get("user") == user]
        return self.memory.store(user_id=user).find_fact(fact_id, hints)

    def search(
        self, query: str, user: str | None, chat: str | None, kind: str | None, limit: int, include_wiki: bool = False
    ):
        """The one search every front end makes (syncd.engine.search); ``user`` None: every user's.
        IndexError_ when there is no index to search (.syncd/ deleted, or never built): nothing
        found there would say nothing about the memory, and opening it would make empty tables."""
        if self.at is None and not self.engine.index_on_disk():
            raise IndexError_(
                "there is no index to search (deleted with .syncd/, or not built yet): a running "
                "`syncd watch` rebuilds it, else Reindex on the Health tab"
            )
        return syncd.engine.search.search(
            self._reader.engine, query, user_id=user, chat_id=chat, kind=kind, limit=limit, include_wiki=include_wiki
        )

    def around(self, rel: str, line: int, radius: int = 4) -> list[tuple[int, str]]:
        """Numbered lines of a file around ``line`` (what a person opens the file to see)."""
        # Never through a symbolic link: a pull can put one where an indexed file was.
        try:
            data = read_regular(self._read_root, rel)
        except (OSError, syncd.SyncdError):
            return []
        if data is None:
            return []
        text = data.decode("utf-8", errors="replace")
        lines = text.splitlines()
        start, end = max(line - radius, 1), min(line + radius, len(lines))
        return [(n, lines[n - 1]) for n in range(start, end + 1)]

    def provenance(self, rel: str, line: int, text: str, source: str = "") -> Provenance:
        session, transcript_line = parse_provenance(source)
        try:
            history = syncd.engine.audit.fact_history(self.root, rel, line, text, self.at) if line > 0 else None
        except syncd.SyncdError as exc:
            return Provenance(rel, line, session, transcript_line, None, str(exc))
        return Provenance(rel, line, session, transcript_line, history)

    # -- core blocks -----------------------------------------------------------------------------

    def _block_page(self, label: str, scope: str, user: str | None, chat: str | None, now: bool = False) -> Page | None:
        """The block file at one scope (of now for an edit, else of the memory shown), None when
        there is none. Read as the engine reads it, never through a symbolic link (whose target
        may be any file on the machine): ParseError saying what is there instead."""
        home = (self.memory if now else self._reader).engine.home
        if scope == "global":
            path = home.block_path(label)
        elif scope == "user":
            path = home.block_path(label, user)
        else:
            path = home.block_path(label, user, chat)
        rel = home.rel(path)
        data = read_memory_file(home.root, rel)
        return None if data is None else parse_page(decode_markdown_lossy(data, rel)[0])

    def block_text(self, label: str, scope: str, user: str | None, chat: str | None) -> str | None:
        """The body of the block file at one scope, None when there is no such file; ParseError
        when something other than a file is there (a symbolic link)."""
        if (scope in ("user", "chat") and not user) or (scope == "chat" and not chat):
            return None
        page = self._block_page(label, scope, user, chat)
        return None if page is None else page.body.strip()

    def blocks(self, user: str | None, chat: str | None) -> list[BlockRow]:
        """Every block label as ``user`` in ``chat`` sees it, with the text at each scope (and
        why a file there is not used, for one that cannot be)."""
        resolved = self._reader.core_blocks(user_id=user, chat_id=chat) if user else self._reader.core_blocks()
        rows = []
        for label, block in resolved.items():
            texts: dict[str, str | None] = {}
            problems: dict[str, str] = {}
            for scope in SCOPES:
                try:
                    texts[scope] = self.block_text(label, scope, user, chat)
                except syncd.SyncdError as exc:
                    texts[scope], problems[scope] = None, str(exc)
            rows.append(BlockRow(label, texts, block.scope, block.content, block.limit, problems))
        return rows

    def block_limit(self, label: str, scope: str, user: str | None, chat: str | None) -> int:
        try:
            page = self._block_page(label, scope, user, chat, now=True)  # for an edit, which is of now
        except syncd.SyncdError:
            page = None
        meta = page.frontmatter if page is not None else {}
        value = meta.get("limit") if isinstance(meta, dict) else None
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
        return self.settings.block_char_limit

    # -- the wiki --------------------------------------------------------------------------------

    def pages(self) -> list[str]:
        if not self.wiki.root.is_dir():
            return []
        return sorted(self.wiki.graph().pages)

    def page_links(self, page: str):
        return self.wiki.links(page), self.wiki.backlinks(page)

    def lint(self):
        return self.wiki.lint() if self.wiki.root.is_dir() else []

    # -- history and health ----------------------------------------------------------------------

    def log(self, path: str | None, limit: int):
        return syncd.engine.audit.read_log(self.root, path or None, limit)

    def effect(self, sha: str):
        return syncd.engine.audit.commit_effect(self.root, sha)

    def revert(self, sha: str) -> str:
        return syncd.engine.audit.revert(self.root, sha, self.settings)

    def status(self):
        return self.engine.status()

    def conflicts(self) -> list[syncd.engine.conflicts.Conflict]:
        """What merges with another machine kept both versions of (home-relative paths, lines)."""
        return syncd.engine.conflicts.find_conflicts(self.root)

    def resolve_conflict(self, conflict: syncd.engine.conflicts.Conflict, keep: str) -> str:
        """Keep ``mine``, ``theirs`` or ``both`` of ``conflict`` (as it was listed): one
        compare-and-swap write through the engine's write path, committed as the workbench.
        ConflictError when the file no longer holds that conflict as listed."""
        return syncd.engine.conflicts.resolve_conflict(
            self.engine, conflict.path, conflict.line, keep, author=AUTHOR, expected=conflict
        )

    def reindex(self, progress: Callable[[Any], None]) -> Any:
        """Rebuild the index (holding the home for the rebuild). LockedError while a daemon or
        another writer holds it: the daemon keeps the index in step itself."""
        with syncd.open(self.root, settings=self.settings, embedder=self._embedder) as writer:
            return writer.reindex(progress=progress)

    def change_token(self) -> tuple:
        """Cheap to read (a few stats, no git process): changes whenever the index is written
        (an indexed change, a reindex) or a commit lands (HEAD or a branch moves)."""
        # A linked worktree's .git is a file: HEAD is in its own git folder, the branches in the
        # folder all its worktrees share (stat'ing .git/HEAD there saw no commit ever).
        git = git_dir(self.root) or self.root / ".git"
        shared = common_git_dir(self.root) or git
        paths = [self.root / ".syncd" / "index" / "meta.json", git / "HEAD", shared / "packed-refs"]
        try:
            head = (git / "HEAD").read_text(encoding="utf-8").strip()
        except OSError:
            head = ""
        if head.startswith("ref: "):
            paths.append(shared / head[5:])
        return tuple(_stamp(p) for p in paths) + (head,)

    def day_counts(self) -> list[DayCounts]:
        """Facts per category of every daily log of every user (each log parsed once, then again
        only when it changes: at 100,000 facts a first pass takes seconds, a refresh milliseconds)."""
        out = []
        seen = set()
        for user in self.users():
            store = self.store(user)
            for date in store.list_daily_logs():
                rel = store.daily_log_rel(date)
                seen.add(rel)
                stamp = _stamp(self._read_root / rel)
                cached = self._counts.get(rel)
                if cached is None or cached[0] != stamp:
                    day = store.read_daily_log(date)
                    counts = collections.Counter(f.fact.category for f in day.log.facts()) if day else {}
                    cached = self._counts[rel] = (stamp, DayCounts(user, date, dict(counts), stamp[1] if stamp else 0))
                out.append(cached[1])
        for gone in set(self._counts) - seen:
            del self._counts[gone]
        return out


def env_home() -> str:
    """The home a notebook opens by default: ``$SYNCD_HOME``, else ``~/memory``."""
    return os.environ.get("SYNCD_HOME") or str(Path("~/memory").expanduser())
