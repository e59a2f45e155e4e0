"""The workbench as a careless or hostile person uses it: odd bytes in every text field, stale
forms, clicks on what changed meanwhile. Each test names what went wrong before its fix."""

from __future__ import annotations

import asyncio
import shutil
import threading

import pytest

import syncd
from syncd.formats.conflicts import callout_title

from .helpers import write
from .workbench_helpers import ANA_LOG_REL as ANA_LOG
from .workbench_helpers import build_home, git, import_workbench, open_workbench

wbmod = import_workbench()


@pytest.fixture
def home(tmp_path, embedder):
    return build_home(tmp_path / "home", embedder)


@pytest.fixture
def wb(home, embedder):
    with open_workbench(home, embedder) as bench:
        yield bench


def _show(wb, title: str):
    wb.tabs.selected_index = wbmod.app.TITLES.index(title)


def test_a_nul_typed_into_the_history_fields_is_a_message_not_a_traceback(wb):
    """A NUL reached git's argument list, which the OS refuses with a bare ValueError: typed
    into the path filter or the "as of" box it came out of the widget's callback as a traceback."""
    _show(wb, "History")
    history = wb.history
    history.path.value = "memory/\x00users"
    assert "NUL" in history.detail.value + history.status.value and history.entries == []
    history.when.value = "HEAD\x00"
    history.view_then.click()
    assert "NUL" in history.status.value and wb.data.at is None


def test_the_history_list_error_goes_when_the_filter_is_mended(wb):
    """An error loading the list stayed on the status line after the next filter loaded fine."""
    _show(wb, "History")
    history = wb.history
    history.path.value = "../../elsewhere"
    assert "outside repository" in history.detail.value
    history.path.value = "memory/users/ana"
    assert history.entries and "outside" not in history.status.value + history.detail.value


def test_a_block_typed_to_open_like_frontmatter_is_saved_as_typed(wb, home):
    """Block text opening with `---`, YAML, `---` was written bare at the top of a file with no
    frontmatter, so it was read back as the block's settings: its first lines gone and its limit
    whatever they said (here 12, leaving the block over its own limit and unsaveable)."""
    block = wb.edit.block
    block.scope.value = "global"
    block.label.value = "persona"
    block.load.click()
    typed = "---\nlimit: 12\n---\nI am a careful, kind assistant."
    block.text.value = typed
    block.save.click()
    assert "Saved" in block.status.value
    block.load.click()
    assert block.text.value == typed and block.limit == wb.data.settings.block_char_limit
    assert wb.data.memory.core_blocks()["persona"].content == typed


def _commit(home, message: str) -> None:
    git(home, "add", "-A")
    git(home, "commit", "-q", "-m", message)


def test_a_commit_shows_the_facts_of_a_log_with_a_nul_and_of_a_merge(wb, home):
    """A commit's facts were read from `git show`, which calls a file with a NUL byte binary
    ("Binary files differ": +0) and shows a merge as a combined diff of its conflicts only (+0),
    though both logs' facts are indexed and the merge's files were listed beside the "+0"."""
    write(home, "memory/users/ana/2026-11-23.md", b"# 2026-11-23\n\n- [note] Has a \x00 in it.\n- [note] Plain.\n")
    _commit(home, "a log with a NUL")
    git(home, "checkout", "-q", "-b", "side")
    write(home, "memory/users/ana/2026-11-24.md", "# 2026-11-24\n\n- [note] Said on the side branch.\n")
    _commit(home, "side")
    git(home, "checkout", "-q", "-")
    write(home, "memory/users/bob/2026-11-25.md", "# 2026-11-25\n\n- [note] Said on the main branch.\n")
    _commit(home, "main")
    git(home, "merge", "-q", "--no-edit", "side")
    _show(wb, "History")
    history = wb.history
    history.refresh()
    shown = {}
    for entry in history.entries[:4]:
        history.commits.pick(entry)
        shown[entry.subject] = history.detail.value
    assert "+2 −0" in shown["a log with a NUL"] and "Plain." in shown["a log with a NUL"]
    merge = shown["Merge branch 'side'"]
    assert "+1 −0" in merge and "Said on the side branch." in merge and "main branch" not in merge


