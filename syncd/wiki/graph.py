"""The link graph of a vault: its files, and for every markdown page its links, embeds,
headings, block ids, aliases, tags and provenance, with each link resolved as Obsidian would.
Pure: :mod:`syncd.wiki.store` reads the files and keeps what is derived from them.

Resolution is incremental. A graph may be given the resolutions of an earlier state
(``known``, computed when the vault held ``known_files``); a page's are reused unless one of
the file names its links look up was added or removed since, or a page of such a name changed
(its headings and block ids are what ``#subpaths`` are checked against). Which file a link opens
depends only on the files of that name (``Resolver`` groups them by lower-cased file name), so
every other link keeps its answer: a new page named like a link elsewhere re-resolves exactly
the links that say that name.
"""

from __future__ import annotations

import json
import re
import reprlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ..formats.pages import Page, parse_page_outline, scalar_text
from .resolve import Resolution, Resolver, parse_linktext, subpath_exists

__all__ = [
    "LinkRef",
    "Problem",
    "PageNode",
    "Edge",
    "VaultGraph",
    "page_node",
    "node_of_page",
    "shown",
]

_TAG_OK_RE = re.compile(r"#?[\w/-]+")


# A frontmatter value quoted in a message, cut short: YAML anchors let a 300-byte page hold a list
# nested ten deep with ten copies at each level, whose full repr is gigabytes.
class _Brief(reprlib.Repr):
    def repr_int(self, x: int, level: int) -> str:
        # An integer too long for Python to write (see scalar_text) is named, not written.
        text = scalar_text(x)
        return "<a number too long to write>" if text is None else super().repr_int(x, level)


_BRIEF = _Brief()
_BRIEF.maxlevel, _BRIEF.maxlist, _BRIEF.maxdict, _BRIEF.maxstring = 2, 4, 4, 60


class LinkRef(NamedTuple):
    """One link as Obsidian reads it. A NamedTuple rather than a dataclass because a large
    vault holds tens of thousands and they are rebuilt from the cache on every lint.

    ``raw`` is the text between ``[[`` and ``]]`` for a wikilink, the whole ``[text](dest)`` for
    a markdown link (``markdown``), whose ``alias`` is its text."""

    path: str
    subpath: str
    alias: str | None
    embed: bool
    line: int
    raw: str
    markdown: bool = False


def shown(link: LinkRef) -> str:
    """The link as its page writes it (for messages)."""
    if link.markdown:
        return link.raw
    return ("!" if link.embed else "") + f"[[{link.raw}]]"


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
            path, sha, t, tuple(map(LinkRef._make, links)), tuple(map(tuple, heads)),
            tuple(blocks), tuple(notes), tuple(aliases), tuple(tags), tuple(sources), sline,
            ptype, tuple(map(Problem._make, probs)),
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
            text = scalar_text(item)
            if text is not None and text.strip():
                items.append(text.strip())
            else:
                bad.append(item)
        if bad:
            return items, f"holds {_BRIEF.repr(bad[0])}, which is not text"
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
            text = scalar_text(item)
            if text is None or not _TAG_OK_RE.fullmatch(text) or text.lstrip("#").isdigit():
                problems.append(Problem("bad-tags", line, f"frontmatter `{key}` holds {_BRIEF.repr(item)}, which Obsidian "
                                        "does not read as a tag (letters, digits, _ - / and not only digits; "
                                        "no spaces: use-dashes)"))  # fmt: skip
                break
    return problems, aliases, sources


def page_node(path: str, sha: str, text: str) -> PageNode:
    """Parse one page's text into its node. Pure; never raises for any text."""
    return node_of_page(path, sha, parse_page_outline(text))


def node_of_page(path: str, sha: str, page: Page) -> PageNode:
    """The node of a page already parsed (the sync parses each page once, for its rows and this)."""
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
    if page.markdown_links:
        links.extend(LinkRef(m.path, m.subpath, m.text, m.embed, m.line, m.raw, True) for m in page.markdown_links)
        links.sort(key=lambda link: link.line)  # stable: on one line, wikilinks first
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


def _file_name(path: str) -> str:
    return path.rpartition("/")[2].lower()


