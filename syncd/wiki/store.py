"""The derived store of a vault's link graph (SQLite, under the home's ``.syncd/wiki/``), and
building a graph from the files with it.

The markdown is the only truth. The store keeps, per page, its parsed node keyed by path and
git blob sha, and its links' resolutions; plus the vault's file list those resolutions were
computed against, and small facts (lint's findings, git answers) keyed by what they depend on.
Deleting it gives the same graph, only slower.

Two writers keep it: the sync (:class:`SyncedPages`, called with every batch the index applies,
so a page's node is written from the same parse as its rows) and any reader that finds a page
the sync has not seen (``snapshot``: a vault outside a home, a page changed since the last
sync). Neither is trusted blindly: a page is believed only while its size and mtime are those
recorded, and its mtime lies outside ``RACY_NS`` of when it was read (git's "racily clean" rule:
an edit in the same clock tick could keep both); otherwise it is hashed, and parsed again if its
sha moved. Resolutions are believed only for the sha they were computed for and the file list
recorded with them (see :mod:`syncd.wiki.graph`).

Hidden files and folders (a name starting with ``.``: ``.obsidian``, ``.git``, ``.syncd``,
``.trash``) are not part of the vault, as in Obsidian.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sqlite3
import stat
import time
from collections.abc import Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..errors import ParseError
from ..formats.text import decode_markdown
from ..home import blob_sha, is_markdown, read_regular, write_refused
from .graph import PageNode, Problem, VaultGraph, node_of_page, page_node

__all__ = [
    "CODE_DIGEST",
    "RACY_NS",
    "GraphCache",
    "Snapshot",
    "SyncedPages",
    "build_graph",
    "follow_index",
    "scan_vault",
    "snapshot",
    "sources_digest",
    "store_path",
]

log = logging.getLogger(__name__)

RACY_NS = 2_000_000_000
# Below this many pages to parse, starting worker processes costs more than it saves.
PARALLEL_MIN = 400
_SCHEMA_VERSION = 3
_FILES_KEY = "files"
STORE_FILE = "graph.sqlite"
VAULT_PREFIX = "vault/"

# A page row written anew keeps its resolutions only if its content (sha) is the same.
_UPSERT = (
    "INSERT INTO pages (path, size, mtime_ns, checked_ns, sha, data) VALUES (?, ?, ?, ?, ?, ?) "
    "ON CONFLICT(path) DO UPDATE SET size = excluded.size, mtime_ns = excluded.mtime_ns, "
    "checked_ns = excluded.checked_ns, data = excluded.data, sha = excluded.sha, "
    "resolved = CASE WHEN pages.sha = excluded.sha THEN pages.resolved ELSE NULL END"
)


def sources_digest(*modules: str) -> str:
    """A digest of the source of ``modules`` (dotted names under ``syncd``): what is stored was
    derived by that code, and a syncd whose parser or resolver differs must not believe it."""
    package = Path(__file__).resolve().parent.parent
    h = hashlib.sha1()
    for name in modules:
        try:
            h.update((package / (name.replace(".", "/") + ".py")).read_bytes())
        except OSError:  # no source (a frozen build): the version alone
            from .._version import __version__

            h.update(__version__.encode())
    return h.hexdigest()


# The code that decides what a node holds and where a link leads.
CODE_DIGEST = sources_digest("formats.text", "formats.pages", "wiki.resolve", "wiki.graph")
_CODE_KEY = "code"


def store_path(home: Path) -> Path:
    """Where a home's graph store lives."""
    return Path(home) / ".syncd" / "wiki" / STORE_FILE


def _hidden(rel: str) -> bool:
    return rel.startswith(".") or "/." in rel


def scan_vault(root: Path) -> dict[str, os.stat_result]:
    """Every file under ``root`` (relative ``/`` paths), hidden files and folders left out. A
    symbolic link to a file is there by its name, with the link's own stat: a link opens it, as
    in Obsidian, but it is never read (syncd never follows links: it may lead out of the vault,
    to another user's memory or anything on the machine; ``syncd status`` names it). A link to a
    folder is not gone into."""
    out: dict[str, os.stat_result] = {}
    stack = [("", str(root))]
    while stack:
        prefix, folder = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError as exc:
            log.warning("cannot list %s: %s", folder, exc)
            continue
        for entry in entries:
            if entry.name.startswith("."):
                continue
            rel = prefix + entry.name
            try:
                if entry.is_dir(follow_symlinks=False):
                    stack.append((rel + "/", entry.path))
                elif entry.is_file():
                    out[rel] = entry.stat(follow_symlinks=False)
            except OSError:
                continue
    return out


