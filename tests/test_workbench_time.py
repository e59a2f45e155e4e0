"""The workbench's time control (issue 29), driven in-kernel on a real home: pick a commit (or
type a revision or a date) on the History tab and Search, Browse and core memory show the memory
as that commit left it, the header says the view is not now, editing waits; back to now."""

from __future__ import annotations

import pytest

from .helpers import write
from .workbench_helpers import ANA_DAY, build_home, git, import_workbench

wbmod = import_workbench()

ANA_LOG = "memory/users/ana/2026-11-22.md"


@pytest.fixture
def travelled(tmp_path, embedder):
    """A home whose HEAD changed ana's tea and her context block; the workbench on it, and the
    sha of the commit before."""
    home = build_home(tmp_path / "home", embedder)
    before = git(home, "rev-parse", "HEAD").strip()
    bench = wbmod.Workbench(home, poll=0, embedder=embedder)
    write(home, ANA_LOG, ANA_DAY.replace("Likes green tea in the morning.", "Likes black coffee at night."))
    write(home, "memory/users/ana/core/context.md", "Ana wants long, careful answers.\n")
    import syncd

    with syncd.open(home, embedder=embedder) as engine:
        engine.sync()
        engine.commit()
    yield bench, home, before
    bench.close()


def _texts(box) -> list[str]:
    return [row.children[1].value for row in box.children]


def _search(bench, query: str) -> list[str]:
    bench.tabs.selected_index = wbmod.app.TITLES.index("Search")
    bench.search.user.value = "ana"
    bench.search.query.value = query
    bench.search.go.click()
    return _texts(bench.search.rows)


def test_search_browse_and_blocks_as_a_commit_left_them_then_back_to_now(travelled):
    bench, home, before = travelled
    bench.refresh()
    shown = _search(bench, "what does ana drink")
    assert any("coffee" in row for row in shown) and not any("green tea" in row for row in shown)
    history = bench.history
    bench.tabs.selected_index = wbmod.app.TITLES.index("History")
    history.refresh()
    history.commits.pick(next(e for e in history.entries if e.sha == before))
    history.view_then.click()
    assert bench.data.at == before
    assert "NOT NOW" in bench.header.value and before[:10] in bench.header.value
    # search answers from that commit's memory
    shown = _search(bench, "what does ana drink")
    assert any("green tea" in row for row in shown) and not any("coffee" in row for row in shown)
    # browse: the day's facts and the core blocks as they were
    assert bench.data.day_facts("ana", "2026-11-22")[0].fact.content == "Likes green tea in the morning."
    # where a line of the past came from: blamed in that commit's file, not in today's
    tea = bench.data.provenance(ANA_LOG, 4, "Likes green tea in the morning.")
    assert tea.history is not None and tea.history.introduced.sha == before
    rows = {r.label: r for r in bench.data.blocks("ana", None)}
    assert rows["context"].content == "Ana prefers short answers."
    # an edit is of now: the Edit tab waits
    edit_slot = bench.tabs.children[wbmod.app.TITLES.index("Edit")]
    assert edit_slot is not bench.edit and "go back to now" in edit_slot.children[0].value
    assert not history.view_now.disabled
    # the home itself is untouched by the journey
    assert git(home, "status", "--porcelain").strip() == "" and "coffee" in (home / ANA_LOG).read_text()
    history.view_now.click()
    assert bench.data.at is None and "NOT NOW" not in bench.header.value
    assert bench.tabs.children[wbmod.app.TITLES.index("Edit")] is bench.edit
    assert any("coffee" in row for row in _search(bench, "what does ana drink"))
    assert {r.label: r for r in bench.data.blocks("ana", None)}["context"].content == "Ana wants long, careful answers."


def test_a_typed_revision_or_date_and_a_bad_one(travelled):
    bench, home, before = travelled
    history = bench.history
    history.when.value = "HEAD~1"
    history.view_then.click()
    assert bench.data.at == before
    when = git(home, "log", "-1", "--format=%cI", before).strip()
    history.view_now.click()
    history.when.value = when
    history.view_then.click()
    assert bench.data.at in (before, git(home, "rev-parse", "HEAD").strip())  # the last commit at or before it
    history.when.value = "no-such-thing"
    at = bench.data.at
    history.view_then.click()
    assert "no commit" in history.status.value and bench.data.at == at  # nothing changed
