"""Vault lint: deterministic findings from a link graph (and, when the vault is in git, facts
read from its history). Pure: the caller reads the files and git; nothing here touches disk.

Each finding has a ``code``, a ``severity`` (error, warning, info), a ``path`` (vault-relative),
a 1-based ``line`` and a ``message`` saying what to do. Findings are sorted by path, line,
code and message, so two runs over the same vault print the same bytes.

Codes (the notebook skill's ``lint.md`` explains how to fix each):

========================  ========  ===========================================================
broken-link               error     ``[[X]]`` opens no file in Obsidian
broken-embed              error     ``![[X]]`` embeds no file (attachments need their extension)
link-to-alias             error     ``[[X]]`` where X is only another page's alias (Obsidian
                                    does not resolve aliases): write ``[[Page|X]]``
broken-heading            error     the page exists, ``#Heading`` is not in it
broken-block              error     the page exists, ``#^id`` is not in it
broken-index-entry        error     a link in ``index.md`` that opens nothing
ambiguous-link            warning   more than one file answers to the link; say which
duplicate-title           warning   two pages carry the same title
duplicate-alias           warning   an alias shared by two pages, or equal to a page's name
orphan                    warning   no page links here and ``index.md`` does not list it
missing-from-index        warning   linked from elsewhere but not listed in ``index.md``
invalid-frontmatter       error     the YAML between the ``---`` lines does not parse
invalid-encoding          error     the file is not UTF-8
too-large                 error     the file is larger than syncd reads (not indexed, not linted)
bad-tags                  warning   ``tags`` is not a list of valid tags
bad-aliases               warning   ``aliases`` is not text or a list of text
bad-sources               warning   ``sources`` is not a list of links, paths or URLs
missing-sources           error     a ``type: synthesis`` page with no ``sources``
missing-source            error     a source that does not exist
private-source            error     a source inside ``.git/`` or ``.syncd/`` (never looked at)
stale-page                warning   a source changed in git after the page last did
log-rewritten             error     a commit changed or removed earlier lines of ``log.md``
bad-log-entry             warning   a ``log.md`` list item not in the entry format
log-out-of-order          warning   a ``log.md`` entry older than the one above it
========================  ========  ===========================================================

The index, log and schema pages (``index.md``, ``log.md``, ``schema.md`` at the vault root)
are never orphans. Index checks run only when the vault has an ``index.md``, log checks only
when it has a ``log.md``, so an adopted vault is not told to have them.

Provenance: a page is *synthesised* when its frontmatter says ``type: synthesis``; it must name
its ``sources``. Any page's ``sources`` are checked: ``[[Page]]`` links resolve like links, URLs
are not checked, other entries are paths relative to the vault, else to the home (the git
root). A page is stale when the last commit touching one of its local sources is newer than
the last commit touching the page.
"""

from __future__ import annotations

import datetime as dt
import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from urllib.parse import quote

from ..formats.text import closes_fence, fence_opener, frontmatter_line_count
from .graph import Edge, LinkRef, VaultGraph, shown
from .resolve import parse_linktext

__all__ = [
    "source_ref",
    "local_source_paths",
    "Finding",
    "GitFacts",
    "LogRewrite",
    "SEVERITIES",
    "CODES",
    "lint",
    "INDEX",
    "LOG",
    "SCHEMA",
]

INDEX, LOG, SCHEMA = "index.md", "log.md", "schema.md"
# A source named by URL (scheme://...) is outside the vault: never a broken local source.
_URL_RE = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
SEVERITIES = ("error", "warning", "info")
CODES: dict[str, str] = {
    "broken-link": "error",
    "broken-embed": "error",
    "link-to-alias": "error",
    "broken-heading": "error",
    "broken-block": "error",
    "broken-index-entry": "error",
    "ambiguous-link": "warning",
    "duplicate-title": "warning",
    "duplicate-alias": "warning",
    "orphan": "warning",
    "missing-from-index": "warning",
    "invalid-frontmatter": "error",
    "invalid-encoding": "error",
    "too-large": "error",
    "bad-tags": "warning",
    "bad-aliases": "warning",
    "bad-sources": "warning",
    "missing-sources": "error",
    "missing-source": "error",
    "private-source": "error",
    "stale-page": "warning",
    "log-rewritten": "error",
    "bad-log-entry": "warning",
    "log-out-of-order": "warning",
}
SYNTHESIS = "synthesis"
_LOG_ITEM_RE = re.compile(r"[-*+][ \t]")
_LOG_ENTRY_RE = re.compile(r"[-*+] (\d{4}-\d{2}-\d{2}) (\d{2}:\d{2}) (\S+) ([^:]+?): (\S.*)")
_LOG_FORMAT = "`- YYYY-MM-DD HH:MM <who> <what>: [[Page]] (<why>)`"


