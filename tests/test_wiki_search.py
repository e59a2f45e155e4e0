"""Search hits from the vault say which page (its title) and which section (its heading path)
they come from, in the Hit, its dict (the control socket and ``--json``) and the CLI's text; and
the title column follows edits exactly as a rebuild would."""

from __future__ import annotations

import json
import os

import lancedb
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import syncd
from syncd.cli import main
from syncd.engine.search import hit_record
from syncd.index.records import SCHEMA_VERSION, page_breadcrumb
from syncd.index.rows import parse_file
from syncd.index.table_rows import entry_schema

from .daemon_helpers import new_home
from .helpers import assert_matches_rebuild, write

PAGES = {
    # frontmatter title, no H1: the title comes first in the breadcrumb
    "vault/drinks/tea.md": "---\ntitle: Green tea\n---\nIntro about tea.\n\n## Brewing\n\n### Temperature\n\n"
    "Steep sencha at 80 degrees for a minute.\n",
    # an H1 that is the title: said once
    "vault/Coffee.md": "# Coffee\n\n## Roasts\n\nDark roast espresso beans from Lyon.\n",
    # no title, no H1: the file name
    "vault/people/Bob Smith.md": "## Hobbies\n\nBob climbs granite walls on weekends.\n",
}


def _chunk_of(engine, query: str, path: str):
    hits = engine.search(query, limit=20, kind="chunk")
    return next(h for h in hits if h.path == path)


@pytest.fixture
def wiki_engine(engine, home):
    for rel, text in PAGES.items():
        write(home, rel, text)
    write(home, "memory/users/ana/MEMORY.md", "# Memory\n\n## Climbing\n\nAna climbs granite too.\n")
    engine.sync()
    return engine


def test_vault_hits_carry_the_page_title_and_heading_path(wiki_engine):
    hit = _chunk_of(wiki_engine, "steep sencha temperature", "vault/drinks/tea.md")
    assert hit.title == "Green tea"
    assert hit.heading == "Brewing > Temperature"
    assert hit.breadcrumb == "Green tea > Brewing > Temperature"
    hit = _chunk_of(wiki_engine, "dark roast espresso", "vault/Coffee.md")
    assert (hit.title, hit.breadcrumb) == ("Coffee", "Coffee > Roasts")
    hit = _chunk_of(wiki_engine, "granite climbing weekends", "vault/people/Bob Smith.md")
    assert (hit.title, hit.breadcrumb) == ("Bob Smith", "Bob Smith > Hobbies")
    # Outside the vault a chunk has no page title: its heading path alone.
    hit = _chunk_of(wiki_engine, "granite climbing weekends", "memory/users/ana/MEMORY.md")
    assert (hit.title, hit.breadcrumb) == (None, "Memory > Climbing")


def test_the_wire_form_says_it_and_makes_the_same_hit(wiki_engine):
    hit = _chunk_of(wiki_engine, "steep sencha temperature", "vault/drinks/tea.md")
    wire = json.loads(json.dumps(hit_record(hit)))
    assert wire["title"] == "Green tea" and wire["breadcrumb"] == "Green tea > Brewing > Temperature"
    again = syncd.Hit(**{k: v for k, v in wire.items() if k != "snippet"})
    assert again.to_dict() == hit.to_dict()


def test_the_title_is_searched_by_its_words(wiki_engine):
    """A chunk that does not say its page's name is still found by it."""
    hits = wiki_engine.search("Smith", limit=3, kind="chunk")
    assert hits[0].path == "vault/people/Bob Smith.md" and hits[0].parts["fulltext"] == 1.0


def test_cli_search_prints_the_breadcrumb_and_json_carries_it(wiki_engine, capsys):
    home = str(wiki_engine.home.root)
    assert main(["search", "sencha temperature", "--kind", "chunk", "--limit", "1", "--wiki", "--home", home]) == 0
    out = capsys.readouterr().out
    assert "vault/drinks/tea.md:" in out and "Green tea > Brewing > Temperature" in out
    assert (
        main(["search", "sencha temperature", "--kind", "chunk", "--limit", "1", "--json", "--wiki", "--home", home])
        == 0
    )
    [hit] = json.loads(capsys.readouterr().out)
    assert hit["title"] == "Green tea" and hit["breadcrumb"] == "Green tea > Brewing > Temperature"