PLANS = (
    "# Plans\n\nWe sail east in May.\n"
    + callout_title(["We sail east in May."], "origin/main")
    + "\n> We sail west in May.\n"
)


def test_keeping_theirs_never_keeps_a_version_the_person_was_not_shown(wb, home):
    """The Conflicts panel resolved "the conflict at path:line" as the file had it at the click:
    when their version had been changed since the list was read, the one kept was never shown."""
    write(home, "vault/Plans.md", PLANS)
    _show(wb, "Health")
    panel = wb.health.conflicts
    (row,) = panel.rows.children
    assert "We sail west in May." in row.children[1].value
    write(home, "vault/Plans.md", PLANS.replace("west", "south"))  # someone, meanwhile
    row.children[2].children[1].click()  # keep theirs: west, as shown
    assert "changed meanwhile" in panel.status.value
    assert (home / "vault/Plans.md").read_text() == PLANS.replace("west", "south")
    (row,) = panel.rows.children  # read again: what is there now
    assert "We sail south in May." in row.children[1].value
    row.children[2].children[1].click()
    assert (home / "vault/Plans.md").read_text() == "# Plans\n\nWe sail south in May.\n"


def test_a_block_that_is_a_symbolic_link_is_never_read_through(wb, home, tmp_path):
    """The workbench read block files with Path.read_text, following a link to any file on the
    machine: Browse showed its text as the block, and the block editor loaded it to edit."""
    secret = tmp_path / "secret.txt"
    secret.write_text("The neighbour's wifi password.\n")
    (home / "memory/users/ana/core/human.md").symlink_to(secret)
    _show(wb, "Browse")
    wb.browse.which.value = "Core blocks"
    view = wb.browse.blocks
    view.user.value = "ana"
    assert "wifi" not in view.view.value and "symbolic link" in view.view.value
    block = wb.edit.block
    block.scope.value = "user"
    block.user.value = "ana"
    block.label.value = "human"
    block.load.click()
    assert "wifi" not in block.text.value and "symbolic link" in block.status.value and block.save.disabled


def test_a_hit_whose_file_became_a_symbolic_link_shows_no_lines_from_elsewhere(wb, home, tmp_path):
    """The lines around a hit were read with Path.read_text: a log replaced by a link since it
    was indexed (a pull can bring one) showed the lines of whatever file the link named."""
    wb.search.user.value = "ana"
    wb.search.query.value = "green tea"
    secret = tmp_path / "secret.txt"
    secret.write_text("".join(f"private line {n}\n" for n in range(10)))
    log = home / "memory/users/ana/2026-11-22.md"
    log.unlink()
    log.symlink_to(secret)
    wb.search.rows.children[0].children[0].click()
    assert "private line" not in wb.search.detail.value


def _open_from_browse(wb, user: str, words: str) -> None:
    _show(wb, "Browse")
    facts = wb.browse.facts
    facts.users.pick(user)
    row = next(row for row in facts.rows.children if words in row.children[1].value)
    row.children[0].click()


def test_moving_the_importance_slider_sets_the_importance(wb, home):
    """A fact without an importance loads with "set importance" unticked; moving the slider left
    it unticked, so Save said "Saved and committed" and wrote nothing of it."""
    _open_from_browse(wb, "ana", "half marathon")
    editor = wb.edit.fact
    assert not editor.has_importance.value
    editor.importance.value = 0.9
    editor.save.click()
    assert "- [goal] Wants to run a half marathon. <!-- imp:0.9 -->" in (home / ANA_LOG).read_text()
    assert editor.has_importance.value and editor.importance.value == 0.9  # as reloaded


