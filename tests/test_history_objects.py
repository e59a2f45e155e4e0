"""Trees and commits written by syncd itself (objects.py) are the objects git would write: the
same ids as ``git write-tree`` for any set of paths, built at once or change by change, valid to
``git fsck --strict``, in SHA-1 and SHA-256 repositories and in a linked worktree. Real git."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from syncd.history.chain import PlannedCommit, commit_chain
from syncd.history.git import head_sha
from syncd.history.objects import ObjectStore

from .daemon_helpers import git, isolate_git_identity


@pytest.fixture(autouse=True)
def global_gitconfig(tmp_path, monkeypatch):
    return isolate_git_identity(tmp_path, monkeypatch)


def _blob(root: Path, text: str) -> str:
    return subprocess.run(["git", "hash-object", "-w", "--stdin"], cwd=root, input=text.encode(),
                          capture_output=True, check=True).stdout.decode().strip()  # fmt: skip


def _gits_tree(root: Path, files: dict[str, tuple[str, str]]) -> str:
    """The tree git itself writes for ``files`` ({path: (mode, blob)}), from a private index."""
    env = {"GIT_INDEX_FILE": str(root / ".git" / "test-index")}
    listing = "".join(f"{mode} {sha}\t{rel}\0" for rel, (mode, sha) in files.items())
    subprocess.run(["git", "read-tree", "--empty"], cwd=root, env={**_environ(), **env}, check=True)
    subprocess.run(["git", "update-index", "-z", "--index-info"], cwd=root, input=listing.encode("utf-8", "surrogateescape"),
                   env={**_environ(), **env}, check=True)  # fmt: skip
    out = subprocess.run(["git", "write-tree"], cwd=root, env={**_environ(), **env}, capture_output=True, check=True)
    return out.stdout.decode().strip()


def _environ() -> dict[str, str]:
    import os

    return dict(os.environ)


# Names chosen to exercise git's order: "a.md" < "a/" < "a0" (a folder sorts as if it ended in /).
_PARTS = st.sampled_from(["a", "a.md", "a0", "b", "é", "sp ace", "a-b", "z"])
_PATHS = st.lists(_PARTS, min_size=1, max_size=3).map("/".join)
_MODES = st.sampled_from(["100644", "100755"])


def _consistent(files: dict[str, tuple[str, str]]) -> dict[str, tuple[str, str]]:
    """Drop paths that are both a file and a folder of another path (no index can hold both)."""
    keep = {}
    for rel in sorted(files, key=lambda r: (r.count("/"), r)):
        parts = rel.split("/")
        if any("/".join(parts[:n]) in keep for n in range(1, len(parts))):
            continue
        if any(other.startswith(rel + "/") for other in keep):
            continue
        keep[rel] = files[rel]
    return keep


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    root = tmp_path_factory.mktemp("objects") / "r"
    root.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=root, check=True)
    return root, [_blob(root, f"text {n}\n") for n in range(3)]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(first=st.dictionaries(_PATHS, st.tuples(_MODES, st.integers(0, 2)), max_size=8),
       second=st.dictionaries(_PATHS, st.one_of(st.none(), st.tuples(_MODES, st.integers(0, 2))), max_size=6))  # fmt: skip
def test_trees_are_the_trees_git_writes_built_at_once_or_change_by_change(repo, first, second):
    root, blobs = repo
    before = _consistent({rel: (mode, blobs[n]) for rel, (mode, n) in first.items()})
    # The second step removes paths or sets them; whatever both steps leave must be a tree git
    # could hold, so a set path's folders and sub-paths make way for it.
    after = dict(before)
    changes: dict[str, tuple[str, str] | None] = {}
    for rel, value in second.items():
        if value is None:
            after.pop(rel, None)
            changes[rel] = None
        else:
            clash = [o for o in after if o.startswith(rel + "/") or rel.startswith(o + "/")]
            for other in clash:
                after.pop(other)
                changes[other] = None
            after[rel] = (value[0], blobs[value[1]])
            changes[rel] = after[rel]
    with ObjectStore(root) as store:
        base = store.write_tree(None, before)
        assert base.hex() == _gits_tree(root, before)
        stepped = store.write_tree(base, changes)
        assert stepped.hex() == _gits_tree(root, after)
        assert store.blobs(stepped, list(after) + list(changes)) == after


def _chain_twice(root: Path) -> list[str | None]:
    (root / "notes").mkdir()
    (root / "notes" / "a.md").write_text("A\n")
    (root / "b.md").write_text("B\n")
    made = commit_chain(root, [PlannedCommit(("notes/a.md",), (), "a", "a@x"), PlannedCommit(("b.md",), (), "b", "b@x")],
                        lambda changes, _read: [f"turn {n}\n" for n in range(len(changes))])  # fmt: skip
    (root / "notes" / "a.md").unlink()
    (root / "notes" / "c.md").write_text("C\n")
    made += commit_chain(
        root, [PlannedCommit(("notes/c.md",), ("notes/a.md",), "c", "c@x")], lambda changes, _read: ["turn 2\n"]
    )
    return [sha for sha, _ in made]


@pytest.mark.parametrize("object_format", ["sha1", "sha256"])
def test_commits_pass_fsck_in_either_hash(tmp_path, object_format):
    root = tmp_path / "r"
    root.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main", f"--object-format={object_format}"], cwd=root, check=True)
    shas = _chain_twice(root)
    assert shas[-1] == head_sha(root) and len(shas[-1]) == (40 if object_format == "sha1" else 64)
    assert git(root, "log", "--format=%an %s").splitlines() == ["c turn 2", "b turn 1", "a turn 0"]
    assert git(root, "ls-tree", "-r", "--name-only", "HEAD").split() == ["b.md", "notes/c.md"]
    subprocess.run(["git", "fsck", "--strict", "--no-dangling"], cwd=root, check=True, capture_output=True)
    assert not git(root, "status", "--porcelain").strip()


def test_a_linked_worktree_writes_into_the_shared_object_store(tmp_path):
    main = tmp_path / "main"
    main.mkdir()
    git(main, "init", "-q", "-b", "main")
    git(main, "-c", "user.name=t", "-c", "user.email=t@x", "commit", "-q", "--allow-empty", "-m", "seed")
    linked = tmp_path / "linked"
    git(main, "worktree", "add", "-q", "-b", "side", str(linked))
    _chain_twice(linked)
    assert git(main, "log", "-1", "--format=%s", "side").strip() == "turn 2"
    subprocess.run(["git", "fsck", "--strict", "--no-dangling"], cwd=main, check=True, capture_output=True)


def test_reading_blobs_skips_big_and_missing_ones_and_stays_in_step(tmp_path):
    """A blob above the limit streams by unread and a missing one is None; what follows each is
    still read right (one reader serves the whole pass: trees, then the blobs messages quote)."""
    root = tmp_path / "r"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    small, big, other = _blob(root, "small\n"), _blob(root, "x" * 3_000_000), _blob(root, "other\n")
    missing = "0" * 39 + "1"
    with ObjectStore(root) as store:
        got = store.read_blobs([small, big, missing, other, small], limit=1000)
        assert got == {small: b"small\n", big: None, missing: None, other: b"other\n"}
        tree = store.write_tree(None, {"a.md": ("100644", other)})
        assert store.read_blobs([big], limit=4_000_000)[big] == b"x" * 3_000_000
        assert store.blobs(tree, ["a.md", "nothing.md"]) == {"a.md": ("100644", other)}


def test_a_repository_made_anew_with_the_other_hash_is_never_written_wrongly(tmp_path):
    """The object format is asked of git once per process; a repository deleted and made again
    at the same path with SHA-256 is noticed by its ids: that pass writes nothing and fails, the
    next one commits right."""
    import shutil

    from syncd.errors import HistoryError

    root = tmp_path / "r"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / "a.md").write_text("A\n")
    commit_chain(root, [PlannedCommit(("a.md",), (), "a", "a@x")], lambda changes, _read: ["one\n"])
    shutil.rmtree(root / ".git")
    subprocess.run(["git", "init", "-q", "-b", "main", "--object-format=sha256"], cwd=root, check=True)
    turn = [PlannedCommit(("a.md",), (), "a", "a@x")]
    with pytest.raises(HistoryError, match="not a sha1 id"):
        commit_chain(root, turn, lambda changes, _read: ["two\n"])
    sha = commit_chain(root, turn, lambda changes, _read: ["two\n"])[0][0]
    assert sha == head_sha(root) and len(sha) == 64
    subprocess.run(["git", "fsck", "--strict", "--no-dangling"], cwd=root, check=True, capture_output=True)
