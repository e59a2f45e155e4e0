"""The CLI end to end: demo, sync (with its commit), reindex, status, clear errors."""

from __future__ import annotations

import json

import git

from syncd.cli import main

from .helpers import write


def test_demo_builds_syncs_and_searches(tmp_path, capsys):
    assert main(["demo", str(tmp_path / "demo"), "--limit", "1"]) == 0
    out = capsys.readouterr().out
    assert "indexed" in out and "Likes green tea in the morning" in out
    # Bob's coffee never shows up in Ana's scoped results.
    ana_coffee = out.split("search 'coffee' (user ana):")[1].split("search")[0]
    assert "espresso" not in ana_coffee
    assert main(["demo", str(tmp_path / "demo"), "--limit", "1"]) == 0  # a second run is harmless


def test_demo_never_writes_into_a_home_or_folder_of_the_persons(tmp_path, capsys):
    home = tmp_path / "real"
    assert main(["init", str(home)]) == 0
    write(home, "memory/users/me/MEMORY.md", "# Me\n\nShip it.\n")
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "todo.md").write_text("Buy milk.\n")
    head = git.Repo(home).head.commit.hexsha
    capsys.readouterr()
    for place, said in ((home, "is a syncd home"), (tmp_path / "notes", "is a folder that is not empty")):
        assert main(["demo", str(place)]) == 1
        err = capsys.readouterr().err
        assert said in err and "syncd demo /tmp/syncd-demo" in err and err.count("\n") == 1, err
    assert sorted(p.name for p in (home / "memory/users").iterdir()) == [".gitkeep", "me"]
    assert git.Repo(home).head.commit.hexsha == head
    assert sorted(p.name for p in (tmp_path / "notes").iterdir()) == ["todo.md"]


def test_sync_commits_and_status_is_fresh(tmp_path, capsys):
    home = tmp_path / "h"
    assert main(["init", str(home)]) == 0
    write(home, "memory/users/ana/2026-11-22.md", "# 2026-11-22\n\n## 10:00\n- [goal] Learn Rust.\n")
    assert main(["sync", "--home", str(home), "-q"]) == 0
    assert "1 commit(s)" in capsys.readouterr().out
    repo = git.Repo(home)
    assert "memory/users/ana/2026-11-22.md" in repo.git.show("--name-only", "--format=", "HEAD")
    assert main(["status", "--home", str(home)]) == 0
    assert "fresh" in capsys.readouterr().out
    assert main(["reindex", "--home", str(home), "-q"]) == 0
    assert "1 facts" in capsys.readouterr().out


def test_stale_index_is_announced_by_search_and_status(tmp_path, capsys):
    home = tmp_path / "h"
    main(["init", str(home)])
    main(["sync", "--home", str(home), "-q"])
    write(home, "vault/New.md", "# New\n\nA page written after the sync.\n")
    capsys.readouterr()
    assert main(["search", "page", "--home", str(home)]) == 0
    assert "changed since the index was updated" in capsys.readouterr().err
    assert main(["status", "--home", str(home), "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert status["stale"]["new"] == ["vault/New.md"] and not status["fresh"]


def test_commands_outside_a_home_fail_clearly(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SYNCD_HOME", raising=False)
    assert main(["status"]) == 1
    assert "no syncd home" in capsys.readouterr().err
    assert main(["search", "x", "--home", str(tmp_path)]) == 1
    assert "not a syncd home" in capsys.readouterr().err