def test_saving_an_unchanged_fact_says_nothing_was_saved(wb, home):
    """Save on a fact as loaded (or a second click on Save) said "Saved and committed as
    workbench" though nothing was written and no commit made."""
    head = git(home, "rev-parse", "HEAD")
    wb.edit_fact("ana", "f-tea")
    editor = wb.edit.fact
    editor.save.click()
    assert "Nothing to save" in editor.status.value and git(home, "rev-parse", "HEAD") == head
    editor.content.value = "Likes oolong."
    editor.save.click()
    assert "Saved" in editor.status.value
    editor.save.click()  # the same click again
    assert "Nothing to save" in editor.status.value
    assert git(home, "log", "--format=%s", f"{head.strip()}..").splitlines() == ["Edit fact f-tea"]


def test_a_long_list_of_stale_files_ends_in_a_line_break_not_in_its_markup(wb, home):
    """Past 20 files, the Health tab's lists ended in "&lt;br&gt;… and 5 more": the line break
    was escaped as text."""
    for day in range(1, 26):
        write(home, f"memory/users/ana/2026-10-{day:02d}.md", f"# 2026-10-{day:02d}\n\n- [note] Day {day}.\n")
    _show(wb, "Health")
    summary = wb.health.summary.value
    assert "<br>" + '<span class="syncd-muted">… and 5 more</span>' in summary and "&lt;br&gt;" not in summary


def test_reverting_over_an_edit_not_committed_says_which_file_and_keeps_it(wb, home):
    """With no daemon to commit a person's editor save, reverting a commit that changed the same
    file ended in git's first line only: "error: Your local changes to the following files would
    be overwritten by merge:", naming no file and saying nothing of what to do."""
    wb.edit_fact("ana", "f-tea")
    wb.edit.fact.content.value = "Likes oolong."
    wb.edit.fact.save.click()
    edited = (home / ANA_LOG).read_text().replace("half marathon", "full marathon")
    write(home, ANA_LOG, edited)  # saved in an editor, not committed
    _show(wb, "History")
    history = wb.history
    history.refresh()
    assert history.commits.value.subject == "Edit fact f-tea"
    history.revert.click()
    history.confirm.click()
    status = history.status.value
    assert ANA_LOG in status and "commit that first" in status and "nothing was changed" in status
    assert (home / ANA_LOG).read_text() == edited
    assert git(home, "log", "-1", "--format=%s").strip() == "Edit fact f-tea"


def test_a_refresh_leaves_browse_on_the_day_and_page_being_read(tmp_path, embedder):
    """Every refresh (each change the daemon commits, polled every 2 s) re-picked the user in
    Browse as if clicked, which started the dates over: the day being read jumped to the
    newest log, page 1."""
    days = {
        f"memory/users/ana/2026-10-{d:02d}.md": f"# 2026-10-{d:02d}\n\n"
        + "".join(f"- [context] Day {d} fact {i}.\n" for i in range(30))
        for d in range(1, 4)
    }
    home = build_home(tmp_path / "home", embedder, days)
    with open_workbench(home, embedder) as bench:
        _show(bench, "Browse")
        facts = bench.browse.facts
        facts.users.pick("ana")
        facts.dates.pick("2026-10-02")
        facts.pager.next.click()
        write(home, "memory/users/bob/2026-11-30.md", "# 2026-11-30\n\n- [note] Something new.\n")
        bench.refresh()
        assert (facts.users.value, facts.dates.value, facts.pager.page) == ("ana", "2026-10-02", 1)
        assert "Day 2 fact 20." in facts.rows.children[0].children[1].value


def test_filtering_the_users_keeps_the_pick_and_edit_opens_the_fact_shown(wb):
    """Typing in Browse's user filter dropped the pick even when it still matched, and an edit
    button of the facts still shown then opened "Pick a user" instead of the fact."""
    _show(wb, "Browse")
    facts = wb.browse.facts
    facts.users.pick("ana")
    facts.users.filter.value = "an"
    assert facts.users.value == "ana"
    facts.users.filter.value = "bo"  # ana is filtered out; her facts stay on screen
    row = next(row for row in facts.rows.children if "green tea" in row.children[1].value)
    row.children[0].click()
    assert wb.edit.fact.loaded is not None and wb.edit.fact.loaded.id == "f-tea"


