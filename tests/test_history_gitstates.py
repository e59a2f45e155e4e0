"""The committer converges with whatever git state the user leaves: staged deletions and renames,
their own commits, unmerged paths, a detached HEAD, a stale lock, our own temp files, huge path
lists; errors leave the history seam as SyncdError only. Real git repositories throughout."""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

import syncd
from syncd.cli import main
from syncd.errors import GitBusyError, HistoryError
from syncd.formats.facts import parse_daily_log
from syncd.history.committer import commit_changes
from syncd.history.git import check_tree_writable
from syncd.history.messages import fact_delta
from syncd.history.status import changed_paths, uncommitted_paths
from syncd.home import Home, remove_stale_temp_files

from .daemon_helpers import daily_log, git, isolate_git_identity, subjects
from .helpers import write

LOG = "memory/users/ana/2026-11-22.md"
BOB = "memory/users/bob/2026-11-22.md"
FACTS = [
    "Likes green tea in the morning.",
    "Works as a nurse in Lyon.",
    "Is allergic to peanuts.",
    "Has a cat called Miso.",
]


@pytest.fixture(autouse=True)
def global_gitconfig(tmp_path, monkeypatch):
    return isolate_git_identity(tmp_path, monkeypatch)


def _commit(home, paths=None, **settings):
    return commit_changes(Home(home), syncd.Settings(**settings), paths)


def _diff_paths(home, sha="HEAD") -> dict[str, str]:
    """{path: A/M/D} of one commit, as git shows it."""
    out = git(home, "show", "--no-renames", "--name-status", "--format=", sha)
    return {line.split("\t")[1]: line.split("\t")[0] for line in out.splitlines() if "\t" in line}


def _message_paths(home, sha="HEAD") -> set[str]:
    """The paths a commit message names (subject and body lines)."""
    text = git(home, "log", "-1", "--format=%B", sha)
    named = set()
    for line in text.splitlines():
        if line.startswith("move "):
            named.update(line[len("move ") :].split(" -> "))
        elif match := re.match(r"^(?:[+-]\d+ facts?(?:, -\d+ facts?)? in|add|edit|delete) (\S+\.md)$", line):
            named.add(match.group(1))
    return named


def _clean(home) -> bool:
    return not git(home, "status", "--porcelain", "--untracked-files=all")


def test_a_git_rm_is_committed_and_the_tree_ends_clean(home, engine):
    write(home, LOG, daily_log(FACTS[:2]))
    write(home, BOB, daily_log(FACTS[2:]))
    engine.sync()
    _commit(home)
    # The user commits one change themselves and stages another of theirs: neither is ours to commit.
    write(home, "vault/Theirs.md", "# Theirs\n")
    git(home, "add", "vault/Theirs.md")
    git(home, "commit", "-q", "-m", "mine")
    git(home, "rm", "-q", BOB)
    write(home, LOG, daily_log(FACTS[:3]))
    write(home, "vault/Staged.md", "# Staged\n")
    git(home, "add", "vault/Staged.md")
    engine.sync()
    shas = _commit(home, [BOB, LOG, "vault/Theirs.md"])
    assert len(shas) == 1
    assert _diff_paths(home) == {BOB: "D", LOG: "M"}
    assert _message_paths(home) == {BOB, LOG}  # the message names exactly what the diff holds
    assert subjects(home)[0] == "+1 fact, -2 facts in 2 files"
    assert git(home, "log", "--format=%s", "--", "vault/Theirs.md").splitlines() == ["mine"]
    assert git(home, "status", "--porcelain").splitlines() == ["A  vault/Staged.md"]
    assert engine.status().uncommitted == ["vault/Staged.md"]
    _commit(home)
    assert _clean(home) and _commit(home) == []


def test_a_staged_rename_is_committed_as_a_move(home, engine):
    write(home, "vault/Tea.md", "# Tea\n\nGreen.\n")
    engine.sync()
    _commit(home)
    git(home, "mv", "vault/Tea.md", "vault/Green tea.md")
    engine.sync()
    _commit(home)
    assert subjects(home)[0] == "move vault/Tea.md -> vault/Green tea.md"
    assert _diff_paths(home) == {"vault/Tea.md": "D", "vault/Green tea.md": "A"}
    assert _clean(home) and engine.status().uncommitted == []


def test_human_edits_carry_the_users_git_identity(home, global_gitconfig):
    write(home, "vault/A.md", "# A\n")
    _commit(home)
    assert git(home, "log", "-1", "--format=%an <%ae>").strip() == "syncd user <user@syncd.local>"
    global_gitconfig.write_text("[user]\n\tname = Global Person\n\temail = global@example.org\n")
    write(home, "vault/B.md", "# B\n")
    _commit(home)
    assert (
        git(home, "log", "-1", "--format=%an <%ae> %cn").strip() == "Global Person <global@example.org> Global Person"
    )
    git(home, "config", "user.name", "Ana Lima")
    git(home, "config", "user.email", "ana@example.org")
    write(home, "vault/C.md", "# C\n")
    _commit(home)
    assert git(home, "log", "-1", "--format=%an <%ae>").strip() == "Ana Lima <ana@example.org>"


