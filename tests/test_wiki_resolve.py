"""The resolver against Obsidian's rules (see syncd/wiki/resolve.py for where they come from)."""

from __future__ import annotations

import posixpath

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from syncd.wiki.resolve import Resolver, parse_linktext, strip_heading, subpath_exists

VAULT = [
    "Home.md",
    "people/Bob.md",
    "archive/people/Bob.md",
    "work/Bob.md",
    "xpeople/Carol.md",
    "people/Carol.md",
    "notes/Deep/Note.md",
    "notes/Note.md",
    "Tea.MD",
    "img/photo.png",
    "docs/report.pdf",
    "v1.2 release.md",
    "Über uns.md",
    "a/Same.md",
    "b/Same.md",
]


def target(link: str, source: str = "Home.md", paths=VAULT) -> str | None:
    return Resolver(paths).resolve(parse_linktext(link)[0], source).target


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("Page", ("Page", "")),
        ("Page#Head", ("Page", "#Head")),
        ("Page#A#B|shown", ("Page", "#A#B")),
        ("Page#^blk", ("Page", "#^blk")),
        ("Page^blk", ("Page^blk", "")),
        ("#Local", ("", "#Local")),
        (" Spaced |x", ("Spaced", "")),
    ],
)
def test_linktext_cut_at_first_pipe_then_first_hash(raw, expected):
    assert parse_linktext(raw) == expected


def test_name_without_extension_case_insensitive():
    assert target("home") == "Home.md"
    assert target("HOME") == "Home.md"
    assert target("tea") == "Tea.MD"  # the extension's case does not matter either
    assert target("über UNS") == "Über uns.md"


def test_unique_name_in_a_folder_needs_no_folder():
    assert target("Deep/Note") == "notes/Deep/Note.md"


def test_repeated_name_shortest_path_wins_from_the_root():
    # people/Bob.md (13) and work/Bob.md (11): the shortest path is work/Bob.md.
    assert target("Bob") == "work/Bob.md"


def test_repeated_name_the_linking_pages_folder_comes_first():
    assert target("Bob", source="people/Index.md") == "people/Bob.md"
    assert target("Note", source="notes/Deep/x.md") == "notes/Deep/Note.md"
    assert target("Note", source="Home.md") == "notes/Note.md"


def test_folder_qualified_path_matches_a_path_suffix():
    assert target("people/Bob") == "people/Bob.md"
    assert target("archive/people/Bob") == "archive/people/Bob.md"
    # Obsidian compares plain string suffixes: "people/carol.md" ends "xpeople/carol.md" too,
    # and the exact path wins over the suffix.
    res = Resolver(VAULT).resolve("people/Carol", "Home.md")
    assert res.target == "people/Carol.md"
    assert Resolver(["xpeople/Carol.md"]).resolve("people/Carol", "Home.md").target == "xpeople/Carol.md"


def test_leading_slash_means_vault_root_only():
    assert target("/people/Bob") == "people/Bob.md"
    assert target("/Bob") is None


def test_relative_paths():
    assert target("./Bob", source="people/Index.md") == "people/Bob.md"
    assert target("../work/Bob", source="people/Index.md") == "work/Bob.md"
    assert target("../../Home", source="notes/Deep/x.md") == "Home.md"


def test_attachments_need_their_extension():
    assert target("photo.png") == "img/photo.png"
    assert target("report.pdf") == "docs/report.pdf"
    assert target("photo") is None
    assert target("Tea.md") == "Tea.MD"


def test_a_dot_in_a_page_name_falls_back_to_md():
    assert target("v1.2 release") == "v1.2 release.md"


def test_empty_path_is_the_linking_page():
    assert target("#Heading", source="people/Bob.md") == "people/Bob.md"


def test_block_link_without_hash_is_a_file_name():
    assert target("Home^abc") is None


def test_a_file_at_the_root_wins_over_the_nearer_folder():
    # "Bob" is then the whole vault path of Bob.md: exact paths are tried before suffixes.
    paths = ["Bob.md", "people/Bob.md"]
    assert Resolver(paths).resolve("Bob", "people/x.md").target == "Bob.md"


def test_equal_length_candidates_are_tied():
    res = Resolver(VAULT).resolve("Same", "Home.md")
    assert res.target == "a/Same.md" and res.tied and res.candidates == ("a/Same.md", "b/Same.md")
    bob = Resolver(VAULT).resolve("Bob", "Home.md")
    assert bob.ambiguous and not bob.tied


