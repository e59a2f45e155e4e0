"""The workbench driven in-kernel: build it on a real home, set values, click buttons, and check
what it shows and what changed on disk, in git and in the index."""

from __future__ import annotations

import os

import pytest

import syncd

from .helpers import write
from .workbench_helpers import ANA_DAY, build_home, git, import_workbench, open_workbench

wbmod = import_workbench()

ANA_LOG = "memory/users/ana/2026-11-22.md"


@pytest.fixture
def home(tmp_path, embedder):
    return build_home(tmp_path / "home", embedder)


@pytest.fixture
def wb(home, embedder):
    with open_workbench(home, embedder) as bench:
        yield bench


def _texts(box) -> list[str]:
    return [row.children[1].value for row in box.children]


def _show(wb, title: str):
    wb.tabs.selected_index = wbmod.app.TITLES.index(title)


def _open_from_browse(wb, user: str, words: str) -> None:
    """Browse ``user``'s facts and click the edit button of the one holding ``words``."""
    _show(wb, "Browse")
    facts = wb.browse.facts
    facts.users.pick(user)
    row = next(row for row in facts.rows.children if words in row.children[1].value)
    row.children[0].click()


def test_search_shows_scored_hits_and_where_they_came_from(wb, home):
    s = wb.search
    assert s.user.options == ("(all users)", "ana", "bob")
    s.user.value = "ana"
    assert "phone" in s.chat.options and "laptop" not in s.chat.options
    s.query.value = "green tea"
    s.go.click()
    rows = _texts(s.rows)
    assert "Likes green tea in the morning." in rows[0] and 'class="syncd-bar"' in rows[0]
    assert not any("Deploys" in r for r in rows)  # bob's memory is not ana's
    s.rows.children[0].children[0].click()
    detail = s.detail.value
    introduced = git(home, "log", "--format=%h", "-1", "--", ANA_LOG).strip()
    assert "<b>    4  - [preference] Likes green tea" in detail  # the file around the line, line marked
    assert "s-117" in detail and "transcript line 12" in detail
    assert introduced[:7] in detail
    assert s.edit.layout.display is None  # a fact: it can be edited from here


def test_no_widget_renders_more_than_a_page(tmp_path, embedder):
    many = "".join(f"- [context] Fact number {i} about kites.\n" for i in range(95))
    days = {
        f"memory/users/ana/2026-10-{d:02d}.md": f"# 2026-10-{d:02d}\n\n- [context] Day {d}.\n" for d in range(1, 26)
    }
    home = build_home(
        tmp_path / "home", embedder, {"memory/users/ana/2026-11-23.md": "# 2026-11-23\n\n" + many, **days}
    )
    bench = wbmod.Workbench(home, poll=0, embedder=embedder)
    try:
        _show(bench, "Browse")
        facts = bench.browse.facts
        assert len(facts.dates.select.options) == 20 and len(facts.dates.items) == 27
        assert facts.dates.value == "2026-11-23"  # newest first
        assert len(facts.rows.children) == 20 and "Fact number 0 " in _texts(facts.rows)[0]
        facts.pager.next.click()
        assert "Fact number 20 " in _texts(facts.rows)[0]
        facts.dates.filter.value = "2026-10-0"
        assert [o[0] for o in facts.dates.select.options] == [f"2026-10-0{d}" for d in range(9, 0, -1)]
        bench.search.query.value = "kites"
        bench.search.limit.value = 60
        bench.search.go.click()
        assert len(bench.search.hits) == 60 and len(bench.search.rows.children) == 10
    finally:
        bench.close()


def test_edit_a_fact_from_browse_commits_it_as_the_workbench(wb, home):
    _open_from_browse(wb, "ana", "green tea")
    editor = wb.edit.fact
    assert wb.tabs.selected_index == wbmod.app.TITLES.index("Edit")
    assert editor.content.value == "Likes green tea in the morning." and editor.category.value == "preference"
    editor.content.value = "Likes jasmine tea in the evening."
    editor.tags.value = "drinks evening"
    editor.save.click()
    assert "Saved" in editor.status.value
    text = (home / ANA_LOG).read_text()
    assert (
        "- [preference] Likes jasmine tea in the evening. `drinks evening` <!-- id:f-tea imp:0.8 src:s-117#12 -->"
        in text
    )
    assert (
        "green tea" not in text and text.replace(text.splitlines()[3] + "\n", ANA_DAY.splitlines()[3] + "\n") == ANA_DAY
    )  # only that line changed
    assert git(home, "log", "-1", "--format=%an|%s").strip() == "workbench|Edit fact f-tea"
    assert git(home, "status", "--porcelain").strip() == ""
    _show(wb, "History")
    detail = wb.history.detail.value
    assert "Edit fact f-tea" in detail and "+1 −1" in detail
    assert "Likes jasmine tea in the evening." in detail and "Likes green tea in the morning." in detail
    wb.search.query.value = "jasmine"
    wb.search.go.click()
    assert "jasmine" in _texts(wb.search.rows)[0]  # the index followed


