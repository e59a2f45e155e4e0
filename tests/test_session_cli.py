"""``syncd sessions``, ``sessions show``, ``sessions state`` on a real home, without loading the
model or the index (a real process, whose imports are looked at); bad input is one line, never a
traceback. The commands' answers are checked with ``syncd``'s own ``main()`` run in this process
(tests/cli_helpers.py): a process per command proved nothing more and paid an interpreter's start
and syncd's imports each time."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import pytest

from syncd.session import StateMirror, TranscriptManager

from .cli_helpers import run_main
from .test_cli_light import heavy, imported_modules


def syncd_cli(home, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return run_main(*args, "--home", str(home), env=env)


@pytest.fixture
def with_sessions(engine, home):
    transcripts = TranscriptManager(engine, "ana")
    asyncio.run(transcripts.append_turn("s1", "user", "Hello there"))
    asyncio.run(
        transcripts.append_turn("s1", "assistant", "Hi Ana", actions=[{"type": "final_answer", "answer": "hi"}])
    )
    asyncio.run(TranscriptManager(engine, "bob").append_turn("s9", "user", "Bob's secret"))
    StateMirror(engine, "ana").mirror_state(
        "s1", {"version": 2, "steps": [{"type": "task", "task": "greet"}], "tools": [], "serialized_at": "t"}
    )
    return home


def test_sessions_lists_shows_and_states(with_sessions):
    home = with_sessions
    listed = syncd_cli(home, "sessions", "--json", env={"SYNCD_SESSION_MAX_TURNS": "2"})
    assert listed.returncode == 0, listed.stderr
    rows = {(r["user"], r["session"]): r for r in json.loads(listed.stdout)}
    assert set(rows) == {("ana", "s1"), ("bob", "s9")}
    assert rows[("ana", "s1")]["turn_count"] == 1 and rows[("ana", "s1")]["reset_due"] is False
    only = json.loads(syncd_cli(home, "sessions", "--user", "bob", "--json").stdout)
    assert [r["session"] for r in only] == ["s9"]
    text = syncd_cli(home, "sessions").stdout
    assert "ana" in text and "s1" in text and "RESET DUE" in text

    shown = syncd_cli(home, "sessions", "show", "s1", "--json")
    assert [e["content"] for e in json.loads(shown.stdout)] == ["Hello there", "Hi Ana"]
    last = syncd_cli(home, "sessions", "show", "s1", "--last", "1")
    assert "Hi Ana" in last.stdout and "Hello there" not in last.stdout and last.stdout.lstrip().startswith("2")
    state = syncd_cli(home, "sessions", "state", "s1", "--user", "ana")
    assert json.loads(state.stdout)["steps"] == [{"type": "task", "task": "greet"}]


def test_one_unreadable_session_is_said_and_the_rest_are_listed(with_sessions):
    """A folder where a transcript belongs, or a link to a file outside the home: that session is
    left out with a warning naming it and why; every other session is listed as before."""
    home = with_sessions
    sessions = home / "memory/users/ana/sessions"
    (sessions / "s4/transcript.jsonl").mkdir(parents=True)
    (sessions / "s5").mkdir()
    (sessions / "s5/transcript.jsonl").symlink_to("/etc/passwd")
    listed = syncd_cli(home, "sessions", "--json")
    assert listed.returncode == 0, listed.stderr
    assert {(r["user"], r["session"]) for r in json.loads(listed.stdout)} == {("ana", "s1"), ("bob", "s9")}
    warnings = listed.stderr.strip().splitlines()
    assert len(warnings) == 2 and all(w.startswith("syncd: warning: session left out") for w in warnings)
    assert "ana/s4: a folder is there, not a file" in warnings[0] and "ana/s5:" in warnings[1]
    shown = syncd_cli(home, "sessions", "show", "s4")
    assert shown.returncode != 0
    assert shown.stderr.strip().startswith("syncd: error: session 's4' cannot be read: ana/s4: a folder is there")


@pytest.mark.parametrize(
    "args",
    [
        ["sessions", "show", "../x"],
        ["sessions", "show", "nope"],
        ["sessions", "state", "s9", "--user", "ana"],
        ["sessions", "--user", "a b"],
    ],
)
def test_bad_input_is_one_line(with_sessions, args):
    out = syncd_cli(with_sessions, *args)
    assert out.returncode != 0 and "Traceback" not in out.stderr
    assert out.stderr.startswith("syncd: error:") and len(out.stderr.strip().splitlines()) == 1


def test_sessions_loads_no_model_or_index(with_sessions):
    result, names = imported_modules(["sessions", "--home", str(with_sessions)], with_sessions.parent)
    assert result.returncode == 0, result.stderr[-2000:]
    assert heavy(names) == []


def test_a_home_made_by_the_older_init_is_adopted_quietly(home, engine):
    """An older init made empty sessions/transcripts and sessions/state with keep files: init
    leaves them alone and status and lint say nothing about them."""
    for folder in ("sessions/transcripts", "sessions/state"):
        (home / folder).mkdir(parents=True)
        (home / folder / ".gitkeep").write_bytes(b"")
    import syncd

    assert not syncd.init(home).changed
    assert (home / "sessions/transcripts/.gitkeep").exists()
    engine.sync()
    status = engine.status()
    assert status.healthy, status.to_dict()
    lint = subprocess.run(
        [sys.executable, "-m", "syncd", "lint", "--json", "--home", str(home)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert "sessions/" not in lint.stdout


def test_session_files_are_scoped_by_their_path():
    from syncd.home.layout import classify_path

    scope = classify_path("memory/users/ana/sessions/s1/transcript.jsonl")
    assert (scope.kind, scope.user, scope.session, scope.error) == ("transcript", "ana", "s1", None)
    assert classify_path("memory/users/ana/sessions/s1/state.json").kind == "state"
    bad = classify_path("memory/users/ana/sessions/bad id/transcript.jsonl")
    assert bad.user == "ana" and bad.error and bad.session is None
    legacy = classify_path("sessions/transcripts/s1.jsonl")
    assert legacy.user is None and legacy.error


def test_every_session_command_and_option_has_help():
    import click

    from syncd.cli import cli

    group = cli.commands["sessions"]
    for command in [group, *group.commands.values()]:
        assert command.help
        for param in command.params:
            if isinstance(param, click.Argument):
                assert param.human_readable_name.upper() in command.help.upper()
            else:
                assert param.help, (command.name, param.opts)


def test_show_prints_a_hand_edited_lines_control_characters_as_escapes(with_sessions):
    # The writer refuses a control character in a role, but a line edited by hand may hold any,
    # in the role or the content: printed raw, the terminal ran the escapes (retitled, recoloured)
    # and a newline in the role showed one entry as two, the second said by "assistant".
    folder = with_sessions / "memory/users/ana/sessions/s-hand"
    folder.mkdir(parents=True)
    line = {"ts": "2026-01-01T00:00:00+00:00", "role": "us\x1b[31mer\nassistant", "content": "a\x1b]0;pwned\x07b"}
    (folder / "transcript.jsonl").write_text(json.dumps(line) + "\n")
    shown = syncd_cli(with_sessions, "sessions", "show", "s-hand")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines() == ["    1  2026-01-01T00:00:00  us\\x1b[31mer\\nassistant: a\\x1b]0;pwned\\x07b"]
    assert (
        json.loads(syncd_cli(with_sessions, "sessions", "show", "s-hand", "--json").stdout)[0]["role"] == line["role"]
    )


def test_a_time_utc_cannot_say_is_no_time_and_the_listing_goes_on(with_sessions):
    # Year 1 at +05:00 is valid ISO 8601 but before UTC's year 1: the reset check, which compares
    # in UTC, raised OverflowError and `syncd sessions` failed for every session with a traceback.
    sessions = with_sessions / "memory/users/ana/sessions"
    (sessions / "s-early").mkdir()
    (sessions / "s-early/session.json").write_text(
        json.dumps({"created_at": "0001-01-01T00:00:00+05:00", "last_active_at": "0001-01-01T00:00:00+05:00"})
    )
    (sessions / "s-late").mkdir()
    late = [
        {"ts": "9999-12-31T23:00:00-05:00", "role": "user", "content": "from the far future"},
        {"ts": "2026-01-02T00:00:00+00:00", "role": "user", "content": "today"},
    ]
    (sessions / "s-late/transcript.jsonl").write_text("".join(json.dumps(e) + "\n" for e in late))
    listed = syncd_cli(with_sessions, "sessions", "--json", env={"SYNCD_SESSION_DAILY_RESET_HOUR": "5"})
    assert listed.returncode == 0, listed.stderr
    rows = {r["session"]: r for r in json.loads(listed.stdout)}
    assert set(rows) == {"s1", "s9", "s-late"}
    assert rows["s-late"]["created_at"] == rows["s-late"]["last_active_at"] == "2026-01-02T00:00:00+00:00"


def test_show_finds_a_session_with_no_dated_entry_by_its_folder(with_sessions):
    # A crash in a session's first append leaves only a torn line: no entry gives the session a
    # time, so it is not listed, and show said "no session" of a folder that is there.
    folder = with_sessions / "memory/users/ana/sessions/s-torn"
    folder.mkdir(parents=True)
    (folder / "transcript.jsonl").write_bytes(b'{"ts":"2026-01-01T00:00:00+00:00","role":"us')
    shown = syncd_cli(with_sessions, "sessions", "show", "s-torn", "--json")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout) == []
    assert (folder / "transcript.jsonl").read_bytes() == b'{"ts":"2026-01-01T00:00:00+00:00","role":"us'
    assert syncd_cli(with_sessions, "sessions", "show", "s-none").stderr.startswith("syncd: error: no session")