def test_our_temp_files_are_never_committed_and_are_cleaned_up(home):
    stale = write(home, "memory/users/ana/.2026-11-22.md.k3j2h1x9.syncd-tmp", daily_log(FACTS[:1]))
    os.utime(stale, (time.time() - 60, time.time() - 60))
    young = write(home, "vault/.Tea.md.a8s7d6f5.syncd-tmp", "# half")
    write(home, "vault/Tea.md", "# Tea\n")
    _commit(home)
    committed = git(home, "log", "--name-only", "--format=")
    assert "syncd-tmp" not in committed and "vault/Tea.md" in committed
    assert remove_stale_temp_files(home) == ["memory/users/ana/.2026-11-22.md.k3j2h1x9.syncd-tmp"]
    assert not stale.exists() and young.exists()  # a young one may be a write in flight


def test_a_temp_file_of_a_write_in_flight_is_left_alone_by_the_persons_stash(home):
    # CI saw `git stash -u` take a write's temp file away mid-write and `stash pop` bring it back
    # after the write had given up: an orphan that stayed in the tree. git must not list them at all.
    _commit(home)  # any commit tells the repository to ignore them, as the daemon's start does
    in_flight = write(home, "memory/users/ana/.2026-11-22.md.q1w2e3r4.syncd-tmp", daily_log(FACTS[:1]))
    write(home, "vault/Untracked.md", "# Untracked\n")
    assert "syncd-tmp" not in git(home, "status", "--porcelain", "--untracked-files=all")
    git(home, "stash", "push", "-q", "--include-untracked")
    assert in_flight.exists() and not (home / "vault/Untracked.md").exists()
    git(home, "stash", "pop", "-q")
    assert (home / "vault/Untracked.md").exists()
    excludes = (home / ".git/info/exclude").read_text()
    _commit(home)
    assert (home / ".git/info/exclude").read_text() == excludes  # said once, not once per commit


def test_unmerged_paths_after_a_stash_pop_are_never_staged_or_committed(home):
    (home / ".gitattributes").unlink()  # a home from before union merges of daily logs
    git(home, "commit", "-qm", "no union merge", "--", ".gitattributes")
    write(home, LOG, daily_log(FACTS[:2]))
    _commit(home)
    write(home, LOG, daily_log([FACTS[0], "Works as a nurse in Paris."]))
    git(home, "stash", "-q")
    write(home, LOG, daily_log([FACTS[0], "Works as a doctor in Lyon."]))
    write(home, "vault/Other.md", "# Other\n")
    _commit(home, [LOG])
    popped = subprocess.run(["git", "stash", "pop"], cwd=home, capture_output=True, text=True, check=False)
    assert popped.returncode != 0 and "CONFLICT" in popped.stdout + popped.stderr
    assert not (home / ".git/MERGE_HEAD").exists()
    head = git(home, "rev-parse", "HEAD")
    with pytest.raises(GitBusyError, match="unmerged"):
        _commit(home)
    with pytest.raises(GitBusyError, match="unmerged"):
        check_tree_writable(home)
    assert changed_paths(home).unmerged == (LOG,)
    assert git(home, "rev-parse", "HEAD") == head
    assert git(home, "ls-files", "-u").strip()  # still unmerged: we did not mark it resolved
    assert "<<<<<<<" not in git(home, "log", "-p", "--all", "--format=", "--", LOG)
    # The user resolves; what they resolved is committed, with everything else that waited.
    write(home, LOG, daily_log([FACTS[0], "Works as a doctor in Paris."]))
    git(home, "add", LOG)
    git(home, "stash", "drop", "-q")
    _commit(home)
    assert "<<<<<<<" not in git(home, "log", "-p", "--format=", "--", LOG)
    assert set(_diff_paths(home)) == {LOG, "vault/Other.md"} and _clean(home)


def test_no_commit_on_a_detached_head_until_a_branch_is_back(home):
    write(home, LOG, daily_log(FACTS[:1]))
    _commit(home)
    git(home, "checkout", "-q", "--detach")
    write(home, LOG, daily_log(FACTS[:2]))
    with pytest.raises(GitBusyError, match="git switch"):
        _commit(home)
    assert uncommitted_paths(home) == [LOG]
    git(home, "checkout", "-q", "main")
    _commit(home)
    assert git(home, "show", f"main:{LOG}") == daily_log(FACTS[:2]) and _clean(home)


def test_index_lock_is_busy_and_sync_warns_with_the_fix_and_exits_0(home, embedder, capsys):
    write(home, LOG, daily_log(FACTS[:1]))
    lock = home / ".git/index.lock"
    lock.write_bytes(b"")
    with pytest.raises(GitBusyError, match=r"index\.lock"):
        _commit(home)
    os.utime(lock, (time.time() - 3600, time.time() - 3600))
    with pytest.raises(GitBusyError, match="remove it"):
        _commit(home)
    assert main(["sync", "--home", str(home), "-q"]) == 0
    err = capsys.readouterr().err
    assert "indexed, but not committed" in err and f"rm {lock}" in err and "Traceback" not in err
    lock.unlink()
    assert main(["sync", "--home", str(home), "-q"]) == 0
    assert "warning" not in capsys.readouterr().err and _clean(home)