def test_a_concurrent_edit_is_shown_never_overwritten(wb, home):
    editor = wb.edit.fact
    wb.edit_fact("ana", "f-tea")
    editor.content.value = "Likes oolong."
    # Meanwhile someone edits the same fact in their editor, and another line too.
    theirs = ANA_DAY.replace("Likes green tea in the morning.", "Likes matcha.").replace("half marathon", "marathon")
    write(home, ANA_LOG, theirs)
    editor.save.click()
    assert "Someone changed this fact" in editor.status.value and "Likes matcha." in editor.status.value
    assert (home / ANA_LOG).read_text() == theirs
    # An edit of another line is no conflict: it is kept, ours lands beside it.
    editor.load.click()  # over the typing: asked first, then discarded
    assert editor.content.value == "Likes oolong." and "unsaved changes" in editor.status.value
    editor.unsaved.discard.click()
    assert editor.content.value == "Likes matcha."
    write(home, ANA_LOG, theirs.replace("Some prose", "Other prose"))
    editor.content.value = "Likes oolong."
    editor.save.click()
    text = (home / ANA_LOG).read_text()
    assert "Likes oolong." in text and "Other prose" in text and "- [goal] Wants to run a marathon." in text, (
        editor.status.value
    )


def test_delete_with_confirmation_and_add(wb, home):
    editor = wb.edit.fact
    wb.edit_fact("bob", "f-deploy")
    editor.delete.click()
    assert "blue-green" in (home / "memory/users/bob/2026-11-21.md").read_text()  # not before confirming
    assert editor.confirm.layout.display is None
    editor.confirm.click()
    assert "blue-green" not in (home / "memory/users/bob/2026-11-21.md").read_text()
    assert git(home, "log", "-1", "--format=%an|%s").strip() == "workbench|Forget fact f-deploy"
    adder = wb.edit.adder
    adder.user.value = "carol"
    adder.content.value = "Keeps bees on the roof."
    adder.category.value = "hobby"
    adder.add.click()
    assert "Added" in adder.status.value
    logs = list((home / "memory/users/carol").glob("*.md"))
    assert len(logs) == 1 and "- [hobby] Keeps bees on the roof." in logs[0].read_text()
    assert git(home, "log", "-1", "--format=%an").strip() == "workbench"
    assert "carol" in wb.search.user.options or (wb.search.refresh() is None and "carol" in wb.search.user.options)


def test_block_editor_shows_the_limit_and_refuses_to_overwrite(wb, home):
    write(home, "memory/core/persona.md", "---\nlimit: 30\n---\nI am the household assistant.\n")
    block = wb.edit.block
    block.scope.value = "global"
    block.label.value = "persona"
    block.load.click()
    assert block.text.value == "I am the household assistant."
    block.text.value = "x" * 31
    assert "31 / 30" in block.count.value and "over the limit" in block.count.value and block.save.disabled
    block.text.value = "I keep the family's memory."
    assert not block.save.disabled
    block.save.click()
    assert "Saved" in block.status.value
    assert (home / "memory/core/persona.md").read_text() == "---\nlimit: 30\n---\nI keep the family's memory.\n"
    assert git(home, "log", "-1", "--format=%an").strip() == "workbench"
    write(home, "memory/core/persona.md", "---\nlimit: 30\n---\nSomeone else wrote this.\n")
    block.text.value = "Mine again."
    block.save.click()
    assert "Someone changed this block" in block.status.value and "Someone else wrote this." in block.status.value
    assert "Someone else wrote this." in (home / "memory/core/persona.md").read_text()


def test_blocks_and_vault_views(wb):
    _show(wb, "Browse")
    wb.browse.which.value = "Core blocks"
    view = wb.browse.blocks
    view.user.value = "ana"
    view.chat.value = "phone"
    rows = {r.label: r for r in wb.data.blocks("ana", "phone")}
    assert rows["context"].resolved == "chat" and rows["persona"].resolved == "global"
    assert '<div class="syncd-winner">On the phone: one line at most.</div>' in view.view.value
    view.chat.value = "(no chat)"
    assert '<div class="syncd-winner">Ana prefers short answers.</div>' in view.view.value
    wb.browse.which.value = "Vault"
    pages = wb.browse.vault.pages
    assert "people/Ana.md" in pages.items
    pages.pick("people/Ana.md")
    shown = wb.browse.vault.view.value
    assert "Lyon.md" in shown and "[[Nowhere]]" in shown and "unresolved" in shown
    assert "Lyon.md" in shown.split("Backlinks")[1]


