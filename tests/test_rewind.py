"""A git command of the person's that puts an older version of a file back under syncd's commits
never turns into a commit deleting acknowledged facts (syncd/writes/rewind.py)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import syncd
from syncd.home import Home
from syncd.memory import MemoryManager
from syncd.writes.rewind import Merged, PutBack, find_rewound, lost_facts

from .daemon_helpers import GIT_ENV, daily_log, git, running_daemon, wait_for
from .helpers import write

LOG = "memory/users/ana/2026-11-22.md"


def _agent_facts(engine, *contents: str) -> None:
    manager = MemoryManager(engine)
    for content in contents:
        asyncio.run(manager.add_memory(content, "ana", dedup=False))


def _log(home) -> str:
    return next((home / "memory/users/ana").glob("20*.md")).relative_to(home).as_posix()


def test_a_file_git_put_back_to_an_older_version_is_rewound_and_merged_back(engine, home):
    _agent_facts(engine, "Likes green tea.")
    log = _log(home)
    _agent_facts(engine, "Swims on Sundays.", "Reads crime novels.")
    # What a merge with local changes does after our commits moved HEAD: the older version into
    # the index and the tree, then the person's own change on top.
    git(home, "checkout", "HEAD~2", "--", log)
    (home / log).write_text((home / log).read_text() + "- [note] Typed by the person.\n")
    git(home, "add", log)
    back = find_rewound(home, [log])
    assert list(back) == [log]
    assert back[log].over == (home / log).read_bytes()  # merged from what the tree holds
    text = back[log].data.decode()
    for line in ("Likes green tea.", "Swims on Sundays.", "Reads crime novels.", "Typed by the person."):
        assert text.count(line) == 1, text
    assert "<<<<<<<" not in text


def test_an_editors_deletion_is_not_a_rewind(engine, home):
    _agent_facts(engine, "Likes green tea.", "Swims on Sundays.")
    log = _log(home)
    text = (home / log).read_text()
    kept = "\n".join(line for line in text.splitlines() if "Swims" not in line) + "\n"
    (home / log).write_text(kept)  # saved in an editor: the index still holds what was committed
    assert lost_facts(text.encode(), kept.encode())
    assert find_rewound(home, [log]) == {}


def test_hand_written_facts_are_not_guarded(home):
    write(home, LOG, daily_log(["Likes green tea.", "Swims on Sundays."]))
    git(home, "add", "-A")
    git(home, "commit", "-qm", "by hand")
    git(home, "rm", "-q", "--cached", LOG)
    assert find_rewound(home, [LOG]) == {}


def test_the_daemon_puts_back_what_a_git_command_took_out_as_its_own_change(home, embedder):
    with running_daemon(home, embedder) as run:
        run.settle()
        _agent_facts(run.reader, "Likes green tea.")
        log = _log(home)
        _agent_facts(run.reader, "Swims on Sundays.")
        run.settle()
        git(home, "checkout", "HEAD~1", "--", log)  # the older version, in the index and the tree
        wait_for(lambda: "Swims on Sundays." in (home / log).read_text(), 30, "the fact put back")
        run.settle()
        run.stop()
    assert "Swims on Sundays." in git(home, "show", f"HEAD:{log}")
    editor = git(home, "log", "--format=%H", "--grep=Syncd-Source: editor", "--", log).split()
    for sha in editor:
        assert "-- [" not in git(home, "show", "--format=", sha)


def _stash_took_it_out_under_our_commit(home, log: str) -> bytes:
    """Leave ``log`` as a `git stash -u` racing the commit pass that published it leaves it: HEAD
    and git's index hold it, the tree does not, the newest stash entry keeps it as untracked."""
    data = (home / log).read_bytes()
    git(home, "rm", "-q", "--cached", log)
    git(home, "commit", "-qm", "before the log was committed")
    git(home, "stash", "push", "-u", "-q")  # the log was untracked when the stash read the index
    assert not (home / log).exists()
    blob = (
        subprocess.run(["git", "hash-object", "-w", "--stdin"], cwd=home, input=data, capture_output=True, check=True)
        .stdout.decode()
        .strip()
    )
    git(home, "update-index", "--add", "--cacheinfo", f"100644,{blob},{log}")
    git(home, "commit", "-qm", "our commit pass, which published the log")
    return data


def test_a_file_a_stash_took_out_whole_under_our_commit_is_put_back(engine, home):
    _agent_facts(engine, "Likes green tea.", "Swims on Sundays.")
    log = _log(home)
    data = _stash_took_it_out_under_our_commit(home, log)
    assert find_rewound(home, [log]) == {log: Merged(data, None)}