@dataclass(frozen=True, order=True)
class Finding:
    path: str
    line: int
    code: str
    message: str
    severity: str = field(compare=False)

    def to_dict(self) -> dict[str, object]:
        return {"code": self.code, "severity": self.severity, "path": self.path, "line": self.line,
                "message": self.message}  # fmt: skip


@dataclass(frozen=True)
class LogRewrite:
    """A commit after which lines ``log.md`` had before are gone (and are still gone now)."""

    commit: str
    when: int
    line: int
    lost: tuple[str, ...]


@dataclass(frozen=True)
class GitFacts:
    """What lint needs from git, read by :mod:`syncd.wiki.provenance`.

    ``vault_prefix`` is the vault's folder relative to the git root (``'vault/'`` in a home);
    ``last_changed`` maps git-root-relative paths to ``(order, commit time, commit sha)`` of the
    last commit touching them, ``order`` growing with recency; ``existing`` holds the git-root-relative paths outside the vault that
    sources name and that exist; ``hidden`` those that whoever asks may not be told of (another
    user's files): such a source is not checked, as a URL is not."""

    vault_prefix: str = ""
    last_changed: Mapping[str, tuple[int, int, str]] = field(default_factory=dict)
    log_rewrites: tuple[LogRewrite, ...] = ()
    existing: frozenset[str] = frozenset()
    hidden: frozenset[str] = frozenset()

    def hiding(self, paths: frozenset[str]) -> GitFacts:
        """These facts with nothing said of ``paths``: not whether they exist, not their commits."""
        last = {p: v for p, v in self.last_changed.items() if p not in paths}
        return replace(self, last_changed=last, existing=self.existing - paths, hidden=self.hidden | paths)


def _finding(code: str, path: str, line: int, message: str) -> Finding:
    return Finding(path, line, code, message, CODES[code])


def _shown(edge: Edge) -> str:
    return shown(edge.link)


def _written(link: LinkRef, target: str, text: str | None) -> str:
    """How to write a link to ``target`` in the link's own style (markdown links keep theirs)."""
    if link.markdown:
        prefix = "!" if link.embed else ""
        shown_text = text or posixpath.basename(_link_name(target))
        return f"{prefix}[{shown_text}]({quote(target)}{quote(link.subpath, safe='#^')})"
    return f"[[{_link_name(target)}{link.subpath}{'|' + text if text else ''}]]"


def _alias_owners(graph: VaultGraph) -> dict[str, list[str]]:
    owners: dict[str, list[str]] = {}
    for path, node in graph.pages.items():
        for alias in node.aliases:
            owners.setdefault(alias.lower(), []).append(path)
    return owners


def _link_name(path: str) -> str:
    return path[:-3] if path.lower().endswith(".md") else path


def _entry_link(graph: VaultGraph, path: str) -> str | None:
    """The text of a wikilink that opens ``path`` from ``index.md``, or None when no link can
    name it: a link's text holds no bracket, is cut at the first ``|`` and then at the first
    ``#`` (``[[a#b]]`` is heading ``b`` of page ``a``), and its path is trimmed of spaces at its
    ends. Checked with the resolver itself, so the advice given is a link that works."""
    name = _link_name(path)
    if "[" in name or "]" in name:
        return None
    for text in (name, "/" + name):  # "/ x" keeps a leading space a bare " x" would lose
        linkpath, subpath = parse_linktext(text)
        if not subpath and graph.resolver.resolve(linkpath, INDEX).target == path:
            return text
    return None


