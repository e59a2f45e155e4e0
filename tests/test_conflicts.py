"""Conflicts a shared home's merges kept both versions of (syncd.formats.conflicts,
syncd.engine.conflicts): found with their file and line, reported by ``syncd status`` and
``syncd lint``, and resolved through the write path from the workbench.

The laws are git's own: keeping mine, theirs or both of every callout gives exactly what
``git merge-file --ours``, ``--theirs`` and ``--union`` give for the same three versions. The rest
runs on two real homes sharing a bare remote, with real git, the real index and the real model.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

import syncd
from syncd.cli import cli
from syncd.engine.conflicts import find_conflicts, resolve_conflict
from syncd.engine.sharing import push
from syncd.errors import InvalidInputError, NotFoundError
from syncd.formats import parse_daily_log
from syncd.formats.conflicts import callout_title
from syncd.formats.conflicts import find_conflicts as conflicts_in_text
from syncd.formats.conflicts import resolve_conflict as resolve_text
from syncd.formats.merging import MARKER_SIZE, callouts_for_conflicts, merge_daily_log

from .helpers import assert_matches_rebuild, write
from .sharing_helpers import shared_homes
from .workbench_helpers import git, import_workbench

# -------------------------------------------------------------------------- callouts, by git's law

# Lines a page may hold around a conflict, quotes too: a quote right below a callout read as
# more of their version (keeping mine deleted it) until the merge wrote where the callout ends.
COMMON = st.sampled_from(["# Plans", "Shared line.", "", "- a list item", "Packing list below.", "> a quote"])
OURS = st.sampled_from(["Our words.", "More of ours.", "", "- ours, a list item", "> a quote of ours"])
THEIRS = st.sampled_from(["Their words.", "Theirs again.", "", "> a quote of theirs", "- [x] theirs, done"])
REGION = st.tuples(st.lists(COMMON, max_size=3), st.lists(OURS, max_size=3), st.lists(THEIRS, max_size=3))


def _merge_file(folder: Path, base: list[str], ours: list[str], theirs: list[str], *how: str) -> str:
    files = []
    for name, lines in (("ours", ours), ("base", base), ("theirs", theirs)):
        path = folder / name
        path.write_text("".join(f"{line}\n" for line in lines))
        files.append(str(path))
    done = subprocess.run(
        [
            "git",
            "merge-file",
            "-p",
            *how,
            f"--marker-size={MARKER_SIZE}",
            "-L",
            "ours",
            "-L",
            "base",
            "-L",
            "theirs",
            *files,
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode >= 0, done.stderr
    return done.stdout


def _resolve_all(text: str, keep: str) -> str:
    # From the last to the first: a resolution moves only the lines below it.
    for conflict in reversed(conflicts_in_text(text, "vault/Plans.md")):
        text = resolve_text(text, "vault/Plans.md", conflict.line, keep)
    return text


@settings(max_examples=80, deadline=None)
@given(regions=st.lists(REGION, min_size=1, max_size=3), tail=st.lists(COMMON, max_size=2))
def test_keeping_mine_theirs_or_both_is_git_s_ours_theirs_or_union(tmp_path_factory, regions, tail):
    folder = tmp_path_factory.mktemp("m")
    base, ours, theirs = [], [], []
    for n, (common, mine, their) in enumerate(regions):
        changed = f"The line both change, number {n}."
        base += [*common, changed]
        ours += [*common, *mine]
        theirs += [*common, *their]
    base, ours, theirs = base + tail, ours + tail, theirs + tail
    marked = _merge_file(folder, base, ours, theirs)
    merged = callouts_for_conflicts(marked, "origin/main")
    found = conflicts_in_text(merged.text, "vault/Plans.md")
    assert len(found) == len(merged.kept_both) == marked.count("<" * MARKER_SIZE)
    for conflict in found:
        assert merged.text.splitlines()[conflict.line - 1].startswith("> [!conflict]- Both machines changed")
        assert conflict.label == "origin/main" and conflict.ours is not None
    for keep, how in (("mine", "--ours"), ("theirs", "--theirs"), ("both", "--union")):
        resolved = _resolve_all(merged.text, keep)
        assert resolved == _merge_file(folder, base, ours, theirs, how), keep
        assert conflicts_in_text(resolved, "vault/Plans.md") == []


def test_a_callout_in_a_code_fence_is_an_example_and_an_older_one_cannot_lose_ours_by_guess():
    fenced = "# How\n\n```\nWords.\n> [!conflict]- Both machines changed the line above; x had:\n> Other.\n```\n"
    assert conflicts_in_text(fenced, "vault/How.md") == []
    older = "# Plans\n\nOurs.\n> [!conflict]- Both machines changed this; origin/main had:\n> Theirs.\n"
    (conflict,) = conflicts_in_text(older, "vault/Plans.md")
    assert conflict.ours is None and conflict.theirs == ("Theirs.",)
    with pytest.raises(InvalidInputError, match="does not say which lines"):
        resolve_text(older, "vault/Plans.md", conflict.line, "theirs")
    assert resolve_text(older, "vault/Plans.md", conflict.line, "mine") == "# Plans\n\nOurs.\n"
    assert resolve_text(older, "vault/Plans.md", conflict.line, "both") == "# Plans\n\nOurs.\nTheirs.\n"
    with pytest.raises(NotFoundError):
        resolve_text(older, "vault/Plans.md", 1, "mine")
    with pytest.raises(InvalidInputError, match="keep what"):
        resolve_text(older, "vault/Plans.md", conflict.line, "neither")


def test_keeping_theirs_deletes_only_the_lines_the_merge_wrote(tmp_path):
    """A callout's "the N lines above" edited by hand made "keep theirs" delete N lines, ours or
    not. The title's digest of our lines must still match them, or theirs cannot be kept."""
    base = ["# Plans", "", "Keep this line.", "And this one.", "We sail north."]
    merged = callouts_for_conflicts(
        _merge_file(tmp_path, base, [*base[:-1], "We sail east."], [*base[:-1], "We sail west."]), "origin/main"
    ).text
    rel = "vault/Plans.md"
    (conflict,) = conflicts_in_text(merged, rel)
    assert conflict.ours == ("We sail east.",)
    assert (
        resolve_text(merged, rel, conflict.line, "theirs")
        == "# Plans\n\nKeep this line.\nAnd this one.\nWe sail west.\n"
    )
    title = merged.splitlines()[conflict.line - 1]
    edited = {
        "count": merged.replace("the line above", "the 3 lines above"),
        "line added above": merged.replace("We sail east.\n", "We sail east.\nA note added by hand.\n"),
        "our line changed": merged.replace("We sail east.", "We sail east, then south."),
        "no digest": merged.replace(title, title.split(" <!--")[0]),
    }
    for what, text in edited.items():
        (found,) = conflicts_in_text(text, rel)
        assert found.ours is None, what
        with pytest.raises(InvalidInputError, match="could delete lines that are not part of the conflict"):
            resolve_text(text, rel, found.line, "theirs")
        kept = resolve_text(text, rel, found.line, "both")
        assert "Keep this line.\nAnd this one.\n" in kept and "We sail west.\n" in kept, what
        assert "Keep this line.\nAnd this one.\n" in resolve_text(text, rel, found.line, "mine"), what
    with pytest.raises(InvalidInputError, match="not the ones the merge wrote"):
        resolve_text(edited["count"], rel, conflict.line, "theirs")