def test_history_filters_and_reverts_with_the_index_following(wb, home):
    wb.edit_fact("bob", "f-deploy")
    wb.edit.fact.content.value = "Deploys on Fridays."
    wb.edit.fact.save.click()
    _show(wb, "History")
    history = wb.history
    history.user.value = "ana"
    assert all("memory/users/ana" in "".join(e.files) for e in history.entries)
    history.user.value = "bob"
    assert history.commits.value.subject == "Edit fact f-deploy"
    history.revert.click()
    assert "Deploys on Fridays." in (home / "memory/users/bob/2026-11-21.md").read_text()  # not yet
    history.confirm.click()
    assert "Reverted" in history.status.value
    assert "Deploys with a blue-green switch." in (home / "memory/users/bob/2026-11-21.md").read_text()
    assert git(home, "log", "-1", "--format=%s").strip().startswith('Revert "Edit fact f-deploy"')
    hits = wb.data.search("blue-green switch", "bob", None, "fact", 3)
    assert hits and "blue-green" in hits[0].content
    assert (
        not wb.data.search("Fridays", "bob", None, "fact", 3)
        or "Fridays" not in wb.data.search("Fridays", "bob", None, "fact", 3)[0].content
    )


def test_health_shows_freshness_lint_and_plots_and_reindexes(wb, home):
    write(home, "memory/users/ana/2026-11-23.md", "# 2026-11-23\n\n- [goal] Learn the violin.\n- [goal] Sail.\n")
    _show(wb, "Health")
    health = wb.health
    assert "stale" in health.summary.value and "memory/users/ana/2026-11-23.md" in health.summary.value
    codes = {f.code for f in health.findings}
    assert any("broken" in c for c in codes), codes
    bars = {bar.name: dict(zip(bar.x, bar.y)) for bar in health.figures["facts_per_day"].data}
    assert bars["goal"]["2026-11-23"] == 2 and bars["preference"]["2026-11-22"] == 1
    lines = {line.name: list(line.y) for line in health.figures["memory_over_time"].data}
    assert lines == {"ana": [2, 4], "bob": [1]}
    health.plot_user.value = "bob"
    assert {bar.name for bar in health.figures["facts_per_day"].data} == {"technical"}
    health.start_reindex(wait=True)
    assert health.progress.value == health.progress.max and "reindexed" in health.progress_text.value
    assert "healthy" in health.summary.value or "fresh" in health.summary.value
    assert "stale: " not in health.summary.value


def test_it_follows_changes_made_elsewhere(wb, home, embedder):
    _show(wb, "Browse")
    assert wb.poll_once() is False
    write(home, "memory/users/bob/2026-11-24.md", "# 2026-11-24\n\n- [plan] Visit Kyoto in spring.\n")
    with syncd.open(home, embedder=embedder) as engine:  # as a daemon would: index, then commit
        engine.sync()
        engine.commit()
    assert wb.poll_once() is True
    facts = wb.browse.facts
    facts.users.pick("bob")
    assert facts.dates.items[0] == "2026-11-24" and "Visit Kyoto" in _texts(facts.rows)[0]
    assert "changed" in wb.header.value


def test_editing_a_hand_typed_fact_keeps_it_open_under_its_new_id(wb, home):
    """A fact typed by hand (no id in its line) has an id derived from its content: after an edit,
    the editor shows the fact under the id the write says it has now."""
    write(home, ANA_LOG, ANA_DAY + "- [note] Grows basil on the balcony.\n")
    _open_from_browse(wb, "ana", "basil")
    editor = wb.edit.fact
    before = editor.loaded.id
    editor.content.value = "Grows basil and thyme on the balcony."
    editor.save.click()
    assert "Saved" in editor.status.value, editor.status.value
    assert editor.loaded.id != before and editor.content.value == "Grows basil and thyme on the balcony."
    assert "- [note] Grows basil and thyme on the balcony." in (home / ANA_LOG).read_text()


def _open_under(folder) -> list[str]:
    """What this process has open under ``folder`` (its descriptors, as the kernel lists them)."""
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue  # the descriptor listdir itself used, closed meanwhile
        if target.startswith(f"{folder}/"):
            found.append(target)
    return found


def test_a_workbench_that_fails_after_opening_the_home_closes_what_it_opened(home, embedder):
    """A Workbench whose construction failed after it opened the home left the engine open (its
    embedding cache, its index files) for as long as the traceback was kept, which a kernel does
    (sys.last_traceback), and registered on the home as the workbench to close next time. The
    fault is a real one: a poll interval that is no number fails after the home is opened."""
    assert _open_under(home) == []
    with pytest.raises(TypeError) as raised:
        wbmod.Workbench(home, poll="2", embedder=embedder)
    # The traceback is kept alive here, as a kernel keeps it: nothing may stay open through it.
    assert raised.traceback and _open_under(home) == []
    with open_workbench(home, embedder) as bench:  # the next one opens cleanly
        assert bench.data.users() == ["ana", "bob"]
    assert _open_under(home) == []


def test_home_data_that_fails_after_opening_the_engine_closes_it(home, embedder, monkeypatch):
    """The same for HomeData, whose steps after opening the engine fail on no real condition
    found: a mock (the only one here) makes its MemoryManager step raise."""

    def refuse(*args, **kwargs):
        raise RuntimeError("the memory manager could not be made")

    monkeypatch.setattr(wbmod.data, "MemoryManager", refuse)
    with pytest.raises(RuntimeError) as raised:
        wbmod.data.HomeData(home, embedder=embedder)
    assert raised.traceback and _open_under(home) == []
