"""The command line against a hostile user and a hostile tree: control characters in files, names,
commits and arguments reach the terminal only as escapes; a stdout that is closed or thinks it is
ASCII, an empty path, a page name that is not UTF-8 and a port in use are one line each, never a
traceback. See tests/test_cli_errors.py for the matrix of bad arguments and bad homes."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import git

import syncd

from .cli_helpers import run_main
from .helpers import write

# What no terminal may receive raw: an OSC sequence that retitles it (ending in a BEL) and a
# backspace. click strips CSI colour sequences itself when stdout is not a terminal (as in these
# tests), so they would prove nothing; these it lets through.
RETITLE = "\x1b]0;pwned\x07"


def _raw_control(text: str) -> list[str]:
    return sorted({c for c in text if (ord(c) < 0x20 and c != "\n") or 0x7F <= ord(c) <= 0x9F})


def _syncd(args: list[str], cwd: Path, env: dict | None = None, shell_suffix: str = "") -> subprocess.CompletedProcess:
    """``python -m syncd ARGS`` as a real process (through bash when ``shell_suffix`` redirects)."""
    command = [sys.executable, "-m", "syncd", *args]
    if shell_suffix:
        quoted = " ".join("'" + part.replace("'", "'\\''") + "'" for part in command)
        return subprocess.run(
            f"{quoted} {shell_suffix}",
            shell=True,
            executable="/bin/bash",
            cwd=cwd,
            env={**os.environ, **(env or {})},
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    return subprocess.run(
        command, cwd=cwd, env={**os.environ, **(env or {})}, capture_output=True, text=True, timeout=300, check=False
    )


def test_text_output_shows_control_characters_of_files_and_commits_as_escapes(home, embedder, monkeypatch):
    write(home, "memory/users/ana/2026-11-22.md", f"# 2026-11-22\n\n## 10:00\n- [pref] Likes tea{RETITLE}\bX.\n")
    write(home, f"vault/Odd{RETITLE}.md", "# Odd\n\nA page with a strange name.\n")
    with syncd.open(home, embedder=embedder) as engine:
        engine.sync()
        engine.commit()
    write(home, f"vault/New{RETITLE}.md", "# New\n")  # stale: status names it
    runs = {
        "search": run_main("search", "tea", "--home", str(home)),
        "status": run_main("status", "--home", str(home)),
        "log": run_main("log", "--home", str(home), "-n", "1"),
        "lint": run_main("lint", "--home", str(home)),
    }
    for name, result in runs.items():
        assert result.returncode in (0, 1) and "Traceback" not in result.stderr, (name, result.stderr)
        assert _raw_control(result.stdout + result.stderr) == [], (name, result.stdout, result.stderr)
        assert "\\x1b]0;pwned\\x07" in result.stdout, (name, result.stdout)
    assert "Likes tea\\x1b]0;pwned\\x07\\x08X." in runs["search"].stdout
    # JSON stays the exact text, escaped as JSON escapes it.
    hits = json.loads(run_main("search", "tea", "--home", str(home), "--json").stdout)
    assert any(hit["content"] == f"Likes tea{RETITLE}\bX." for hit in hits)


def test_an_error_naming_what_was_typed_shows_its_control_characters_as_escapes(tmp_path):
    result = run_main("status", "--home", str(tmp_path / f"gone{RETITLE}"))
    assert result.returncode == 1
    assert _raw_control(result.stderr) == [] and "gone\\x1b]0;pwned\\x07" in result.stderr
    assert result.stderr.count("\n") == 1


def test_json_escapes_the_control_characters_a_terminal_acts_on_beyond_ascii(home, embedder):
    # U+009B is CSI itself to a terminal that reads C1 controls; json.dumps leaves it raw.
    write(home, "memory/users/ana/2026-11-22.md", "# 2026-11-22\n\n## 10:00\n- [pref] Likes tea\x9b31m.\n")
    with syncd.open(home, embedder=embedder) as engine:
        engine.sync()
    result = run_main("search", "tea", "--home", str(home), "--json")
    assert result.returncode == 0 and "\x9b" not in result.stdout and "\\u009b" in result.stdout
    assert [hit["content"] for hit in json.loads(result.stdout)] == ["Likes tea\x9b31m."]


def test_empty_paths_are_refused_not_read_as_the_current_folder(tmp_path, monkeypatch):
    """`syncd init "$DIR"` with DIR unset once made a home (a git repository) of the current folder."""
    monkeypatch.chdir(tmp_path)
    home = syncd.init(tmp_path / "h").home
    for argv in (["init", ""], ["demo", ""], ["status", "--home", ""], ["log", "", "--home", str(home)],
                 ["lint", "--vault", " "]):  # fmt: skip
        result = run_main(*argv)
        assert result.returncode == 2, (argv, result.stderr)
        assert "an empty path" in result.stderr and result.stderr.count("\n") == 1, (argv, result.stderr)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["h"]


def test_a_page_name_that_is_not_utf8_is_linted_not_a_traceback(tmp_path):
    home = syncd.init(tmp_path / "h").home
    # A file named on a Latin-1 system: Python reads its name with a lone surrogate, which the
    # wiki's store (SQLite, UTF-8) cannot take.
    with open(os.path.join(os.fsencode(home / "vault"), b"caf\xe9.md"), "wb") as page:
        page.write(b"# Cafe\n")
    for _ in range(2):  # the first with no store yet, the second over it
        result = run_main("lint", "--home", str(home))
        assert result.returncode == 0, result.stderr
        assert "caf\\xe9.md:1: warning orphan" in result.stdout and "Traceback" not in result.stderr
    doc = json.loads(run_main("lint", "--json", "--home", str(home)).stdout)
    assert [f["path"] for f in doc["findings"]] == ["caf\udce9.md"]


def test_wiki_reports_reach_a_stdout_python_thinks_is_ascii(tmp_path):
    home = syncd.init(tmp_path / "h").home
    (home / "vault" / "Café.md").write_text("# Café\n\nSee [[index]].\n", encoding="utf-8")
    for args in (["lint"], ["links", "Café"], ["backlinks", "index"]):
        result = _syncd([*args, "--home", str(home)], tmp_path, {"PYTHONIOENCODING": "ascii"})
        assert result.returncode == 0, (args, result.stderr)
        assert "Café" in result.stdout and result.stderr == "", (args, result.stderr)


def test_a_closed_stdout_is_one_line_and_an_error_but_a_command_writing_none_runs(tmp_path):
    home = syncd.init(tmp_path / "h").home
    for args in (
        ["status", "--home", str(home)],
        ["--version"],
        ["token", "add", "--user", "ana", "--home", str(home)],
    ):
        result = _syncd(args, tmp_path, shell_suffix=">&-")
        assert result.returncode == 1, (args, result.stderr)
        assert result.stderr == "syncd: error: standard output is closed\n", (args, result.stderr)
    # Nothing printed to stdout, nothing to fail: an error on stderr is still the error.
    result = _syncd(["status", "--home", str(tmp_path / "missing")], tmp_path, shell_suffix=">&-")
    assert result.returncode == 1 and "does not exist" in result.stderr


def test_serve_on_a_port_in_use_is_one_line_and_holds_nothing(tmp_path):
    home = syncd.init(tmp_path / "h").home
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = _syncd(["serve", "--home", str(home), "--port", str(port)], tmp_path)
    assert result.returncode == 1, result.stderr
    assert result.stderr == f"syncd: error: cannot listen on 127.0.0.1:{port}: Address already in use\n"
    assert not (home / ".git" / "syncd" / "server.json").exists()
    assert git.Repo(home).head.commit.message.startswith("syncd: initialise")


def test_serve_on_a_host_that_does_not_resolve_is_one_line(tmp_path):
    home = syncd.init(tmp_path / "h").home
    result = _syncd(["serve", "--home", str(home), "--host", "no such host.invalid"], tmp_path)
    assert result.returncode == 1
    assert result.stderr.startswith("syncd: error: cannot listen on 'no such host.invalid':")
    assert result.stderr.count("\n") == 1


def test_a_home_without_its_git_repository_is_told_so_in_syncds_words(tmp_path):
    gone = syncd.init(tmp_path / "gone").home
    subprocess.run(["rm", "-rf", str(gone / ".git")], check=True)
    broken = syncd.init(tmp_path / "broken").home
    (broken / ".git" / "HEAD").write_text("garbage\n")
    for command in (["status"], ["search", "tea"]):
        result = run_main(*command, "--home", str(gone))
        if command == ["status"]:
            assert result.returncode == 1 and "has no git repository of its own" in result.stderr, result.stderr
        assert "--local" not in result.stderr, result.stderr
        result = run_main(*command, "--home", str(broken))
        assert result.returncode == 1 and f"`git -C {broken} status` says what is wrong" in result.stderr


def test_a_file_where_syncd_keeps_its_index_is_named_by_every_command(tmp_path):
    home = syncd.init(tmp_path / "h").home
    subprocess.run(["rm", "-rf", str(home / ".syncd")], check=True)
    (home / ".syncd").write_text("not a folder\n")
    for command in (["status"], ["search", "tea"], ["sync", "-q"], ["lint"]):
        result = run_main(*command, "--home", str(home))
        assert result.returncode == 1, (command, result.stderr)
        assert result.stderr.startswith(f"syncd: error: {home / '.syncd'} is not a folder: syncd keeps")
        assert result.stderr.count("\n") == 1
    assert (home / ".syncd").read_text() == "not a folder\n"


def test_ctrl_c_while_the_cli_imports_says_interrupted_without_a_traceback(tmp_path):
    """Ctrl-C in the first tens of milliseconds (click and the commands' modules importing)
    raised KeyboardInterrupt before the CLI's handling of it was there: a Python traceback
    through click's and syncd's code. Swept over that window, for the console script and for
    ``python -m syncd``. A traceback in the interpreter's own start (its site module) or in the
    import of the package itself, before any code of syncd's can run, is beyond reach, and
    allowed."""
    import click

    script = Path(sys.executable).parent / "syncd"
    code_folders = [Path(syncd.__file__).parent, Path(click.__file__).parent]
    # Python imports the package (syncd/__init__.py and errors.py, a few milliseconds, kept free
    # of heavy imports for this) before any code of it can run: like the interpreter's start,
    # beyond reach.
    package_root = [Path(syncd.__file__), Path(syncd.__file__).with_name("errors.py")]
    ours = []
    for command in ([str(script), "--help"], [sys.executable, "-m", "syncd", "--help"]):
        for step in range(30):
            proc = subprocess.Popen(
                command,
                cwd=tmp_path,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
            )
            time.sleep(0.006 * step)  # not a wait: the signal lands at a swept moment of the import
            proc.send_signal(signal.SIGINT)
            err = proc.communicate(timeout=120)[1]
            frames = [line for line in err.splitlines() if line.lstrip().startswith('File "')]
            if any(f'"{folder}/' in frame for frame in frames for folder in code_folders) and not any(
                f'"{root}"' in frame for frame in frames for root in package_root
            ):
                ours.append(err)
            elif not frames and proc.returncode not in (0, -signal.SIGINT):
                assert err.strip() == "syncd: interrupted" and proc.returncode == 130, err
    assert not ours, ours[0]


def test_a_home_whose_path_is_not_utf8_is_told_so_and_linted(tmp_path):
    """A folder named on a Latin-1 system: LanceDB takes only UTF-8 paths, and raised a
    UnicodeEncodeError traceback from every command that opens the index; lint one from the
    path git printed."""
    home = syncd.init(Path(os.fsdecode(os.fsencode(tmp_path) + b"/caf\xe9"))).home
    for command in (["search", "tea"], ["sync", "-q"], ["reindex", "-q"]):
        result = run_main(*command, "--home", str(home))
        assert result.returncode == 1, (command, result.stderr)
        assert result.stderr == (
            f"syncd: error: {tmp_path}/caf\\xe9: its path is not UTF-8, and LanceDB cannot keep the index in a "
            "folder so named; rename the folder (or the one above it that is so named), or keep the index in "
            "PostgreSQL (SYNCD_INDEX_URL)\n"
        ), command
    result = run_main("lint", "--home", str(home))
    assert result.returncode == 0 and result.stdout == "no findings\n", result.stderr
    # With no index yet, status reads none: it says so, and what to run (which then says the above).
    assert run_main("status", "--home", str(home)).returncode == 0


def test_a_vault_whose_folder_name_ends_in_a_space_is_found_in_its_repository(tmp_path):
    from syncd.wiki.provenance import git_location

    home = syncd.init(tmp_path / "h ").home
    assert git_location(home / "vault") == (home, "vault/")


def test_a_file_where_syncd_keeps_its_lock_and_tokens_is_named_by_every_command_that_needs_them(tmp_path):
    home = syncd.init(tmp_path / "h").home
    subprocess.run(["rm", "-rf", str(home / ".git" / "syncd")], check=True)
    (home / ".git" / "syncd").write_text("not a folder\n")
    for command in (["sync", "-q"], ["reindex", "-q"], ["watch"], ["token", "list"], ["token", "add", "--user", "a"]):
        result = run_main(*command, "--home", str(home))
        assert result.returncode == 1, command
        assert result.stderr == (
            f"syncd: error: {home}/.git/syncd is not a folder: syncd keeps the home's lock, tokens and writes not "
            "yet committed there; move it away\n"
        ), command
    assert run_main("status", "--home", str(home)).returncode == 0
    assert (home / ".git" / "syncd").read_text() == "not a folder\n"


def test_a_damaged_git_index_is_the_status_git_line_not_the_end_of_the_status(tmp_path):
    """Was 'syncd: error: git ls-files failed: fatal: .git/index: index file smaller than
    expected', and no status at all."""
    home = syncd.init(tmp_path / "h").home
    (home / ".git" / "index").write_bytes(b"garbage\n")
    result = run_main("status", "--home", str(home))
    assert result.returncode == 0, result.stderr
    [line] = [line for line in result.stdout.splitlines() if line.startswith("git ")]
    assert "index file smaller than expected" in line and f"`git -C {home} status` says what is wrong" in line
    assert "indexed  " in result.stdout


def test_a_damaged_index_is_one_line_naming_the_remedy_for_every_command(home, embedder):
    """A data file of the index cut short (a crash of the disk, a bad copy): search, status, sync
    and even `syncd reindex`, the remedy status names, died with LanceDB's RuntimeError traceback.
    The remedy is `syncd reindex` alone: it removes the tables it cannot read and builds them
    anew, embedding nothing (the cache beside the index keeps every vector)."""
    write(home, "memory/users/ana/2026-11-22.md", "# 2026-11-22\n\n## 10:00\n- [pref] Likes green tea.\n")
    with syncd.open(home, embedder=embedder) as engine:
        engine.sync()
    index = home / ".syncd" / "index"
    for data in (index / "lance" / "entries.lance" / "data").iterdir():
        os.truncate(data, 10)
    for derived in ("rows.image", "files.sqlite"):  # what would answer without reading the tables
        (index / derived).unlink(missing_ok=True)
    for command in (["search", "tea"], ["status"], ["sync", "-q"]):
        result = run_main(*command, "--home", str(home))
        assert result.returncode == 1, (command, result.stderr)
        assert result.stderr.startswith("syncd: error: the index cannot be read (lance error: "), result.stderr
        assert result.stderr.endswith(
            "it is derived from the markdown: run `syncd reindex` to rebuild it (the "
            "embedding cache beside it keeps every vector, so nothing is embedded again)\n"
        )
        assert result.stderr.count("\n") == 1 and ".rs:" not in result.stderr
    rebuilt = run_main("reindex", "--home", str(home))
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert "(0 texts embedded, the rest from the cache)" in rebuilt.stdout, rebuilt.stdout
    assert "Likes green tea." in run_main("search", "tea", "--home", str(home)).stdout
    assert run_main("status", "--home", str(home)).returncode == 0
    assert not (home / ".syncd" / "index.damaged").exists()


def test_a_damaged_index_kept_elsewhere_by_a_link_is_rebuilt_by_every_reindex(home, embedder, tmp_path):
    """`.syncd/index` a link to a folder elsewhere (a bigger disk), its tables damaged twice:
    the first `syncd reindex` renamed the link aside and could not remove it (shutil.rmtree
    refuses a link, silently), so every later one failed to rename the index onto it ("syncd:
    error: Not a directory"), the remedy naming itself. Nothing is removed through the link."""
    write(home, "memory/users/ana/2026-11-22.md", "# 2026-11-22\n\n## 10:00\n- [pref] Likes green tea.\n")
    with syncd.open(home, embedder=embedder) as engine:
        engine.sync()
    state = home / ".syncd"
    elsewhere = tmp_path / "bigger-disk" / "index"
    elsewhere.parent.mkdir()
    (state / "index").rename(elsewhere)
    (state / "index").symlink_to(elsewhere)

    def damage(index: Path) -> None:
        for data in (index / "lance" / "entries.lance" / "data").iterdir():
            os.truncate(data, 10)
        for derived in ("rows.image", "files.sqlite"):  # else reindex never reads the tables
            (index / derived).unlink(missing_ok=True)

    damage(elsewhere)
    left_there = [p.relative_to(elsewhere) for p in elsewhere.rglob("*")]
    for _ in range(2):
        rebuilt = run_main("reindex", "-q", "--home", str(home))
        assert rebuilt.returncode == 0, rebuilt.stderr
        assert "Likes green tea." in run_main("search", "tea", "--home", str(home)).stdout
        damage(state / "index")
    assert set(left_there) <= {p.relative_to(elsewhere) for p in elsewhere.rglob("*")}  # its open may add some
    assert not (state / "index").is_symlink()
    assert not any(p.name.startswith("index.damaged") for p in state.iterdir())
