"""Commands that make a home: ``init`` and ``demo``."""

from __future__ import annotations

from pathlib import Path

import click

from .common import PathArg, home_option, load_settings, say

__all__ = ["COMMANDS"]


@click.command("init")
@click.argument("path", required=False, type=PathArg(path_type=Path))
@click.option(
    "--index",
    "index_url",
    metavar="URL",
    default=None,
    help="Keep the index in PostgreSQL with pgvector (postgresql://...) instead of .syncd/.",
)
@home_option
def init_command(path: Path | None, index_url: str | None, home: Path | None) -> None:
    """Create a memory home, or adopt an existing folder without changing its files.

    PATH is the folder to create or adopt (default: --home, else the current folder). With
    --index, the home's index lives in that database from now on (the URL is recorded in the
    home's .git/config without its password: give that by PGPASSWORD or ~/.pgpass).
    """
    from ..engine.initialize import init

    if index_url is not None:
        from ..index.pg_connections import check_database

        check_database(index_url)  # a bad URL, a server down or without pgvector: said before anything is made
    report = init(path or home or Path("."), load_settings())
    if index_url is not None:
        from ..index.backend import record_home_index, redact_url

        record_home_index(report.home, index_url)
        click.echo(f"  index: {redact_url(index_url)}")
    if not report.changed:
        say(f"{report.home} is already a syncd home; nothing to do")
        return
    for rel in report.created:
        click.echo(f"  created {rel}")
    if report.git_initialised:
        say(f"  initialised git repository in {report.home}")
    say(f"syncd home ready at {report.home}" + (f" (commit {report.commit[:10]})" if report.commit else ""))


@click.command("demo")
@click.argument("path", required=False, type=PathArg(path_type=Path))
@click.option("--limit", type=click.IntRange(min=1), default=3, show_default=True, help="Results per query.")
# Not $SYNCD_HOME: a demo must never land in the user's real home.
@click.option("--home", type=PathArg(path_type=Path), default=None, help="Same as PATH.")
def demo_command(path: Path | None, limit: int, home: Path | None) -> None:
    """Create a demo home with two users' memory, index it and search it (offline).

    PATH is where to create it (default: ./syncd-demo).
    """
    from .demo import run_demo

    run_demo(path or home or Path("syncd-demo"), load_settings(), limit=limit, echo=click.echo)


COMMANDS = [init_command, demo_command]
