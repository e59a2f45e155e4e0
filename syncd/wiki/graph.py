"""The link graph of a vault: its files, and for every markdown page its links, embeds,
headings, block ids, aliases, tags and provenance, with each link resolved as Obsidian would.

Built from the files (``build_graph``). The markdown is the only truth: what is parsed is kept
in a small derived store (``GraphCache``, SQLite under the home's ``.syncd/``) keyed by path
and git blob sha, so a second build parses only pages that changed. Deleting the store gives
the same graph, only slower. A page whose size and mtime are unchanged is trusted without
reading it unless its mtime is within ``RACY_NS`` of when it was last checked (git's "racily
clean" rule: an edit in the same clock tick could keep both).

Hidden files and folders (a name starting with ``.``: ``.obsidian``, ``.git``, ``.syncd``,
``.trash``) are not part of the vault, as in Obsidian.
"""

from __future__ import annotations

import hashlib
import json
import logging
import multiprocessing
import os
import re
import sqlite3
import time
from collections.abc import Iterable, Mapping
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, NamedTuple

from ..errors import ParseError
from ..formats.pages import parse_page
from ..formats.text import decode_markdown
from ..home import blob_sha
from .resolve import Resolution, Resolver, parse_linktext, subpath_exists

__all__ = [
    "LinkRef",
    "Problem",
    "PageNode",
    "Edge",
    "VaultGraph",
    "GraphCache",
    "page_node",
    "Snapshot",
    "snapshot",
    "build_graph",
    "scan_vault",
]

log = logging.getLogger(__name__)

RACY_NS = 2_000_000_000
# Below this many pages to parse, starting worker processes costs more than it saves.
PARALLEL_MIN = 400
_SCHEMA_VERSION = 1
_TAG_OK_RE = re.compile(r"#?[\w/-]+")
_URL_RE = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")


class LinkRef(NamedTuple):
    """One link as Obsidian reads it. A NamedTuple rather than a dataclass because a large
    vault holds tens of thousands and they are rebuilt from the cache on every lint."""

    path: str
    subpath: str
    alias: str | None
    embed: bool
    line: int
    raw: str


class Problem(NamedTuple):
    """Something wrong in a page's own text (not its links): a lint finding in waiting."""

    code: str
    line: int
    message: str


@dataclass(frozen=True)
class PageNode:
    """What the graph knows about one markdown page (``path`` relative to the vault root)."""

    path: str
    sha: str
    title: str | None
    links: tuple[LinkRef, ...]
    headings: tuple[tuple[int, str], ...]
    block_ids: tuple[str, ...]
    footnotes: tuple[str, ...]
    aliases: tuple[str, ...]
    tags: tuple[str, ...]
    sources: tuple[str, ...]
    sources_line: int
    page_type: str | None
    problems: tuple[Problem, ...]

    def to_json(self) -> str:
        return json.dumps(
            [self.title, self.links, self.headings, self.block_ids, self.footnotes, self.aliases,
             self.tags, self.sources, self.sources_line, self.page_type, self.problems],
            ensure_ascii=False, separators=(",", ":"),
        )  # fmt: skip

    @classmethod
    def from_json(cls, path: str, sha: str, data: str) -> PageNode:
        t, links, heads, blocks, notes, aliases, tags, sources, sline, ptype, probs = json.loads(data)
        return cls(
            path, sha, t, tuple(LinkRef._make(x) for x in links), tuple(map(tuple, heads)),
            tuple(blocks), tuple(notes), tuple(aliases), tuple(tags), tuple(sources), sline,
            ptype, tuple(Problem._make(x) for x in probs),
        )  # fmt: skip


# --------------------------------------------------------------------------- one page (pure)


def _key_line(fm_lines: list[str], keys: Iterable[str]) -> int:
    """1-based file line of the first frontmatter line that sets one of ``keys`` (else 1)."""
    for i, text in enumerate(fm_lines):
        for key in keys:
            if text.startswith(key) and text[len(key) :].lstrip(" \t").startswith(":"):
                return i + 1
    return 1