def test_the_block_editor_saves_only_the_block_it_loaded_and_only_a_change(wb, home):
    """Save after the scope, user, chat or label had been changed (not loaded) wrote there with
    the loaded block as the expected text: "Someone changed this block since you loaded it",
    which nobody had. And Save of the block as loaded said "Saved ... and committed it" with no
    commit made."""
    head = git(home, "rev-parse", "HEAD")
    block = wb.edit.block
    block.scope.value = "user"
    block.user.value = "ana"
    block.label.value = "context"
    block.load.click()
    block.save.click()
    assert "Nothing to save" in block.status.value and git(home, "rev-parse", "HEAD") == head
    block.user.value = "bob"
    block.text.value = "Bob likes detail."
    block.save.click()
    assert "Someone changed" not in block.status.value and "Load the block named above" in block.status.value
    assert not (home / "memory/users/bob/core/context.md").exists() and git(home, "rev-parse", "HEAD") == head
    block.load.click()  # over the typing: asked first, then discarded
    block.unsaved.discard.click()
    block.text.value = "Bob likes detail."
    block.save.click()
    assert "Saved" in block.status.value
    assert (home / "memory/users/bob/core/context.md").read_text() == "Bob likes detail.\n"


def test_the_fact_editor_writes_only_the_fact_it_loaded(wb, home):
    """With the user changed above a loaded fact (not loaded again), Save looked the fact up in
    that other user's memory ("no fact 'f-tea' in the memory of bob") and Delete would too."""
    wb.edit_fact("ana", "f-tea")
    editor = wb.edit.fact
    editor.user.value = "bob"
    editor.content.value = "Likes oolong."
    editor.save.click()
    assert "Load the fact named above" in editor.status.value
    editor.delete.click()
    editor.confirm.click()
    assert "Load the fact named above" in editor.status.value
    assert "Likes green tea in the morning." in (home / ANA_LOG).read_text()
    editor.user.value = "ana"
    editor.save.click()
    assert "Saved" in editor.status.value and "Likes oolong." in (home / ANA_LOG).read_text()


def test_the_search_says_once_that_the_memory_changed_since(wb):
    """Each refresh while hits were shown (each change the daemon commits) appended another
    "(the memory changed since: search again to see it)" to the status line."""
    wb.search.query.value = "green tea"
    for _ in range(3):
        wb.refresh()
    assert wb.search.status.value.count("the memory changed since") == 1
    wb.search.go.click()
    assert "the memory changed since" not in wb.search.status.value


def test_edit_from_a_search_of_the_past_loads_the_fact_as_it_is_now(wb, home):
    """Viewing a past commit, "Edit this fact" loaded the fact as that commit left it into the
    editor, which edits now: back to now the form showed the old words, and Save said "Someone
    changed this fact since you loaded it"."""
    before = git(home, "rev-parse", "HEAD").strip()
    wb.edit_fact("ana", "f-tea")
    wb.edit.fact.content.value = "Likes black coffee."
    wb.edit.fact.save.click()
    wb.travel(before)
    _show(wb, "Search")
    wb.search.user.value = "ana"
    wb.search.query.value = "green tea"
    wb.search.rows.children[0].children[0].click()
    wb.search.edit.click()
    wb.travel(None)
    editor = wb.edit.fact
    assert editor.content.value == "Likes black coffee."
    editor.category.value = "habit"
    editor.save.click()
    assert "Saved" in editor.status.value
    assert "- [habit] Likes black coffee." in (home / ANA_LOG).read_text()


