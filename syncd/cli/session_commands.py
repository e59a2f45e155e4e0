"""Session commands: ``syncd sessions`` (list), ``sessions show ID``, ``sessions state ID``.

They read the session files only (never the index or the model), so they answer at once.
"""

from __future__ import annotations

import datetime as dt
import os
import stat
from pathlib import Path

import click

from ..errors import NotFoundError
from .common import home_option, id_option, json_option, load_settings, print_json, resolve_home, say

__all__ = ["COMMANDS"]

_user_option = id_option("--user", "user", "Only this user's sessions (show/state: the session's user).")


def _home(home: Path | None):
    from ..home import Home

    return Home(resolve_home(home))


def _owner(root, session: str, user: str | None) -> str:
    """The user of ``session``: the one given, or the only user who has a session of that id."""
    from ..session.files import list_sessions

    if user is not None:
        return user
    unreadable: list[str] = []
    owners = sorted({i.user for i in list_sessions(root, None, unreadable) if i.session == session})
    if not owners:
        cannot = [why for why in unreadable if why.split(": ", 1)[0].split("/")[1] == session]
        if cannot:
            raise NotFoundError(f"session {session!r} cannot be read: {cannot[0]}")
        # Not listed, for it has no dated entry yet (a crash in its first append leaves only a
        # torn line; a hand edit can leave none): its folder still says whose it is, and show
        # says what is in it rather than that it does not exist.
        owners = _folder_owners(root, session)
    if not owners:
        raise NotFoundError(f"no session {session!r} in this home")
    if len(owners) > 1:
        raise click.UsageError(f"session {session!r} exists for several users ({', '.join(owners)}); pass --user")
    return owners[0]


def _folder_owners(root, session: str) -> list[str]:
    users = root.memory_dir / "users"
    try:
        names = sorted(e.name for e in os.scandir(users) if e.is_dir(follow_symlinks=False))
    except OSError:
        return []
    found = []
    for user in names:
        try:
            if stat.S_ISDIR(os.lstat(root.sessions_dir_of(user) / session).st_mode):
                found.append(user)
        except (OSError, ValueError):
            continue
    return found


@click.group("sessions", invoke_without_command=True)
@_user_option
@json_option
@home_option
@click.pass_context
def sessions_group(ctx: click.Context, user: str | None, as_json: bool, home: Path | None) -> None:
    """Agent sessions: who, how many turns, when last active, and whether a reset is due.

    A reset is due under the policy SYNCD_SESSION_DAILY_RESET_HOUR / _IDLE_TIMEOUT_MINUTES /
    _MAX_TURNS (0 disables each).
    """
    if ctx.invoked_subcommand is not None:
        return
    from ..session.files import list_sessions
    from ..session.lifecycle import SessionLifecycle, SessionPolicy

    root = _home(home)
    lifecycle = SessionLifecycle(SessionPolicy.from_settings(load_settings()))
    rows = []
    unreadable: list[str] = []
    damaged: list[str] = []
    for info in list_sessions(root, user, unreadable, damaged):
        due, reason = lifecycle.should_reset(info.last_active, info.turn_count, info.created)
        rows.append({**info.to_dict(), "reset_due": due, "reset_reason": reason or None})
    for problem in unreadable:
        say(f"syncd: warning: session left out, cannot be read: {problem}", err=True)
    for problem in damaged:
        say(f"syncd: warning: {problem}", err=True)
    if as_json:
        print_json([{k: v for k, v in r.items() if k != "flushed"} for r in rows])
        return
    if not rows:
        click.echo("no sessions" + (f" of {user}" if user else ""))
        return
    click.echo(f"{'USER':<16} {'SESSION':<28} {'TURNS':>5}  {'LAST ACTIVE':<25} RESET DUE")
    for r in rows:
        reset = r["reset_reason"] if r["reset_due"] else "no"
        # To the second, with its UTC offset: the stored milliseconds would push the columns apart.
        active = dt.datetime.fromisoformat(r["last_active_at"]).isoformat(sep=" ", timespec="seconds")
        click.echo(f"{r['user']:<16} {r['session']:<28} {r['turn_count']:>5}  {active:<25} {reset}")


@sessions_group.command("show")
@click.argument("session_id")
@click.option("--last", "last_n", type=click.IntRange(min=0), default=None, help="Only the last N entries.")
@_user_option
@json_option
@home_option
def show_command(session_id: str, last_n: int | None, user: str | None, as_json: bool, home: Path | None) -> None:
    """The transcript of a session, one entry per line with its line number.

    SESSION_ID is the session's id, as `syncd sessions` lists it.
    """
    from ..home import validate_id
    from ..session.transcripts import read_transcript_file

    root = _home(home)
    session = validate_id("session", session_id)
    owner = _owner(root, session, user)
    entries = read_transcript_file(root, owner, session, last_n)
    if as_json:
        print_json(entries)
        return
    for e in entries:
        # A transcript edited by hand may hold any control character: a newline in a role would
        # make one entry read as two, the second said by whoever the text names.
        text = " ".join(e["content"].split())
        say(f"{e['line']:>5}  {e['ts'][:19]}  {e['role']}: {text}")
        for action in e["actions"] or ():
            say(f"       action: {action}")


@sessions_group.command("state")
@click.argument("session_id")
@_user_option
@home_option
def state_command(session_id: str, user: str | None, home: Path | None) -> None:
    """The agent-state snapshot of a session (JSON v2).

    SESSION_ID is the session's id, as `syncd sessions` lists it.
    """
    from ..home import validate_id
    from ..session.state import read_state_file

    root = _home(home)
    session = validate_id("session", session_id)
    owner = _owner(root, session, user)
    state = read_state_file(root, owner, session)
    if state is None:
        raise NotFoundError(f"session {session!r} of {owner} has no agent state (or it is not JSON v2)")
    print_json(state)


COMMANDS = [sessions_group]
