"""Markdown-style links (``[text](note.md)``, ``![alt](image.png)``): read like Obsidian reads
them, resolved like wikilinks, counted in links/backlinks/orphans and checked by lint."""

from __future__ import annotations

import json
import posixpath
from pathlib import Path
from urllib.parse import quote

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from syncd.cli import main
from syncd.formats.pages import markdown_destination, parse_page
from syncd.wiki.manager import WikiManager
from syncd.wiki.resolve import Resolver, parse_linktext


def md(text: str) -> list[tuple[str, str, str, bool, int]]:
    return [(m.path, m.subpath, m.text, m.embed, m.line) for m in parse_page(text).markdown_links]


@pytest.mark.parametrize(
    ("text", "links"),
    [
        ("[a note](note.md)", [("note.md", "", "a note", False, 1)]),
        ("[h](folder/note.md#Heading)", [("folder/note.md", "#Heading", "h", False, 1)]),
        ("[s](Note%20name.md)", [("Note name.md", "", "s", False, 1)]),
        ("![alt](image.png)", [("image.png", "", "alt", True, 1)]),
        ("[b](Page.md#^blk)", [("Page.md", "#^blk", "b", False, 1)]),
        ("[b](Page.md#Part%20two)", [("Page.md", "#Part two", "b", False, 1)]),
        ("[c](C%23%20notes.md)", [("C# notes.md", "", "c", False, 1)]),
        ("[self](#Section)", [("", "#Section", "self", False, 1)]),
        ("[t](<My Note.md> \"a title\")", [("My Note.md", "", "t", False, 1)]),
        ("[t](note.md 'title')", [("note.md", "", "t", False, 1)]),
        ("[p](a_(b).md)", [("a_(b).md", "", "p", False, 1)]),
        ("[e](a\\_b.md)", [("a_b.md", "", "e", False, 1)]),
        ("[![i](a.png)](b.md)", [("b.md", "", "![i](a.png)", False, 1), ("a.png", "", "i", True, 1)]),
        ("x\n\n[two](b.md) [three](c.md)", [("b.md", "", "two", False, 3), ("c.md", "", "three", False, 3)]),
        # outside the vault, or not links at all
        ("[w](https://example.com/a.md#x) [m](mailto:a@b.c) [o](obsidian://open?vault=x)", []),
        ("[f](file:///tmp/a.md) [z](zotero://select/items/1)", []),
        ("[empty]() [hash](#) [sp](two words.md)", []),
        ("`[c](code.md)` [[wiki]] [[x]](y.md)", []),
        ("```\n[f](fenced.md)\n```\n%% [c](comment.md) %%\n<!-- [h](html.md) -->\n$[m](math.md)$", []),
        ("---\nup: '[x](front.md)'\n---\nbody", []),
    ],
)  # fmt: skip
def test_markdown_links_are_read_as_obsidian_reads_them(text, links):
    assert md(text) == links


_NAME = st.text(st.characters(blacklist_categories=["Cs", "Cc"], blacklist_characters="/\\"), min_size=1,
                max_size=12).filter(lambda s: s.strip() == s and s not in (".", ".."))  # fmt: skip


@settings(max_examples=200)
@given(folder=st.lists(_NAME, max_size=2), name=_NAME, heading=st.text(max_size=10))
def test_a_destination_written_url_encoded_decodes_to_the_path_and_subpath(folder, name, heading):
    path = "/".join([*folder, name + ".md"])
    dest = quote(path) + ("#" + quote(heading) if heading else "")
    assert markdown_destination(dest) == (path, "#" + heading if heading else "")
    # And the parser finds it whole in a page, whatever the characters.
    [link] = parse_page(f"see [x]({dest}) here\n").markdown_links
    assert (link.path, link.subpath) == (path, "#" + heading if heading else "")


_VAULT = st.lists(
    st.tuples(st.sampled_from(["", "a", "a/b", "Ü ber", "c d"]),
              st.sampled_from(["Note", "note", "Two words", "Ünï", "x.y"])),
    min_size=1, max_size=8, unique_by=lambda t: (t[0] + "/" + t[1]).lower(),
).map(lambda pairs: [posixpath.join(f, n + ".md") for f, n in pairs])  # fmt: skip


@settings(max_examples=150)
@given(paths=_VAULT, data=st.data())
def test_a_markdown_link_opens_what_the_same_wikilink_opens(paths, data):
    """Obsidian resolves both styles with one function: the markdown link's decoded path (the
    way Obsidian writes it: relative ``../``, full, or the bare file name) opens the same file."""
    source = data.draw(st.sampled_from(paths))
    target = data.draw(st.sampled_from(paths))
    style = data.draw(st.sampled_from(["full", "name", "relative", "no-ext"]))
    if style == "full":
        written = target
    elif style == "name":
        written = posixpath.basename(target)
    elif style == "relative":
        written = posixpath.relpath(target, posixpath.dirname(source) or ".")
        written = written if written.startswith("../") else "./" + written
    else:
        written = target[:-3]
    [link] = parse_page(f"[x]({quote(written)})").markdown_links
    resolver = Resolver(paths)
    assert resolver.resolve(link.path, source) == resolver.resolve(parse_linktext(written)[0], source)
    if style in ("full", "relative"):
        assert resolver.resolve(link.path, source).target == target


