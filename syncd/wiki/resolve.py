"""Obsidian-exact wikilink resolution: which file a ``[[link]]`` opens, and whether its
``#Heading`` or ``#^block`` exists there. Pure: it sees a list of vault paths and parsed pages.

Sources. The rules below were read from Obsidian's own code (the desktop app's ``app.js``,
``MetadataCache.getLinkpathDest``, ``resolveSubpath``, ``stripHeading``, as published in
de-obfuscated form by plugin authors) and cross-checked with the Obsidian help pages
("Internal links": an alias chosen from the suggestions is written as ``[[Page|Alias]]``;
"Link to a block in a note"; "Aliases") and with community reimplementations (Quartz's
``shortest`` resolution, obsidian-export). Where they disagree the app's code wins.

Link text (``parse_linktext``): the text in the brackets is cut at the first ``|`` (what follows
is only shown text), then at the first ``#``: the path before it, the *subpath* from it on. So
``[[Page^id]]`` (no ``#``) asks for a file called ``Page^id`` and is broken; the block form is
``[[Page#^id]]``.

Which file (``Resolver.candidates``; Obsidian opens the first):

1. An empty path is the linking page itself (``[[#Heading]]``).
2. Files are looked up by *file name* (extension included), lower-cased. If the last path
   segment contains a ``.``, it is tried as written (``photo.png``, ``Note.md``); when that
   finds nothing, ``.md`` is appended (``v1.2 notes`` -> ``v1.2 notes.md``). A link to an
   attachment therefore needs its extension: ``[[photo]]`` does not open ``photo.png``.
3. A bare name that only one file has is that file.
4. ``./x`` and ``../x`` are resolved against the linking page's folder and must then match a
   path exactly (case-insensitively); otherwise resolution continues with the resolved path.
5. A leading ``/`` is dropped; a path equal to a file's whole vault path (case-insensitively)
   is that file. A path that started with ``/`` stops here.
6. Otherwise every file whose lower-cased path *ends with* the lower-cased link path (plain
   string suffix, as Obsidian does: ``[[people/Bob]]`` also matches ``xpeople/Bob.md``) is a
   candidate. Candidates whose path starts with the linking page's folder come first; each
   group is sorted by path length, shortest first. Equal lengths keep Obsidian's file-loading
   order, which is not defined, so we sort them by path and call the link *ambiguous*.
7. Frontmatter ``aliases`` are NOT consulted: Obsidian offers them in link suggestions but
   writes ``[[Page|Alias]]``; a bare ``[[Alias]]`` stays unresolved. Lint says so and gives
   the fix (``alias_owner``).

Subpaths (``subpath_exists``), for markdown targets only (``[[doc.pdf#page=3]]`` is not
checked): split on ``#``, empty parts dropped. One part starting with ``^`` is a block id,
compared case-insensitively; one part ``[^x]`` is a footnote. Otherwise the parts are a chain
of headings: walking the page's headings in order, a heading matches the next part when it is
deeper than the last matched one and both are equal after ``strip_heading`` and lower-casing;
the link resolves when every part has matched. A block id that is not found falls through to
the heading walk, as in Obsidian.

Not modelled: Unicode normalisation of file names (Obsidian compares code points as we do), the
"Excluded files" setting, and folders or files whose name starts with ``.`` (Obsidian does not
load them; the graph builder skips them).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

__all__ = [
    "parse_linktext",
    "strip_heading",
    "Resolver",
    "Resolution",
    "subpath_exists",
]

# Obsidian's HEADING_STRIP_REGEX: these characters become spaces, runs of space become one.
_HEADING_STRIP_RE = re.compile(r"[!\"#$%&()*+,.:;<=>?@^`{|}~/\[\]\\\r\n]")
_SPACES_RE = re.compile(r"\s+")


def parse_linktext(raw: str) -> tuple[str, str]:
    """``(path, subpath)`` of the text inside ``[[...]]``: cut at the first ``|``, then at the
    first ``#`` (the subpath keeps its ``#``; ``''`` when there is none). The path is stripped of
    surrounding spaces, as Obsidian's editor trims it."""
    link = raw.split("|", 1)[0]
    hash_ = link.find("#")
    if hash_ < 0:
        return link.strip(), ""
    return link[:hash_].strip(), link[hash_:]


def strip_heading(text: str) -> str:
    """Obsidian's ``stripHeading``: punctuation to spaces, runs of whitespace to one, trimmed."""
    return _SPACES_RE.sub(" ", _HEADING_STRIP_RE.sub(" ", text)).strip()


def _dirname(path: str) -> str:
    return path.rpartition("/")[0]


