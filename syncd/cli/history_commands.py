"""History commands: ``log``, ``blame``, ``revert``, over the use cases of ``syncd.engine.audit``.
``log`` and the git part of ``blame`` read git alone; ``blame`` opens the index (never the model)
only to find where the fact sits."""

from __future__ import annotations

from pathlib import Path

import click

from .common import PathArg, home_option, json_option, load_settings, print_json, resolve_home, say

__all__ = ["COMMANDS"]


def _print_entry(entry, indent: str = "") -> None:
    say(f"{indent}{entry.sha[:10]}  {entry.date}  {entry.author} <{entry.email}>")
    say(f"{indent}    {entry.subject}")
    for key, value in entry.trailers.items():
        say(f"{indent}    {key}: {value}")


@click.command("log")
@click.argument("path", required=False, type=PathArg(path_type=str))
@click.option("-n", "--limit", type=click.IntRange(min=1), default=20, show_default=True, help="How many commits.")
@json_option
@home_option
def log_command(path: str | None, limit: int, as_json: bool, home: Path | None) -> None:
    """Recent commits of the memory, with who made them and their provenance trailers.

    PATH limits the log to commits touching this file or folder (relative to the current folder
    when it is inside the home, else to the home).
    """
    from ..engine import audit
    from ..home import Home

    root = Path(resolve_home(home)).resolve()
    # Relative to the current folder inside the home (as git reads it), else to the home; one that
    # leaves the home is refused here, with the home named, not by git.
    cwd = Path.cwd().resolve()
    base = cwd if cwd.is_relative_to(root) else root
    rel = Home(root).rel(base / path) if path else None
    entries = audit.read_log(root, rel, limit)
    if as_json:
        print_json([e.to_dict() for e in entries])
        return
    if not entries:
        say("no commits" + (f" touching {rel}" if rel else ""))
    for entry in entries:
        _print_entry(entry)
        for name in entry.files[:10]:
            say(f"      {name}")
        if len(entry.files) > 10:
            click.echo(f"      ... and {len(entry.files) - 10} more files")


@click.command("blame")
@click.argument("fact_id")
@json_option
@home_option
def blame_command(fact_id: str, as_json: bool, home: Path | None) -> None:
    """The commit and provenance that introduced a fact, and later edits of it.

    FACT_ID is the fact's id, as `syncd search --json` shows it. Each fact's history ends with the
    revision to search the memory as it stood when the fact was written (`syncd search Q --at REV`;
    `"at"` in --json).
    """
    from ..engine import audit
    from ..engine.facade import open_engine

    with open_engine(resolve_home(home), read_only=True, settings=load_settings(), looks_only=True) as engine:
        histories = audit.blame(engine, fact_id)
    if as_json:
        print_json([h.to_dict() | {"at": h.introduced.sha if h.introduced else None} for h in histories])
        return
    for history in histories:
        say(f"{fact_id}  {history.path}:{history.line}")
        say(f"    {history.text}")
        if history.uncommitted:
            click.echo("    not committed yet (the daemon commits it shortly)")
            continue
        if history.introduced:
            click.echo("introduced by")
            _print_entry(history.introduced, "  ")
            # What the agent knew when it wrote this: the memory as that commit left it.
            click.echo(f"  the memory then: syncd search QUERY --at {history.introduced.sha[:12]}")
        if history.edits:
            click.echo("later edits (newest first)")
            for entry in history.edits:
                _print_entry(entry, "  ")


@click.command("revert")
@click.argument("commit")
@home_option
def revert_command(commit: str, home: Path | None) -> None:
    """Undo one commit (an agent turn, say) with `git revert`, and index the result.

    COMMIT is the commit to undo (a sha or any git revision).
    """
    from ..engine import audit

    # By the one writer of the home (this process, or the running daemon, asked over its socket).
    sha = audit.revert(resolve_home(home), commit, load_settings())
    click.echo(f"reverted as {sha[:10]}; the index is updated")


COMMANDS = [log_command, blame_command, revert_command]
