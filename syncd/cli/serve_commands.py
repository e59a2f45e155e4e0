"""``syncd serve`` (daemon + REST + MCP over HTTP), ``syncd mcp`` (MCP over stdio) and
``syncd token add|list|revoke`` (the servers' bearer tokens)."""

from __future__ import annotations

import logging
from pathlib import Path

import click

from .common import home_option, json_option, load_settings, print_json, resolve_home

__all__ = ["COMMANDS"]


@click.command("serve")
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to listen on; keep the loopback default unless you put TLS in front.",
)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8765,
    show_default=True,
    help="Port (0: any free port; server.json in .git/syncd/ says which).",
)
@click.option(
    "--cors-origin",
    "cors_origins",
    multiple=True,
    metavar="ORIGIN",
    help="Allow browser pages from ORIGIN to call the API (repeatable; none by default).",
)
@click.option(
    "--read-only",
    "read_only",
    is_flag=True,
    help="Serve searches and reads only, holding nothing: one of many servers over a shared index.",
)
@click.option(
    "--index",
    "index_url",
    metavar="URL",
    default=None,
    help="The PostgreSQL index to read (postgresql://...; default: the home's own).",
)
@click.option(
    "--index-schema",
    "index_schema",
    metavar="NAME",
    default=None,
    help="The home's schema in that database (its writer's `git config syncd.indexschema`).",
)
@click.option(
    "--remote",
    default=None,
    metavar="NAME",
    help="Share the home through the git remote NAME, as `syncd watch --remote` does: pull every "
    "--pull-every seconds and push what is new (see `syncd remote add`).",
)
@click.option(
    "--pull-every",
    type=click.FloatRange(min=1),
    default=10.0,
    show_default=True,
    metavar="SECONDS",
    help="With --remote: how often to pull (an unreachable remote is retried less and less often).",
)
@home_option
def serve_command(
    host: str,
    port: int,
    cors_origins: tuple[str, ...],
    read_only: bool,
    index_url: str | None,
    index_schema: str | None,
    remote: str | None,
    pull_every: float,
    home: Path | None,
) -> None:
    """Run the daemon plus the REST API and MCP (streamable HTTP at /mcp) in one process that
    holds the home. Every request needs a bearer token: the first serve writes the admin token
    to .git/syncd/admin.token (mode 0600); `syncd token add --user U` issues a user's token.
    SIGTERM/SIGINT answer the requests in flight, commit, release the lock and exit 0.

    With --read-only it holds nothing and runs no daemon: it answers searches, stats and
    core-block reads from the index its home's writer keeps (a PostgreSQL index any number of
    servers on other machines share, each over a clone of the home), and refuses writes.
    With --read-only --index URL and no --home nor --index-schema, it serves every home of that
    database with no copy of any: GET /homes, then /homes/HOME/memory/archival, .../core and
    .../stats, each checked against the tokens of the home it names (its writer publishes them).

    With --remote NAME it also shares the home through that git remote (pull, merge by file
    kind, push), as `syncd watch --remote` does; not with --read-only, which holds nothing."""
    if remote is not None and read_only:
        raise click.UsageError("--remote shares a home this server holds; a --read-only server holds none")
    from ..daemon.logfile import daemon_log
    from ..home import Home
    from ..server.serve import serve

    if read_only and index_url is not None and home is None and index_schema is None:
        _serve_database(index_url, host, port)
        return
    root = resolve_home(home)
    if remote is not None:
        from ..engine.sharing import check_remote

        check_remote(root, remote)  # before the model, the index and the port are taken
    settings = load_settings()
    if index_url is not None or index_schema is not None:
        from ..index.backend import validate_url

        updates = {"index_url": validate_url(index_url) if index_url else settings.index_url}
        settings = settings.model_copy(update={**updates, "index_schema": index_schema or settings.index_schema})
    handler = daemon_log(Home(root))
    try:
        serve(
            root,
            settings,
            host,
            port,
            cors_origins=cors_origins,
            on_ready=lambda url: click.echo(
                f"syncd serving {Home(root).root} on {url} (MCP: {url}/mcp)" + (", read-only" if read_only else ""),
                err=True,
            ),
            read_only=read_only,
            remote=remote,
            pull_every=pull_every,
        )
    finally:
        logging.getLogger("syncd").removeHandler(handler)
        handler.close()