def test_a_blob_pasted_into_a_log_does_not_make_the_widgets_megabytes(tmp_path, embedder):
    """Fact text was shown whole: a log of 100 facts of 50,000 characters each made Browse's
    page of facts 1 MB, the commit's History 5 MB and a hit's file view 450 KB."""
    blob = "".join(f"- [note] Blob {i} " + "x" * 50_000 + "\n" for i in range(100))
    home = build_home(tmp_path / "home", embedder, {"memory/users/ana/2026-11-30.md": "# 2026-11-30\n\n" + blob})
    with open_workbench(home, embedder) as bench:
        _show(bench, "Browse")
        facts = bench.browse.facts
        facts.users.pick("ana")
        facts.dates.pick("2026-11-30")
        assert sum(len(row.children[1].value) for row in facts.rows.children) < 20 * 1_000
        assert "Blob 0 xxx" in facts.rows.children[0].children[1].value
        _show(bench, "History")
        assert bench.history.commits.value is not None and len(bench.history.detail.value) < 100 * 1_000
        _show(bench, "Search")
        bench.search.query.value = "Blob 5"
        bench.search.rows.children[0].children[0].click()
        assert len(bench.search.detail.value) < 20_000
        bench.edit_fact("ana", bench.search.hits[0].id)
        assert len(bench.edit.fact.content.value) > 50_000  # the whole text, to edit


def test_a_commit_gone_since_the_list_was_read_is_a_message(wb, home):
    """Picking a commit the person had since dropped from history (a reset, then gc) raised
    HistoryError out of the list's callback: a traceback, and the detail of another commit."""
    wb.edit_fact("ana", "f-tea")
    wb.edit.fact.content.value = "Likes oolong."
    wb.edit.fact.save.click()
    _show(wb, "History")
    history = wb.history
    history.refresh()
    gone, older = history.entries[0], history.entries[1]
    git(home, "reset", "-q", "--hard", "HEAD~1")
    git(home, "reflog", "expire", "--expire=now", "--all")
    git(home, "gc", "-q", "--prune=now")
    history.commits.pick(older)
    history.commits.pick(gone)
    assert "bad object" in history.detail.value and history.revert.disabled


def test_a_double_click_on_yes_revert_reverts_once(wb, home):
    """After a revert the list picks the newest commit, the revert itself: the second click of a
    double click on "Yes, revert it" reverted that, putting back what the first one undid."""
    wb.edit_fact("bob", "f-deploy")
    wb.edit.fact.content.value = "Deploys on Fridays."
    wb.edit.fact.save.click()
    _show(wb, "History")
    history = wb.history
    history.refresh()
    history.revert.click()
    history.confirm.click()
    history.confirm.click()
    assert "Deploys with a blue-green switch." in (home / "memory/users/bob/2026-11-21.md").read_text()
    subjects = git(home, "log", "--format=%s", "-3").splitlines()
    assert subjects[0] == 'Revert "Edit fact f-deploy"' and subjects[1] == "Edit fact f-deploy"


def test_a_hit_in_a_file_not_committed_yet_says_so(wb, home, embedder):
    """A log indexed but not committed yet (the daemon commits after a quiet moment) showed, for
    where its hit came from, "has no history in git: fatal: no such path ... in HEAD"."""
    write(home, "memory/users/ana/2026-11-30.md", "# 2026-11-30\n\n- [hobby] Builds kites from bamboo.\n")
    with syncd.open(home, embedder=embedder) as engine:
        engine.sync()
    wb.search.user.value = "ana"
    wb.search.query.value = "kites made of bamboo"
    wb.search.rows.children[0].children[0].click()
    detail = wb.search.detail.value
    assert "not committed yet" in detail and "no such path" not in detail


def test_it_follows_commits_in_a_home_that_is_a_linked_worktree(home, embedder):
    """In a linked worktree .git is a file naming the worktree's git folder: the change token
    stat'ed .git/HEAD and .git/refs there, which do not exist, so no commit was ever noticed."""
    linked = home.parent / "linked"
    git(home, "worktree", "add", "-q", "-b", "other", str(linked))
    with open_workbench(linked, embedder) as bench:
        assert bench.poll_once() is False
        write(linked, "memory/users/ana/2026-11-30.md", "# 2026-11-30\n\n- [note] Made in the worktree.\n")
        git(linked, "add", "-A")
        git(linked, "commit", "-q", "-m", "a commit of the person's")
        assert bench.poll_once() is True


