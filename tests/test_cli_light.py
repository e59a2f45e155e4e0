"""The CLI answers fast: commands that need no model or index import neither, and every command
and option explains itself."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import click
import pytest

import syncd
from syncd.cli import cli

HEAVY = ("lancedb", "onnxruntime", "fastembed", "fastapi", "uvicorn", "mcp", "starlette")


def imported_modules(args: list[str], cwd, env: dict | None = None) -> tuple[subprocess.CompletedProcess, set[str]]:
    """Run ``syncd ARGS`` with ``-X importtime``: every module the process imported, by name."""
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "syncd", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=300,
        env=None if env is None else os.environ | env,
    )
    names = {line.rsplit("|", 1)[1].strip() for line in result.stderr.splitlines() if line.startswith("import time:")}
    return result, names


def heavy(names: set[str]) -> list[str]:
    return sorted(n for n in names if n.split(".")[0] in HEAVY)


@pytest.fixture
def synced_home(home, engine):
    (home / "memory/users/ana").mkdir(parents=True, exist_ok=True)
    (home / "memory/users/ana/2026-11-22.md").write_text("# 2026-11-22\n\n## 10:00\n- [goal] Learn Rust.\n")
    engine.sync()
    engine.commit()
    return home


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        ["--version"],
        ["search", "--help"],
        ["serve", "--help"],
        ["token", "list"],
        ["status"],
        ["status", "--json"],
        ["log"],
        ["log", "--json"],
        ["lint"],
        ["links", "index"],
        ["backlinks", "index"],
    ],
)
def test_commands_without_model_or_index_import_neither(synced_home, argv):
    result, names = imported_modules(
        [*argv, "--home", str(synced_home)]
        if argv[0] in ("status", "log", "lint", "links", "backlinks", "token")
        else argv,
        synced_home.parent,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "syncd" in names and "click" in names  # the measurement saw the CLI run
    assert heavy(names) == []


# What a one-shot search or sync without a daemon never needs: LanceDB and pyarrow (the rows image
# and the files mirror answer for the tables), pydantic (syncd.config reads plain settings itself),
# the servers, the LLM client, the watcher.
ONE_SHOT_NEVER = (
    "lancedb",
    "pyarrow",
    "pydantic",
    "pydantic_settings",
    "pydantic_core",
    "litellm",
    "fastapi",
    "uvicorn",
    "starlette",
    "mcp",
    "watchdog",
    "fastembed",
)
# ... and what a sync that finds nothing changed never needs either: it embeds nothing, reads no row
# (numpy: the model's vectors and the rows in memory) and parses no page (multiprocessing: the
# wiki's parallel parse of a large vault).
NO_OP_SYNC_NEVER = (*ONE_SHOT_NEVER, "numpy", "multiprocessing")


def test_one_shot_search_and_sync_import_only_what_they_use(home, embedder):
    (home / "memory/users/ana").mkdir(parents=True, exist_ok=True)
    (home / "memory/users/ana/2026-11-22.md").write_text("# 2026-11-22\n\n## 10:00\n- [goal] Learn Rust.\n")
    # Written a while ago: a file written just before a sync is looked at again by the next
    # (sync.scan's racy mtime), which would then have a record to update.
    past = time.time() - 3600
    for path in [*(home / "memory").rglob("*.md"), *(home / "vault").rglob("*.md")]:
        os.utime(path, (past, past))
    with syncd.open(home, embedder=embedder) as engine:
        engine.sync()
        engine.commit()
    search = ["search", "learning rust", "--user", "ana", "--home", str(home)]
    # A first search images the rows (another query: the measured one is embedded here).
    warm = ["search", "rust", "--home", str(home)]
    subprocess.run([sys.executable, "-m", "syncd", *warm], check=True, capture_output=True, timeout=300)
    settings = {"SYNCD_LOCK_WAIT_S": "5", "SYNCD_SEARCH_FLOOR": "true"}  # read without pydantic too
    result, names = imported_modules(search, home.parent, settings)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "Learn Rust." in result.stdout and "changed since" not in result.stderr
    assert "onnxruntime" in names  # the measurement saw the query embedded here, not by a daemon
    assert sorted(n for n in names if n.split(".")[0] in ONE_SHOT_NEVER) == []

    result, names = imported_modules(["sync", "-q", "--home", str(home)], home.parent, settings)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.startswith("0 new, 0 changed, 0 moved, 0 deleted")
    assert sorted(n for n in names if n.split(".")[0] in NO_OP_SYNC_NEVER) == []

    # Stale: the count says so, found by the scan behind the quick look.
    (home / "memory/users/ana/2026-11-22.md").write_text("# 2026-11-22\n\n## 10:00\n- [goal] Learn Go.\n")
    result, names = imported_modules(search, home.parent)
    assert result.returncode == 0 and "1 file(s) changed since the index was updated" in result.stderr


def test_status_reports_the_index_without_loading_it(synced_home):
    result, names = imported_modules(["status", "--home", str(synced_home)], synced_home.parent)
    assert result.returncode == 0
    out = result.stdout
    assert "indexed  4 files, 1 facts" in out and "fresh" in out
    assert heavy(names) == []


def test_status_of_a_home_never_synced_imports_no_index(tmp_path):
    home = syncd.init(tmp_path / "h").home
    result, names = imported_modules(["status", "--home", str(home)], tmp_path)
    assert result.returncode == 0 and "3 new" in result.stdout
    assert heavy(names) == []


def test_init_imports_no_index(tmp_path):
    result, names = imported_modules(["init", str(tmp_path / "new")], tmp_path)
    assert result.returncode == 0 and "syncd home ready" in result.stdout
    assert heavy(names) == []


def test_version_is_the_package_version(tmp_path):
    result = subprocess.run([sys.executable, "-m", "syncd", "--version"], capture_output=True, text=True)
    assert result.returncode == 0 and result.stdout.strip() == f"syncd {syncd.__version__}"


def test_every_command_and_option_has_help():
    assert set(cli.commands) == {
        "init",
        "demo",
        "sync",
        "reindex",
        "search",
        "status",
        "watch",
        "log",
        "blame",
        "revert",
        "lint",
        "links",
        "backlinks",
        "sessions",
        "serve",
        "mcp",
        "token",
        "remote",
        "pull",
        "push",
        "merge-driver",
    }
    for param in cli.params:
        assert getattr(param, "help", None), f"syncd {param.name} has no help"
    for name, command in cli.commands.items():
        assert command.help, name
        text = command.help.upper()
        for param in command.params:
            if isinstance(param, click.Argument):
                # click arguments carry no help of their own: the command's text names each one.
                assert param.human_readable_name.upper() in text, f"syncd {name} {param.name} is not explained"
            else:
                assert param.help, f"syncd {name} {param.opts} has no help"


def test_main_returns_exit_codes_for_tests_and_scripts(tmp_path, capsys):
    from syncd.cli import main

    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"syncd {syncd.__version__}"
    assert main(["--help"]) == 0
    assert main(["search"]) == 2
    assert main(["status", "--home", str(tmp_path)]) == 1
    assert capsys.readouterr().err.startswith("syncd: error:")