def test_a_file_the_person_deleted_is_not_put_back(engine, home):
    _agent_facts(engine, "Likes green tea.")
    log = _log(home)
    (home / log).unlink()  # rm: HEAD and the index hold it, but no stash keeps it
    assert find_rewound(home, [log]) == {}
    git(home, "stash", "push", "-q")  # a stash of the deletion: the file is tracked, not untracked
    git(home, "rm", "-q", log)
    assert find_rewound(home, [log]) == {}


def test_a_file_whose_stashed_copy_differs_from_head_is_not_put_back(engine, home):
    _agent_facts(engine, "Likes green tea.")
    log = _log(home)
    _stash_keeping_untracked(home, log, b"# An older page of the person's, stashed\n")
    (home / log).unlink()
    assert find_rewound(home, [log]) == {}


def _stash_keeping_untracked(home, log: str, data: bytes) -> None:
    """A newest stash entry keeping ``data`` at ``log`` as untracked (its third parent), made
    with git's plumbing so that the tree is not touched (a daemon watches it)."""
    env = {"GIT_INDEX_FILE": str(home / ".git" / "index-for-the-stash")}
    blob = git_input(home, data, "hash-object", "-w", "--stdin")
    git_input(home, b"", "update-index", "--add", "--cacheinfo", f"100644,{blob},{log}", env=env)
    tree = git_input(home, b"", "write-tree", env=env)
    untracked = git_input(home, b"", "commit-tree", tree, "-m", "untracked files on main")
    head = git(home, "rev-parse", "HEAD").strip()
    index = git_input(home, b"", "commit-tree", f"{head}^{{tree}}", "-p", head, "-m", "index on main")
    entry = git_input(
        home, b"", "commit-tree", f"{head}^{{tree}}", "-p", head, "-p", index, "-p", untracked, "-m", "WIP on main"
    )
    git(home, "update-ref", "refs/stash", entry)


def git_input(home, data: bytes, *args: str, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        ["git", *args], cwd=home, input=data, capture_output=True, check=True, env=os.environ | GIT_ENV | (env or {})
    )
    return done.stdout.decode().strip()


def test_a_file_committed_on_a_branch_the_person_left_is_not_put_back_on_the_next(engine, home):
    """Our commit pass landed on a branch the person had checked out (`git checkout -b x`), and
    their `git checkout main` took the new file out of the tree as the pass ended: it went with
    the branch whose commit holds it. Put back, it was left on main untracked, a stray of a turn
    committed elsewhere, that no commit ever took in."""
    git(home, "checkout", "-q", "-b", "x")
    _agent_facts(engine, "Likes green tea.")
    log = _log(home)
    sha = git(home, "rev-parse", f"HEAD:{log}").strip()
    git(home, "checkout", "-q", "main")
    assert not (home / log).exists()
    PutBack(Home(home)).taken_under_commit(log, sha)
    assert not (home / log).exists()
    assert git(home, "status", "--porcelain").strip() == ""
    git(home, "checkout", "-q", "x")  # where HEAD holds it, a file taken out is put back
    (home / log).unlink()
    PutBack(Home(home)).taken_under_commit(log, sha)
    assert git(home, "hash-object", str(home / log)).strip() == sha


def test_a_file_the_person_renamed_or_git_rm_ed_under_our_commit_is_not_put_back(engine, home):
    """The person renamed the page our commit pass just committed (Obsidian, `mv`) or ran `git
    rm` on it while the pass ran: put back as HEAD has it, the rename became a copy of the page
    and the removal was undone. Only a file git's index still holds, with its bytes nowhere else
    in the tree (a stash's or a clean's race: see the daemon test below), is put back.
    White-box: PutBack.taken_under_commit is what the commit pass calls on such a file."""
    _agent_facts(engine, "Likes green tea.")
    log = _log(home)
    sha = git(home, "rev-parse", f"HEAD:{log}").strip()
    renamed = home / "memory" / "users" / "ana" / "tea.md"
    (home / log).rename(renamed)
    PutBack(Home(home)).taken_under_commit(log, sha)
    assert not (home / log).exists() and git(home, "hash-object", str(renamed)).strip() == sha
    renamed.rename(home / log)
    git(home, "rm", "-q", "--", log)
    PutBack(Home(home)).taken_under_commit(log, sha)
    assert not (home / log).exists()
    assert git(home, "status", "--porcelain").strip() == f"D  {log}"