def _entry_advice(graph: VaultGraph, path: str, where: str) -> str:
    """How to list ``path`` in index.md: the entry to add, or, when no link can name the page,
    that it must be renamed first (an entry such as ``[[a#b]]`` would open another page)."""
    text = _entry_link(graph, path)
    if text is not None:
        return f"add '- [[{text}]] <what it holds>' {where}"
    name = _link_name(path)
    other = graph.resolver.resolve(parse_linktext(name)[0], INDEX).target
    if "[" in name or "]" in name:
        why = "a link cannot hold '[' or ']'"
    elif "|" in name:
        shown, _, alias = name.partition("|")
        why = f"[[{name}]] would open '{shown}', showing '{alias}'"
    elif "#" in name:
        page, _, heading = name.partition("#")
        why = f"[[{name}]] would open heading '{heading}' of page '{page}'"
    elif other not in (None, path):
        why = f"[[{name}]] opens {other}: links do not tell names apart by case"
    else:
        why = "a link's path loses the spaces at its ends"
    return (f"no link can name this page ({why}): rename it (no # | [ ], no space at either end, "
            "not only a case away from another page), "
            f"then add '- [[<new name>]] <what it holds>' {where}")  # fmt: skip


def _check_edges(graph: VaultGraph, out: list[Finding]) -> None:
    owners = _alias_owners(graph)
    has_index = INDEX in graph.pages
    stems: dict[str, str] | None = None
    for edge in graph.edges:
        link, res, src = edge.link, edge.resolution, edge.source
        if res.target is None and not link.markdown and f"[[{link.raw}]]" in graph.pages[src].sources:
            continue  # reported once, as a missing source
        if res.target is None:
            alias_of = owners.get(link.path.lower()) if "/" not in link.path else None
            if alias_of:
                owner = min(alias_of)
                fix = _written(link, owner if link.markdown else posixpath.basename(owner), link.alias or link.path)
                out.append(_finding("link-to-alias", src, link.line,
                    f"{_shown(edge)}: '{link.path}' is an alias of {owner}, and Obsidian does "
                    f"not resolve aliases in links; write {fix}"))  # fmt: skip
                continue
            hint = ""
            if "^" in link.path and not link.subpath:
                page, _, block = link.path.partition("^")
                hint = f"; a block link needs '#': [[{page}#^{block}]]"
            elif "." not in posixpath.basename(link.path):
                if stems is None:
                    stems = {}
                    for f in graph.files:
                        if not f.lower().endswith(".md"):
                            stems.setdefault(posixpath.splitext(posixpath.basename(f))[0].lower(), f)
                attachment = stems.get(posixpath.basename(link.path).lower())
                if attachment and not any(c in attachment for c in "#|[]"):
                    hint = f"; attachments need their extension: [[{posixpath.basename(attachment)}]]"
            if src == INDEX and has_index:
                out.append(_finding("broken-index-entry", src, link.line,
                    f"{_shown(edge)} in the index opens nothing: create the page or remove the entry{hint}"))  # fmt: skip
            else:
                code = "broken-embed" if link.embed else "broken-link"
                out.append(_finding(code, src, link.line,
                    f"{_shown(edge)} opens no file in this vault: create '{link.path}', or fix the name{hint}"))  # fmt: skip
            continue
        if not edge.subpath_ok:
            _check_subpath(graph, edge, res.target, out)
        if res.ambiguous and link.path:
            others = ", ".join(res.candidates[1:4])
            why = ("Obsidian's pick among equally short paths depends on load order" if res.tied
                   else "Obsidian picks the one nearest the linking page, then the shortest path")  # fmt: skip
            out.append(_finding("ambiguous-link", src, link.line,
                f"{_shown(edge)} opens {res.target} but also matches {others}; {why}. "
                f"Write {_written(link, res.target, link.alias)} to say which"))  # fmt: skip