def test_control_and_reordering_characters_in_a_log_are_shown_not_obeyed(wb, home):
    """A hand-edited log's control characters went into the widget HTML as they were (a browser
    drops them unseen) and a right-to-left override reordered the rest of the line, so Browse
    read "Pays to account 5678 1234." for a fact whose file says "Pays 8765 tnuocca ot 1234."."""
    text = "# 2026-11-24\n\n- [note] Pays \u202e8765 tnuocca ot\u202c 1234.\n- [note] Bell \x07 and \x1b[31mred.\n"
    write(home, "memory/users/ana/2026-11-24.md", text)
    _show(wb, "Browse")
    facts = wb.browse.facts
    facts.users.pick("ana")
    facts.dates.pick("2026-11-24")
    shown = "".join(row.children[1].value for row in facts.rows.children)
    assert "⟨U+202E⟩8765 tnuocca ot⟨U+202C⟩" in shown and "Bell ⟨U+0007⟩ and ⟨U+001B⟩[31mred." in shown
    assert not any(c in shown for c in "\u202e\u202c\x07\x1b")


def test_running_the_notebook_cell_again_lets_the_workbench_before_go(home, embedder, tmp_path):
    """Each run of the notebook's cell made a workbench and left the one before open, held by
    its polling task, ipywidgets' registry and IPython's Out, each with its own model and index
    in memory: about 100 MB more per run, never given back."""
    first = wbmod.Workbench(home, poll=0, embedder=embedder)
    other = wbmod.Workbench(build_home(tmp_path / "other", embedder), poll=0, embedder=embedder)
    again = wbmod.Workbench(home, poll=0, embedder=embedder)
    try:
        assert not hasattr(first, "data") and first.comm is None  # closed, its widget too
        assert not hasattr(first.search.data, "engine")  # what its tabs still hold let go of the index
        assert other.data.users() == ["ana", "bob"] and again.data.users() == ["ana", "bob"]
        again.search.query.value = "green tea"
        assert "green tea" in again.search.hits[0].content
    finally:
        again.close()
        other.close()


def test_view_as_of_then_goes_to_the_commit_picked_after_a_revision_typed(wb, home):
    """A revision typed once stayed in the "as of" box and won over every commit picked after
    it: "View the memory as of then" under commit A's detail showed the typed commit B."""
    wb.edit_fact("ana", "f-tea")
    wb.edit.fact.content.value = "Likes oolong."
    wb.edit.fact.save.click()
    _show(wb, "History")
    history = wb.history
    history.refresh()
    history.when.value = "HEAD~1"
    history.view_then.click()
    assert wb.data.at == git(home, "rev-parse", "HEAD~1").strip()
    history.view_now.click()
    newest = history.entries[0]
    history.commits.pick(history.entries[1])
    history.commits.pick(newest)
    history.view_then.click()
    assert wb.data.at == newest.sha


def test_health_says_when_the_index_is_gone_and_when_git_holds_commits_back(wb, home):
    """Health showed only counts: with .syncd/ deleted it said "stale" with zero facts, and with
    HEAD detached (nothing is committed then, edits are refused) it said "healthy"."""
    _show(wb, "Health")
    git(home, "checkout", "-q", "--detach")
    wb.health.check.click()
    summary = wb.health.summary.value
    assert "healthy" in summary and "HEAD is detached" in summary and "commits nothing" in summary
    git(home, "checkout", "-q", "-")
    shutil.rmtree(home / ".syncd")
    wb.health.check.click()
    summary = wb.health.summary.value
    assert "missing" in summary and "No index on disk" in summary and "detached" not in summary


def test_a_search_with_no_index_says_so_not_just_no_hits(wb, home):
    """With .syncd/ deleted (the daemon rebuilds it; without one it stays gone) a search said
    "0 hit(s)", as if the memory held nothing about it, and made empty tables there, after which
    Health said "stale" rather than that the index is missing."""
    shutil.rmtree(home / ".syncd")
    wb.search.query.value = "green tea"
    assert wb.search.hits == [] and "no index to search" in wb.search.status.value
    assert not (home / ".syncd" / "index").exists()