class GraphCache:
    """The derived store. Disposable; any error reading it means "not cached"."""

    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._refused = False
        # The daemon's sync and a CLI lint may write at once: wait for each other, briefly.
        self._db = sqlite3.connect(str(path), timeout=10, isolation_level=None)
        version = self._db.execute("PRAGMA user_version").fetchone()[0]
        if version != _SCHEMA_VERSION:
            self._db.executescript(
                "BEGIN IMMEDIATE; DROP TABLE IF EXISTS pages; DROP TABLE IF EXISTS facts;"
                "CREATE TABLE pages (path TEXT PRIMARY KEY, size INTEGER, mtime_ns INTEGER,"
                " checked_ns INTEGER, sha TEXT, data TEXT, resolved TEXT);"
                "CREATE TABLE facts (key TEXT PRIMARY KEY, value TEXT);"
                f"PRAGMA user_version = {_SCHEMA_VERSION}; COMMIT;"
            )
        if self.fact(_CODE_KEY) != CODE_DIGEST:
            with self._transaction():
                self._db.execute("DELETE FROM pages")
                self._db.execute("DELETE FROM facts")
                self._set_fact(_CODE_KEY, CODE_DIGEST)

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> GraphCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def load(self) -> tuple[dict[str, tuple[int, int, int, str, str, str | None]], tuple[str, ...] | None]:
        """Every page row, and the file list the stored resolutions were computed against,
        read together (one transaction: another writer cannot slip in between)."""
        self._db.execute("BEGIN")
        try:
            rows = {r[0]: r[1:] for r in self._db.execute(
                "SELECT path, size, mtime_ns, checked_ns, sha, data, resolved FROM pages")}  # fmt: skip
            files = self.fact(_FILES_KEY)
        finally:
            self._db.execute("COMMIT")
        return rows, (tuple(files) if isinstance(files, list) else None)

    def rows(self) -> dict[str, tuple[int, int, int, str, str, str | None]]:
        return self.load()[0]

    def save(self, upserts: Sequence[tuple[str, int, int, int, str, str]], deletes: Sequence[str]) -> None:
        if not upserts and not deletes:
            return
        with self._best_effort(), self._transaction():
            self._db.executemany(_UPSERT, upserts)
            self._db.executemany("DELETE FROM pages WHERE path = ?", [(d,) for d in deletes])

    def touch(self, stats: Sequence[tuple[str, int, int, int, str]]) -> None:
        """New stat for pages whose content is the same: ``(path, size, mtime_ns, checked_ns, sha)``."""
        with self._best_effort(), self._transaction():
            self._db.executemany(
                "UPDATE pages SET size = ?, mtime_ns = ?, checked_ns = ? WHERE path = ? AND sha = ?",
                [(size, mtime, checked, path, sha) for path, size, mtime, checked, sha in stats],
            )

    def clear(self) -> None:
        with self._transaction():
            self._db.execute("DELETE FROM pages")
            self._db.execute("DELETE FROM facts WHERE key != ?", (_CODE_KEY,))

    def keep_resolutions(self, graph: VaultGraph, loaded_files: tuple[str, ...] | None) -> bool:
        """Store what ``graph`` resolved anew, and its file list as the one every stored
        resolution now holds for. Only if no other process stored resolutions since ours were
        loaded (else ours may answer for another file list): then nothing is stored. Returns
        whether they were stored (or could not be: see _best_effort)."""
        if not graph.fresh and graph.known_files == graph.files:
            return True
        with self._best_effort(), self._transaction():
            if self._stored_files() != loaded_files:
                return False
            self._db.executemany(
                "UPDATE pages SET resolved = ? WHERE path = ? AND sha = ?",
                [(data, path, graph.pages[path].sha) for path, data in graph.fresh.items()],
            )
            if graph.files != loaded_files:
                self._set_fact(_FILES_KEY, list(graph.files))
        return True

    def _stored_files(self) -> tuple[str, ...] | None:
        files = self.fact(_FILES_KEY)
        return tuple(files) if isinstance(files, list) else None

    def fact(self, key: str) -> Any:
        row = self._db.execute("SELECT value FROM facts WHERE key = ?", (key,)).fetchone()
        return None if row is None else json.loads(row[0])

    def set_fact(self, key: str, value: Any) -> None:
        with self._best_effort(), self._transaction():
            self._set_fact(key, value)

    def _set_fact(self, key: str, value: Any) -> None:
        self._db.execute("INSERT OR REPLACE INTO facts VALUES (?, ?)", (key, json.dumps(value)))

    def _transaction(self):
        return _Immediate(self._db)

    @contextmanager
    def _best_effort(self):
        """A write the store cannot take (on a read-only disk, say, or a page name that is not
        UTF-8) is left out and logged: the store only saves work, and the lint, links or sync
        that was writing it goes on without it."""
        try:
            yield
        except (sqlite3.Error, UnicodeEncodeError) as exc:
            # Once: a read-only store refuses every write of the command alike. And quietly when
            # this process may not write there at all (a home on a read-only mount, someone
            # else's): the person who made it so needs no news of it on every lint.
            level = logging.DEBUG if self._refused else logging.INFO if write_refused(exc) else logging.WARNING
            self._refused = True
            log.log(level, "the wiki graph store %s was not updated: %s", self.path, exc)