def write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")


VAULT = {
    "Home.md": "# Home\n[people](people/Bob%20Smith.md) [gone](Missing.md) ![pic](img/photo.png) "
               "![no](img/none.png)\n[sec](people/Bob%20Smith.md#Hobbies) [bad](people/Bob%20Smith.md#Nope)\n"
               "[web](https://example.com) [same](Same.md)\n",
    "people/Bob Smith.md": "# Bob Smith\n## Hobbies\n[back](../Home.md)\n",
    "a/Same.md": "x\n",
    "b/Same.md": "y\n",
    "img/photo.png": "",
}  # fmt: skip


def test_lint_checks_markdown_links_and_backlinks_count_them(tmp_path):
    write(tmp_path, VAULT)
    wiki = WikiManager(tmp_path, use_cache=False)
    found = {(f.code, f.path, f.line): f.message for f in wiki.lint()}
    assert set(found) == {
        ("broken-link", "Home.md", 2),
        ("broken-embed", "Home.md", 2),
        ("broken-heading", "Home.md", 3),
        ("ambiguous-link", "Home.md", 4),
    }
    assert found["broken-link", "Home.md", 2].startswith("[gone](Missing.md) opens no file")
    assert found["broken-embed", "Home.md", 2].startswith("![no](img/none.png) opens no file")
    assert "has no heading 'Nope'" in found["broken-heading", "Home.md", 3]
    # The fix keeps the link's style, URL-encoded as Obsidian writes it.
    assert "Write [same](a/Same.md) to say which" in found["ambiguous-link", "Home.md", 4]
    # No orphans: Bob and the pages named Same are linked (by markdown links alone).
    assert [e.source for e in wiki.backlinks("people/Bob Smith.md")] == ["Home.md", "Home.md", "Home.md"]
    assert [e.source for e in wiki.backlinks("Home.md")] == ["people/Bob Smith.md"]
    assert [e.source for e in wiki.backlinks("img/photo.png")] == ["Home.md"]


def test_links_json_shows_markdown_links_as_written(tmp_path, capsys):
    write(tmp_path, VAULT)
    assert main(["links", "Bob Smith", "--vault", str(tmp_path), "--json"]) == 0
    [link] = json.loads(capsys.readouterr().out)["links"]
    assert (link["link"], link["target"]) == ("[back](../Home.md)", "Home.md")


def test_a_github_style_anchor_gets_the_fix_obsidian_understands(tmp_path):
    """Docs written for GitHub link to ``#release-types``; Obsidian matches heading text, so the
    message says what to write, and writing it clears the finding."""
    page = "# Release types\n\n[r](#release-types) [[B#part-two|x]] [s](B.md#part-two) [n](B.md#nothing-like)\n"
    write(tmp_path, {"A.md": page, "B.md": "## Part two\n"})
    wiki = WikiManager(tmp_path, use_cache=False)
    fixes = {}
    for finding in wiki.lint():
        assert finding.code == "broken-heading"
        if "GitHub-style" in finding.message:
            broken, fix = finding.message.split(": ", 1)[0], finding.message.rsplit("write ", 1)[1]
            fixes[broken] = fix
    assert fixes == {"[r](#release-types)": "[r](#Release%20types)", "[[B#part-two|x]]": "[[B#Part two|x]]",
                     "[s](B.md#part-two)": "[s](B.md#Part%20two)"}  # fmt: skip
    for broken, fix in fixes.items():
        page = page.replace(broken, fix)
    write(tmp_path, {"A.md": page})
    assert [(f.code, f.message.split(":")[0]) for f in wiki.lint()] == [("broken-heading", "[n](B.md#nothing-like)")]


def test_github_anchors_of_repeated_headings_links_and_emphasis():
    from syncd.wiki.lint import _github_slugs  # white-box: the slug rule, case by case against GitHub's

    heads = [(2, "Windows"), (2, "Windows"), (2, "[Issues](./x.md)"), (2, "8. Build _(optional)_"),
             (2, "`snake_case` for fields"), (2, "Unix/macOS")]  # fmt: skip
    assert _github_slugs(heads) == {
        "windows": "Windows", "windows-1": "Windows", "issues": "[Issues](./x.md)",
        "8-build-optional": "8. Build _(optional)_", "snake_case-for-fields": "`snake_case` for fields",
        "unixmacos": "Unix/macOS",
    }  # fmt: skip