def _names_looked_up(source: str, node: PageNode) -> Iterable[str]:
    """The lower-cased file names whose files decide where ``node``'s links lead (see
    ``Resolver.resolve``: a name as written when it has a dot, else with ``.md``)."""
    for link in node.links:
        if not link.path:
            yield _file_name(source)
            continue
        name = link.path.lower().rpartition("/")[2]
        yield name
        yield name + ".md"


def _encode(edge: Edge) -> Any:
    """One resolved link as the store keeps it (compact: most links open one file)."""
    res = edge.resolution
    if res.target is None:
        return None
    if len(res.candidates) == 1:
        return [res.target, edge.subpath_ok]
    return [res.target, edge.subpath_ok, list(res.candidates), res.tied]


_UNRESOLVED = Resolution(None, (), False)


@dataclass
class VaultGraph:
    """Pages (markdown files) and all files of a vault, with every link resolved on demand.

    ``known`` maps pages to their links' resolutions (JSON, as ``_encode`` writes them) computed
    when the vault's files were ``known_files``; they are reused where still valid (see the
    module's docstring). ``fresh`` holds, after ``edges``, the resolutions computed anew."""

    pages: dict[str, PageNode]
    files: tuple[str, ...]
    known: Mapping[str, str] = field(default_factory=dict)
    known_files: tuple[str, ...] | None = None
    resolver: Resolver = field(init=False)
    fresh: dict[str, str] = field(default_factory=dict, init=False, repr=False)
    _by_page: dict[str, list[Edge]] | None = field(default=None, init=False, repr=False)
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

    def reusable(self) -> set[str]:
        """The pages whose ``known`` resolutions still hold for the files as they are now."""
        if self.known_files is None or not self.known:
            return set()
        changed = set(self.files).symmetric_difference(self.known_files)
        touched = {_file_name(f) for f in changed}
        touched.update(_file_name(p) for p in self.pages if p not in self.known)
        reuse = set()
        for path in self.known:
            node = self.pages.get(path)
            if node is None:
                continue
            if touched and not touched.isdisjoint(_names_looked_up(path, node)):
                continue
            reuse.add(path)
        return reuse

    def _decode(self, source: str, node: PageNode, data: str, interned: dict) -> list[Edge] | None:
        try:
            encoded = json.loads(data)
        except ValueError:
            return None
        if not isinstance(encoded, list) or len(encoded) != len(node.links):
            return None
        edges = []
        for link, item in zip(node.links, encoded):
            if item is None:
                edges.append(Edge(source, link, _UNRESOLVED, True))
                continue
            target, ok = item[0], item[1]
            key = (target, tuple(item[2]), item[3]) if len(item) > 2 else (target, (target,), False)
            res = interned.get(key)
            if res is None:
                res = interned[key] = Resolution(*key)
            edges.append(Edge(source, link, res, ok))
        return edges

    def _resolved(self) -> dict[str, list[Edge]]:
        if self._by_page is None:
            reuse = self.reusable()
            interned: dict = {}
            by_page: dict[str, list[Edge]] = {}
            for path in sorted(self.pages):
                node = self.pages[path]
                edges = self._decode(path, node, self.known[path], interned) if path in reuse else None
                if edges is None:
                    edges = [self.resolve(path, link) for link in node.links]
                    self.fresh[path] = json.dumps([_encode(e) for e in edges], ensure_ascii=False,
                                                  separators=(",", ":"))  # fmt: skip
                by_page[path] = edges
            self._by_page = by_page
        return self._by_page

    @property
    def edges(self) -> list[Edge]:
        """Every link of every page, resolved; in page path order, then file order."""
        if self._edges is None:
            self._edges = [edge for edges in self._resolved().values() for edge in edges]
        return self._edges

    def links(self, page: str) -> list[Edge]:
        if self._by_page is None:  # one page's links need not wait for the whole vault's
            node = self.pages.get(page)
            return [] if node is None else [self.resolve(page, link) for link in node.links]
        return list(self._by_page.get(page, ()))

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
        the vault root (a link pasted whole, ``[[name]]`` or ``![[name]]``, means the same)."""
        name = name.strip()
        if name.startswith(("[[", "![[")) and name.endswith("]]"):
            name = name.removeprefix("!")[2:-2]
        name = name.removeprefix("./")
        if name in self.pages or name in self.files:
            return name
        target = parse_linktext(name)[0]
        if not target:
            return None  # "" or "#Heading": a link to the page it is in, and here there is none
        return self.resolver.resolve(target, "").target