# --------------------------------------------------------------------------- restated facts

REL = "memory/users/ana/2026-11-20.md"


def _log(facts: dict[int, str]) -> str:
    return "# 2026-11-20\n\n## 10:00\n" + "".join(
        f"- [context] Fact {n} about {text}. <!-- id:m-{n:04x} imp:0.5 -->\n" for n, text in facts.items()
    )


def _facts(text: str) -> dict[str, str]:
    log = parse_daily_log(text)
    return dict(zip(log.fact_ids(REL), (f.fact.content for f in log.facts()), strict=True))


@settings(max_examples=60, deadline=None)
@given(
    size=st.integers(1, 6),
    both=st.sets(st.integers(0, 5), min_size=1),
    keep=st.sampled_from(["mine", "theirs", "both"]),
)
def test_a_fact_both_machines_edited_resolves_to_the_version_kept(size, both, keep):
    both = {n for n in both if n < size} or {0}
    base = {n: f"topic {n}" for n in range(size)}
    mine = {n: f"{t} as mine has it" if n in both else t for n, t in base.items()}
    theirs = {n: f"{t} as theirs has it" if n in both else t for n, t in base.items()}
    merged = merge_daily_log(_log(base), _log(mine), _log(theirs), REL)
    found = conflicts_in_text(merged.text, REL, daily_log=True)
    assert sorted(c.fact_id for c in found) == sorted(merged.kept_both) == sorted(f"m-{n:04x}" for n in both)
    text = merged.text
    for conflict in reversed(found):
        assert conflict.ours and "as mine has it" in conflict.ours[0] and "as theirs has it" in conflict.theirs[0]
        text = resolve_text(text, REL, conflict.line, keep, daily_log=True)
    got = _facts(text)
    assert "syncd merge" not in text and conflicts_in_text(text, REL, daily_log=True) == []
    for n in range(size):
        key, words = f"m-{n:04x}", {"mine": mine, "theirs": theirs, "both": mine}[keep][n]
        assert got[key] == f"Fact {n} about {words}."  # the fact keeps its id, with the words kept
    kept_theirs = [v for v in got.values() if "as theirs has it" in v]
    assert len(kept_theirs) == (len(both) if keep != "mine" else 0)
    assert len(got) == size + (len(both) if keep == "both" else 0)