def _serve_database(index_url: str, host: str, port: int) -> None:
    """``syncd serve --read-only --index URL``: every home of the database (server.database_server)."""
    from ..index.backend import validate_url
    from ..server.database_server import serve_database
    from ..server.serve import check_listen

    check_listen(host, port)
    settings = load_settings()
    settings = settings.model_copy(update={"index_url": validate_url(index_url)})
    serve_database(
        settings.index_url,
        settings,
        host,
        port,
        on_ready=lambda url: click.echo(
            f"syncd serving every home of the index database on {url}, read-only", err=True
        ),
    )


@click.command("mcp")
@click.option(
    "--user",
    "user",
    default=None,
    metavar="ID",
    help="Act for this user only (default: any user, named per call; else 'default').",
)
@home_option
def mcp_command(user: str | None, home: Path | None) -> None:
    """Speak MCP over stdio (for desktop agents). Talks to the running `syncd serve` or
    `syncd watch` of the home over its local socket; with none running, holds the home itself
    (and serves the socket to others) until stdin closes. A home it may not write (a read-only
    mount, someone else's folder) it serves read-only: reads work, writes are refused saying why."""
    import anyio

    from ..control.client import ask_daemon
    from ..home import validate_id
    from ..server.mcp_server import SocketBackend, build_mcp
    from ..server.service import LOCAL_ADMIN
    from ..server.tokens import Principal

    root = Path(resolve_home(home)).resolve()
    principal = LOCAL_ADMIN if user is None else Principal(validate_id("user", user), "stdio")
    ping = ask_daemon(root, "ping", timeout=5.0)
    if ping is not None and "call" in ping.get("methods", ()):
        anyio.run(build_mcp(SocketBackend(root), principal).run_stdio_async)
        return
    _mcp_holding_the_home(root, principal)


def _mcp_holding_the_home(root: Path, principal) -> None:
    import threading

    import anyio

    from ..daemon.loop import Daemon
    from ..engine.facade import open_engine
    from ..errors import HomeError
    from ..home import write_refused
    from ..server.mcp_server import LocalBackend, build_mcp, control_methods
    from ..server.service import MemoryService

    settings = load_settings()
    try:
        engine = open_engine(root, settings=settings)
    except HomeError as exc:
        if not (isinstance(exc.__cause__, OSError) and write_refused(exc.__cause__)):
            raise
        # A home this account may not write (a read-only mount, someone else's folder) is still
        # worth reading: `syncd search` and `syncd serve --read-only` read it, so does this.
        _mcp_reading_the_home(root, principal, settings, str(exc))
        return
    with engine:
        service = MemoryService(engine)
        daemon = Daemon(engine, settings, control_methods=control_methods(lambda: service), role="syncd mcp")
        worker = threading.Thread(target=daemon.run, name="syncd-daemon", daemon=True)
        worker.start()
        try:
            anyio.run(build_mcp(LocalBackend(service), principal).run_stdio_async)
        finally:
            daemon.stop()
            worker.join()


def _mcp_reading_the_home(root: Path, principal, settings, why: str) -> None:
    """MCP over stdio on a home that cannot be written, holding nothing and running no daemon
    (whose lock, log and socket would all be refused): search and every read answer as usual;
    every write is refused with ``why`` (the lock's refusal: what was refused, and why)."""
    import anyio

    from ..engine.facade import open_engine
    from ..server.mcp_server import LocalBackend, build_mcp
    from ..server.service import MemoryService

    click.echo(f"syncd: warning: {why}; `syncd mcp` serves it read-only: reads work, writes are refused", err=True)
    with open_engine(root, settings=settings, read_only=True, looks_only=True) as engine:
        service = MemoryService(engine, read_only=True, refusal=f"this home is read-only to `syncd mcp`: {why}")
        anyio.run(build_mcp(LocalBackend(service), principal).run_stdio_async)