def test_the_daemon_puts_back_a_file_a_stash_took_out_under_our_commit(home, embedder):
    with running_daemon(home, embedder) as run:
        run.settle()
        _agent_facts(run.reader, "Likes green tea.")
        run.settle()
        log = _log(home)
        data = (home / log).read_bytes()
        _stash_keeping_untracked(home, log, data)
        (home / log).unlink()  # the stash's clean, landing after our commit pass looked
        wait_for(lambda: (home / log).exists(), 30, "the log put back")
        run.settle()
        run.stop()
    assert (home / log).read_bytes() == data
    assert git(home, "show", f"HEAD:{log}").encode() == data
    assert not git(home, "log", "--diff-filter=D", "--format=%H", "--", log).split()


def test_undoing_a_group_never_takes_lines_out_that_a_commit_took_in(home):
    # A group wrote twice and gave up (its commit found git busy); between its writes the person
    # committed the file as it then was (`git commit -a`, or a stash popped back and committed as
    # their edit). Put back as it was before the group, the file would lose lines HEAD holds, and
    # the next commit, made as the person, would delete them: the undo leaves such a file alone.
    from functools import partial

    from syncd.home import Home, atomic_write, blob_sha
    from syncd.writes.journal import GroupJournal, Original
    from syncd.writes.rewind import undo_would_uncommit

    base = daily_log(["Likes green tea."]).encode()
    write(home, LOG, base.decode())
    git(home, "add", "-A")
    git(home, "commit", "-qm", "base")
    first = base + b"- [personal] Swims on Sundays. <!-- id:m-1111111111111111 -->\n"
    second = first + b"- [personal] Reads crime novels. <!-- id:m-2222222222222222 -->\n"
    other = "memory/users/ana/notes-by-the-group.md"

    journal = GroupJournal.open(Home(home))
    try:
        for data in (first, second):
            journal.before_write(LOG, blob_sha(data), lambda: Original(data=base))
            atomic_write(home / LOG, data)
            if data is first:
                git(home, "commit", "-qam", "the person's commit between the group's writes")
        journal.before_write(other, blob_sha(b"# Notes\n"), lambda: Original())
        atomic_write(home / other, b"# Notes\n")
        assert journal.rollback(home, keep=partial(undo_would_uncommit, home)) == [other]
    finally:
        journal.close()
    assert (home / LOG).read_bytes() == second and not (home / other).exists()
    # The rule alone: nothing committed of what is undone, the undo goes ahead.
    assert not undo_would_uncommit(home, LOG, second, first)
    assert undo_would_uncommit(home, LOG, second, base)
    assert undo_would_uncommit(home, LOG, first, base)  # HEAD holds it as it is
    assert not undo_would_uncommit(home, other, b"# Notes\n", None)  # not in HEAD at all


def test_a_write_to_a_file_a_stash_took_out_builds_on_what_is_committed(engine, home):
    _agent_facts(engine, "Likes green tea.")
    log = _log(home)
    _stash_keeping_untracked(home, log, (home / log).read_bytes())
    (home / log).unlink()
    _agent_facts(engine, "Swims on Sundays.")
    for fact in ("Likes green tea.", "Swims on Sundays."):
        assert fact in (home / log).read_text()
        assert fact in git(home, "show", f"HEAD:{log}")
    assert not git(home, "log", "--diff-filter=D", "--format=%H", "--", log).split()


# Run by `git rebase` before it writes any state (a clean tree: nothing to autostash), after it
# read HEAD: it waits here while the test makes a commit of ours, as one can land in that moment.
_PAUSING_HOOK = """#!/bin/sh
touch "$MARKS/started"
i=0
while [ ! -e "$MARKS/go" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done
"""


def _other_machine(home, tmp_path):
    """A clone of the home with a commit of its own (made before the home's next commits, so that
    pulling from it rebases them)."""
    other = tmp_path / "other"
    git(tmp_path, "clone", "-q", str(home), str(other))
    (other / "vault/Remote.md").write_text("# Remote\n\nWritten on another machine.\n")
    git(other, "add", "-A")
    git(other, "commit", "-qm", "from the other machine")
    return other