def test_a_chat_folder_that_is_no_chat_id_is_not_offered(wb, home):
    """A folder under chats/ whose name is no valid chat id ("bad name", "..x") was offered in
    Browse and Search; picking it in Browse's core blocks raised InvalidIdError out of the
    dropdown's callback."""
    write(home, "memory/users/ana/chats/bad name/core/context.md", "Spaces.\n")
    write(home, "memory/users/ana/chats/..x/core/context.md", "Dots.\n")
    _show(wb, "Browse")
    wb.browse.which.value = "Core blocks"
    view = wb.browse.blocks
    view.user.value = "ana"
    assert view.chat.options == ("(no chat)", "phone")
    wb.search.user.value = "ana"
    assert wb.search.chat.options == ("(any chat)", "phone")


def test_a_commit_subject_with_a_bidirectional_override_is_listed_as_it_is(wb, home):
    """The History list's labels (text, not HTML) showed a commit subject's right-to-left override
    as what it does: the rest of the subject reversed."""
    git(home, "commit", "-q", "--allow-empty", "-m", "Add \u202edrow\u202c to the log")
    _show(wb, "History")
    wb.history.refresh()
    assert "Add ⟨U+202E⟩drow⟨U+202C⟩ to the log" in wb.history.commits.select.options[0][0]


def test_loading_a_fact_with_no_index_reads_the_files_and_makes_no_empty_index(wb, home):
    """With .syncd/ deleted, loading a fact into the editor asked the index where it was, which
    made empty tables there: Health then said "stale" with zero facts instead of "missing"."""
    shutil.rmtree(home / ".syncd")
    wb.edit_fact("ana", "f-tea")
    assert wb.edit.fact.content.value == "Likes green tea in the morning."
    assert not (home / ".syncd" / "index").exists()
    _show(wb, "Health")
    assert "missing" in wb.health.summary.value


def test_a_reindex_refreshes_the_tabs_on_the_kernel_s_thread(wb):
    """Reindex ran on a worker thread, which then refreshed the status and the tab on screen
    itself: beside the kernel's thread handling the person's clicks on the same widgets."""
    threads = []
    wb.health.changed = lambda: threads.append(threading.current_thread().name)
    # white-box: the reindex's last step is wrapped, to know when it ran and on which thread.
    finish = wb.health._reindexed

    async def click_and_wait() -> None:
        finished = asyncio.Event()

        def finished_too(*outcome) -> None:
            finish(*outcome)
            finished.set()

        wb.health._reindexed = finished_too
        wb.health.reindex_button.click()
        await asyncio.wait_for(finished.wait(), 120)

    asyncio.run(click_and_wait())
    assert threads == [threading.current_thread().name] and "reindexed" in wb.health.progress_text.value


def test_opening_another_fact_over_unsaved_typing_asks_first(wb, home):
    """Edit on another fact (Browse, Search, or Load) replaced what was typed over the fact the
    form held, without a word: the typing was gone. Now it asks: Save, Discard or Cancel."""
    wb.edit_fact("ana", "f-tea")
    editor = wb.edit.fact
    editor.content.value = "Likes oolong in the morning."
    _open_from_browse(wb, "bob", "blue-green")  # another user's fact, from Browse's Edit button
    assert editor.content.value == "Likes oolong in the morning." and editor.loaded_key == ("ana", "f-tea")
    assert "unsaved changes to fact f-tea of ana" in editor.status.value
    editor.unsaved.stay.click()  # Cancel: keep editing
    assert editor.content.value == "Likes oolong in the morning." and editor.unsaved.box.layout.display == "none"
    assert (editor.user.value, editor.fact_id.value) == ("ana", "f-tea")
    head = git(home, "rev-parse", "HEAD")

    editor.fact_id.value = "f-deploy"
    editor.user.value = "bob"
    editor.load.click()  # the Load button, with another fact named above
    assert editor.content.value == "Likes oolong in the morning." and editor.unsaved.box.layout.display is None
    editor.unsaved.keep.click()  # Save, then open the fact asked for
    assert "Likes oolong in the morning." in (home / ANA_LOG).read_text()
    assert editor.loaded_key == ("bob", "f-deploy") and editor.content.value == "Deploys with a blue-green switch."
    assert "Saved" in editor.status.value and not editor.has_unsaved()

    editor.category.value = "habit"
    wb.edit_fact("ana", "f-tea")
    editor.unsaved.discard.click()  # Discard: the fact asked for opens, nothing is written
    assert editor.loaded_key == ("ana", "f-tea") and editor.content.value == "Likes oolong in the morning."
    assert "[technical] Deploys" in (home / "memory/users/bob/2026-11-21.md").read_text()
    assert git(home, "log", "--format=%s", f"{head.strip()}..").splitlines() == ["Edit fact f-tea"]
    # With nothing typed, another fact opens at once.
    wb.edit_fact("bob", "f-deploy")
    assert editor.loaded_key == ("bob", "f-deploy") and editor.unsaved.box.layout.display == "none"