def _string_list(value: Any) -> tuple[list[str], str | None]:
    """A frontmatter value that should be text or a list of text: its items, or why not."""
    if value is None:
        return [], None
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()], None
    if isinstance(value, list):
        items, bad = [], []
        for item in value:
            if isinstance(item, str) and item.strip():
                items.append(item.strip())
            elif isinstance(item, (int, float)) and not isinstance(item, bool):
                items.append(str(item))
            else:
                bad.append(item)
        if bad:
            return items, f"holds {bad[0]!r}, which is not text"
        return items, None
    return [], f"is a {type(value).__name__}, not text or a list of text"


def _shape_problems(fm: Mapping[Any, Any], fm_lines: list[str]) -> tuple[list[Problem], list[str], list[str]]:
    problems: list[Problem] = []
    alias_key = "aliases" if "aliases" in fm else "alias"
    aliases, why = _string_list(fm.get(alias_key))
    if why:
        line = _key_line(fm_lines, (alias_key,))
        problems.append(Problem("bad-aliases", line, f"frontmatter `{alias_key}` {why}; write a list: "
                                f"`{alias_key}: [Other name, Short name]`"))  # fmt: skip
    sources, why = _string_list(fm.get("sources"))
    if why:
        line = _key_line(fm_lines, ("sources",))
        problems.append(Problem("bad-sources", line, f"frontmatter `sources` {why}; write a list of "
                                "links, paths or URLs: `sources: ['[[Paper]]', raw/notes.pdf]`"))  # fmt: skip
    for key in ("tags", "tag"):
        if key not in fm:
            continue
        value = fm[key]
        line = _key_line(fm_lines, (key,))
        if value is None or isinstance(value, str):
            continue
        if not isinstance(value, list):
            problems.append(Problem("bad-tags", line, f"frontmatter `{key}` is a {type(value).__name__}; "
                                    f"write a list: `{key}: [project, idea]`"))  # fmt: skip
            continue
        for item in value:
            text = str(item) if isinstance(item, (str, int, float)) and not isinstance(item, bool) else None
            if text is None or not _TAG_OK_RE.fullmatch(text) or text.lstrip("#").isdigit():
                problems.append(Problem("bad-tags", line, f"frontmatter `{key}` holds {item!r}, which Obsidian "
                                        "does not read as a tag (letters, digits, _ - / and not only digits; "
                                        "no spaces: use-dashes)"))  # fmt: skip
                break
    return problems, aliases, sources


def page_node(path: str, sha: str, text: str) -> PageNode:
    """Parse one page's text into its node. Pure; never raises for any text."""
    page = parse_page(text)
    fm_lines = page.frontmatter_raw.split("\n")
    problems: list[Problem] = []
    if page.frontmatter_error:
        problems.append(Problem("invalid-frontmatter", 1, f"{page.frontmatter_error}; Obsidian ignores "
                                "this page's properties until the YAML between the `---` lines is fixed"))  # fmt: skip
    shape, aliases, sources = _shape_problems(page.frontmatter, fm_lines)
    problems.extend(shape)
    links = []
    for link in page.links:
        linkpath, subpath = parse_linktext(link.raw)
        links.append(LinkRef(linkpath, subpath, link.alias, link.embed, link.line, link.raw))
    ptype = page.frontmatter.get("type")
    return PageNode(
        path=path,
        sha=sha,
        title=page.title,
        links=tuple(links),
        headings=tuple((h.level, h.text) for h in page.headings),
        block_ids=tuple(dict.fromkeys(b.id for b in page.block_ids)),
        footnotes=page.footnotes,
        aliases=tuple(aliases),
        tags=page.tags,
        sources=tuple(sources),
        sources_line=_key_line(fm_lines, ("sources",)),
        page_type=ptype if isinstance(ptype, str) else None,
        problems=tuple(problems),
    )


# --------------------------------------------------------------------------- the graph (pure)


