"""Sharing commands: ``remote add|list``, ``pull``, ``push``, and the ``merge-driver`` git calls
(over the use cases of ``syncd.engine.sharing``)."""

from __future__ import annotations

from pathlib import Path

import click

from .common import home_option, load_settings, resolve_home, say

__all__ = ["COMMANDS"]

remote_argument = click.argument("remote", required=False, default="origin")


def _open(home: Path | None):
    from ..engine.facade import open_engine

    return open_engine(resolve_home(home), read_only=False, settings=load_settings())


@click.group("remote")
def remote_group() -> None:
    """Share this home with other machines through a git remote (see `syncd pull`, `syncd push`)."""


@remote_group.command("add")
@click.argument("name")
@click.argument("url")
@home_option
def remote_add(name: str, url: str, home: Path | None) -> None:
    """Add the git remote NAME at URL and set the home up for sharing: syncd's merge driver
    merges memory by file kind (facts by id, never a conflict marker). Authentication is git's
    own (ssh agent, credential helpers); syncd stores no secret."""
    from ..engine.sharing import share

    with _open(home) as engine:
        share(engine, name, url)
    click.echo(f"remote {name} added; `syncd pull {name}` and `syncd push {name}` share this home")


@remote_group.command("list")
@home_option
def remote_list(home: Path | None) -> None:
    """The home's git remotes, one per line: NAME URL (a password or token in the URL masked)."""
    from ..engine.sharing import remotes, shown_url

    for name, url in sorted(remotes(resolve_home(home)).items()):
        say(f"{name} {shown_url(url)}")


@remote_group.command("retry")
@click.argument("name", required=False, default=None)
@home_option
def remote_retry(name: str | None, home: Path | None) -> None:
    """Have the daemon sharing this home (`syncd watch --remote`, `syncd serve --remote`) try its
    remote again now: after it stopped on a refusal that waiting cannot change (another
    history, a declining hook, credentials, no such repository) once that is fixed, or during
    its pause after a failure. `syncd status` then says how it went."""
    from ..control.client import ask_daemon
    from ..errors import RemoteError, SyncdError

    root = resolve_home(home)
    try:
        answer = ask_daemon(root, "remote_retry", {"remote": name}, timeout=10.0)
    except RemoteError as exc:
        if exc.kind != "ProtocolError":
            raise
        answer = None
    if answer is None:
        raise SyncdError(
            "no daemon shares this home through a remote (`syncd watch --remote NAME` or `syncd serve --remote "
            "NAME`); `syncd pull` and `syncd push` try a remote now"
        )
    was = "stopped on a refusal" if answer.get("stopped") else "pausing"
    click.echo(
        f"asked the daemon to try remote {answer.get('remote')} again (it was {was}); `syncd status` says how it went"
    )


@click.command("pull")
@remote_argument
@home_option
def pull_command(remote: str, home: Path | None) -> None:
    """Fetch the current branch from REMOTE (default origin), merge it by file kind and index
    what came in. What both machines changed differently keeps both versions, reported here."""
    from ..engine.sharing import pull

    with _open(home) as engine:
        report = pull(engine, remote)
    say(report.summary())


@click.command("push")
@remote_argument
@home_option
def push_command(remote: str, home: Path | None) -> None:
    """Commit what is pending and push the current branch to REMOTE (default origin). Never
    forces: a remote that moved on is pulled (merged) first, then pushed again."""
    from ..engine.sharing import push

    with _open(home) as engine:
        report = push(engine, remote)
    for pulled in report.pulls:
        say(pulled.summary())
    say(report.summary())


@click.command("merge-driver", hidden=True)
@click.argument("base", type=click.Path(path_type=Path))
@click.argument("ours", type=click.Path(path_type=Path))
@click.argument("theirs", type=click.Path(path_type=Path))
@click.argument("rel")
def merge_driver_command(base: Path, ours: Path, theirs: Path, rel: str) -> None:
    """Git's merge driver for a syncd home (configured by `syncd remote add`): merges BASE, OURS
    and THEIRS of the file REL by its kind, into OURS."""
    from ..engine.sharing import merge_driver

    merged = merge_driver(base, ours, theirs, rel)
    if merged.kept_both:
        click.echo(f"syncd: {rel}: both machines changed it; both versions kept", err=True)


COMMANDS = [remote_group, pull_command, push_command, merge_driver_command]