@dataclass(frozen=True)
class Resolution:
    """Where a link path leads: ``target`` is Obsidian's choice (None: unresolved);
    ``candidates`` every file that answers, Obsidian's order; ``tied`` when the first two are
    equally good and Obsidian's pick depends on the order it loaded files in."""

    target: str | None
    candidates: tuple[str, ...]
    tied: bool

    @property
    def ambiguous(self) -> bool:
        return len(self.candidates) > 1


_UNRESOLVED = Resolution(None, (), False)


class Resolver:
    """Resolves link paths against the files of one vault (paths relative to the vault root,
    ``/``-separated, any extension). Build once per vault state; ``resolve`` is pure."""

    def __init__(self, paths: Iterable[str]):
        by_name: dict[str, list[str]] = {}
        for path in paths:
            by_name.setdefault(posixpath.basename(path).lower(), []).append(path)
        for group in by_name.values():
            group.sort()
        self._by_name = by_name
        self._cache: dict[tuple[str, str], Resolution] = {}

    def files_named(self, name_lower: str) -> tuple[str, ...]:
        return tuple(self._by_name.get(name_lower, ()))

    def resolve(self, linkpath: str, source: str) -> Resolution:
        """Resolve ``linkpath`` (a link's path part) written in the file at ``source``."""
        key = (linkpath, source.rpartition("/")[0] if linkpath else source)
        hit = self._cache.get(key)
        if hit is None:
            hit = self._cache[key] = self._resolve(linkpath, source)
        return hit

    def _resolve(self, linkpath: str, source: str) -> Resolution:
        if linkpath == "":
            return Resolution(source, (source,), False)
        n = linkpath.lower()
        name = n.rsplit("/", 1)[-1]
        group = self._by_name.get(name) if "." in name else None
        if not group:
            n = (linkpath + ".md").lower()
            name = n.rsplit("/", 1)[-1]
            group = self._by_name.get(name)
        if not group:
            return _UNRESOLVED
        if name == n and len(group) == 1:
            return Resolution(group[0], (group[0],), False)
        folder = _dirname(source).lower()
        if n.startswith(("./", "../")):
            n, folder = _from_folder(n, folder)
            for path in group:
                if path.lower() == n:
                    return Resolution(path, (path,), False)
        if n.startswith("/"):
            n = n[1:]
        for path in group:
            if path.lower() == n:
                return Resolution(path, (path,), False)
        if linkpath.startswith("/"):
            return _UNRESOLVED
        return _nearest(group, n, folder)


def _nearest(group: Sequence[str], n: str, folder: str) -> Resolution:
    """Of the files in ``group`` whose path ends in ``n``, those under ``folder`` first, then
    the rest, each shortest first (how Obsidian picks among files of one name)."""
    near: list[str] = []
    far: list[str] = []
    for path in group:
        lower = path.lower()
        if lower.endswith(n):
            (near if lower.startswith(folder) else far).append(path)
    near.sort(key=len)
    far.sort(key=len)
    ordered = tuple(near + far)
    if not ordered:
        return _UNRESOLVED
    first = near if near else far
    tied = len(first) > 1 and len(first[0]) == len(first[1])
    return Resolution(ordered[0], ordered, tied)


def _from_folder(n: str, folder: str) -> tuple[str, str]:
    """A ``./`` or ``../`` link path ``n`` written in ``folder`` as a vault path, and the folder
    it climbed to (where the nearest-first order then looks from)."""
    if n.startswith("./../"):
        n = n[2:]
    if n.startswith("./"):
        return (folder + "/" if folder else "") + n[2:], folder
    while n.startswith("../"):
        n = n[3:]
        folder = _dirname(folder)
    return (folder + "/" if folder else "") + n, folder


def subpath_exists(
    subpath: str,
    headings: Sequence[tuple[int, str]],
    block_ids: Collection[str],
    footnotes: Collection[str] = (),
) -> bool:
    """Whether ``subpath`` (``#A#B``, ``#^id``, ``#[^1]``) names something in a page whose
    headings are ``(level, text)`` in order, block ids and footnote ids as written."""
    parts = [p for p in subpath.split("#") if p]
    if not parts:
        return True
    if len(parts) == 1:
        only = parts[0]
        if only.startswith("^"):
            wanted = only[1:].lower()
            if any(b.lower() == wanted for b in block_ids):
                return True
        elif only.startswith("[^") and only[2:-1] in footnotes:
            return True
    wanted_parts = [strip_heading(p).lower() for p in parts]
    matched = 0
    deepest = 0
    for level, text in headings:
        if level > deepest and strip_heading(text).lower() == wanted_parts[matched]:
            matched += 1
            deepest = level
            if matched == len(wanted_parts):
                return True
    return False