def _check_subpath(graph: VaultGraph, edge: Edge, target: str, out: list[Finding]) -> None:
    """The finding for a link to ``target``, a file that exists, whose ``#heading`` or
    ``#^block`` does not."""
    link, res, src = edge.link, edge.resolution, edge.source
    node = graph.pages.get(target)
    parts = [p for p in link.subpath.split("#") if p]
    if len(parts) == 1 and parts[0].startswith("^"):
        ids = ", ".join(f"^{b}" for b in (node.block_ids if node else ())[:5]) or "none"
        out.append(_finding("broken-block", src, link.line,
            f"{_shown(edge)}: {res.target} has no block '{parts[0]}' (block ids there: {ids}); "
            f"end the paragraph with ' {parts[0]}' or fix the id"))  # fmt: skip
    else:
        headings = node.headings if node else ()
        heads = ", ".join(h for _, h in headings[:6]) or "none"
        slugged = _slug_match(parts, headings)
        fix = "fix the heading text or the link"
        if slugged:
            fix = (f"'#{parts[0]}' is a GitHub-style anchor, but Obsidian matches the heading's text: "
                   f"write {_with_subpath(link, '#' + slugged)}")  # fmt: skip
        out.append(_finding("broken-heading", src, link.line,
            f"{_shown(edge)}: {res.target} has no heading '{'#'.join(parts)}' (headings there: {heads}); "
            f"{fix}"))  # fmt: skip


def _with_subpath(link: LinkRef, subpath: str) -> str:
    """The link as written, pointing at ``subpath`` instead."""
    if link.markdown:
        dest = quote(link.path) + quote(subpath, safe="#^")
        return f"{'!' if link.embed else ''}[{link.alias or ''}]({dest})"
    return f"{'!' if link.embed else ''}[[{link.path}{subpath}{'|' + link.alias if link.alias else ''}]]"


_MD_LINK_TEXT_RE = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_EMPHASIS_RE = re.compile(r"(?<!\w)_([^_]+)_(?!\w)")


def _github_slugs(headings) -> dict[str, str]:
    """GitHub's anchor for each heading: the rendered text lower-cased, punctuation dropped,
    spaces to ``-``; a repeated one gets ``-1``, ``-2``... (the first wins a clash)."""
    slugs: dict[str, str] = {}
    seen: dict[str, int] = {}
    for _, text in headings:
        shown = _EMPHASIS_RE.sub(r"\1", _MD_LINK_TEXT_RE.sub(r"\1", text))
        base = re.sub(r"[^\w\- ]", "", shown.strip().lower()).replace(" ", "-")
        n = seen.get(base, 0)
        seen[base] = n + 1
        slugs.setdefault(base if n == 0 else f"{base}-{n}", text)
    return slugs


def _slug_match(parts: list[str], headings) -> str | None:
    """The heading a one-part ``#some-heading`` anchor means, when it is the GitHub anchor of
    one (docs written for GitHub link that way; Obsidian does not understand it)."""
    if len(parts) != 1:
        return None
    return _github_slugs(headings).get(parts[0].lower())


def _check_names(graph: VaultGraph, out: list[Finding]) -> None:
    titles: dict[str, list[str]] = {}
    for path, node in graph.pages.items():
        if node.title:
            titles.setdefault(node.title.strip().lower(), []).append(path)
    for group in titles.values():
        if len(group) > 1:
            group.sort()
            for path in group:
                others = ", ".join(p for p in group if p != path)
                out.append(_finding("duplicate-title", path, 1,
                    f"title '{graph.pages[path].title}' is also the title of {others}; give each page its own title"))  # fmt: skip
    owners = _alias_owners(graph)
    for alias, group in owners.items():
        pages = sorted(set(group))
        named = list(graph.resolver.files_named(alias + ".md"))
        for path in pages:
            sharing = [p for p in pages if p != path]
            if sharing:
                out.append(_finding("duplicate-alias", path, 1,
                    f"alias '{alias}' is also an alias of {', '.join(sharing)}; keep it on one page"))  # fmt: skip
            clash = [p for p in named if p != path]
            if clash:
                out.append(_finding("duplicate-alias", path, 1,
                    f"alias '{alias}' is the name of {', '.join(clash)}, so [[{alias}]] opens that page, not this one; "
                    "drop or change the alias"))  # fmt: skip


def _check_index(graph: VaultGraph, out: list[Finding]) -> None:
    if INDEX not in graph.pages:
        return
    listed = {e.resolution.target for e in graph.links(INDEX) if e.resolution.target}
    inbound: set[str] = set()
    for edge in graph.edges:
        target = edge.resolution.target
        if target is not None and target != edge.source and edge.source != INDEX:
            inbound.add(target)
    for path in sorted(graph.pages):
        if path in (INDEX, LOG, SCHEMA) or path in listed:
            continue
        if path not in inbound:
            out.append(_finding("orphan", path, 1,
                f"no page links to {path} and index.md does not list it; "
                f"{_entry_advice(graph, path, 'to index.md or link it from a related page')}"))  # fmt: skip
        else:
            out.append(_finding("missing-from-index", path, 1,
                f"{path} is not listed in index.md; {_entry_advice(graph, path, 'under its group')}"))  # fmt: skip