# ------------------------------------------------------------------------- two real homes

LOG = "memory/users/ana/2026-11-20.md"
PAGE = "vault/Plans.md"
BLOCK = "memory/users/ana/core/context.md"
BASE = {
    LOG: "# 2026-11-20\n\n## 10:00\n- [preference] Ana likes tea. <!-- id:f-tea imp:0.5 -->\n",
    PAGE: "# Plans\n\nWe sail north in May.\n\nPacking list below.\n",
    BLOCK: "Ana prefers short answers.\n",
}
SIDES = {"a": ("green tea", "west", "long answers"), "b": ("black tea", "east", "answers in French")}


def _edit(root: Path, side: str) -> None:
    tea, way, answers = SIDES[side]
    write(root, LOG, BASE[LOG].replace("tea.", f"{tea}."))
    write(root, PAGE, BASE[PAGE].replace("north", way))
    write(root, BLOCK, BASE[BLOCK].replace("short answers", answers))


@pytest.fixture
def conflicted(tmp_path, embedder) -> Path:
    """Home b after pulling home a's edits of the fact, page and block b edited differently."""
    _remote, (a_root, b_root) = shared_homes(tmp_path, embedder, files=BASE)
    with syncd.open(a_root, embedder=embedder) as a, syncd.open(b_root, embedder=embedder) as b:
        for engine, side in ((a, "a"), (b, "b")):
            _edit(engine.home.root, side)
            engine.sync()
            engine.commit()
        push(a, "origin")
        report = push(b, "origin").pulls[0]
    assert set(report.kept_both) == {LOG, PAGE, BLOCK}
    return b_root


def _line_of(root: Path, rel: str, start: str) -> int:
    return next(n for n, line in enumerate((root / rel).read_text().splitlines(), 1) if line.startswith(start))


def _cli(*args: str) -> str:
    done = CliRunner().invoke(cli, list(args))
    assert done.exit_code == 0, done.output
    return done.output


def test_status_and_lint_report_each_conflict_with_its_file_and_line(conflicted):
    root = conflicted
    where = {
        PAGE: _line_of(root, PAGE, "> [!conflict]"),
        BLOCK: _line_of(root, BLOCK, "> [!conflict]"),
        LOG: _line_of(root, LOG, "<!-- syncd merge:"),
    }
    shown = _cli("status", "--home", str(root))
    for rel, line in where.items():
        assert f"conflict {rel}:{line}: both machines changed" in shown, shown
    doc = json.loads(_cli("status", "--json", "--home", str(root)))
    assert {(c["path"], c["line"]) for c in doc["conflicts"]} == set(where.items())
    fact = next(c for c in doc["conflicts"] if c["kind"] == "fact")
    assert fact["fact_id"] == "f-tea" and "black tea" in fact["ours"][0] and "green tea" in fact["theirs"][0]
    page = next(c for c in doc["conflicts"] if c["path"] == PAGE)
    assert page["ours"] == ["We sail east in May."] and page["theirs"] == ["We sail west in May."]
    linted = json.loads(_cli("lint", "--json", "--home", str(root)))
    found = {(f["path"], f["line"]) for f in linted["findings"] if f["code"] == "merge-conflict"}
    assert found == {("Plans.md", where[PAGE]), (BLOCK, where[BLOCK]), (LOG, where[LOG])}
    assert all(f["severity"] == "warning" for f in linted["findings"] if f["code"] == "merge-conflict")
    text = _cli("lint", "--home", str(root))
    assert f"Plans.md:{where[PAGE]}: warning merge-conflict: both machines changed this" in text
    vault_only = json.loads(_cli("lint", "--json", "--vault", str(root / "vault")))
    assert {(f["path"], f["line"]) for f in vault_only["findings"] if f["code"] == "merge-conflict"} == {
        ("Plans.md", where[PAGE])
    }


def test_a_conflict_in_a_page_whose_extension_is_upper_case_is_found(tmp_path):
    # Tea.MD is a page to lint and the index (home/layout.py's is_markdown), so to status too.
    root = syncd.init(tmp_path / "home").home
    write(
        root,
        "vault/Trip.MD",
        "We sail east.\n" + callout_title(["We sail east."], "origin/main") + "\n> We sail west.\n",
    )
    assert [(c.path, c.line, c.theirs) for c in find_conflicts(root)] == [("vault/Trip.MD", 2, ("We sail west.",))]


