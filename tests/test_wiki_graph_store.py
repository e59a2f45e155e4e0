"""The link graph's derived store: kept by the sync in the same pass as the index, resolved
incrementally, and always equal to a graph built from the files alone."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from hypothesis import example, given, settings
from hypothesis import strategies as st

import syncd
from syncd.home import blob_sha
from syncd.wiki.graph import page_node
from syncd.wiki.manager import WikiManager
from syncd.wiki.store import GraphCache, build_graph, snapshot, store_path

from .daemon_helpers import new_home

NAMES = ["A.md", "B.md", "sub/A.md", "sub/C.md", "deep/sub/C.md", "img.png", "sub/img.png"]
PIECES = st.sampled_from(
    ["[[A]]", "[[B#H]]", "[[sub/A]]", "[[C#^x]]", "![[img.png]]", "[[C]]", "# H\n", "text ^x\n", "\n",
     "[[A#H]]", "[[#H]]", "[[../A]]", "[[./C]]", "[[/sub/C]]", "## H\n", "[[img]]"]
)  # fmt: skip
OPS = st.lists(
    st.tuples(st.sampled_from(["write", "delete", "rename"]), st.sampled_from(NAMES), st.sampled_from(NAMES),
              st.lists(PIECES, max_size=6).map("".join)),
    min_size=1, max_size=8,
)  # fmt: skip


def _do(vault: Path, op) -> None:
    kind, rel, other, text = op
    path = vault / rel
    if kind == "write":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text.encode() if rel.lower().endswith(".md") else b"\x89PNG")
    elif kind == "delete" and path.exists():
        path.unlink()
    elif kind == "rename" and path.exists() and rel != other and rel[-3:].lower() == other[-3:].lower():
        (vault / other).parent.mkdir(parents=True, exist_ok=True)
        os.replace(path, vault / other)


def _resolved(graph) -> list:
    return [(e.source, e.link, e.resolution, e.subpath_ok) for e in graph.edges]


@settings(max_examples=60)
@given(first=OPS, then=st.lists(OPS, min_size=1, max_size=3))
def test_incremental_resolution_equals_resolving_everything(tmp_path_factory, first, then):
    """After any edits, renames and deletes (of pages and attachments), a graph that reuses the
    stored resolutions resolves every link exactly as one built from scratch."""
    root = tmp_path_factory.mktemp("inc")
    vault = root / "v"
    vault.mkdir()
    for op in first:
        _do(vault, op)
    with GraphCache(root / "g.sqlite") as cache:
        for ops in then:
            snap = snapshot(vault, cache)
            graph = snap.graph()
            graph.edges  # noqa: B018
            assert cache.keep_resolutions(graph, snap.known_files)
            for op in ops:
                _do(vault, op)
            # What the store knows is reused only where still true.
            again = snapshot(vault, cache)
            incremental = again.graph()
            assert _resolved(incremental) == _resolved(build_graph(vault))
            assert cache.keep_resolutions(incremental, again.known_files)


def _resolve_and_keep(vault: Path, cache: GraphCache):
    """What lint does: snapshot, resolve every link (reusing what it can), keep the new ones."""
    snap = snapshot(vault, cache)
    graph = snap.graph()
    graph.edges  # noqa: B018
    assert cache.keep_resolutions(graph, snap.known_files)
    return graph


def test_an_unchanged_vault_reuses_every_resolution_and_a_new_name_only_its_own(tmp_path):
    vault = tmp_path / "v"
    for i in range(30):
        (vault / f"f{i % 3}").mkdir(parents=True, exist_ok=True)
        (vault / f"f{i % 3}" / f"P{i}.md").write_text(f"[[P{(i + 1) % 30}]] [[Q]]\n")
    (vault / "Other.md").write_text("[[P1]]\n")
    with GraphCache(tmp_path / "g.sqlite") as cache:
        assert len(_resolve_and_keep(vault, cache).fresh) == 31
        assert _resolve_and_keep(vault, cache).fresh == {}
        # A new page named Q changes the links that say Q (every P), not Other's [[P1]].
        (vault / "Q.md").write_text("new\n")
        after = _resolve_and_keep(vault, cache)
        assert set(after.fresh) == {f"f{i % 3}/P{i}.md" for i in range(30)} | {"Q.md"}
        # A page edited: its own links, and the links into it (its headings may have changed).
        (vault / "Other.md").write_text("[[P1]] [[P2#H]]\n")
        edited = _resolve_and_keep(vault, cache)
        assert [e.subpath_ok for e in edited.links("Other.md")] == [True, False]
        assert set(edited.fresh) == {"Other.md"}
        (vault / "f2" / "P2.md").write_text("# H\n[[P3]] [[Q]]\n")
        headed = _resolve_and_keep(vault, cache)
        assert [e.subpath_ok for e in headed.links("Other.md")] == [True, True]
        assert set(headed.fresh) == {"f2/P2.md", "f1/P1.md", "Other.md"}  # P1 links to P2 too


def test_two_readers_storing_against_different_file_lists_do_not_mix(tmp_path):
    vault = tmp_path / "v"
    vault.mkdir()
    (vault / "A.md").write_text("[[B]]\n")
    with GraphCache(tmp_path / "g.sqlite") as one, GraphCache(tmp_path / "g.sqlite") as two:
        snap_one = snapshot(vault, one)
        (vault / "B.md").write_text("b\n")
        snap_two = snapshot(vault, two)
        g_two = snap_two.graph()
        g_two.edges  # noqa: B018
        assert two.keep_resolutions(g_two, snap_two.known_files)
        g_one = snap_one.graph()
        g_one.edges  # noqa: B018
        # One resolved [[B]] when B did not exist yet; storing that now would be stale.
        assert not one.keep_resolutions(g_one, snap_one.known_files)
        assert _resolved(snapshot(vault, one).graph()) == _resolved(build_graph(vault))


# ----------------------------------------------------------------------------- kept by the sync

# Tea.MD: a page to Obsidian and to lint whatever its extension's case, so the index's too.
HOME_PAGES = ["vault/A.md", "vault/B.md", "vault/sub/A.md", "vault/sub/C.md", "vault/Tea.MD"]
HOME_OPS = st.lists(
    st.tuples(st.sampled_from(["write", "delete", "rename"]), st.sampled_from(HOME_PAGES),
              st.sampled_from(HOME_PAGES), st.lists(PIECES, max_size=5).map("".join)),
    min_size=1, max_size=4,
)  # fmt: skip


def _store_matches_the_files(home: Path, engine=None) -> None:
    """Every vault page's row in the store is what a fresh parse of its file gives, and the
    index (when ``engine`` is given) holds the same pages as lint reads."""
    vault = home / "vault"
    with GraphCache(store_path(home)) as cache:
        rows = cache.rows()
    pages = {str(p.relative_to(vault)) for p in vault.rglob("*") if p.name.lower().endswith(".md")}
    assert set(rows) == pages
    if engine is not None:
        indexed = {p.removeprefix("vault/") for p in engine.index.files() if p.startswith("vault/")}
        assert indexed == pages == set(WikiManager.for_home(home).graph().pages)
    for rel in pages:
        data = (vault / rel).read_bytes()
        sha = blob_sha(data)
        assert rows[rel][3] == sha and rows[rel][4] == page_node(rel, sha, data.decode()).to_json()


@settings(max_examples=6)
@given(ops=HOME_OPS)
@example(ops=[("write", "vault/Tea.MD", "vault/A.md", "[[A]]"), ("rename", "vault/Tea.MD", "vault/B.md", "")])
def test_the_sync_keeps_the_graph_in_step_and_equal_to_a_rebuild(tmp_path_factory, embedder, ops):
    home = new_home(tmp_path_factory.mktemp("home"), embedder)
    wiki = WikiManager.for_home(home)
    with syncd.open(home, embedder=embedder) as engine:
        engine.sync()
        for op in ops:
            kind, rel, other, text = op
            _do(home, (kind, rel, other, text))
            engine.sync()
            # Written by the sync itself, before any lint or links looked at the vault.
            _store_matches_the_files(home, engine)
            assert _resolved(wiki.graph()) == _resolved(build_graph(home / "vault"))
            assert wiki.lint() == WikiManager(home / "vault", use_cache=False).lint()
        engine.reindex()
        _store_matches_the_files(home, engine)


def test_reindex_rebuilds_the_store_and_lint_needs_no_parse(home, engine, monkeypatch):
    (home / "vault" / "Tea.md").write_text("# Tea\n[[Coffee#Roasts]]\n")
    (home / "vault" / "Coffee.md").write_text("# Coffee\n## Roasts\n")
    engine.sync()
    shutil.rmtree(home / ".syncd" / "wiki")
    engine.reindex()
    _store_matches_the_files(home)
    from syncd.wiki import store

    parsed: list = []
    real = store._parse_all  # white-box: which pages are parsed again is the claim
    monkeypatch.setattr(store, "_parse_all", lambda items: parsed.extend(items) or real(items))
    links = WikiManager.for_home(home).links("Tea")
    assert [(e.resolution.target, e.subpath_ok) for e in links] == [("Coffee.md", True)]
    # Pages the sync wrote within the racy window are re-hashed, never parsed again.
    assert parsed == []


def test_a_store_written_by_other_code_is_not_believed(tmp_path):
    """Nodes and findings are derived by the parser and resolver: a syncd whose code differs
    (an upgrade that reads more link styles) starts the store afresh."""
    vault = tmp_path / "v"
    vault.mkdir()
    (vault / "A.md").write_text("[x](B.md)\n")
    with GraphCache(tmp_path / "g.sqlite") as cache:
        snapshot(vault, cache)
        cache.set_fact("code", "another syncd")
    with GraphCache(tmp_path / "g.sqlite") as cache:
        assert cache.rows() == {}
        assert [e.resolution.target for e in build_graph(vault, cache).edges] == [None]
