"""Lint, the graph cache and WikiManager on real files and real git."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import syncd
from syncd.errors import NotFoundError
from syncd.wiki import report
from syncd.wiki.lint import CODES
from syncd.wiki.manager import WikiManager
from syncd.wiki.store import GraphCache, build_graph


def write(root: Path, files: dict[str, str | bytes]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text if isinstance(text, bytes) else text.encode())


def git(root: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "PATH": "/usr/bin:/bin"}  # fmt: skip
    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, text=True, env=env).stdout


def codes(findings, path=None):
    return sorted((f.code, f.path, f.line) for f in findings if path is None or f.path == path)


def tree_digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".syncd" not in p.parts and ".git" not in p.parts
    }


@pytest.fixture
def home(tmp_path):
    root = tmp_path / "home"
    syncd.init(root)
    return root


# ------------------------------------------------------------------------------ the template


def test_fresh_home_lints_clean(home):
    wiki = WikiManager.for_home(home)
    findings = wiki.lint()
    assert findings == []
    assert report.lint_exit_code(findings) == 0
    assert report.lint_lines(findings) == ["no findings"]


def test_bootstrap_seeds_once_then_never_writes(tmp_path):
    vault = tmp_path / "anywhere"
    wiki = WikiManager(vault)
    assert wiki.bootstrap() == ["index.md", "log.md", "schema.md"]
    assert wiki.lint() == []
    (vault / "log.md").unlink()
    before = tree_digest(vault)
    assert wiki.bootstrap() == []
    assert tree_digest(vault) == before


# ------------------------------------------------------------------------------ findings

VAULT = {
    "index.md": "# Index\n- [[Alice]]\n- [[Gone]]\n- [[people/Bob]]\n- [[Same]]\n- [[Attach]]\n",
    "log.md": "# Log\n- 2024-01-02 10:00 agent created: [[Alice]] (seed)\n- not an entry\n"
    "- 2024-01-01 09:00 agent created: [[Bob]] (late)\n",
    "Alice.md": "---\naliases: [Ally]\ntags: [ok, 'has space']\n---\n# Alice\nSee [[Bob#Work 2024]] and [[Bob#Nope]].\n"
    "Quote ^q1\n[[Ally]] ![[photo]] ![[photo.png]] [[Alice#^q1]] [[Alice#^zz]] [[Bob^b1]]\n"
    "`[[InCode]]` %% [[InComment]] %% <!-- [[InHtml]] --> $[[InMath]]$\n",
    "people/Bob.md": "# Bob\n## Work: 2024!\npara ^b1\n[[Same]]\n",
    "Same/x.md": "",
    "a/Same.md": "# Same\n",
    "b/Same.md": "# Same\n",
    "Lonely.md": "---\ntitle: [broken\n---\nnobody links here\n",
    "Linked.md": "---\naliases: Bob\n---\n[[Lonely]]\n",
    "Attach.md": "---\ntype: synthesis\n---\n# Alice\n",
    "photo.png": b"\x89PNG",
}


def test_each_kind_of_finding(tmp_path):
    write(tmp_path, VAULT)
    findings = WikiManager(tmp_path, use_cache=False).lint()
    got = codes(findings)
    expected = [
        ("ambiguous-link", "index.md", 5),
        ("ambiguous-link", "people/Bob.md", 4),
        ("bad-log-entry", "log.md", 3),
        ("bad-tags", "Alice.md", 3),
        ("broken-block", "Alice.md", 8),
        ("broken-embed", "Alice.md", 8),
        ("broken-heading", "Alice.md", 6),
        ("broken-index-entry", "index.md", 3),
        ("broken-link", "Alice.md", 8),
        ("duplicate-alias", "Linked.md", 1),
        ("duplicate-title", "Alice.md", 1),
        ("duplicate-title", "Attach.md", 1),
        ("duplicate-title", "a/Same.md", 1),
        ("duplicate-title", "b/Same.md", 1),
        ("invalid-frontmatter", "Lonely.md", 1),
        ("link-to-alias", "Alice.md", 8),
        ("log-out-of-order", "log.md", 4),
        ("missing-from-index", "Lonely.md", 1),
        ("missing-sources", "Attach.md", 1),
        ("orphan", "Linked.md", 1),
        ("orphan", "Same/x.md", 1),
        ("orphan", "b/Same.md", 1),
    ]
    assert got == expected
    by = {(f.code, f.path): f for f in findings}
    assert "[[Alice|Ally]]" in by[("link-to-alias", "Alice.md")].message
    assert "[[photo.png]]" in by[("broken-embed", "Alice.md")].message
    assert "[[Bob#^b1]]" in by[("broken-link", "Alice.md")].message
    assert all(f.severity == CODES[f.code] for f in findings)
    assert report.lint_exit_code(findings) == 1
    doc = json.loads(report.lint_json(findings))
    assert doc["counts"]["error"] == sum(f.severity == "error" for f in findings)
    assert doc["findings"][0] == findings[0].to_dict()


# Names a link cannot simply be the name of: '#' and '|' cut a link's text, brackets end it, a
# link's path loses its end spaces, and a name only a case away from another is that one's.
ODD_NAMES = ["Plain", "a#b", "x|y", "c^d", "e[f]", "g]h", " lead", "trail ", "Tea", "tea", "deep/q#r", "deep/Sub"]


def test_the_advice_for_an_unlisted_page_is_a_link_that_opens_it_or_to_rename_it(home):
    vault = home / "vault"
    write(vault, {f"{name}.md": "# A page\n" for name in ODD_NAMES})
    advice = {f.path: f.message for f in WikiManager.for_home(home).lint() if f.code == "orphan"}
    entries, renamed = [], []
    for name in ODD_NAMES:
        entry = re.search(r"add '- (\[\[.*?\]\]) <what it holds>'", advice[f"{name}.md"])
        assert entry, advice[f"{name}.md"]
        if entry[1] == "[[<new name>]]":
            assert "no link can name this page" in advice[f"{name}.md"]
            renamed.append(f"{name}.md")
        else:
            entries.append(f"- {entry[1]} a page\n")
    # Following the advice lists every page it gave a link for, and that link opens the page.
    listed_from = len((vault / "index.md").read_text().splitlines())
    with open(vault / "index.md", "a") as index:
        index.writelines(entries)
    findings = WikiManager.for_home(home).lint()
    assert [f.message for f in findings if f.code == "broken-index-entry" and f.line > listed_from] == []
    assert sorted(f.path for f in findings if f.code == "orphan" and f.path.endswith(".md")
                  and f.path[:-3] in ODD_NAMES) == sorted(renamed)  # fmt: skip
    assert sorted(renamed) == sorted(f"{n}.md" for n in ["a#b", "x|y", "e[f]", "g]h", "trail ", "tea", "deep/q#r"])
    assert "[[a#b]] would open heading 'b' of page 'a'" in advice["a#b.md"]
    # Rename was right: the link the name would make lists none of them.
    with open(vault / "index.md", "a") as index:
        index.writelines(f"- [[{p[:-3]}]] a page\n" for p in renamed)
    still = {f.path for f in WikiManager.for_home(home).lint() if f.code == "orphan"}
    assert set(renamed) <= still


def test_lint_never_changes_a_byte(tmp_path):
    write(tmp_path, VAULT)
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", "-A")
    git(tmp_path, "commit", "-qm", "seed")
    before = tree_digest(tmp_path)
    status = git(tmp_path, "status", "--porcelain")
    wiki = WikiManager(tmp_path, cache_dir=tmp_path.parent / "cache")
    first = wiki.lint()
    second = wiki.lint()
    assert first == second
    wiki.links("Alice")
    wiki.backlinks("Bob")
    assert tree_digest(tmp_path) == before
    assert git(tmp_path, "status", "--porcelain") == status


def test_links_and_backlinks(tmp_path):
    write(tmp_path, VAULT)
    wiki = WikiManager(tmp_path, use_cache=False)
    links = wiki.links("Alice")
    assert [(e.link.raw, e.resolution.target) for e in links][:3] == [
        ("Bob#Work 2024", "people/Bob.md"), ("Bob#Nope", "people/Bob.md"), ("Ally", None)]  # fmt: skip
    back = wiki.backlinks("people/Bob.md")
    assert sorted({e.source for e in back}) == ["Alice.md", "index.md", "log.md"]
    doc = json.loads(report.backlinks_json("people/Bob.md", back))
    assert {b["source"] for b in doc["backlinks"]} == {"Alice.md", "index.md", "log.md"}
    assert "-> people/Bob.md" in "\n".join(report.links_lines("Alice.md", links))
    with pytest.raises(NotFoundError):
        wiki.links("Nobody")


# ------------------------------------------------------------------------------ the cache


def test_cache_gives_the_same_graph_and_follows_edits(tmp_path):
    vault = tmp_path / "v"
    write(vault, VAULT)
    cache = GraphCache(tmp_path / "c.sqlite")
    cold = build_graph(vault, cache)
    warm = build_graph(vault, cache)
    assert warm.pages == cold.pages == build_graph(vault).pages
    write(vault, {"people/Bob.md": "# Bob\n## Nope\n"})
    edited = build_graph(vault, cache)
    assert edited.pages == build_graph(vault).pages
    assert edited.pages["people/Bob.md"].headings == ((1, "Bob"), (2, "Nope"))
    (vault / "Lonely.md").unlink()
    assert "Lonely.md" not in build_graph(vault, cache).pages
    cache.close()


def test_deleting_the_derived_store_gives_the_same_findings(home):
    write(home / "vault", {"A.md": "[[B]] [[index]]\n", "people/B.md": "# B\n[[A#Missing]]\n"})
    wiki = WikiManager.for_home(home)
    first = wiki.lint()
    assert (home / ".syncd" / "wiki" / "graph.sqlite").exists()
    shutil.rmtree(home / ".syncd" / "wiki")
    assert wiki.lint() == first
    assert codes(first) == [("broken-heading", "people/B.md", 2), ("missing-from-index", "A.md", 1),
                            ("missing-from-index", "people/B.md", 1)]  # fmt: skip


def test_parallel_parse_equals_one_core(tmp_path):
    from syncd.wiki import graph as graph_module
    from syncd.wiki import store as store_module

    pages = {
        f"f{i % 7}/P{i}.md": f"# P{i}\n[[P{i + 1}#P{i + 1}]] ^b{i}\n" for i in range(store_module.PARALLEL_MIN + 5)
    }
    write(tmp_path, pages)
    parallel = build_graph(tmp_path)
    items = [(rel, "sha", text.encode()) for rel, text in pages.items()]
    # White-box: the one-core parse, to compare with the parallel one build_graph chose.
    one_core = {
        rel: graph_module.PageNode.from_json(rel, "sha", data) for rel, _, data, _ in store_module._parse_batch(items)
    }
    assert {rel: node.to_json() for rel, node in parallel.pages.items()} == {
        rel: node.to_json() for rel, node in one_core.items()}  # fmt: skip
    assert [e for e in parallel.edges if not e.subpath_ok or e.resolution.target is None] == [
        e for e in parallel.edges if e.link.path == f"P{store_module.PARALLEL_MIN + 5}"]  # fmt: skip


_PIECES = st.sampled_from(["[[A]]", "[[B#H]]", "[[a/C^x]]", "![[p.png]]", "# H\n", "text ^x\n", "\n",
                           "---\naliases: [Z]\n---\n", "%%", "`", "$", "[[Z]]", "#tag "])  # fmt: skip


@given(st.dictionaries(st.sampled_from(["A.md", "B.md", "a/C.md", "b/A.md", "index.md"]),
                       st.lists(_PIECES, max_size=8).map("".join), min_size=1),
       st.dictionaries(st.sampled_from(["A.md", "B.md", "a/C.md", "b/A.md", "index.md"]),
                       st.lists(_PIECES, max_size=8).map("".join)))  # fmt: skip
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_property_incremental_equals_rebuild(tmp_path_factory, first, second):
    root = tmp_path_factory.mktemp("inc")
    vault = root / "v"
    write(vault, first)
    cache = GraphCache(root / "c.sqlite")
    try:
        build_graph(vault, cache)
        write(vault, second)
        for rel in first:
            if rel not in second and len(first) > 1 and rel.startswith("b/"):
                (vault / rel).unlink()
        incremental = build_graph(vault, cache)
        assert incremental.pages == build_graph(vault).pages
    finally:
        cache.close()


# ------------------------------------------------------------------------------ git: log and provenance


def commit(root: Path, message: str) -> None:
    git(root, "add", "-A")
    git(root, "commit", "-qm", message)


def test_log_rewritten_is_caught_in_history_and_cleared_by_restoring(home):
    vault = home / "vault"
    log = vault / "log.md"
    original = log.read_text()
    entry1 = "- 2024-05-01 10:00 agent created: [[A]] (first)\n"
    entry2 = "- 2024-05-02 10:00 agent created: [[B]] (second)\n"
    write(vault, {"A.md": "[[index]]", "B.md": "[[A]]", "log.md": original + entry1})
    commit(home, "one")
    write(vault, {"log.md": original + entry2})  # entry1 rewritten away
    commit(home, "two")
    findings = [f for f in WikiManager.for_home(home).lint() if f.code == "log-rewritten"]
    assert len(findings) == 1 and "2024-05-01" in findings[0].message
    write(vault, {"log.md": original + entry1 + entry2})  # restored, uncommitted
    assert [f for f in WikiManager.for_home(home).lint() if f.code == "log-rewritten"] == []
    commit(home, "three")
    write(vault, {"log.md": original.replace("newest last", "newest first") + entry1 + entry2})
    uncommitted = [f for f in WikiManager.for_home(home).lint() if f.code == "log-rewritten"]
    assert len(uncommitted) == 1 and "uncommitted" in uncommitted[0].message


def test_provenance_missing_and_stale_sources(home):
    vault = home / "vault"
    write(home, {"memory/users/u/2024-01-01.md": "# 2024-01-01\n", "raw/paper.txt": "v1\n"})
    write(vault, {
        "index.md": (vault / "index.md").read_text() + "- [[Summary]]\n- [[Source page]]\n",
        "Source page.md": "facts\n",
        "Summary.md": "---\ntype: synthesis\nsources: ['[[Source page]]', raw/paper.txt, "
                      "memory/users/u/2024-01-01.md, https://example.com/x, raw/gone.txt, '[[Nope]]']\n---\n# S\n",
    })  # fmt: skip
    commit(home, "pages")
    got = codes(WikiManager.for_home(home).lint())
    assert got == [("missing-source", "Summary.md", 3), ("missing-source", "Summary.md", 3)]
    write(home, {"raw/paper.txt": "v2\n"})
    commit(home, "source changed")
    write(vault, {"Source page.md": "more facts\n"})
    commit(home, "source page changed")
    stale = [f for f in WikiManager.for_home(home).lint() if f.code == "stale-page"]
    assert len(stale) == 2
    assert {("raw/paper.txt" in f.message) or ("Source page" in f.message) for f in stale} == {True}
    write(vault, {"Summary.md": (vault / "Summary.md").read_text() + "updated\n"})
    commit(home, "summary refreshed")
    assert [f for f in WikiManager.for_home(home).lint() if f.code == "stale-page"] == []


def test_the_lint_skill_explains_every_code():
    skill = (Path(__file__).parent.parent / "skills" / "notebook" / "lint.md").read_text()
    assert [code for code in CODES if f"`{code}`" not in skill] == []


def test_a_frontmatter_value_built_from_yaml_anchors_is_quoted_briefly(tmp_path):
    # Each level is ten copies of the one before: a 300-byte page whose `aliases` repr was 50 MB
    # (10**7 items; two levels more is gigabytes, and the daemon parses every page it indexes).
    levels = ["l0: &l0 [x, x, x, x, x, x, x, x, x, x]"]
    levels += [f"l{n}: &l{n} [{', '.join([f'*l{n - 1}'] * 10)}]" for n in range(1, 7)]
    bomb = "\n".join(levels)
    write(tmp_path, {
        "Aliases.md": f"---\n{bomb}\naliases: [ok, *l6]\n---\n# A\n",
        "Tags.md": f"---\n{bomb}\ntags: [*l6]\n---\n# T\n",
        "Sources.md": f"---\n{bomb}\nsources: [*l6]\n---\n# S\n",
    })  # fmt: skip
    findings = [f for f in WikiManager(tmp_path, use_cache=False).lint() if f.code.startswith("bad-")]
    assert sorted(f.code for f in findings) == ["bad-aliases", "bad-sources", "bad-tags"]
    assert all(len(f.message) < 400 for f in findings), [len(f.message) for f in findings]
    assert all("holds [[" in f.message for f in findings)


def test_a_page_with_a_byte_that_is_not_utf8_keeps_its_links(tmp_path):
    # Its links were dropped whole: the page it alone links to was an orphan with no backlinks,
    # and its broken link went unreported (the sync indexes it with U+FFFD for the bad byte).
    write(tmp_path, {"Caf\u00e9.md": b"# Caf\xe9 notes\n\nSee [[Only]] and [[Nowhere]].\n", "Only.md": "# Only\n"})
    wiki = WikiManager(tmp_path, use_cache=False)
    findings = wiki.lint()
    assert codes(findings) == [("broken-link", "Caf\u00e9.md", 3), ("invalid-encoding", "Caf\u00e9.md", 1)]
    (bad,) = [f for f in findings if f.code == "invalid-encoding"]
    assert bad.message.startswith("not valid UTF-8 (byte 0xe9") and "Caf" not in bad.message
    assert [e.source for e in wiki.backlinks("Only")] == ["Caf\u00e9.md"]


def test_a_source_outside_the_home_is_never_looked_at_and_hides_no_stale_page(home):
    # `../x` was looked for on disk (so lint, over REST too, told whether any file on the machine
    # exists), and handed to git log with the other sources: git refused the whole walk, and
    # every stale-page finding of the vault was silently gone.
    (home.parent / "outside.txt").write_text("a file next to the home\n")
    vault = home / "vault"
    write(home, {"raw/paper.txt": "v1\n"})
    write(vault, {"Summary.md": "---\nsources: [raw/paper.txt]\n---\n# S\n"})
    commit(home, "summary")
    write(home, {"raw/paper.txt": "v2\n"})
    commit(home, "paper changed")
    for n, source in enumerate(["../outside.txt", "vault/../../outside.txt", "../no-such-file.txt"]):
        write(vault, {f"Climbs{n}.md": f"---\nsources: ['{source}']\n---\n# C\n"})
    commit(home, "pages citing files outside the home")
    findings = [f for f in WikiManager.for_home(home).lint() if "source" in f.code or f.code == "stale-page"]
    assert codes(findings) == [("missing-source", "Climbs0.md", 2), ("missing-source", "Climbs1.md", 2),
                               ("missing-source", "Climbs2.md", 2), ("stale-page", "Summary.md", 2)]  # fmt: skip
    assert all("is outside the home" in f.message for f in findings if f.code == "missing-source")


PRIVATE_SOURCES = [".git/config", ".git/syncd/probe", "./.git/HEAD", "vault/../.git/HEAD", ".GIT/config",
                   ".syncd/secret.txt", ".syncd/nothing", "memory/.git/x"]  # fmt: skip


def test_a_source_in_git_s_or_syncd_s_folder_is_refused_without_saying_whether_it_exists(home):
    vault = home / "vault"
    listed = "".join(f"  - '{s}'\n" for s in PRIVATE_SOURCES)
    write(vault, {"Peek.md": f"---\nsources:\n{listed}---\n# Peek\n"})
    commit(home, "a page citing private files")

    def peek() -> list[tuple[str, str]]:
        found = WikiManager.for_home(home).lint() + WikiManager(vault, use_cache=False).lint()
        return sorted((f.code, f.message) for f in found if f.path == "Peek.md" and "source" in f.code)

    toggled = [".syncd/secret.txt", "memory/.git/x", ".git/syncd/probe"]
    write(home, dict.fromkeys(toggled, "x"))
    with_files = peek()
    for rel in toggled:
        (home / rel).unlink()
    assert peek() == with_files
    assert {code for code, _ in with_files} == {"private-source"}
    assert len(with_files) == 2 * len(PRIVATE_SOURCES)
    assert all("points into syncd's private folder" in message for _, message in with_files)


def test_a_linked_page_is_a_name_never_read(tmp_path):
    # lint, links and backlinks read a page through a symbolic link, wherever it led: another
    # user's log, any file of the machine (over REST too), though syncd never follows links.
    outside = tmp_path / "outside"
    write(outside, {"secret.md": "# Secret\n\n[[Swordfish]]\n\n## Launch codes\n", "folder/x.md": "[[Swordfish]]\n"})
    vault = tmp_path / "vault"
    write(vault, {"Notes.md": "[[secret#Launch codes]] and [[secret]]\n"})
    (vault / "secret.md").symlink_to(outside / "secret.md")
    (vault / "linked").symlink_to(outside / "folder")
    for wiki in (WikiManager(vault, use_cache=False), WikiManager(vault, cache_dir=tmp_path / "cache")):
        findings = wiki.lint()
        assert not [f for f in findings if "Swordfish" in f.message or f.path != "Notes.md"], findings
        assert [(e.link.raw, e.resolution.target) for e in wiki.links("Notes")] == [
            ("secret#Launch codes", "secret.md"), ("secret", "secret.md")]  # fmt: skip
        assert wiki.links("secret.md") == []
    assert "secret.md" not in build_graph(vault).pages and "secret.md" in build_graph(vault).files


def test_a_page_whose_name_git_quotes_is_found_stale(home):
    # git log quoted these names ("Say \"hi\".md"), which then matched no page: never stale.
    names = ['Say "hi".md', "back\\slash.md", "tab\there.md", "caf\u00e9.md"]
    write(home, {"raw/paper.txt": "v1\n"})
    write(home / "vault", dict.fromkeys(names, "---\nsources: [raw/paper.txt]\n---\n# P\n"))
    commit(home, "pages")
    write(home, {"raw/paper.txt": "v2\n"})
    commit(home, "paper changed")
    stale = [f.path for f in WikiManager.for_home(home).lint() if f.code == "stale-page"]
    assert sorted(stale) == sorted(names)


def test_the_store_keeps_one_answer_of_git_per_question_however_long_the_history(home):
    # Keyed by the HEAD, each lint after a commit added a row holding every version of log.md
    # (8 MB a row for a 280 KB log of 60 versions): the derived store grew with history for good.
    import sqlite3

    from syncd.wiki.store import store_path

    vault = home / "vault"
    write(vault, {"Summary.md": "---\nsources: [Notes.md]\n---\n# S\n", "Notes.md": "# N\n"})
    for n in range(3):
        write(
            vault, {"log.md": (vault / "log.md").read_text() + f"- 2026-01-0{n + 1} 10:00 me edited: [[Notes]] (x)\n"}
        )
        commit(home, f"log {n}")
        WikiManager.for_home(home).lint()
    with sqlite3.connect(store_path(home)) as db:
        keys = sorted(k for (k,) in db.execute("SELECT key FROM facts") if k.startswith(("log_", "last_")))
    db.close()
    assert keys == ["last_changed", "log_versions:vault/"]


def test_a_source_reached_through_a_link_is_never_looked_at(home, tmp_path):
    # is_file() followed the link: lint told whoever asked whether any file it led to existed.
    outside = tmp_path / "outside"
    write(outside, {"secret.txt": "x\n"})
    (home / "notes").mkdir()
    (home / "notes" / "etc").symlink_to(outside)
    (home / "notes" / "link.txt").symlink_to(outside / "secret.txt")
    write(home, {"notes/real.txt": "y\n"})
    sources = ["notes/etc/secret.txt", "notes/link.txt", "notes/real.txt"]
    write(home / "vault", {"P.md": f"---\nsources: {sources}\n---\n# P\n"})
    for _ in range(2):  # the second answered from the store
        missing = [f.message for f in WikiManager.for_home(home).lint() if f.code == "missing-source"]
        assert sorted(m.split("'")[1] for m in missing) == sources[:2]