def _page_time(git: GitFacts, vault_path: str) -> tuple[int, int, str] | None:
    return git.last_changed.get(git.vault_prefix + vault_path)


def _check_provenance(graph: VaultGraph, git: GitFacts | None, out: list[Finding]) -> None:
    for path in sorted(graph.pages):
        node = graph.pages[path]
        if node.page_type == SYNTHESIS and not node.sources:
            out.append(_finding("missing-sources", path, node.sources_line if node.sources_line > 1 else 1,
                "this synthesis page names no sources; add `sources:` to its frontmatter with the pages, "
                "files or URLs it rests on"))  # fmt: skip
        mine = _page_time(git, path) if git else None
        for source in node.sources:
            repo_path = _source_repo_path(graph, git, path, source)
            if repo_path is None:
                continue
            if repo_path == _PRIVATE_SOURCE:
                out.append(_finding("private-source", path, node.sources_line,
                    f"source '{source}' points into syncd's private folder (.git/ or .syncd/), where lint "
                    "looks at no file; cite a note in the home instead, or remove it"))  # fmt: skip
                continue
            if repo_path == "":
                out.append(_finding("missing-source", path, node.sources_line, _missing_source(source, git)))
                continue
            if git is None or mine is None:
                continue
            theirs = git.last_changed.get(repo_path)
            if theirs is not None and theirs[0] > mine[0]:
                out.append(_finding("stale-page", path, node.sources_line,
                    f"source '{source}' changed in commit {theirs[2][:8]} ({_date(theirs[1])}) after this page last "
                    f"did ({mine[2][:8]}, {_date(mine[1])}); re-read the source and update the page"))  # fmt: skip


def _missing_source(source: str, git: GitFacts | None) -> str:
    where = "home" if git and git.vault_prefix else "vault"
    if _climbs(source):
        return (f"source '{source}' is outside the {where}, where lint looks at no file; copy it into the {where} "
                "and name that, or remove it")  # fmt: skip
    return (f"source '{source}' does not exist (looked in the vault{' and the home' if where == 'home' else ''}); "
            "fix the path or remove it")  # fmt: skip


def _climbs(source: str) -> bool:
    """Whether a source path climbs above the home (or the vault outside any repository)."""
    rel = posixpath.normpath(source.lstrip("/"))
    return rel == ".." or rel.startswith("../")


def _date(ts: int) -> str:
    return dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%d %H:%M UTC")


def source_ref(graph: VaultGraph, page: str, source: str) -> tuple[str, str]:
    """What one ``sources`` entry of ``page`` names: ``('vault', vault path)``, ``('path',
    path relative to the home)`` for a file outside the vault, ``('url', '')`` (not checked) or
    ``('private', '')`` for a path into ``.git/`` or ``.syncd/`` (never looked at), or
    ``('missing', '')`` for a link that opens nothing or a path that climbs out of the home
    (``../x``: whether a file exists there, or when git last changed it, is no business of the
    home's readers; and git refuses the whole history walk for a path outside its tree)."""
    if source.startswith("[[") and source.endswith("]]"):
        target = graph.resolver.resolve(parse_linktext(source[2:-2])[0], page).target
        return ("missing", "") if target is None else ("vault", target)
    if _URL_RE.match(source) or source.startswith("mailto:"):
        return "url", ""
    if _climbs(source):
        return "missing", ""
    rel = posixpath.normpath(source.lstrip("/"))
    if _private(rel):
        return "private", ""
    return ("vault", rel) if rel in graph.files else ("path", rel)


# git's folder (and syncd's own, .git/syncd/: tokens, the lock) and syncd's derived one: not
# notes. Whether a file exists there is no business of the home's readers (a shared vault page
# naming .git/syncd/<token file> would tell them), so such a source is refused unlooked-at.
_PRIVATE = (".git", ".syncd")