def test_keep_theirs_is_not_offered_over_lines_edited_since_the_merge(wb, home):
    """With the callout's "the line above" edited to "the 2 lines above", Keep theirs deleted the
    blank line above ours too: a line the merge never wrote as ours. Now it is not offered."""
    edited = PLANS.replace("the line above", "the 2 lines above")
    write(home, "vault/Plans.md", edited)
    _show(wb, "Health")
    panel = wb.health.conflicts
    (row,) = panel.rows.children
    keep_theirs = row.children[2].children[1]
    assert keep_theirs.disabled and "no longer known" in row.children[1].value
    panel.resolve(panel.conflicts[0], "theirs")  # as a stale button would
    assert "not part of the conflict" in panel.status.value and (home / "vault/Plans.md").read_text() == edited
    (row,) = panel.rows.children
    row.children[2].children[2].click()  # keep both
    assert (home / "vault/Plans.md").read_text() == "# Plans\n\nWe sail east in May.\nWe sail west in May.\n"


def test_loading_another_block_over_unsaved_typing_asks_first(wb, home):
    """Load with another block named above replaced the text typed over the block the editor held,
    without a word. Now it asks, as the fact editor does: Save, Discard or Cancel."""
    block = wb.edit.block
    block.scope.value, block.user.value, block.label.value = "user", "ana", "context"
    block.load.click()
    block.text.value = "Ana prefers long answers."
    block.scope.value = "global"
    block.label.value = "persona"
    block.load.click()
    assert block.text.value == "Ana prefers long answers." and block.unsaved.box.layout.display is None
    assert "unsaved changes to the user block context of ana" in block.status.value
    block.unsaved.stay.click()  # Cancel: keep editing, the fields name the block held again
    assert block.text.value == "Ana prefers long answers." and block.unsaved.box.layout.display == "none"
    assert (block.scope.value, block.user.value, block.label.value) == ("user", "ana", "context")
    head = git(home, "rev-parse", "HEAD")

    block.scope.value, block.label.value = "global", "persona"
    block.load.click()
    block.unsaved.keep.click()  # Save, then load the block asked for
    assert (home / "memory/users/ana/core/context.md").read_text() == "Ana prefers long answers.\n"
    assert block.loaded_where == ("global", None, None, "persona")
    assert block.text.value == "I am the household assistant." and "Saved" in block.status.value

    block.text.value = "I am nobody's assistant."
    block.scope.value, block.chat.value, block.label.value = "chat", "phone", "context"
    block.load.click()
    block.unsaved.discard.click()  # Discard: the block asked for loads, nothing is written
    assert block.loaded_where == ("chat", "ana", "phone", "context")
    assert block.text.value == "On the phone: one line at most."
    assert (home / "memory/core/persona.md").read_text() == "I am the household assistant.\n"
    assert git(home, "log", "--format=%an", f"{head.strip()}..").splitlines() == ["workbench"]
    # With nothing typed, another block loads at once.
    block.scope.value = "user"
    block.load.click()
    assert block.loaded_where == ("user", "ana", None, "context") and block.unsaved.box.layout.display == "none"