def test_aliases_are_not_resolved():
    # Nothing about aliases reaches the resolver: only file names count.
    assert target("Robert") is None


# ------------------------------------------------------------------------------ subpaths

HEADS = [(1, "Intro"), (2, "Setup: Linux & Mac!"), (3, "Step 1"), (2, "Other"), (3, "Step 1"), (1, "Ünïcode Ω")]
BLOCKS = ["abc-1", "XyZ"]


@pytest.mark.parametrize(
    ("subpath", "ok"),
    [
        ("#Intro", True),
        ("#intro", True),
        ("#Setup Linux Mac", True),  # punctuation becomes space, runs of space one
        ("#Setup: Linux & Mac!", True),
        ("#Setup Linux & Mac", True),
        ("#Setup Linux and Mac", False),
        ("#Intro#Setup Linux Mac#Step 1", True),
        ("#Other#Step 1", True),
        ("#Step 1#Other", False),  # order matters
        ("#Intro#Nope", False),
        ("#ünïcode ω", True),
        ("#^abc-1", True),
        ("#^ABC-1", True),
        ("#^xyz", True),
        ("#^missing", False),
        ("#", True),
    ],
)
def test_subpaths(subpath, ok):
    assert subpath_exists(subpath, HEADS, BLOCKS) is ok


def test_a_missing_block_falls_through_to_headings_as_obsidian_does():
    assert subpath_exists("#^Intro", HEADS, []) is True


def test_footnote_subpath():
    assert subpath_exists("#[^1]", [], [], ["1"]) is True
    assert subpath_exists("#[^2]", [], [], ["1"]) is False


def test_strip_heading():
    assert strip_heading("  a.b:c  [d]|e ") == "a b c d e"


# ------------------------------------------------------------------------------ properties

# Names whose case variants lower-case back to the same text (not true of every letter: 'ŉ'
# upper-cases to two characters), as Obsidian compares lower-cased names.
_NAME = st.text(st.characters(categories=("L", "N")), min_size=1, max_size=8).filter(
    lambda s: s.swapcase().lower() == s.lower() == s.upper().lower()
)
_FOLDER = st.sampled_from(["", "a/", "b/", "a/b/", "Z/"])


@st.composite
def vaults(draw):
    names = draw(st.lists(_NAME, min_size=1, max_size=6, unique_by=str.lower))
    paths = set()
    for name in names:
        for folder in draw(st.lists(_FOLDER, min_size=1, max_size=3, unique=True)):
            case = draw(st.sampled_from([str, str.upper, str.lower]))
            paths.add(folder + case(name) + ".md")
    return sorted(paths, key=str.lower), names


def _by_lower(paths):
    seen = {}
    for p in paths:
        seen.setdefault(p.lower(), p)
    return sorted(seen.values())


@given(vaults(), _FOLDER)
@settings(max_examples=200)
def test_property_bare_name_resolves_to_a_file_with_that_name(vault, source_folder):
    paths, names = vault
    paths = _by_lower(paths)
    resolver = Resolver(paths)
    for name in names:
        res = resolver.resolve(name.swapcase(), source_folder + "src.md")
        assert res.target is not None
        assert posixpath.basename(res.target).lower() == name.lower() + ".md"
        same = [p for p in paths if posixpath.basename(p).lower() == name.lower() + ".md"]
        at_root = [p for p in same if "/" not in p]
        if at_root:  # the link text is then a whole vault path, and an exact path wins
            assert res.candidates == (at_root[0],)
            continue
        assert sorted(res.candidates) == sorted(same)
        # Obsidian's order: the linking page's folder first, then shortest path.
        near = [p for p in same if p.lower().startswith(source_folder.rstrip("/").lower())]
        pool = near or same
        assert len(res.target) == min(len(p) for p in pool)


@given(vaults(), _FOLDER)
@settings(max_examples=200)
def test_property_full_path_always_resolves_to_itself(vault, source_folder):
    paths, _ = vault
    paths = _by_lower(paths)
    resolver = Resolver(paths)
    for path in paths:
        assert resolver.resolve(path[:-3], source_folder + "src.md").target == path
        assert resolver.resolve("/" + path, source_folder + "src.md").target == path


@given(st.text(max_size=30), st.text(max_size=30))
@settings(max_examples=300)
def test_property_resolve_never_raises(link, source):
    res = Resolver(VAULT).resolve(parse_linktext(link)[0], source or "x.md")
    assert res.target is None or res.target in VAULT or res.target == (source or "x.md")