def _private(rel: str) -> bool:
    """Whether a normalised relative path goes into a ``.git`` or ``.syncd`` folder (in any
    case: on a case-insensitive disk ``.GIT/config`` is git's config)."""
    return any(part.lower() in _PRIVATE for part in rel.split("/"))


def local_source_paths(graph: VaultGraph) -> set[str]:
    """Home-relative paths (vault files as vault paths) that the vault's sources name outside
    the vault, i.e. those whose existence only the home can tell."""
    return {ref for page, node in graph.pages.items() for s in node.sources
            for kind, ref in [source_ref(graph, page, s)] if kind == "path"}  # fmt: skip


_PRIVATE_SOURCE = "\0private"  # what _source_repo_path says of a source into a private folder


def _source_repo_path(graph: VaultGraph, git: GitFacts | None, page: str, source: str) -> str | None:
    """The git-root-relative path a source names; ``''`` if it names nothing; None for a URL;
    ``_PRIVATE_SOURCE`` for a path into ``.git/`` or ``.syncd/``."""
    kind, ref = source_ref(graph, page, source)
    if kind == "private":
        return _PRIVATE_SOURCE
    if kind == "url" or (kind == "path" and git is not None and ref in git.hidden):
        return None
    if kind == "vault":
        return (git.vault_prefix if git else "") + ref
    if kind == "path" and git is not None and ref in git.existing:
        return ref
    return ""


def _check_log(log_text: str | None, git: GitFacts | None, out: list[Finding]) -> None:
    if log_text is None:
        return
    lines = log_text.split("\n")
    start = frontmatter_line_count(lines)
    fence = None
    previous: tuple[str, str] | None = None
    for i in range(start, len(lines)):
        text = lines[i].rstrip("\r").removeprefix("\ufeff")
        if fence is not None:
            if closes_fence(text, *fence):
                fence = None
            continue
        if (opened := fence_opener(text)) is not None:
            fence = opened
            continue
        if not _LOG_ITEM_RE.match(text):
            continue
        m = _LOG_ENTRY_RE.fullmatch(text.rstrip())
        when = None
        if m is not None:
            try:
                dt.datetime.strptime(f"{m.group(1)} {m.group(2)}", "%Y-%m-%d %H:%M")
                when = (m.group(1), m.group(2))
            except ValueError:
                when = None
        if when is None:
            out.append(_finding("bad-log-entry", LOG, i + 1,
                f"log entry not in the format {_LOG_FORMAT}: '{text.strip()[:80]}'; rewrite only this line's form, "
                "keep what it says"))  # fmt: skip
            continue
        if previous is not None and when < previous:
            out.append(_finding("log-out-of-order", LOG, i + 1,
                f"entry dated {' '.join(when)} comes after one dated {' '.join(previous)}; "
                "append new entries at the end with the current time"))  # fmt: skip
        previous = max(previous, when) if previous else when
    if git is not None:
        for rewrite in git.log_rewrites:
            shown = "; ".join(s.strip()[:60] for s in rewrite.lost[:2])
            out.append(_finding("log-rewritten", LOG, rewrite.line,
                f"log.md is append-only, but {rewrite.commit[:8] if rewrite.commit else 'uncommitted changes'}"
                f"{' (' + _date(rewrite.when) + ')' if rewrite.when else ''} removed or changed {len(rewrite.lost)} "
                f"earlier line(s), still missing: '{shown}'; restore them (git show {rewrite.commit[:8] or 'HEAD'}~1:"
                f"{(git.vault_prefix or '')}log.md) and append corrections as new entries"))  # fmt: skip


def lint(graph: VaultGraph, *, log_text: str | None = None, git: GitFacts | None = None) -> list[Finding]:
    """All findings for the vault, sorted. ``log_text`` is ``log.md``'s text when it exists."""
    out: list[Finding] = []
    for path, node in graph.pages.items():
        for problem in node.problems:
            out.append(_finding(problem.code, path, problem.line, problem.message))
    _check_edges(graph, out)
    _check_names(graph, out)
    _check_index(graph, out)
    _check_provenance(graph, git, out)
    _check_log(log_text if LOG in graph.pages else None, git, out)
    out.sort()
    return out