@pytest.mark.parametrize(
    ("title", "heading", "expected"),
    [
        ("Tea", "", "Tea"),
        ("Tea", "Tea > Brewing", "Tea > Brewing"),
        ("Tea", "tea > Brewing", "tea > Brewing"),
        ("Green tea", "Brewing", "Green tea > Brewing"),
        ("Tea", "Tea time > Brewing", "Tea > Tea time > Brewing"),
        (None, "Brewing", "Brewing"),
    ],
)
def test_breadcrumb_says_the_title_once(title, heading, expected):
    assert page_breadcrumb(title, heading) == expected


def _titles(rel: str, text: str) -> set:
    return {(row.title, row.heading) for row in parse_file(rel, text.encode())}


def test_rows_take_the_title_from_frontmatter_then_h1_then_the_file_name():
    assert _titles("vault/a/x.md", "---\ntitle: T\n---\n# H\n\nbody\n") == {("T", "H")}
    assert _titles("vault/a/x.md", "# H\n\nbody\n") == {("H", "H")}
    assert _titles("vault/a/x y.md", "body\n") == {("x y", "")}
    # Invalid YAML: the title falls back to the H1 and the page is still indexed.
    assert _titles("vault/x.md", "---\ntitle: [unclosed\n---\n# H\n\nbody\n") == {("H", "H")}
    assert _titles("memory/users/ana/MEMORY.md", "# H\n\nbody\n") == {(None, "H")}


_TITLE_EDITS = st.lists(
    st.tuples(
        st.sampled_from(["vault/a.md", "vault/sub/b.md", "vault/sub/c.md"]),
        st.sampled_from(["fm", "h1", "none", "rename", "delete", "section"]),
        st.sampled_from(["Alpha", "Beta gamma", "Ünïcode", "Alpha"]),
    ),
    min_size=1,
    max_size=6,
)


def _edit(root, rel: str, how: str, word: str) -> None:
    path = root / rel
    if how == "fm":
        write(root, rel, f"---\ntitle: {word}\n---\nText about {word}.\n\n## Part\n\nMore.\n")
    elif how == "h1":
        write(root, rel, f"# {word}\n\nText.\n\n## Part\n\nMore about {word}.\n")
    elif how == "none":
        write(root, rel, f"Just text about {word}.\n")
    elif how == "rename" and path.exists():
        os.replace(path, path.with_name(f"{word}.md"))
    elif how == "delete" and path.exists():
        path.unlink()
    elif how == "section" and path.exists():
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(f"\n## {word}\n\nA new section.\n")


@settings(max_examples=8)
@given(edits=_TITLE_EDITS)
def test_titles_after_edits_equal_a_rebuild(tmp_path_factory, embedder, edits):
    root = new_home(tmp_path_factory.mktemp("titles"), embedder)
    with syncd.open(root, embedder=embedder) as engine:
        engine.sync()
        for rel, how, word in edits:
            _edit(root, rel, how, word)
            engine.sync()
        # Every vault row's title is what its file says now.
        for row in engine.index.all_rows().to_pylist():
            if row["path"].startswith("vault/"):
                want = {(r.title, r.heading) for r in parse_file(row["path"], (root / row["path"]).read_bytes())}
                assert (row["title"], row["heading"]) in want
        assert_matches_rebuild(engine)


def test_an_index_of_the_old_layout_is_rebuilt_with_titles(home, embedder):
    write(home, "vault/drinks/tea.md", PAGES["vault/drinks/tea.md"])
    with syncd.open(home, embedder=embedder) as engine:
        engine.sync()
    # Make it an index of layout 2: no title column, and meta.json says so.
    folder = home / ".syncd" / "index"
    db = lancedb.connect(str(folder / "lance"))
    old = db.open_table("entries").to_arrow().drop_columns(["title"])
    old_schema = pa.schema([f for f in entry_schema(old.schema.field("vector").type.list_size) if f.name != "title"])
    db.drop_table("entries")
    db.create_table("entries", old.cast(old_schema))
    meta = json.loads((folder / "meta.json").read_text())
    (folder / "meta.json").write_text(json.dumps(meta | {"schema": 2}))
    with syncd.open(home, embedder=embedder) as engine:
        engine.sync()
        hit = _chunk_of(engine, "steep sencha temperature", "vault/drinks/tea.md")
        assert hit.breadcrumb == "Green tea > Brewing > Temperature"
        assert json.loads((folder / "meta.json").read_text())["schema"] == SCHEMA_VERSION
