"""The ``syncd`` command: a thin shell over the library.

Every command takes ``--home`` (default: ``SYNCD_HOME``, then the nearest enclosing home). A
SyncdError becomes one clear line on stderr and exit status 1; anything else is a bug and keeps its
traceback.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from ..config import Settings
from ..errors import SyncdError
from ..home import find_home

__all__ = ["main", "build_parser"]

log = logging.getLogger("syncd")


def _resolve_home(args: argparse.Namespace, settings: Settings) -> Path:
    if args.home is not None:
        return Path(args.home)
    if settings.home is not None:
        return settings.home
    return find_home()


def _print_json(value: object) -> None:
    print(json.dumps(value, indent=2, ensure_ascii=False, default=str))


def cmd_init(args: argparse.Namespace, settings: Settings) -> int:
    from ..initialize import init

    target = Path(args.path or args.home or settings.home or ".")
    report = init(target, settings)
    if not report.changed:
        print(f"{report.home} is already a syncd home; nothing to do")
        return 0
    for rel in report.created:
        print(f"  created {rel}")
    if report.git_initialised:
        print(f"  initialised git repository in {report.home}")
    print(f"syncd home ready at {report.home}" + (f" (commit {report.commit[:10]})" if report.commit else ""))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="syncd",
        description="Filesystem-native memory for AI agents: markdown is the truth, "
        "LanceDB the index, git the history.",
    )
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more log output (-vv for debug)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def command(name: str, func, help_text: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.add_argument("--home", type=Path, default=None, help="the memory home (default: $SYNCD_HOME, "
                       "then the nearest enclosing home)")
        p.set_defaults(func=func)
        return p

    p = command("init", cmd_init, "Create a memory home, or adopt an existing folder without changing its files.")
    p.add_argument("path", nargs="?", help="folder to create or adopt (default: --home or the current folder)")

    from . import history_commands, index_commands

    index_commands.register(command)
    history_commands.register(command)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    level = logging.WARNING - 10 * min(args.verbose, 2)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    try:
        settings = Settings()
        args.resolve_home = lambda: _resolve_home(args, settings)
        return int(args.func(args, settings) or 0)
    except SyncdError as exc:
        print(f"syncd: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("syncd: interrupted", file=sys.stderr)
        return 130