@click.group("token")
def token_group() -> None:
    """The bearer tokens of `syncd serve`: the admin token (.git/syncd/admin.token) and tokens
    bound to one user, which can never read or change another user's memory."""


@token_group.command("add")
@click.option("--user", "user", required=True, metavar="ID", help="The user the token acts for.")
@json_option
@home_option
def token_add(user: str, as_json: bool, home: Path | None) -> None:
    """Issue a token for one user. It is shown once; only its hash is kept (and, with a
    PostgreSQL index, published to the database's read-only servers)."""
    from ..home import Home
    from ..server.tokens import TokenStore

    root = resolve_home(home)
    info, token = TokenStore.of(Home(root)).add(user)
    if as_json:
        print_json({"id": info.id, "user": info.user, "created": info.created, "token": token})
    else:
        click.echo(token)
        click.echo(f"token {info.id} for user {info.user}: shown only now, keep it safe", err=True)
    _publish_tokens(root)


@token_group.command("list")
@json_option
@home_option
def token_list(as_json: bool, home: Path | None) -> None:
    """The user tokens (ids and users; the tokens themselves are not kept)."""
    from ..home import Home
    from ..server.tokens import TokenStore

    store = TokenStore.of(Home(resolve_home(home)))
    tokens = store.list()
    if as_json:
        print_json([{"id": t.id, "user": t.user, "created": t.created} for t in tokens])
        return
    click.echo(f"admin token: {store.admin_path}" + ("" if store.admin_token() else " (made by the first serve)"))
    for t in tokens:
        click.echo(f"{t.id}  {t.user}  {t.created}")


@token_group.command("revoke")
@click.argument("token_id", required=False)
@click.option("--user", "user", metavar="ID", help="Revoke every token of this user instead.")
@home_option
def token_revoke(token_id: str | None, user: str | None, home: Path | None) -> None:
    """Revoke one token, TOKEN_ID (see `syncd token list`; the token itself does too), or with
    --user every token of one user. A running server refuses them from its next request; with a
    PostgreSQL index, the database's read-only servers within a second (or once the home's writer
    runs, if the database is down now)."""
    from ..home import Home
    from ..server.tokens import TokenStore

    if (token_id is None) == (user is None):
        raise click.UsageError("name a TOKEN_ID or --user USER (one of the two)")
    root = resolve_home(home)
    store = TokenStore.of(Home(root))
    if token_id is not None:
        t = store.revoke(token_id)
        click.echo(f"revoked token {t.id} of user {t.user}")
    else:
        assert user is not None  # one of the two, as checked above
        gone = store.revoke_user(user)
        click.echo(
            f"revoked {len(gone)} token{'s' if len(gone) != 1 else ''} of user {user}: {', '.join(t.id for t in gone)}"
        )
    _publish_tokens(root)


def _publish_tokens(root: Path) -> None:
    """Tell the read-only servers of a shared PostgreSQL index about a token change now, not
    only when the home's writer next runs (engine.database.publish_home_tokens). The change is
    made and kept either way: a database that cannot take it now is said on stderr, and the
    writer's start publishes it."""
    from ..engine.database import publish_home_tokens
    from ..errors import IndexUnreachable, SyncdError

    later = "the index's read-only servers learn it when the home's writer (syncd serve or watch) next runs"
    try:
        if publish_home_tokens(root, load_settings()) is not None:
            click.echo("published to the index's read-only servers (they apply it within a second)", err=True)
    except IndexUnreachable as exc:
        click.echo(f"warning: {exc}; {later}", err=True)
    except SyncdError as exc:
        click.echo(f"note: not published to the index's read-only servers ({exc}); {later}", err=True)


COMMANDS = [serve_command, mcp_command, token_group]