class _Immediate:
    """``BEGIN IMMEDIATE`` ... ``COMMIT`` (``ROLLBACK`` on an error): writers queue up front
    instead of failing halfway when two processes write at once."""

    def __init__(self, db: sqlite3.Connection):
        self._db = db

    def __enter__(self) -> None:
        self._db.execute("BEGIN IMMEDIATE")

    def __exit__(self, kind, exc, tb) -> None:
        self._db.execute("COMMIT" if kind is None else "ROLLBACK")


def _node_from_bytes(rel: str, sha: str, data: bytes) -> PageNode:
    try:
        text = decode_markdown(data, rel)
    except ParseError as exc:
        # Not UTF-8: read as the sync indexes it (U+FFFD for the bad bytes), so one bad byte
        # does not take the page's links with it (their targets called orphans, broken ones unseen).
        why = str(exc).removeprefix(f"{rel}:{exc.line}: ")
        problem = Problem("invalid-encoding", exc.line or 1, f"{why}; save the file as UTF-8")
        node = page_node(rel, sha, data.decode("utf-8", errors="replace"))
        return replace(node, problems=(problem, *node.problems))
    return page_node(rel, sha, text)


def _too_large(rel: str, size: int, limit: int) -> PageNode:
    problem = Problem("too-large", 1, f"{size} bytes, over the {limit} syncd reads of a file (SYNCD_MAX_FILE_BYTES): "
                      "not indexed, its links not checked; split it, or move it out of the vault")  # fmt: skip
    return replace(page_node(rel, "", ""), problems=(problem,))


@dataclass(frozen=True)
class Snapshot:
    """The vault's state as the store saw it: every file, and for each page its blob sha and
    its node (decoded) or the node's JSON (not decoded yet, so an unchanged vault is cheap);
    ``known`` the stored resolutions still valid for their page's content, computed against
    ``known_files``."""

    files: tuple[str, ...]
    pages: dict[str, tuple[str, PageNode | str]]
    known: dict[str, str]
    known_files: tuple[str, ...] | None

    def key(self) -> str:
        """A digest of everything the graph depends on: file names and page contents."""
        h = hashlib.sha1()
        for rel in self.files:
            h.update(rel.encode("utf-8", "surrogateescape") + b"\0")
            entry = self.pages.get(rel)
            if entry is not None:
                h.update(entry[0].encode())
        return h.hexdigest()

    def graph(self) -> VaultGraph:
        pages = {
            rel: node if isinstance(node, PageNode) else PageNode.from_json(rel, sha, node)
            for rel, (sha, node) in self.pages.items()
        }
        return VaultGraph(pages, self.files, self.known, self.known_files)


def snapshot(root: Path, cache: GraphCache | None = None, max_file_bytes: int | None = None) -> Snapshot:
    """Scan the vault at ``root``; with ``cache``, unchanged pages are neither parsed nor (out
    of the racy window) read, and the cache is brought up to date. Reads the vault only.

    A page larger than ``max_file_bytes`` is not read (the sync does not index it either): a
    stray dump of gigabytes would otherwise be read whole and parsed, by lint over REST in the
    daemon's own process too. It is a ``too-large`` problem, its links unknown."""
    root = Path(root)
    stats = scan_vault(root)
    cached, known_files = cache.load() if cache is not None else ({}, None)
    now = time.time_ns()
    pages: dict[str, tuple[str, PageNode | str]] = {}
    known: dict[str, str] = {}
    upserts: list[tuple[str, int, int, int, str, str]] = []
    to_parse: list[tuple[str, str, bytes]] = []
    for rel, st in stats.items():
        if not is_markdown(rel) or stat.S_ISLNK(st.st_mode):
            continue
        if max_file_bytes is not None and st.st_size > max_file_bytes:
            # Named by its size and time in place of a sha, so a lint kept for it ends when it changes.
            pages[rel] = (f"too-large:{st.st_size}:{st.st_mtime_ns}", _too_large(rel, st.st_size, max_file_bytes))
            continue
        row = cached.get(rel)
        if row is not None:
            size, mtime_ns, checked_ns, sha, node_json, resolved = row
            if size == st.st_size and mtime_ns == st.st_mtime_ns and mtime_ns + RACY_NS < checked_ns:
                pages[rel] = (sha, node_json)
                if resolved is not None:
                    known[rel] = resolved
                continue
        try:
            # Not through a link, even one swapped in since the scan.
            data = read_regular(root, rel)
        except OSError as exc:
            log.warning("cannot read %s: %s", rel, exc)
            continue
        if data is None:  # gone since the scan
            continue
        sha = blob_sha(data)
        if row is not None and row[3] == sha:
            pages[rel] = (sha, row[4])
            if row[5] is not None:
                known[rel] = row[5]
            upserts.append((rel, st.st_size, st.st_mtime_ns, now, sha, row[4]))
        else:
            to_parse.append((rel, sha, data))
    for rel, sha, node_json, node in _parse_all(to_parse):
        st = stats[rel]
        pages[rel] = (sha, node if node is not None else node_json)
        upserts.append((rel, st.st_size, st.st_mtime_ns, now, sha, node_json))
    if cache is not None:
        cache.save(upserts, [p for p in cached if p not in pages])
    return Snapshot(tuple(sorted(stats)), pages, known, known_files)


