"""``WikiManager``: the vault an agent keeps (schema, index, log and the pages they describe).

It bootstraps a vault once, from ``vault_template/`` (the same seed ``syncd init`` uses), and
after that only reads: ``lint``, ``links`` and ``backlinks`` never write a page. Parsed pages
and resolved links are kept in a derived store (:mod:`syncd.wiki.store`): under the home's
``.syncd/wiki/`` when the vault is inside a home (where the sync keeps it up to date as it
indexes), else under the vault's own hidden ``.syncd/wiki/`` (Obsidian ignores hidden folders).
Deleting that store changes nothing but speed; if it cannot be opened (a read-only folder), the
graph is built from the files alone.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable
from pathlib import Path

from ..config import Settings
from ..errors import HomeError, NotFoundError
from ..home import atomic_write
from ..home.seed import vault_seed
from .graph import Edge, VaultGraph
from .lint import LOG, Finding, GitFacts, lint, local_source_paths, source_ref
from .provenance import git_facts, git_location, head_commit, is_regular
from .store import CODE_DIGEST, STORE_FILE, GraphCache, Snapshot, snapshot, sources_digest

__all__ = ["WikiManager"]

log = logging.getLogger(__name__)

_LINT_KEY = "lint"
# Stored findings hold only for the code that found them (a newer syncd may check more).
_LINT_CODE = sources_digest("wiki.lint", "wiki.provenance") + CODE_DIGEST[:12]


def _home_of(vault: Path) -> Path | None:
    for folder in (vault, *vault.parents):
        if (folder / ".syncd").is_dir():
            return folder
    return None


class WikiManager:
    """One vault: ``root`` is its folder (``HOME/vault`` in a home, or any folder).

    In a home the link graph is kept in the home's ``.syncd/wiki/`` (derived, ignored by git);
    a vault outside any home, with no ``cache_dir`` given, is only read: nothing is written into
    the person's folder (a ``.syncd/`` there would be an untracked folder in their repository)."""

    def __init__(
        self,
        root: Path | str,
        *,
        cache_dir: Path | str | None = None,
        use_cache: bool = True,
        max_file_bytes: int = Settings.max_file_bytes,
    ):
        self.root = Path(root).expanduser()
        # Pages larger are not read, as the sync does not index them (Settings.max_file_bytes).
        self.max_file_bytes = max_file_bytes
        # The home whose vault/ this is, if it is one (its pages are named from the home too).
        self.home: Path | None = _home_of(self.root)
        if self.home is not None and self.root != self.home / "vault":
            self.home = None
        if cache_dir is None:
            home = _home_of(self.root)
            use_cache = use_cache and home is not None
            cache_dir = (home if home is not None else self.root) / ".syncd" / "wiki"
        self.cache_dir = Path(cache_dir)
        self.use_cache = use_cache

    @classmethod
    def for_home(cls, home: Path | str, **kwargs) -> WikiManager:
        home = Path(home).expanduser()
        manager = cls(home / "vault", cache_dir=home / ".syncd" / "wiki", **kwargs)
        manager.home = home
        return manager

    def __repr__(self) -> str:
        return f"WikiManager({str(self.root)!r})"

    # ------------------------------------------------------------------ bootstrap (the one write)

    def bootstrap(self) -> list[str]:
        """Seed a new vault with ``schema.md``, ``index.md`` and ``log.md``; returns what it
        created. Only a vault holding none of them is seeded: once any exists, the vault
        belongs to its people and agents and this writes nothing, even if one was deleted."""
        if self.root.exists() and not self.root.is_dir():
            raise HomeError(f"{self.root} exists and is not a folder")
        seed = vault_seed()
        if any((self.root / name).exists() for name in seed):
            return []
        self.root.mkdir(parents=True, exist_ok=True)
        created = []
        for name, data in sorted(seed.items()):
            try:
                atomic_write(self.root / name, data, expected_sha=None)
            except FileExistsError:
                continue
            created.append(name)
        return created

    # ------------------------------------------------------------------ reading

    def _cache(self) -> GraphCache | None:
        if not self.use_cache:
            return None
        try:
            return GraphCache(self.cache_dir / STORE_FILE)
        except (OSError, sqlite3.Error) as exc:
            log.warning("wiki cache unavailable (%s); reading every page", exc)
            return None

    def graph(self) -> VaultGraph:
        """The vault's link graph, every link resolved (and what was resolved anew kept)."""
        cache = self._cache()
        try:
            snap = snapshot(self.root, cache, self.max_file_bytes)
            return self._resolved(snap, cache)
        finally:
            if cache is not None:
                cache.close()

    @staticmethod
    def _resolved(snap: Snapshot, cache: GraphCache | None) -> VaultGraph:
        graph = snap.graph()
        graph.edges  # noqa: B018 -- resolves every link now, reusing what the store knows
        if cache is not None:
            cache.keep_resolutions(graph, snap.known_files)
        return graph

    def lint(self, shown: Callable[[str], bool] | None = None) -> list[Finding]:
        """Every finding for the vault, sorted (see :mod:`syncd.wiki.lint` for the codes).

        ``shown``: whether a home-relative file outside the vault may be named to whoever asks
        (None: any). A source it hides is not checked, as a URL is not: a shared page citing
        another user's daily log tells nobody else whether that log exists or which commit last
        changed it.

        The findings are kept in the derived store with a digest of what they depend on (every
        file name, every page's blob sha, the git HEAD, whether the files sources name outside
        the vault exist), so a lint of an unchanged vault only scans it and compares. Findings
        with sources hidden are not kept: they are made again for each asker."""
        cache = self._cache()
        try:
            snap = snapshot(self.root, cache, self.max_file_bytes)
            location = git_location(self.root)
            head = head_commit(location[0]) if location else None
            key = f"{snap.key()}:{head}:{_LINT_CODE}"
            hit = cache.fact(_LINT_KEY) if cache is not None else None
            # Files outside the vault a cached answer depended on (none without git) are as then.
            if (
                hit is not None
                and hit["key"] == key
                and all(
                    location is not None and is_regular(location[0], p) == there for p, there in hit["outside"].items()
                )
                and (shown is None or all(shown(p) for p in hit["outside"]))
            ):
                return [Finding(**f) for f in hit["findings"]]
            graph = self._resolved(snap, cache)
            log_text = self._read(LOG) if LOG in graph.pages else None
            facts = self._git_facts(graph, log_text, cache, location)
            hidden = frozenset(p for p in local_source_paths(graph) if shown is not None and not shown(p))
            if hidden and facts is not None:
                return lint(graph, log_text=log_text, git=facts.hiding(hidden))
            findings = lint(graph, log_text=log_text, git=facts)
            if cache is not None:
                outside = {p: p in facts.existing for p in local_source_paths(graph)} if facts else {}
                cache.set_fact(_LINT_KEY, {"key": key, "outside": outside,
                                           "findings": [f.to_dict() for f in findings]})  # fmt: skip
            return findings
        finally:
            if cache is not None:
                cache.close()

    def _read(self, rel: str) -> str | None:
        try:
            return (self.root / rel).read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None

    def _git_facts(
        self, graph: VaultGraph, log_text: str | None, cache: GraphCache | None, location: tuple[Path, str] | None
    ) -> GitFacts | None:
        with_sources = [p for p, n in graph.pages.items() if n.sources]
        if location is None or (not with_sources and log_text is None):
            return None
        named = {ref for p in with_sources for s in graph.pages[p].sources
                 for kind, ref in [source_ref(graph, p, s)] if kind == "vault"}  # fmt: skip
        return git_facts(location, set(with_sources) | named, local_source_paths(graph), log_text, cache)

    def _page(self, graph: VaultGraph, page: str) -> str:
        found = graph.find(page)
        # A path as search, status and log print it, relative to the home (vault/people/Bob.md).
        if found is None and self.home is not None and page.startswith("vault/"):
            found = graph.find(page.removeprefix("vault/"))
        if found is None:
            raise NotFoundError(f"no page {page!r} in {self.root}")
        return found

    def links(self, page: str) -> list[Edge]:
        """The links of ``page`` (a vault path or a name as written in ``[[...]]``), resolved."""
        cache = self._cache()
        try:
            graph = snapshot(self.root, cache, self.max_file_bytes).graph()  # one page's links: no need to resolve all
        finally:
            if cache is not None:
                cache.close()
        return graph.links(self._page(graph, page))

    def backlinks(self, page: str) -> list[Edge]:
        """The links in the vault that open ``page``."""
        graph = self.graph()
        return graph.backlinks(self._page(graph, page))
