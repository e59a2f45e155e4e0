"""Git history: readable commit messages, provenance from intents, log, blame, revert, status."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import syncd
from syncd.cli import main
from syncd.errors import HistoryError, NotFoundError
from syncd.history.blame import fact_history
from syncd.history.committer import commit_changes
from syncd.history.git import git_busy, git_reason, run_git
from syncd.history.intents import Intent, record_intent
from syncd.history.log import read_log
from syncd.history.revert import revert_commit
from syncd.home import Home, blob_sha

from .daemon_helpers import (
    daily_log,
    git,
    isolate_git_identity,
    running_daemon,
    subjects,
)
from .helpers import assert_matches_rebuild, write

LOG = "memory/users/ana/2026-11-22.md"
FACTS = [
    "Likes green tea in the morning.",
    "Works as a nurse in Lyon.",
    "Is allergic to peanuts.",
    "Has a cat called Miso.",
]


@pytest.fixture(autouse=True)
def global_gitconfig(tmp_path, monkeypatch):
    return isolate_git_identity(tmp_path, monkeypatch)


def _commit(home, paths=None):
    return commit_changes(Home(home), syncd.Settings(), paths)


def test_messages_say_what_changed(home):
    write(home, LOG, daily_log(FACTS[:3]))
    _commit(home)
    assert subjects(home)[0] == f"+3 facts in {LOG}"
    write(home, LOG, daily_log(FACTS[:2]))
    _commit(home)
    assert subjects(home)[0] == f"-1 fact in {LOG}"
    write(home, "vault/Tea.md", "# Tea\n\nGreen.\n")
    _commit(home)
    write(home, "vault/Tea.md", "# Tea\n\nGreen and grassy.\n")
    _commit(home)
    assert subjects(home)[:2] == ["edit vault/Tea.md", "add vault/Tea.md"]
    (home / "vault/Tea.md").rename(home / "vault/Green tea.md")
    _commit(home)
    assert subjects(home)[0] == "move vault/Tea.md -> vault/Green tea.md"
    write(home, "memory/users/bob/2026-11-22.md", daily_log(FACTS[3:]))
    (home / LOG).unlink()
    _commit(home)
    body = git(home, "log", "-1", "--format=%B")
    assert subjects(home)[0] == "+1 fact, -2 facts in 2 files"
    assert f"-2 facts in {LOG}" in body and "Syncd-Source: editor" in body
    assert git(home, "log", "-1", "--format=%an <%ae>").strip() == "syncd user <user@syncd.local>"


def test_one_agent_turn_is_one_commit_with_its_provenance(home, embedder):
    turn = {
        "author": "tutor-bot",
        "user": "ana",
        "chat": "c1",
        "session": "s9",
        "turn": "t3",
        "transcript_line": 42,
        "model": "gpt-test",
        "prompt_version": "extract-v2",
    }
    with running_daemon(home, embedder) as run:
        run.settle()
        with run.reader.changes():  # one turn's writes: one group, one commit
            run.reader.write_file(LOG, daily_log(FACTS[:2]).encode(), intent=Intent(summary="remember tea", **turn))
            run.reader.write_file(
                "memory/users/ana/MEMORY.md",
                b"# Ana\n\n- [identity] Nurse in Lyon.\n",
                intent=Intent(summary="update profile", **turn),
            )
        write(home, "vault/Hand.md", "# Hand\n\nTyped by a person.\n")
        run.settle()
        run.stop()
        agent = git(home, "log", "--author=tutor-bot", "--format=%H").split()
        assert len(agent) == 1
        shown = git(home, "show", "--name-only", "--format=%an <%ae>%n%B", agent[0])
        assert "tutor-bot <tutor-bot@agents.syncd.local>" in shown
        for trailer in (
            "Syncd-Session: s9",
            "Syncd-Turn: t3",
            "Syncd-Transcript-Line: 42",
            "Syncd-Model: gpt-test",
            "Syncd-Prompt-Version: extract-v2",
            "Syncd-User: ana",
            "Syncd-Source: api",
        ):
            assert trailer in shown
        assert LOG in shown and "memory/users/ana/MEMORY.md" in shown and "vault/Hand.md" not in shown
        human = git(home, "log", "-1", "--format=%an", "--", "vault/Hand.md").strip()
        assert human == "syncd user"
        assert_matches_rebuild(run.engine)


def test_log_lists_commits_with_trailers(home, capsys):
    write(home, LOG, daily_log(FACTS[:1]))
    record_intent(Home(home), LOG, blob_sha((home / LOG).read_bytes()), Intent(author="bot", session="s1", turn="1"))
    _commit(home)
    entries = read_log(home, LOG)
    assert len(entries) == 1 and entries[0].author == "bot"
    assert entries[0].trailers["Syncd-Session"] == "s1" and entries[0].files == (LOG,)
    assert main(["log", "--home", str(home), LOG]) == 0
    out = capsys.readouterr().out
    assert "+1 fact in " + LOG in out and "Syncd-Turn: 1" in out
    assert main(["log", "--home", str(home), "--json", "-n", "5"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 2


def test_log_paths_are_read_from_the_current_folder_and_never_leave_the_home(home, capsys, monkeypatch):
    write(home, LOG, daily_log(FACTS[:1]))
    _commit(home)
    # Handed to git as it was, "../etc" came back as "git log failed: fatal: ... outside repository".
    assert main(["log", "--home", str(home), "../etc"]) != 0
    err = capsys.readouterr().err
    assert err.startswith("syncd: error:") and "outside the home" in err and "git" not in err
    # From a folder inside the home, a path is relative to it, as git (and a shell) read it.
    monkeypatch.chdir(home / Path(LOG).parent.parent)
    assert main(["log", "--home", str(home), Path(LOG).parent.name]) == 0
    assert LOG in capsys.readouterr().out
    assert main(["log", "--home", str(home), "../../vault/../" + LOG]) == 0
    assert LOG in capsys.readouterr().out


def test_blame_refuses_what_is_no_fact_id_in_one_short_line(home, engine, capsys):
    # The id went into the message whole: 100,000 characters of "no fact 'aaaa...'" on stderr.
    for fact_id in ("", "a" * 100_000, "a b"):
        assert main(["blame", "--home", str(home), fact_id]) != 0
        err = capsys.readouterr().err
        assert err.startswith("syncd: error: bad fact id") and len(err) < 200 and err.count("\n") == 1


def _fact_id(engine, text):
    return next(h.id for h in engine.search(text, kind="fact", limit=5) if h.content == text)


def test_blame_finds_the_commit_that_introduced_a_fact_and_later_edits(home, engine, capsys):
    write(home, LOG, daily_log(FACTS[:2]))
    first = _commit(home)[0]
    write(home, LOG, daily_log(FACTS[:2]).replace("- [preference] Works", "- [identity] Works"))
    second = _commit(home)[0]
    write(
        home,
        LOG,
        daily_log(FACTS[:2]).replace("- [preference] Works", "- [identity] Works")
        + "- [preference] Is allergic to peanuts.\n",
    )
    _commit(home)
    engine.sync()
    fact = engine.index.find_fact(_fact_id(engine, FACTS[1]))[0]
    history = fact_history(home, fact["path"], fact["line"], fact["text"])
    assert history.introduced.sha == first
    assert [e.sha for e in history.edits] == [second]
    assert main(["blame", "--home", str(home), fact["id"]]) == 0
    out = capsys.readouterr().out
    assert "introduced by" in out and first[:10] in out and second[:10] in out
    # ... and offers the revision to search the memory as it stood then
    assert f"--at {first[:12]}" in out
    assert main(["blame", "--home", str(home), "--json", fact["id"]]) == 0
    assert json.loads(capsys.readouterr().out)[0]["at"] == first
    with pytest.raises(NotFoundError):
        fact_history(home, "vault/none.md", 1, "x")
    assert main(["blame", "--home", str(home), "h-000000"]) == 1


def test_revert_one_agent_turn_and_the_index_follows(home, embedder):
    write(home, LOG, daily_log(FACTS[:1]))
    _commit(home)
    write(home, LOG, daily_log(FACTS[:3]))
    record_intent(Home(home), LOG, blob_sha((home / LOG).read_bytes()), Intent(author="bot", turn="7"))
    turn = _commit(home)[0]
    with syncd.open(home, embedder=embedder) as engine:
        engine.sync()
    assert main(["revert", "--home", str(home), turn]) == 0
    assert (home / LOG).read_text() == daily_log(FACTS[:1])
    assert subjects(home)[0].startswith('Revert "')
    with syncd.open(home, embedder=embedder) as engine:
        assert engine.status().fresh and not engine.status().uncommitted
        assert engine.index.meta()["aligned_commit"] == git(home, "rev-parse", "HEAD").strip()
        assert engine.index.counts()["facts"] == 1
        assert_matches_rebuild(engine)
    with pytest.raises(NotFoundError):
        revert_commit(home, "no-such-commit", "x", "x@y")


def _merge_commit(home) -> str:
    """A merge of a side branch into main (a pull's merge, say); its sha."""
    git(home, "checkout", "-q", "-b", "side")
    write(home, "vault/side.md", "# Side\n")
    git(home, "add", "-A")
    git(home, "commit", "-q", "-m", "side")
    git(home, "checkout", "-q", "main")
    write(home, "vault/main.md", "# Main\n")
    git(home, "add", "-A")
    git(home, "commit", "-q", "-m", "main")
    git(home, "merge", "-q", "--no-edit", "side")
    return git(home, "rev-parse", "HEAD").strip()


def test_a_git_failure_says_gits_first_error_line_not_its_last(home):
    """git says the cause first ("error: commit ... is a merge but no -m option was given.") and
    ends with "fatal: revert failed": the cause is what the person is shown."""
    merge = _merge_commit(home)
    with pytest.raises(HistoryError) as info:
        run_git(home, "revert", "--no-edit", merge)
    assert info.value.detail == f"error: commit {merge} is a merge but no -m option was given."
    assert git_reason("hint: one\nwarning: two\nthe last\n") == "the last" and git_reason("\n") == ""


def test_revert_says_what_is_wrong_with_a_bad_target_and_what_to_do(home, capsys):
    """Unknown, on another branch, a merge, already undone, the home's first: one line each naming
    the commit and the way on, exit 1, and nothing changed."""
    merge = _merge_commit(home)
    git(home, "checkout", "-q", "-b", "elsewhere", "main~1")
    write(home, "vault/elsewhere.md", "# Elsewhere\n")
    git(home, "add", "-A")
    git(home, "commit", "-q", "-m", "elsewhere")
    elsewhere = git(home, "rev-parse", "HEAD").strip()
    git(home, "checkout", "-q", "main")
    assert main(["revert", "--home", str(home), "HEAD^2"]) == 0  # the side branch's commit
    capsys.readouterr()
    head = git(home, "rev-parse", "HEAD").strip()
    first = git(home, "rev-list", "--max-parents=0", "HEAD").strip()  # `syncd init`'s: it was reverted
    cases = {
        first: f"commit {first[:10]} is the first commit of this home; reverting it would delete every file",
        "deadbeef": "no commit 'deadbeef' in this home's history; `syncd log` lists the commits",
        elsewhere: f"commit {elsewhere[:10]} is not in the history of this home's branch; `syncd log`",
        merge: f"commit {merge[:10]} is a merge; revert the commits it brought in, one at a time",
        "HEAD~1^2": "what it changed is already undone on this branch (reverted before?); nothing to revert",
    }
    for target, said in cases.items():
        assert main(["revert", "--home", str(home), target]) == 1
        err = capsys.readouterr().err
        assert said in err and err.count("\n") == 1, err
    assert git(home, "rev-parse", "HEAD").strip() == head
    assert git(home, "status", "--porcelain", "--untracked-files=no") == ""


def test_revert_beside_a_running_daemon(home, embedder):
    with running_daemon(home, embedder) as run:
        write(home, LOG, daily_log(FACTS[:2]))
        run.settle()
        added = git(home, "rev-parse", "HEAD").strip()
        assert main(["revert", "--home", str(home), added]) == 0
        run.settle()
        assert not (home / LOG).exists() and LOG not in run.reader.index.files()
        run.stop()
        assert subjects(home)[0].startswith('Revert "')
        assert_matches_rebuild(run.engine)


def test_status_names_uncommitted_changes(home, engine):
    engine.sync()
    write(home, LOG, daily_log(FACTS[:1]))
    status = engine.status()
    assert status.stale["new"] == [LOG] and status.uncommitted == []
    engine.sync()
    assert engine.status().uncommitted == [LOG]
    engine.commit()
    assert engine.status().uncommitted == []


def test_git_busy_reports_the_users_operation_and_a_stale_lock(home):
    assert git_busy(home) is None
    lock = home / ".git/index.lock"
    lock.write_bytes(b"")
    assert "index.lock present" in git_busy(home)
    os.utime(lock, (0, 0))
    assert "remove" in git_busy(home)
    lock.unlink()
    (home / ".git/MERGE_HEAD").write_text("0" * 40 + "\n")
    assert "MERGE_HEAD" in git_busy(home)


def test_an_intent_not_synced_is_still_whole_and_its_stale_temp_files_go(home):
    """An intent for a write this process commits is renamed into place unsynced (intents.py):
    read back whole, committed as the agent; a temporary file a kill left behind is dropped with
    the stale intents, a day on."""
    rel = "memory/users/ana/2026-03-14.md"
    write(home, rel, "# 2026-03-14\n\n- [context] Likes tea.\n")
    record_intent(Home(home), rel, blob_sha((home / rel).read_bytes()), Intent(author="bot", turn="3"), durable=False)
    folder = Home(home).private_dir / "intents"
    left = folder / ".abc-123.json.deadbeef.tmp"
    left.write_bytes(b'{"path": "half')
    day_ago = os.stat(left).st_mtime - 2 * 24 * 3600
    os.utime(left, (day_ago, day_ago))
    commit_changes(Home(home), syncd.Settings())
    assert git(home, "log", "-1", "--format=%an %(trailers:key=Syncd-Turn,valueonly)").split() == ["bot", "3"]
    assert not left.exists() and not list(folder.glob("*.json"))
