"""Commits made as a chain (trees and commits written by syncd, one update-ref for several
turns): each turn is its own commit with exactly its paths, the same commits one-by-one committing
would make, whatever the names; a HEAD that moves meanwhile loses nothing. Real git repositories."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from syncd.errors import GitBusyError
from syncd.history import chain as history_chain
from syncd.history.chain import PlannedCommit, commit_chain
from syncd.history.git import head_sha
from syncd.history.staging import commit_exact

from .daemon_helpers import git, isolate_git_identity


@pytest.fixture(autouse=True)
def global_gitconfig(tmp_path, monkeypatch):
    return isolate_git_identity(tmp_path, monkeypatch)


def _repo(root: Path) -> Path:
    root.mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    (root / "seed.md").write_text("# seed\n")
    git(root, "add", "seed.md")
    git(root, "-c", "user.name=t", "-c", "user.email=t@x", "commit", "-qm", "seed")
    return root


def _plain(messages: list[str]):
    return lambda changes, _read: [m if entries else "" for m, entries in zip(messages, changes)]


def _files(root: Path, sha: str) -> dict[str, str]:
    out = git(root, "ls-tree", "-r", "-z", sha)
    return {rec.split("\t", 1)[1]: rec.split()[2] for rec in out.split("\0") if "\t" in rec}


def test_each_turn_is_its_own_commit_with_exactly_its_paths(tmp_path):
    root = _repo(tmp_path / "r")
    (root / "a.md").write_text("A\n")
    (root / "b.md").write_text("B\n")
    (root / "seed.md").unlink()
    (root / "theirs.md").write_text("staged by the user\n")
    git(root, "add", "theirs.md")
    made = commit_chain(root, [PlannedCommit(("a.md",), (), "ana-agent", "a@x"),
                               PlannedCommit(("b.md",), ("seed.md",), "bob-agent", "b@x")],
                        _plain(["first", "second"]))  # fmt: skip
    shas = [sha for sha, _ in made]
    assert shas[1] == head_sha(root) and git(root, "rev-parse", "HEAD^").strip() == shas[0]
    assert git(root, "log", "-2", "--format=%an %s").splitlines() == ["bob-agent second", "ana-agent first"]
    assert git(root, "show", "--name-status", "--format=", shas[0]).split() == ["A", "a.md"]
    assert git(root, "show", "--name-status", "--format=", shas[1]).split() == ["A", "b.md", "D", "seed.md"]
    # Ours are clean, the user's staged file is still staged and in no commit of ours.
    assert git(root, "status", "--porcelain").splitlines() == ["A  theirs.md"]
    assert not git(root, "for-each-ref", "refs/syncd").strip()


def test_a_turn_whose_paths_already_match_head_makes_no_commit(tmp_path):
    root = _repo(tmp_path / "r")
    before = head_sha(root)
    (root / "new.md").write_text("N\n")
    made = commit_chain(root, [PlannedCommit(("seed.md",), (), "a", "a@x"), PlannedCommit(("new.md",), (), "b", "b@x")],
                        _plain(["nothing", "new"]))  # fmt: skip
    assert made[0] == (None, []) and made[1][0] == head_sha(root)
    assert git(root, "rev-parse", "HEAD^").strip() == before


def test_the_first_commits_of_an_empty_repository(tmp_path):
    root = tmp_path / "r"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / "a.md").write_text("A\n")
    (root / "b.md").write_text("B\n")
    made = commit_chain(root, [PlannedCommit(("a.md",), (), "a", "a@x"), PlannedCommit(("b.md",), (), "b", "b@x")],
                        _plain(["first", "second"]))  # fmt: skip
    assert made[1][0] == head_sha(root) and [[c.status for c in changes] for _, changes in made] == [["A"], ["A"]]
    assert git(root, "rev-list", "--count", "HEAD").strip() == "2"


def test_a_git_add_of_the_users_while_a_chain_commits_is_kept_and_never_committed_by_it(tmp_path, monkeypatch):
    """A chain stages into a copy of git's index and takes it in under git's own index lock: the
    user's `git add` in the middle of the pass makes the pass give up (GitBusyError, nothing
    moved, their staging kept), and the next pass commits ours with their file still staged and
    out of every commit of ours."""
    root = _repo(tmp_path / "r")
    for name in ("a.md", "b.md", "theirs.md"):
        (root / name).write_text(f"{name}\n")
    real = history_chain.run_git
    head = head_sha(root)

    def racing(where, *args, **kwargs):
        if args[:1] == ("ls-files",):
            git(where, "add", "theirs.md")
        return real(where, *args, **kwargs)

    turns = [PlannedCommit(("a.md",), (), "a", "a@x"), PlannedCommit(("b.md",), (), "b", "b@x")]
    monkeypatch.setattr(history_chain, "run_git", racing)
    with pytest.raises(GitBusyError, match="index changed"):
        commit_chain(root, turns, _plain(["one", "two"]))
    assert head_sha(root) == head
    assert sorted(git(root, "status", "--porcelain").splitlines()) == ["?? a.md", "?? b.md", "A  theirs.md"]
    monkeypatch.setattr(history_chain, "run_git", real)
    made = commit_chain(root, turns, _plain(["one", "two"]))
    assert [git(root, "show", "--name-only", "--format=", sha).split() for sha, _ in made] == [["a.md"], ["b.md"]]
    assert git(root, "status", "--porcelain").splitlines() == ["A  theirs.md"]


def test_head_moving_before_the_ref_update_loses_nothing(tmp_path, monkeypatch):
    """HEAD moved by the user between writing our commits and our update-ref (plumbing, which
    needs no index lock; a commit from another worktree of the branch does the same): ours is
    refused as a whole (GitBusyError), nothing is staged, and the next pass commits on top."""
    root = _repo(tmp_path / "r")
    (root / "a.md").write_text("A\n")
    (root / "user.md").write_text("U\n")
    real = history_chain.run_git

    def racing(where, *args, **kwargs):
        if args[:1] == ("update-ref",) and "--stdin" in args:
            env = {**os.environ, "GIT_INDEX_FILE": str(tmp_path / "their-index")}
            for step in (["read-tree", "HEAD"], ["update-index", "--add", "user.md"]):
                subprocess.run(["git", *step], cwd=where, env=env, check=True)
            tree = subprocess.run(
                ["git", "write-tree"], cwd=where, env=env, check=True, capture_output=True, text=True
            ).stdout.strip()
            commit = subprocess.run(
                ["git", "-c", "user.name=u", "-c", "user.email=u@x", "commit-tree", tree, "-p", "HEAD", "-m", "theirs"],
                cwd=where,
                check=True,
                capture_output=True,
                text=True,
            ).stdout.strip()
            subprocess.run(["git", "update-ref", "HEAD", commit], cwd=where, check=True)
        return real(where, *args, **kwargs)

    monkeypatch.setattr(history_chain, "run_git", racing)
    (root / "b.md").write_text("B\n")
    turns = [PlannedCommit(("a.md",), (), "a", "a@x"), PlannedCommit(("b.md",), (), "b", "b@x")]
    with pytest.raises(GitBusyError, match="HEAD moved"):
        commit_chain(root, turns, _plain(["ours", "ours too"]))
    monkeypatch.setattr(history_chain, "run_git", real)
    assert git(root, "log", "-1", "--format=%s").strip() == "theirs"
    assert not git(root, "for-each-ref", "refs/syncd").strip()
    made = commit_chain(root, turns, _plain(["ours", "ours too"]))
    assert made[1][0] == head_sha(root)
    assert git(root, "log", "-3", "--format=%s").splitlines() == ["ours too", "ours", "theirs"]
    git(root, "reset", "-q")  # the index from before their plumbing commit: refreshed from HEAD
    assert not git(root, "status", "--porcelain").strip()


_NAMES = st.sampled_from(["a.md", "b c.md", 'q"uote.md', "dir/é.md", "dir/sub/x.md", "back\\slash.md", "tab\tname.md"])
_CONTENT = st.sampled_from(["one\n", "two\n", "three\n"])
_TURN = st.dictionaries(_NAMES, st.one_of(st.none(), _CONTENT), min_size=1, max_size=3)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(turns=st.lists(_TURN, min_size=1, max_size=4))
def test_a_chain_makes_the_commits_one_by_one_committing_makes(tmp_path_factory, turns):
    """Generated turns over shared names (edits, deletions, names that need quoting): the chain's
    commits have the trees, authors and messages of committing each turn alone, in order. Each turn
    here writes its files first, then all are committed, as queued turns are (disjoint paths per
    turn are what the engine queues; overlapping ones take the last content, in both)."""
    base = tmp_path_factory.mktemp("chain")
    roots = {kind: _repo(base / kind) for kind in ("chain", "single")}
    owner: dict[str, int] = {}
    for n, turn in enumerate(turns):
        for rel in turn:
            owner[rel] = n  # the last turn that writes a path is the one that commits it
    for root in roots.values():
        for turn in turns:
            for rel, text in turn.items():
                path = root / rel
                if text is None:
                    path.unlink(missing_ok=True)
                else:
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_text(text)
    planned = []
    for n in range(len(turns)):
        mine = sorted(rel for rel, who in owner.items() if who == n)
        present = tuple(rel for rel in mine if (roots["chain"] / rel).exists())
        planned.append(PlannedCommit(present, tuple(rel for rel in mine if rel not in present), f"agent{n}", f"{n}@x"))
    messages = [f"turn {n}" for n in range(len(turns))]
    made = commit_chain(roots["chain"], planned, _plain(messages))
    single = [commit_exact(roots["single"], p.present, p.removed, m, p.author_name, p.author_email)
              for p, m in zip(planned, messages)]  # fmt: skip
    assert [bool(sha) for sha, _ in made] == [bool(sha) for sha, _ in single]
    assert [c for _, c in made] == [c for _, c in single]
    for (a, _), (b, _) in zip(made, single):
        if a:
            assert _files(roots["chain"], a) == _files(roots["single"], b)
            assert git(roots["chain"], "log", "-1", "--format=%an <%ae>%n%B", a) == git(
                roots["single"], "log", "-1", "--format=%an <%ae>%n%B", b
            )
    assert git(roots["chain"], "status", "--porcelain") == git(roots["single"], "status", "--porcelain")