class Edge(NamedTuple):
    """A link from ``source`` with where it leads."""

    source: str
    link: LinkRef
    resolution: Resolution
    subpath_ok: bool


@dataclass
class VaultGraph:
    """Pages (markdown files) and all files of a vault, with every link resolved on demand."""

    pages: dict[str, PageNode]
    files: tuple[str, ...]
    resolver: Resolver = field(init=False)
    _edges: list[Edge] | None = field(default=None, init=False, repr=False)
    _backlinks: dict[str, list[Edge]] | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self.resolver = Resolver(self.files)

    def resolve(self, source: str, link: LinkRef) -> Edge:
        res = self.resolver.resolve(link.path, source)
        ok = True
        if link.subpath and res.target is not None:
            node = self.pages.get(res.target)
            if node is not None:
                ok = subpath_exists(link.subpath, node.headings, node.block_ids, node.footnotes)
        return Edge(source, link, res, ok)

    @property
    def edges(self) -> list[Edge]:
        """Every link of every page, resolved; in page path order, then file order."""
        if self._edges is None:
            self._edges = [self.resolve(p, link) for p in sorted(self.pages) for link in self.pages[p].links]
        return self._edges

    def links(self, page: str) -> list[Edge]:
        node = self.pages.get(page)
        return [] if node is None else [self.resolve(page, link) for link in node.links]

    def backlinks(self, target: str) -> list[Edge]:
        """Links from other pages (and the page itself) that Obsidian opens ``target`` for."""
        if self._backlinks is None:
            index: dict[str, list[Edge]] = {}
            for edge in self.edges:
                if edge.resolution.target is not None:
                    index.setdefault(edge.resolution.target, []).append(edge)
            self._backlinks = index
        return list(self._backlinks.get(target, ()))

    def find(self, name: str) -> str | None:
        """The file a person means by ``name``: a vault path, or what ``[[name]]`` opens from
        the vault root."""
        name = name.strip().removeprefix("./")
        if name in self.pages or name in self.files:
            return name
        return self.resolver.resolve(parse_linktext(name)[0], "").target


# --------------------------------------------------------------------------- files and cache (I/O)


def scan_vault(root: Path) -> dict[str, os.stat_result]:
    """Every file under ``root`` (relative ``/`` paths), hidden files and folders left out."""
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
                    out[rel] = entry.stat()
            except OSError:
                continue
    return out


class GraphCache:
    """The derived store: parsed page nodes by (path, blob sha), plus small facts keyed by the
    git HEAD they were computed at. Disposable; any error reading it means "not cached"."""

    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._db = sqlite3.connect(str(path))
        version = self._db.execute("PRAGMA user_version").fetchone()[0]
        if version != _SCHEMA_VERSION:
            self._db.executescript(
                "DROP TABLE IF EXISTS pages; DROP TABLE IF EXISTS facts;"
                "CREATE TABLE pages (path TEXT PRIMARY KEY, size INTEGER, mtime_ns INTEGER,"
                " checked_ns INTEGER, sha TEXT, data TEXT);"
                "CREATE TABLE facts (key TEXT PRIMARY KEY, value TEXT);"
                f"PRAGMA user_version = {_SCHEMA_VERSION};"
            )
            self._db.commit()

    def close(self) -> None:
        self._db.close()

    def rows(self) -> dict[str, tuple[int, int, int, str, str]]:
        return {r[0]: r[1:] for r in self._db.execute("SELECT path, size, mtime_ns, checked_ns, sha, data FROM pages")}

    def save(self, upserts: list[tuple[str, int, int, int, str, str]], deletes: list[str]) -> None:
        if not upserts and not deletes:
            return
        with self._db:
            self._db.executemany("INSERT OR REPLACE INTO pages VALUES (?, ?, ?, ?, ?, ?)", upserts)
            self._db.executemany("DELETE FROM pages WHERE path = ?", [(d,) for d in deletes])

    def fact(self, key: str) -> Any:
        row = self._db.execute("SELECT value FROM facts WHERE key = ?", (key,)).fetchone()
        return None if row is None else json.loads(row[0])

    def set_fact(self, key: str, value: Any) -> None:
        with self._db:
            self._db.execute("INSERT OR REPLACE INTO facts VALUES (?, ?)", (key, json.dumps(value)))