def _rebase_failing_at_its_end(home, tmp_path, other, meanwhile) -> None:
    """A real `git pull --rebase` from ``other`` that ``meanwhile()`` commits under (paused in its
    pre-rebase hook, after it read HEAD), so that moving the branch at its end fails."""
    marks = tmp_path / "marks"
    marks.mkdir()
    hook = home / ".git/hooks/pre-rebase"
    hook.write_text(_PAUSING_HOOK)
    hook.chmod(0o755)
    pull = subprocess.Popen(
        ["git", "pull", "-q", "--rebase", str(other), "main"],
        cwd=home,
        env={**os.environ, **GIT_ENV, "MARKS": str(marks)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    wait_for(lambda: (marks / "started").exists(), 60, "the rebase to start")
    meanwhile()
    (marks / "go").touch()
    said = pull.communicate(timeout=60)[0]
    assert pull.returncode != 0 and "could not update refs/heads/main" in said, said


@pytest.mark.parametrize("daemon", ["running", "started after the abort"])
def test_a_commit_a_rebase_abort_took_out_of_the_branch_is_put_back(home, embedder, tmp_path, daemon):
    """`git rebase` moves the branch at its end from the HEAD it read at its start: our commit in
    between makes that move fail, and `git rebase --abort` sets the branch back to what the rebase
    read, dropping our commit (acknowledged) from the branch and its lines from the tree. The
    daemon merges them back in as its own change, also when it starts after the abort (what the
    daemons looked at is kept in the home's private folder)."""
    other = _other_machine(home, tmp_path)
    with running_daemon(home, embedder) as run:
        _agent_facts(run.reader, "Likes green tea.")
        log = _log(home)
        run.settle()

        def add() -> None:
            _agent_facts(run.reader, "Swims on Sundays.")  # acknowledged: committed on the branch
            assert "Swims on Sundays." in git(home, "show", f"HEAD:{log}")

        _rebase_failing_at_its_end(home, tmp_path, other, add)
        if daemon == "running":
            _abort_and_wait_for_the_put_back(home, log)
            run.settle()
        run.stop()
    if daemon != "running":
        git(home, "rebase", "--abort")
        with running_daemon(home, embedder) as run:
            _abort_and_wait_for_the_put_back(home, log, aborted=True)
            run.settle()
            run.stop()
    text = (home / log).read_text()
    assert text.count("Swims on Sundays.") == 1 and text.count("Likes green tea.") == 1, text
    assert git(home, "show", f"HEAD:{log}") == text
    put_back = git(home, "log", "-1", "--format=%an%n%s", "-S", "Swims on Sundays.", "--", log)
    assert "rebase --abort" in put_back, put_back


def test_with_no_daemon_the_next_change_puts_back_what_a_rebase_abort_took_out(home, embedder, tmp_path):
    """An agent writing with no daemon (``MemoryManager(home)``: each change borrows the home's
    lock) is not covered by a daemon's commit pass: before this, the commit a `git rebase
    --abort` dropped stayed out of the branch for good. The next change puts it back first, in a
    commit of syncd's own, then makes its own."""
    other = _other_machine(home, tmp_path)
    with MemoryManager(home, embedder=embedder) as memory:
        asyncio.run(memory.add_memory("Likes green tea.", "ana", dedup=False))
        log = _log(home)

        def add() -> None:
            asyncio.run(memory.add_memory("Swims on Sundays.", "ana", dedup=False))  # acknowledged
            assert "Swims on Sundays." in git(home, "show", f"HEAD:{log}")

        _rebase_failing_at_its_end(home, tmp_path, other, add)
        git(home, "rebase", "--abort")
        assert "Swims on Sundays." not in (home / log).read_text()  # what git itself leaves
        asyncio.run(memory.add_memory("Reads crime novels.", "ana", dedup=False))
        hits = asyncio.run(memory.retrieve_relevant_memories("swimming on Sundays", user_id="ana"))
    text = (home / log).read_text()
    for fact in ("Likes green tea.", "Swims on Sundays.", "Reads crime novels."):
        assert text.count(fact) == 1, text
    assert git(home, "show", f"HEAD:{log}") == text
    put_back = git(home, "log", "-1", "--format=%an%n%s", "-S", "Swims on Sundays.", "--", log)
    assert put_back.splitlines() == ["syncd", f"Put back what a git rebase --abort took out of the branch in {log}"]
    assert "Swims on Sundays." in hits  # indexed too
    assert not git(home, "status", "--porcelain", "--", "memory")


def _aborted_then_a_persons_line(home: Path, tmp_path: Path, memory: MemoryManager) -> str:
    """An agent's "Swims on Sundays." committed during a rebase the person then aborts (dropping
    it), and "- Plays the cello." saved in the log by the person's editor after the abort, before
    anything put the dropped commit back. The log's path."""
    other = _other_machine(home, tmp_path)
    asyncio.run(memory.add_memory("Likes green tea.", "ana", dedup=False))
    log = _log(home)

    def add() -> None:
        asyncio.run(memory.add_memory("Swims on Sundays.", "ana", dedup=False))

    _rebase_failing_at_its_end(home, tmp_path, other, add)
    git(home, "rebase", "--abort")
    with open(home / log, "a") as handle:
        handle.write("- Plays the cello.\n")
    return log


def test_with_no_daemon_a_put_back_merged_with_the_persons_line_is_syncds_own_commit(home, embedder, tmp_path):
    """The process that wrote the dropped commit expected its file to hold what it wrote then;
    merged with a line the person saved after the abort, the file holds other bytes, and the
    put-back's commit was refused for them ("changed meanwhile"): the merge rode along in the
    agent's next commit, as the agent's. It is now committed as syncd's own change first."""
    with MemoryManager(home, embedder=embedder) as memory:
        log = _aborted_then_a_persons_line(home, tmp_path, memory)
        asyncio.run(memory.add_memory("Reads crime novels.", "ana", dedup=False))
    text = (home / log).read_text()
    for fact in ("Likes green tea.", "Swims on Sundays.", "Reads crime novels.", "Plays the cello."):
        assert text.count(fact) == 1, text
    put_back = git(home, "log", "-1", "--format=%an%n%s", "-S", "Swims on Sundays.", "--", log)
    assert put_back.splitlines() == ["syncd", f"Put back what a git rebase --abort took out of the branch in {log}"]


@pytest.mark.parametrize("writer", ["the next change with no daemon", "a daemon started after the abort"])
def test_a_put_back_leaves_the_persons_line_saved_after_the_abort_in_their_own_commit(home, embedder, tmp_path, writer):
    """The person saves a line after their `git rebase --abort`, before syncd puts back what the
    abort dropped: the put-back's commit (syncd's) held the person's line too, so `git log` and
    blame named syncd for it. Their edit is now committed first, as theirs (as the daemon
    commits any edit of theirs), and syncd's commit holds only what it puts back."""
    from .conftest import SUITE_GIT_NAME

    with MemoryManager(home, embedder=embedder) as memory:
        log = _aborted_then_a_persons_line(home, tmp_path, memory)
        if writer == "the next change with no daemon":
            asyncio.run(memory.add_memory("Reads crime novels.", "ana", dedup=False))
    if writer == "a daemon started after the abort":
        with running_daemon(home, embedder) as run:
            _abort_and_wait_for_the_put_back(home, log, aborted=True)
            run.settle()
            run.stop()
    text = (home / log).read_text()
    assert text.count("Swims on Sundays.") == 1 and text.count("Plays the cello.") == 1, text
    assert git(home, "show", f"HEAD:{log}") == text

    def added_by(fact: str) -> tuple[str, list[str]]:
        """The author of the commit that added ``fact``, and the lines it added to the log."""
        sha = git(home, "log", "-1", "--format=%H", "-S", fact, "--", log).strip()
        author = git(home, "show", "-s", "--format=%an", sha).strip()
        diff = git(home, "show", "--format=", "--unified=0", sha, "--", log).splitlines()
        return author, [line[1:] for line in diff if line.startswith("+") and not line.startswith("+++")]

    author, added = added_by("Plays the cello.")
    assert author == SUITE_GIT_NAME and added == ["- Plays the cello."], (author, added)
    author, added = added_by("Swims on Sundays.")
    assert author == "syncd" and "- Plays the cello." not in added, (author, added)
    assert [line for line in added if "Swims on Sundays." in line], added


def test_two_aborts_looked_at_once_put_back_both_commits(home):
    """Two `git rebase --abort`s, each dropping a commit of syncd's to one file, seen in one look:
    the second's merge was made from the tree and replaced the first's, and both entries were
    kept as looked at, so the first commit's line was never put back. Each is now merged into
    what the one before made of the file."""
    from syncd.home import Home
    from syncd.writes.rewind import PutBack

    write(home, "vault/Page.md", "# Page\n")
    git(home, "add", "-A")
    git(home, "commit", "-qm", "the person's page")
    put_back = PutBack(Home(home))
    assert put_back.dropped(_commit_as_is(home)) == {}
    _drop_a_commit_of_syncds(home, "vault/Page.md", "# Page\n\n- [note] First fact. <!-- id:a1 -->\n")
    _drop_a_commit_of_syncds(home, "vault/Page.md", "# Page\n\n- [note] Second fact. <!-- id:a2 -->\n")
    assert set(put_back.dropped(_commit_as_is(home))) == {"vault/Page.md"}
    text = (home / "vault/Page.md").read_text()
    assert text.count("First fact.") == 1 and text.count("Second fact.") == 1, text
    assert put_back.dropped(_commit_as_is(home)) == {}


def test_a_rewound_file_is_put_back_only_over_the_bytes_its_merge_was_made_from(home):
    """The daemon merges a rewound file from the bytes it looked at; a save of the person's
    between that look and the write was overwritten by a merge that lacks it. The write now
    compares against the bytes the merge was made from: the save stays, and the next pass
    merges again."""
    from syncd.home import Home
    from syncd.writes.rewind import PutBack

    rel = "vault/Page.md"
    write(home, rel, "# Page\n")
    git(home, "add", "-A")
    git(home, "commit", "-qm", "page")
    write(home, rel, "# Page\n- [note] Kept by syncd. <!-- id:x1 -->\n")
    git(home, "add", "-A")
    git(home, "commit", "-qm", "syncd's\n\nSyncd-Source: api")
    git(home, "checkout", "HEAD~1", "--", rel)  # a git command rewinds it, tree and index
    found = find_rewound(home, [rel])
    with open(home / rel, "a") as handle:
        handle.write("The person's new line.\n")
    assert not PutBack(Home(home)).write(rel, found[rel].data, "put back", over=found[rel].over)
    assert (home / rel).read_text() == "# Page\nThe person's new line.\n"


def _commit_as_is(home):
    """What a put-back's caller does with files edited since the abort: commits them as they
    are (here with git itself, as the person would)."""

    def commit(paths: list[str]) -> None:
        git(home, "add", "--", *paths)
        git(home, "commit", "-qm", "the person's edit", "--", *paths)

    return commit


def _abort_and_wait_for_the_put_back(home, log: str, aborted: bool = False) -> None:
    if not aborted:
        git(home, "rebase", "--abort")
        assert "Swims on Sundays." not in (home / log).read_text()  # what git itself leaves
    wait_for(lambda: "Swims on Sundays." in git(home, "show", f"HEAD:{log}"), 30, "the dropped commit put back")


def test_a_commit_of_the_persons_their_abort_took_out_stays_out(home, embedder, tmp_path):
    """Only syncd's commits are put back: one the person made (from another terminal, say) and
    their own abort dropped is theirs to have dropped."""
    other = _other_machine(home, tmp_path)
    with running_daemon(home, embedder) as run:
        _agent_facts(run.reader, "Likes green tea.")  # a commit the pull rebases
        run.settle()

        def commit() -> None:
            write(home, "vault/Mine.md", "# Mine\n\nThe person's page.\n")
            git(home, "add", "vault/Mine.md")
            git(home, "commit", "-qm", "the person's own commit")

        _rebase_failing_at_its_end(home, tmp_path, other, commit)
        git(home, "rebase", "--abort")
        _agent_facts(run.reader, "Swims on Sundays.")  # a pass of the daemon's after the abort
        run.settle()
        run.stop()
    assert not (home / "vault/Mine.md").exists()
    assert "vault/Mine.md" not in git(home, "ls-tree", "-r", "--name-only", "HEAD")


def test_dropped_commits_are_found_in_a_linked_worktree_home(tmp_path):
    """A home may be a linked worktree: its branch's reflog is in the shared git folder."""
    from syncd.writes.rewind import DroppedCommits

    main = tmp_path / "main"
    git(tmp_path, "init", "-q", "-b", "main", str(main))
    write(main, "a.md", "# A\n")
    git(main, "add", "-A")
    git(main, "commit", "-qm", "start")
    home = tmp_path / "home"
    git(main, "worktree", "add", "-q", "-b", "work", str(home))
    state = tmp_path / "state.json"
    dropped = DroppedCommits(home, state)
    assert dropped.find() == {}
    before = git(home, "rev-parse", "HEAD").strip()
    write(home, "a.md", "# A\n- [note] Kept by syncd. <!-- id:x1 -->\n")
    git(home, "commit", "-qam", "syncd's\n\nSyncd-Source: api")
    # What `git rebase --abort` leaves: the branch set back, with its words in the reflog.
    git(home, "update-ref", "-m", "rebase (abort): returning to refs/heads/work", "refs/heads/work", before)
    git(home, "reset", "-q", "--hard")
    assert dropped.find() == {"a.md": Merged(b"# A\n- [note] Kept by syncd. <!-- id:x1 -->\n", b"# A\n")}
    dropped.looked()
    assert dropped.find() == {}  # looked at once
    assert DroppedCommits(home, state).find() == {}  # and by the next daemon, not again


def _drop_a_commit_of_syncds(home: Path, rel: str, text: str) -> None:
    """What `git rebase --abort` leaves after a commit of syncd's landed under the rebase: the
    branch set back, with its words in the reflog, and the tree as the branch has it."""
    before = git(home, "rev-parse", "HEAD").strip()
    write(home, rel, text)
    git(home, "add", "-A")
    git(home, "commit", "-qm", "syncd's\n\nSyncd-Source: api")
    git(home, "update-ref", "-m", "rebase (abort): returning to refs/heads/main", "refs/heads/main", before)
    git(home, "reset", "-q", "--hard")


def test_an_entry_is_kept_as_looked_at_only_once_its_files_are_written(home):
    """Found but not written back (the writer was killed between, or a file changed under the
    write): the entry is looked at again, by this writer and by the next. Before, the look kept
    it at once, and reading the state file again undid look_again."""
    from syncd.writes.rewind import DroppedCommits

    state = home.parent / "dropped.json"
    dropped = DroppedCommits(home, state)
    _drop_a_commit_of_syncds(home, "vault/Page.md", "# Page\n\nKept by syncd.\n")
    found = dropped.find()
    assert set(found) == {"vault/Page.md"}
    assert DroppedCommits(home, state).find() == found  # a writer killed before the write
    dropped.look_again()
    assert dropped.find() == found
    dropped.looked()
    assert dropped.find() == {}
    assert DroppedCommits(home, state).find() == {}


def test_put_back_leaves_a_file_changed_after_the_merge_read_it(home):
    """The merge is made from the tree's bytes when it looked; a save of the person's landing
    after that look is not overwritten with a merge that lacks it: the file stays as they saved
    it, and the next look merges again."""
    from syncd.home import Home
    from syncd.writes.rewind import PutBack

    put_back = PutBack(Home(home))
    assert put_back.dropped(_commit_as_is(home)) == {}
    _drop_a_commit_of_syncds(home, "vault/Page.md", "# Page\n\nKept by syncd.\n")
    found = put_back._dropped.find()  # white-box: the look, then a save before the write
    write(home, "vault/Page.md", "# Page\n\nThe person's line.\n")
    assert not put_back.write(
        "vault/Page.md", found["vault/Page.md"].data, "put back", over=found["vault/Page.md"].over
    )
    assert (home / "vault/Page.md").read_text() == "# Page\n\nThe person's line.\n"
    put_back._dropped.look_again()
    assert set(put_back.dropped(_commit_as_is(home))) == {"vault/Page.md"}
    merged = (home / "vault/Page.md").read_text()
    assert "The person's line." in merged and "Kept by syncd." in merged


def test_a_binary_file_changed_on_both_sides_does_not_stop_the_rest_being_put_back(home):
    """A file that is not text, written by the dropped commit and again since, cannot be merged
    line by line (it was, into a garbled picture): it stays as it is now, and the dropped
    commit's other files are put back all the same."""
    from syncd.writes.rewind import DroppedCommits

    dropped = DroppedCommits(home, home.parent / "dropped.json")
    before = git(home, "rev-parse", "HEAD").strip()
    (home / "vault/photo.png").write_bytes(b"\x89PNG\x00first")
    write(home, "vault/Page.md", "# Page\n\nKept by syncd.\n")
    git(home, "add", "-A")
    git(home, "commit", "-qm", "syncd's\n\nSyncd-Source: editor")
    git(home, "update-ref", "-m", "rebase (abort): returning to refs/heads/main", "refs/heads/main", before)
    git(home, "reset", "-q", "--hard")
    (home / "vault/photo.png").write_bytes(b"\x89PNG\x00second")
    found = dropped.find()
    assert found == {"vault/Page.md": Merged(b"# Page\n\nKept by syncd.\n", None)}
    assert (home / "vault/photo.png").read_bytes() == b"\x89PNG\x00second"


_SHA = st.text("0123456789abcdef", min_size=40, max_size=40)
_ENTRY = st.tuples(
    _SHA,
    _SHA,
    st.text(st.characters(blacklist_characters="<>\n\t\r", blacklist_categories=("Cs",)), min_size=1, max_size=30),
    st.integers(0, 2**33),
    st.text(st.characters(blacklist_characters="\n", blacklist_categories=("Cs",)), max_size=200),
)


@settings(max_examples=60, deadline=None)
@given(
    entries=st.lists(_ENTRY, max_size=120), torn=st.sampled_from(["", "abc", "0" * 40 + " 1"]), pad=st.integers(0, 3)
)
def test_the_reflog_file_is_read_from_its_end_as_git_reflog_reads_it(tmp_path_factory, entries, torn, pad):
    """The branch's reflog is read from the file's end (every commit pass of a writer reads it):
    its last entries, oldest first, whatever the file's length, names and messages (tabs in a
    message included), and a torn last line skipped."""
    # white-box: the reflog reader is a parser of git's file format; its law is tested directly.
    from syncd.writes.rewind import _reflog_tail

    path = tmp_path_factory.mktemp("reflog") / "main"
    # A long history before them, so that the entries asked for lie past the first block read.
    filler = [("1" * 40, "2" * 40, "Someone", 1, "commit: " + "x" * 300)] * (pad * 40)
    lines = [
        f"{a} {b} {name} <p@example.org> {when} +0100\t{message}" for a, b, name, when, message in filler + entries
    ]
    path.write_bytes("".join(line + "\n" for line in lines).encode() + torn.encode())
    got = _reflog_tail(path, 50)
    want = [(a, b, when, message) for a, b, _, when, message in (filler + entries)[-50:]]
    assert [(e.move[0], e.move[1], e.when, e.message) for e in got] == want
    assert _reflog_tail(path.with_name("missing"), 50) == []


def test_a_daemon_starting_puts_back_a_dropped_commit_whose_file_its_index_already_holds(home, embedder):
    """A commit of syncd's that `git rebase --abort` took out of the branch, in a file whose
    bytes after the abort are the ones the index already holds (it had indexed the rebase's own
    checkout of it): the starting daemon finds nothing changed to commit, and the put-back, made
    by commit passes only, waited for the next change anywhere in the home. It now looks at the
    start (and after each move of git's) whatever is pending."""
    rel = "vault/Page.md"
    write(home, rel, "# Page\n")
    git(home, "add", "-A")
    git(home, "commit", "-qm", "the person's page")
    with syncd.open(home, embedder=embedder) as engine:
        engine.sync()
        # White-box: a writer's first look, as a daemon running before the rebase made one (the
        # aborts looked for are those after a writer first looked).
        assert engine.writes.put_back.dropped(_commit_as_is(home)) == {}
    _drop_a_commit_of_syncds(home, rel, "# Page\n\n- [note] Kept by syncd. <!-- id:k1 -->\n")
    assert (home / rel).read_text() == "# Page\n"  # as the index holds it
    with running_daemon(home, embedder):
        wait_for(lambda: "Kept by syncd." in git(home, "show", f"HEAD:{rel}"), 30, "the dropped commit put back")


def test_a_sessions_json_files_a_dropped_commit_made_are_merged_back_as_json(home):
    """A dropped commit of syncd's made a session's files that the tree now holds otherwise (the
    turn ran again after the abort): merged back line by line without a base, HEAD's lines came
    after the closing brace, and session.json was no longer JSON ("Extra data"), so the next
    turn of the session failed with ParseError. Merged by their kind, they stay JSON."""
    from syncd.writes.rewind import _merged_back  # white-box: the merge the put-back writes

    folder = "memory/users/bob/sessions/s3"
    base = git(home, "rev-parse", "HEAD").strip()

    def session(active: str, turns: int) -> str:
        fields = {"created_at": "2026-12-07T05:00:00+00:00", "last_active_at": active, "turn_count": turns}
        return json.dumps(fields, indent=2) + "\n"

    write(home, f"{folder}/session.json", session("2026-12-07T05:01:00+00:00", 1))
    write(home, f"{folder}/transcript.jsonl", '{"role": "user", "content": "first"}\n')
    git(home, "add", "-A")
    git(home, "commit", "-qm", "a turn of syncd's that a git command then dropped")
    dropped = git(home, "rev-parse", "HEAD").strip()
    git(home, "reset", "-q", "--hard", base)
    write(home, f"{folder}/session.json", session("2026-12-07T05:02:00+00:00", 1))
    write(home, f"{folder}/transcript.jsonl", '{"role": "user", "content": "again"}\n')
    merged = _merged_back(home, base, dropped, {})
    meta = json.loads(merged[f"{folder}/session.json"].data)
    assert meta["last_active_at"] == "2026-12-07T05:02:00+00:00"
    lines = merged[f"{folder}/transcript.jsonl"].data.decode().splitlines()
    assert [json.loads(line)["content"] for line in lines] == ["again", "first"]
