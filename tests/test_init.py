"""``syncd init``: creation, idempotence, and adoption of folders that already hold notes."""

from __future__ import annotations

import subprocess
from pathlib import Path

import git

import syncd
from syncd.cli import main


def _snapshot(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".git" not in p.relative_to(root).parts
    }


def test_init_creates_the_layout_and_a_first_commit(tmp_path):
    report = syncd.init(tmp_path / "home")
    root = report.home
    for folder in ["memory/core", "memory/users", "vault"]:
        assert (root / folder).is_dir()
    # Sessions live under their user (memory/users/<user>/sessions/), made on a first turn.
    assert not (root / "sessions").exists()
    for page in ["schema.md", "index.md", "log.md"]:
        assert (root / "vault" / page).read_text().startswith("---")
    assert ".syncd/" in (root / ".gitignore").read_text()
    repo = git.Repo(root)
    assert repo.head.commit.hexsha == report.commit
    assert not repo.is_dirty(untracked_files=True)


def test_init_twice_changes_nothing(tmp_path):
    first = syncd.init(tmp_path)
    before = _snapshot(tmp_path)
    head = git.Repo(tmp_path).head.commit.hexsha
    second = syncd.init(tmp_path)
    assert not second.changed and second.commit is None
    assert _snapshot(tmp_path) == before
    assert git.Repo(tmp_path).head.commit.hexsha == head == first.commit


def test_init_adopts_an_obsidian_vault_in_a_git_repo_without_touching_it(tmp_path):
    root = tmp_path / "notes"
    (root / "vault" / ".obsidian").mkdir(parents=True)
    (root / "vault" / "index.md").write_bytes(b"# My own index\r\n\r\n- [[Somewhere]]")
    (root / "vault" / ".obsidian" / "app.json").write_text("{}")
    (root / ".gitignore").write_text("*.pdf\n")
    (root / "Inbox.md").write_text("unstaged thoughts\n")
    (root / "staged.md").write_text("staged but not committed\n")
    env = {
        "GIT_AUTHOR_NAME": "me",
        "GIT_AUTHOR_EMAIL": "me@x",
        "GIT_COMMITTER_NAME": "me",
        "GIT_COMMITTER_EMAIL": "me@x",
        "PATH": "/usr/bin:/bin",
    }
    subprocess.run(["git", "init", "-q", "-b", "trunk", str(root)], check=True)
    subprocess.run(["git", "-C", str(root), "add", "vault", ".gitignore"], check=True)
    subprocess.run(["git", "-C", str(root), "commit", "-qm", "mine"], check=True, env=env)
    subprocess.run(["git", "-C", str(root), "add", "staged.md"], check=True)
    before = _snapshot(root)
    their_head = git.Repo(root).head.commit.hexsha

    report = syncd.init(root)

    after = _snapshot(root)
    for rel, data in before.items():
        assert after[rel] == data, f"{rel} was modified"
    assert "vault/index.md" not in report.created and ".gitignore" not in report.created
    assert {"vault/schema.md", "vault/log.md"} <= set(report.created)
    repo = git.Repo(root)
    assert repo.active_branch.name == "trunk"
    assert repo.head.commit.parents[0].hexsha == their_head
    committed = set(repo.git.show("--name-only", "--format=", "HEAD").split())
    assert committed == set(report.created)
    # The user's staged file is still staged, not swept into our commit; untracked stays untracked.
    assert repo.git.diff("--cached", "--name-only").split() == ["staged.md"]
    assert "Inbox.md" in repo.untracked_files
    # .syncd/ stays out of git even though their .gitignore does not mention it.
    (root / ".syncd" / "junk").write_text("x")
    assert not any(p.startswith(".syncd") for p in repo.untracked_files)


def test_cli_init_and_help(tmp_path, capsys):
    assert main(["init", str(tmp_path / "h")]) == 0
    assert "syncd home ready" in capsys.readouterr().out
    assert main(["init", str(tmp_path / "h")]) == 0
    assert "nothing to do" in capsys.readouterr().out


def test_init_refuses_a_file_in_place_of_a_folder(tmp_path, capsys):
    (tmp_path / "memory").write_text("not a folder")
    assert main(["init", str(tmp_path)]) == 1
    assert "is not a folder" in capsys.readouterr().err
    assert (tmp_path / "memory").read_text() == "not a folder"


def _tree(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*"))


def test_init_refuses_git_folders_and_creates_nothing(tmp_path, capsys):
    """A bare repository (or a folder in it) and a repository's .git folder have no working
    tree: one clear line saying where to run init instead, and not a file or folder made."""
    subprocess.run(["git", "init", "-q", "--bare", str(tmp_path / "bare.git")], check=True)
    subprocess.run(["git", "init", "-q", str(tmp_path / "repo")], check=True)
    cases = {
        "bare.git": "bare git repository",
        "bare.git/objects": "bare git repository",
        "repo/.git": "inside a git repository's .git folder",
        "repo/.git/hooks/new": "inside a git repository's .git folder",
    }
    before = _tree(tmp_path)
    for rel, said in cases.items():
        assert main(["init", str(tmp_path / rel)]) == 1
        err = capsys.readouterr().err
        assert err.startswith("syncd: error: ") and said in err and err.count("\n") == 1, err
    assert _tree(tmp_path) == before


def test_init_refuses_a_folder_inside_a_home_and_creates_nothing(tmp_path, capsys):
    home = syncd.init(tmp_path / "home").home
    before = _tree(tmp_path)
    for rel in ("memory/users", "vault/new/deeper", ".syncd"):
        assert main(["init", str(home / rel)]) == 1
        err = capsys.readouterr().err
        assert f"inside the syncd home {home}" in err and err.count("\n") == 1, err
    assert _tree(tmp_path) == before
    assert subprocess.run(["git", "-C", str(home), "status", "--porcelain"], capture_output=True).stdout == b""