def test_a_folder_swapped_for_a_symlink_does_not_block_commits(home, tmp_path):
    write(home, "vault/people/bob.md", "# Bob\n")
    _commit(home)
    outside = tmp_path / "outside"
    write(outside, "bob.md", "# Secret\n")
    for child in (home / "vault/people").iterdir():
        child.unlink()
    (home / "vault/people").rmdir()
    (home / "vault/people").symlink_to(outside)
    write(home, "vault/Tea.md", "# Tea\n")
    _commit(home)
    assert _diff_paths(home) == {"vault/people/bob.md": "D", "vault/Tea.md": "A"}
    assert "Secret" not in git(home, "log", "-p", "--format=")


def test_other_git_failures_are_history_errors(home):
    write(home, LOG, daily_log(FACTS[:1]))
    (home / ".git/index").write_bytes(b"DIRC garbage, not an index")
    with pytest.raises(HistoryError) as caught:
        _commit(home)
    assert caught.value.command == "status" and "index" in caught.value.detail
    assert uncommitted_paths(home) == []  # status degrades to "unknown", it does not raise


def test_a_file_above_the_size_limit_is_committed_without_being_read_for_its_message(home):
    write(home, LOG, daily_log([f"Fact {i} about tea." for i in range(100)]))
    _commit(home, max_file_bytes=1024)
    assert subjects(home)[0] == f"add {LOG}"
    write(home, BOB, daily_log(FACTS[:2]))
    _commit(home, max_file_bytes=1024)
    assert subjects(home)[0] == f"+2 facts in {BOB}"


def test_more_paths_than_a_command_line_holds(home):
    # ~9,000 paths of ~240 bytes: more than the system's 2 MB argument limit in one command.
    folder = "vault/" + "long-folder-name-" * 12
    names = [f"{folder}/{i:05d}-{'x' * 20}.md" for i in range(9000)]
    for rel in names:
        write(home, rel, f"# {rel[-30:]}\n")
    shas = _commit(home, names)
    assert len(shas) == 1 and _clean(home)
    assert int(git(home, "ls-tree", "-r", "--name-only", "HEAD", "--", "vault/").count("\n")) >= 9000
    assert subjects(home)[0] == "add 9000 files"


_line = st.sampled_from(
    [
        *(f"- [preference] {f}" for f in FACTS),
        "- [identity] Likes green tea in the morning.",
        "Free text.",
        "",
        "## 10:00 chat:c1",
        "- [ ] not a fact",
    ]
)


@given(st.lists(_line, max_size=12), st.lists(_line, max_size=12))
def test_fact_counts_equal_the_multiset_difference_of_parsed_facts(old, new):
    def contents(lines):
        text = "# 2026-11-22\n\n" + "".join(line + "\n" for line in lines)
        return Counter(located.fact.content for located in parse_daily_log(text).facts())

    before, after = contents(old), contents(new)
    added, removed = fact_delta(
        ("# 2026-11-22\n\n" + "".join(x + "\n" for x in old)).encode(),
        ("# 2026-11-22\n\n" + "".join(x + "\n" for x in new)).encode(),
    )
    assert (added, removed) == (sum((after - before).values()), sum((before - after).values()))


def test_lines_added_on_both_sides_of_a_stash_pop_or_a_merge_are_both_kept(home):
    """A new home's .gitattributes merges daily logs by union: facts appended on both sides
    (an agent's beside the person's stash, or on two branches) all survive, no conflict markers."""
    write(home, LOG, daily_log(FACTS[:1]))
    _commit(home)
    write(home, LOG, daily_log(FACTS[:1]) + "- [note] Stashed by the person.\n")
    git(home, "stash", "-q")
    write(home, LOG, daily_log(FACTS[:1]) + "- [note] Remembered by an agent meanwhile.\n")
    _commit(home)
    git(home, "stash", "pop", "-q")
    text = (home / LOG).read_text()
    assert "Stashed by the person." in text and "Remembered by an agent meanwhile." in text
    assert "<<<<<<<" not in text and not git(home, "ls-files", "-u").strip()
    _commit(home)
    git(home, "checkout", "-q", "-b", "side")
    write(home, LOG, (home / LOG).read_text() + "- [note] On the side branch.\n")
    _commit(home)
    git(home, "checkout", "-q", "main")
    write(home, LOG, (home / LOG).read_text() + "- [note] On main.\n")
    _commit(home)
    git(home, "merge", "-q", "--no-edit", "side")
    merged = parse_daily_log(git(home, "show", f"HEAD:{LOG}"))
    contents = [located.fact.content for located in merged.facts()]
    assert {"On the side branch.", "On main.", "Stashed by the person."} <= set(contents)
    assert len(contents) == len(set(contents))