def _parse_batch(
    batch: list[tuple[str, str, bytes]], keep: bool = False
) -> list[tuple[str, str, str, PageNode | None]]:
    out = []
    for rel, sha, data in batch:
        node = _node_from_bytes(rel, sha, data)
        out.append((rel, sha, node.to_json(), node if keep else None))
    return out


def _parse_all(items: list[tuple[str, str, bytes]]) -> list[tuple[str, str, str, PageNode | None]]:
    """Parse pages, on every core when there are many (a cold build of a large vault): parsing
    is pure CPU work and the GIL would hold it to one core. Parsed here, the nodes themselves
    come back too (no need to decode their JSON again)."""
    workers = min(os.cpu_count() or 1, 8)
    if workers < 2 or len(items) < PARALLEL_MIN:
        return _parse_batch(items, keep=True)
    size = -(-len(items) // (workers * 4))
    batches = [items[i : i + size] for i in range(0, len(items), size)]
    # Here, not at the top: every `syncd sync` follows the index with this module (cli), and
    # only a cold build of a large vault starts processes.
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    try:
        context = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else None)
        with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
            return [row for part in pool.map(_parse_batch, batches) for row in part]
    except (OSError, RuntimeError) as exc:  # no processes allowed here: do it on this one
        log.debug("parsing on one core: %s", exc)
        return _parse_batch(items, keep=True)


def build_graph(root: Path, cache: GraphCache | None = None, max_file_bytes: int | None = None) -> VaultGraph:
    """The graph of the vault at ``root`` from its files (see ``snapshot``)."""
    return snapshot(root, cache, max_file_bytes).graph()


def follow_index(engine: Any) -> None:
    """Keep the link graph store of ``engine``'s home in step with every batch its index applies
    (Engine.follow_index), from the same parses. Without it the store is still right, only
    slower: readers parse what it lacks."""
    engine.follow_index(SyncedPages(engine.home.root))


class SyncedPages:
    """The sync's side of the store: called with each batch of index updates of a home, it
    writes the nodes of the vault pages in it (parsed once, for their rows and their node),
    forgets deleted and moved ones, and notes new stats. A failure here costs only speed
    (a reader parses what the store lacks), so it is logged, never raised."""

    def __init__(self, home: Path):
        self.path = store_path(home)

    def __eq__(self, other: object) -> bool:
        # The same store followed twice would write every batch twice (Engine.follow_index).
        return isinstance(other, SyncedPages) and other.path == self.path

    def reset(self) -> None:
        """Forget everything (a rebuild of the index rebuilds this too)."""
        try:
            with GraphCache(self.path) as cache:
                cache.clear()
        except (OSError, sqlite3.Error) as exc:
            log.warning("cannot reset the wiki graph store %s: %s", self.path, exc)

    def __call__(self, updates: Sequence[Any]) -> None:
        now = time.time_ns()
        upserts, deletes, touched = [], [], []
        for update in updates:
            if not update.path.startswith(VAULT_PREFIX):
                continue
            rel = update.path[len(VAULT_PREFIX) :]
            if _hidden(rel) or not is_markdown(rel):
                continue
            record = update.record
            if record is None:
                deletes.append(rel)
            elif update.rows is None:
                touched.append((rel, record.size, record.mtime_ns, now, record.sha))
            elif getattr(update, "page", None) is None or record.error:
                deletes.append(rel)  # not read cleanly (not UTF-8, too large): a reader parses it
            else:
                node = node_of_page(rel, record.sha, update.page)
                upserts.append((rel, record.size, record.mtime_ns, now, record.sha, node.to_json()))
        if not (upserts or deletes or touched):
            return
        try:
            with GraphCache(self.path) as cache:
                cache.save(upserts, deletes)
                if touched:
                    cache.touch(touched)
        except (OSError, sqlite3.Error) as exc:
            log.warning("cannot update the wiki graph store %s: %s", self.path, exc)