def _node_from_bytes(rel: str, sha: str, data: bytes) -> PageNode:
    try:
        text = decode_markdown(data, rel)
    except ParseError as exc:  # not UTF-8: the page still exists and can be linked to
        problem = Problem("invalid-encoding", exc.line or 1, f"{exc}; save the file as UTF-8")
        return replace(page_node(rel, sha, ""), problems=(problem,))
    return page_node(rel, sha, text)


@dataclass(frozen=True)
class Snapshot:
    """The vault's state as the cache saw it: every file, and for each page its blob sha and
    its node (decoded) or the node's JSON (not decoded yet, so an unchanged vault is cheap)."""

    files: tuple[str, ...]
    pages: dict[str, tuple[str, PageNode | str]]

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
        return VaultGraph(pages, self.files)


def snapshot(root: Path, cache: GraphCache | None = None) -> Snapshot:
    """Scan the vault at ``root``; with ``cache``, unchanged pages are neither parsed nor (out
    of the racy window) read, and the cache is brought up to date. Reads the vault only."""
    root = Path(root)
    stats = scan_vault(root)
    cached = cache.rows() if cache is not None else {}
    now = time.time_ns()
    pages: dict[str, tuple[str, PageNode | str]] = {}
    upserts: list[tuple[str, int, int, int, str, str]] = []
    to_parse: list[tuple[str, str, bytes]] = []
    for rel, st in stats.items():
        if not rel.lower().endswith(".md"):
            continue
        row = cached.get(rel)
        if row is not None:
            size, mtime_ns, checked_ns, sha, data = row
            if size == st.st_size and mtime_ns == st.st_mtime_ns and mtime_ns + RACY_NS < checked_ns:
                pages[rel] = (sha, data)
                continue
        try:
            data = (root / rel).read_bytes()
        except OSError as exc:
            log.warning("cannot read %s: %s", rel, exc)
            continue
        sha = blob_sha(data)
        if row is not None and row[3] == sha:
            pages[rel] = (sha, row[4])
            upserts.append((rel, st.st_size, st.st_mtime_ns, now, sha, row[4]))
        else:
            to_parse.append((rel, sha, data))
    for rel, sha, node_json in _parse_all(to_parse):
        st = stats[rel]
        pages[rel] = (sha, node_json)
        upserts.append((rel, st.st_size, st.st_mtime_ns, now, sha, node_json))
    if cache is not None:
        cache.save(upserts, [p for p in cached if p not in pages])
    return Snapshot(tuple(sorted(stats)), pages)


def _parse_batch(batch: list[tuple[str, str, bytes]]) -> list[tuple[str, str, str]]:
    return [(rel, sha, _node_from_bytes(rel, sha, data).to_json()) for rel, sha, data in batch]


def _parse_all(items: list[tuple[str, str, bytes]]) -> list[tuple[str, str, str]]:
    """Parse pages, on every core when there are many (a cold build of a large vault): parsing
    is pure CPU work and the GIL would hold it to one core."""
    workers = min(os.cpu_count() or 1, 8)
    if workers < 2 or len(items) < PARALLEL_MIN:
        return _parse_batch(items)
    size = -(-len(items) // (workers * 4))
    batches = [items[i : i + size] for i in range(0, len(items), size)]
    try:
        context = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else None)
        with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
            return [row for part in pool.map(_parse_batch, batches) for row in part]
    except (OSError, RuntimeError) as exc:  # no processes allowed here: do it on this one
        log.debug("parsing on one core: %s", exc)
        return _parse_batch(items)


def build_graph(root: Path, cache: GraphCache | None = None) -> VaultGraph:
    """The graph of the vault at ``root`` from its files (see ``snapshot``)."""
    return snapshot(root, cache).graph()
