"""``syncd watch``: the daemon, which also answers other processes over its local socket."""

from __future__ import annotations

import logging
from pathlib import Path

import click

from .common import home_option, load_settings, resolve_home

__all__ = ["COMMANDS"]


@click.command("watch")
@click.option(
    "--reconcile-interval",
    type=click.FloatRange(min=1),
    default=None,
    metavar="SECONDS",
    help="Full reconcile every SECONDS, catching events the OS dropped "
    "(default: $SYNCD_RECONCILE_INTERVAL_S, else 300).",
)
@click.option(
    "--remote",
    default=None,
    metavar="NAME",
    help="Share the home through the git remote NAME: pull every --pull-every seconds and push "
    "what is new (see `syncd remote add`).",
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
def watch_command(reconcile_interval: float | None, remote: str | None, pull_every: float, home: Path | None) -> None:
    """Run the daemon: keep the index and git history in step with the tree until interrupted
    (SIGINT/SIGTERM finish the batch in hand, commit, and exit 0). While it runs, `syncd search`
    asks it over the home's socket instead of loading the index and the model itself."""
    from ..daemon.logfile import daemon_log
    from ..daemon.loop import Daemon
    from ..engine.facade import open_engine

    settings = load_settings()
    if remote is not None:
        from ..engine.sharing import check_remote

        check_remote(resolve_home(home), remote)  # before the model and the index are loaded
    if reconcile_interval is not None:
        settings = settings.model_copy(update={"reconcile_interval_s": reconcile_interval})
    # The lock comes first: a second daemon fails here, naming the pid that holds it.
    with open_engine(resolve_home(home), settings=settings) as engine:
        file_log = daemon_log(engine.home)
        try:
            # `syncd mcp` asks a running watch to do its calls (the servers' operations).
            from ..server.mcp_server import control_methods
            from ..server.service import MemoryService

            methods = control_methods(lambda: MemoryService(engine))
            shared = None
            if remote is not None:
                from ..daemon.sharing import RemoteSharing

                shared = RemoteSharing(engine, remote, pull_every).start(methods)
            try:
                Daemon(engine, settings, control_methods=methods).run(install_signals=True)
            finally:
                if shared is not None:
                    shared.stop()
        finally:
            logging.getLogger("syncd").removeHandler(file_log)
            file_log.close()


COMMANDS = [watch_command]
