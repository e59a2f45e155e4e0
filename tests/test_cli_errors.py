"""Bad input never shows a traceback: every command, given bad arguments and bad homes, says what
is wrong in one line and exits 1 (an error) or 2 (a usage error); a closed pipe ends it quietly.

The matrix of bad inputs runs ``syncd``'s own ``main()`` in this process under click's CliRunner
(a real process per case cost about 2.5 s of interpreter start and imports, 100 of them); a handful
of the same cases also run as real ``python -m syncd`` processes and must end exactly as they do in
process, which proves the in-process run is the real one (``__main__``, the exit status, stderr)."""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from click.testing import CliRunner

import syncd
from syncd.cli import main
from syncd.errors import QueryError
from syncd.memory import MemoryManager

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


def run_in_process(args: list[str], env: dict | None = None) -> tuple[int, str]:
    """(exit status, stderr) of ``syncd args`` run by its ``main()`` here, in the current folder.

    CliRunner swaps in ``env`` and the standard streams. Log records reach that stderr as the
    command's own logging (WARNING and up, its format) shows them, and an exception escaping
    ``main()`` is printed as the interpreter would: a traceback, which the checks then find."""
    with CliRunner().isolation(env=env) as (_, stderr, _):
        handler = logging.StreamHandler(sys.stderr)  # the runner's stream while isolated
        handler.setLevel(logging.WARNING)
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        logging.getLogger().addHandler(handler)
        try:
            code = main(list(args))
        except Exception:  # noqa: BLE001 - whatever escapes main() is a bug: shown as its traceback
            traceback.print_exc()
            code = 1
        finally:
            logging.getLogger().removeHandler(handler)
        sys.stderr.flush()
        return code, stderr.getvalue().decode()


def run_cli(args: list[str], cwd: Path, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "syncd", *args],
        cwd=cwd,
        env={**os.environ, **(env or {})},  # the runner's SYNCD_* are gone already (conftest)
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
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


def _one_line_error(code: int, stderr: str) -> bool:
    errors = [line for line in stderr.splitlines() if line.startswith("syncd: error:")]
    return "Traceback" not in stderr and len(errors) == 1 and code in (1, 2)


def test_every_command_with_bad_input_says_one_line_and_fails(tmp_path, monkeypatch):
    syncd.init(tmp_path / "home")
    cwd = tmp_path / "plain-cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)  # "no home around": nothing above the current folder is a home
    problems = []
    for what, argv, env in bad_cases(tmp_path):
        code, stderr = run_in_process(argv, env)
        if not _one_line_error(code, stderr):
            problems.append(f"{what} ({argv}, {env}): exit {code}, stderr:\n{stderr}")
    assert not problems, "\n\n".join(problems)


# One case per way of failing: a SyncdError, $SYNCD_HOME read from the environment, an OS error,
# a bad setting, click's own usage errors (a command, an option), and ours (a value checked late).
REAL_PROCESS_CASES = [
    "status: no such home",
    "search: SYNCD_HOME is a file",
    "init: under a file",
    "sync: bad setting",
    "unknown command",
    "log: unknown option",
    "search: chat without user",
]


def test_real_processes_end_as_the_in_process_runs_do(tmp_path, monkeypatch):
    syncd.init(tmp_path / "home")
    cwd = tmp_path / "plain-cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    cases = [case for case in bad_cases(tmp_path) if case[0] in REAL_PROCESS_CASES]
    assert len(cases) == len(REAL_PROCESS_CASES)
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda case: run_cli(case[1], cwd, case[2]), cases))
    for (what, argv, env), result in zip(cases, results):
        assert _one_line_error(result.returncode, result.stderr), f"{what}: exit {result.returncode}\n{result.stderr}"
        assert (result.returncode, result.stderr) == run_in_process(argv, env), what


def test_usage_errors_name_the_help_to_read(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, stderr = run_in_process(["search", "tea", "--limit", "0", "--home", str(tmp_path)])
    assert code == 2
    assert stderr.strip().endswith("(see `syncd search --help`)")
    assert stderr.count("\n") == 1


def test_chat_without_user_is_a_usage_error_not_a_value_error(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, stderr = run_in_process(["search", "tea", "--chat", "phone", "--home", str(syncd.init(tmp_path / "h").home)])
    assert code == 2
    assert stderr.startswith("syncd: error: --chat needs --user")


@pytest.mark.parametrize("argv", [["log"], ["status"]])
def test_a_closed_pipe_ends_the_command_quietly(tmp_path, argv):
    home = syncd.init(tmp_path / "home").home
    args = [*argv, "--home", str(home)]
    # The reader goes away before the command writes anything: its first write meets EPIPE.
    proc = subprocess.Popen(
        [sys.executable, "-m", "syncd", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path
    )
    proc.stdout.close()
    stderr = proc.stderr.read().decode()
    proc.stderr.close()
    assert proc.wait(timeout=300) == 141, stderr
    assert stderr == ""


def test_demo_into_head_exits_quietly(tmp_path):
    """The case as a person meets it: `syncd demo DIR | head -3` through a shell."""
    result = subprocess.run(
        f'{sys.executable} -m syncd demo {tmp_path / "demo"} | head -3; echo "status=${{PIPESTATUS[0]}}"',
        shell=True,
        executable="/bin/bash",
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        check=False,
    )
    assert "Traceback" not in result.stderr and "BrokenPipe" not in result.stderr, result.stderr
    assert len(result.stdout.splitlines()) == 4
    assert result.stdout.splitlines()[-1] in ("status=0", "status=141")


def test_a_search_for_bytes_that_are_not_utf8_says_so_not_that_the_model_failed(tmp_path, monkeypatch, embedder):
    """``syncd search $'caf\\xe9'`` (a Latin-1 terminal) reaches Python as 'caf\\udce9': the model
    could not read the lone surrogate and the error blamed it ("... failed to embed: TextInputSequence
    must be str"). The same from the Python API and an agent's recall."""
    home = syncd.init(tmp_path / "home").home
    monkeypatch.chdir(tmp_path)
    code, stderr = run_in_process(["search", "caf\udce9", "--home", str(home)])
    assert _one_line_error(code, stderr), stderr
    assert "lone surrogate U+DCE9 at position 3" in stderr and "embed" not in stderr
    with syncd.open(home, embedder=embedder) as engine:
        manager = MemoryManager(engine)
        with pytest.raises(QueryError, match="lone surrogate"):
            asyncio.run(manager.retrieve_relevant_memories("caf\udce9 au lait", user_id="ana"))