def test_resolving_through_the_write_path_commits_and_indexes_the_version_kept(conflicted, embedder):
    root = conflicted
    with syncd.open(root, embedder=embedder) as engine:
        page_line = _line_of(root, PAGE, "> [!conflict]")
        with pytest.raises(NotFoundError):
            resolve_conflict(engine, PAGE, page_line - 1, "theirs")
        with pytest.raises(InvalidInputError):
            resolve_conflict(engine, "../outside.md", 1, "mine")
        # Its count edited by hand: keeping theirs is refused, and nothing written or committed.
        merged, head = (root / PAGE).read_bytes(), git(root, "rev-parse", "HEAD")
        write(root, PAGE, merged.replace(b"the line above", b"the 3 lines above"))
        with pytest.raises(InvalidInputError, match="not the ones the merge wrote"):
            resolve_conflict(engine, PAGE, page_line, "theirs")
        assert b"the 3 lines above" in (root / PAGE).read_bytes() and git(root, "rev-parse", "HEAD") == head
        write(root, PAGE, merged)
        resolve_conflict(engine, PAGE, page_line, "theirs", author="tester")
        assert (root / PAGE).read_text() == BASE[PAGE].replace("north", "west")
        assert (
            git(root, "log", "-1", "--format=%an|%s").strip()
            == f"tester|Resolve the conflict at {PAGE}:{page_line}: keep theirs"
        )
        resolve_conflict(engine, LOG, _line_of(root, LOG, "<!-- syncd merge:"), "mine")
        assert (root / LOG).read_text() == BASE[LOG].replace("tea.", "black tea.")
        resolve_conflict(engine, BLOCK, _line_of(root, BLOCK, "> [!conflict]"), "both")
        assert (root / BLOCK).read_text() == "Ana prefers answers in French.\nAna prefers long answers.\n"
        assert find_conflicts(root) == []
        assert git(root, "status", "--porcelain").strip() == ""
        hits = engine.search("What does Ana drink?", user_id="ana", limit=3)
        assert hits and "black tea" in hits[0].content and not any("green tea" in h.content for h in hits)
        assert_matches_rebuild(engine)
    assert "conflict " not in _cli("status", "--home", str(root))


def test_the_workbench_lists_conflicts_and_keeps_the_version_picked(conflicted, embedder):
    root = conflicted
    wbmod = import_workbench()
    bench = wbmod.Workbench(root, poll=0, embedder=embedder)
    try:
        bench.tabs.selected_index = wbmod.app.TITLES.index("Health")
        panel = bench.health.conflicts
        assert [(c.path, c.kind) for c in panel.conflicts] == [(LOG, "fact"), (BLOCK, "callout"), (PAGE, "callout")]
        assert len(panel.rows.children) == 3 and "3 places" in panel.summary.value
        page_row = panel.rows.children[2]
        assert (
            "We sail east in May." in page_row.children[1].value
            and "We sail west in May." in page_row.children[1].value
        )
        # Someone edits the page above the callout meanwhile: the line listed is no callout any
        # more, so nothing is written and the list is read again.
        write(root, PAGE, "Added on top.\n" + (root / PAGE).read_text())
        keep_theirs = page_row.children[2].children[1]
        keep_theirs.click()
        assert "no conflict at" in panel.status.value
        assert (root / PAGE).read_text().startswith("Added on top.\n# Plans")
        page_row = next(row for row in panel.rows.children if PAGE in row.children[0].value)
        page_row.children[2].children[1].click()  # keep theirs, at the line it is at now
        assert "kept theirs" in panel.status.value
        assert (root / PAGE).read_text() == "Added on top.\n" + BASE[PAGE].replace("north", "west")
        assert git(root, "log", "-1", "--format=%an").strip() == "workbench"
        fact_row = next(row for row in panel.rows.children if LOG in row.children[0].value)
        fact_row.children[2].children[2].click()  # keep both
        text = (root / LOG).read_text()
        assert "black tea" in text and "green tea" in text and "syncd merge" not in text
        block_row = next(row for row in panel.rows.children if BLOCK in row.children[0].value)
        block_row.children[2].children[0].click()  # keep mine
        assert (root / BLOCK).read_text() == BASE[BLOCK].replace("short answers", "answers in French")
        assert panel.conflicts == [] and "none" in panel.summary.value
        assert git(root, "status", "--porcelain").strip() == ""
    finally:
        bench.close()
    with syncd.open(root, embedder=embedder) as engine:
        assert_matches_rebuild(engine)
