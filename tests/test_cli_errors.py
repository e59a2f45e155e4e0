"""Bad input never shows a traceback: every command, run as a real process with bad arguments and
bad homes, says what is wrong in one line and exits non-zero; a closed pipe ends it quietly."""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import syncd

COMMANDS_WITH_HOME = [
    ["sync", "-q"],
    ["reindex", "-q"],
    ["search", "tea"],
    ["status"],
    ["watch"],
    ["log"],
    ["blame", "f-123"],
    ["revert", "HEAD"],
]


def run_cli(args: list[str], cwd: Path, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("SYNCD_")}
    environment.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "syncd", *args],
        cwd=cwd,
        env=environment,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def bad_cases(tmp_path: Path) -> list[tuple[str, list[str], dict]]:
    """(what, argv, extra environment) for every way in which the input is wrong."""
    (tmp_path / "a-file").write_text("not a folder\n")
    (tmp_path / "plain").mkdir()
    home = str(tmp_path / "home")
    cases: list[tuple[str, list[str], dict]] = []
    for argv in COMMANDS_WITH_HOME:
        name = argv[0]
        cases += [
            (f"{name}: no such home", [*argv, "--home", str(tmp_path / "missing")], {}),
            (f"{name}: home is a file", [*argv, "--home", str(tmp_path / "a-file")], {}),
            (f"{name}: not a home", [*argv, "--home", str(tmp_path / "plain")], {}),
            (f"{name}: no home around", argv, {}),
            (f"{name}: SYNCD_HOME is a file", argv, {"SYNCD_HOME": str(tmp_path / "a-file")}),
            (f"{name}: unknown option", [*argv, "--home", home, "--frobnicate"], {}),
        ]
        if name != "log":  # log reads git alone, no setting
            cases.append((f"{name}: bad setting", [*argv, "--home", home], {"SYNCD_DEBOUNCE_MS": "soon"}))
    cases += [
        ("unknown command", ["frobnicate"], {}),
        ("unknown global option", ["--frobnicate", "status"], {}),
        ("init: a file", ["init", str(tmp_path / "a-file")], {}),
        ("init: under a file", ["init", str(tmp_path / "a-file" / "h")], {}),
        ("demo: a file", ["demo", str(tmp_path / "a-file")], {}),
        ("demo: limit 0", ["demo", str(tmp_path / "d"), "--limit", "0"], {}),
        ("demo: limit not a number", ["demo", str(tmp_path / "d"), "--limit", "three"], {}),
        ("search: missing query", ["search", "--home", home], {}),
        ("search: chat without user", ["search", "tea", "--home", home, "--chat", "phone"], {}),
        ("search: user escapes", ["search", "tea", "--home", home, "--user", "../x"], {}),
        ("search: user with a space", ["search", "tea", "--home", home, "--user", "a b"], {}),
        ("search: chat escapes", ["search", "tea", "--home", home, "--user", "ana", "--chat", "../../x"], {}),
        ("search: empty user", ["search", "tea", "--home", home, "--user", ""], {}),
        ("search: limit 0", ["search", "tea", "--home", home, "--limit", "0"], {}),
        ("search: limit negative", ["search", "tea", "--home", home, "--limit", "-3"], {}),
        ("search: limit not a number", ["search", "tea", "--home", home, "--limit", "ten"], {}),
        ("search: unknown kind", ["search", "tea", "--home", home, "--kind", "page"], {}),
        ("log: limit 0", ["log", "--home", home, "-n", "0"], {}),
        ("log: limit not a number", ["log", "--home", home, "-n", "x"], {}),
        ("log: path outside the home", ["log", "--home", home, "/etc/passwd"], {}),
        ("blame: missing id", ["blame", "--home", home], {}),
        ("blame: unknown fact", ["blame", "f-000000", "--home", home], {}),
        ("revert: missing commit", ["revert", "--home", home], {}),
        ("revert: unknown commit", ["revert", "no-such-commit", "--home", home], {}),
        ("watch: interval 0", ["watch", "--home", home, "--reconcile-interval", "0"], {}),
        ("watch: interval not a number", ["watch", "--home", home, "--reconcile-interval", "often"], {}),
        ("status: bad setting", ["status", "--home", home], {"SYNCD_MAX_FILE_BYTES": "-1"}),
        ("lint: no such home", ["lint", "--home", str(tmp_path / "missing")], {}),
        ("lint: not a home", ["lint", "--home", str(tmp_path / "plain")], {}),
        ("lint: vault is a file", ["lint", "--vault", str(tmp_path / "a-file")], {}),
        ("lint: no such vault", ["lint", "--vault", str(tmp_path / "missing")], {}),
        ("links: missing page", ["links", "--home", home], {}),
        ("links: unknown page", ["links", "No such page", "--home", home], {}),
        ("backlinks: unknown page", ["backlinks", "No such page", "--home", home], {}),
        ("backlinks: home is a file", ["backlinks", "index", "--home", str(tmp_path / "a-file")], {}),
    ]
    return cases


def test_every_command_with_bad_input_says_one_line_and_fails(tmp_path):
    syncd.init(tmp_path / "home")
    cwd = tmp_path / "plain-cwd"
    cwd.mkdir()
    cases = bad_cases(tmp_path)
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda case: run_cli(case[1], cwd, case[2]), cases))
    problems = []
    for (what, argv, env), result in zip(cases, results):
        lines = result.stderr.splitlines()
        errors = [line for line in lines if line.startswith("syncd: error:")]
        if "Traceback" in result.stderr or len(errors) != 1 or result.returncode == 0:
            problems.append(f"{what} ({argv}, {env}): exit {result.returncode}, stderr:\n{result.stderr}")
    assert not problems, "\n\n".join(problems)


def test_usage_errors_name_the_help_to_read(tmp_path):
    result = run_cli(["search", "tea", "--limit", "0", "--home", str(tmp_path)], tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip().endswith("(see `syncd search --help`)")
    assert result.stderr.count("\n") == 1


def test_chat_without_user_is_a_usage_error_not_a_value_error(tmp_path):
    result = run_cli(["search", "tea", "--chat", "phone", "--home", str(syncd.init(tmp_path / "h").home)], tmp_path)
    assert result.returncode == 2
    assert result.stderr.startswith("syncd: error: --chat needs --user")


@pytest.mark.parametrize("argv", [["log"], ["status"]])
def test_a_closed_pipe_ends_the_command_quietly(tmp_path, argv):
    home = syncd.init(tmp_path / "home").home
    args = [*argv, "--home", str(home)]
    # The reader goes away before the command writes anything: its first write meets EPIPE.
    proc = subprocess.Popen([sys.executable, "-m", "syncd", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd=tmp_path)
    proc.stdout.close()
    stderr = proc.stderr.read().decode()
    proc.stderr.close()
    assert proc.wait(timeout=300) == 141, stderr
    assert stderr == ""


def test_demo_into_head_exits_quietly(tmp_path):
    """The case as a person meets it: `syncd demo DIR | head -3` through a shell."""
    result = subprocess.run(
        f"{sys.executable} -m syncd demo {tmp_path / 'demo'} | head -3; echo \"status=${{PIPESTATUS[0]}}\"",
        shell=True, executable="/bin/bash", capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )
    assert "Traceback" not in result.stderr and "BrokenPipe" not in result.stderr, result.stderr
    assert len(result.stdout.splitlines()) == 4
    assert result.stdout.splitlines()[-1] in ("status=0", "status=141")
