"""What every command shares: the ``--home`` option, settings, checked ids, JSON output.

Nothing here imports pydantic, LanceDB or the model: a command pays only for what it
uses, so ``syncd --help`` and a search the daemon answers start in a blink (pydantic only
when a SYNCD_* value needs its reading, see syncd.config).
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from ..errors import ConfigError, HomeError

__all__ = ["home_option", "json_option", "resolve_home", "load_settings", "print_json", "id_option"]

home_option = click.option(
    "--home",
    type=click.Path(path_type=Path),
    envvar="SYNCD_HOME",
    default=None,
    help="The memory home (default: $SYNCD_HOME, then the nearest enclosing home).",
)

json_option = click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")


def _checked_id(kind: str):
    def check(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
        from ..home import validate_id

        # InvalidIdError (exit 1, as from the library), before the id reaches a path or a request.
        return None if value is None else validate_id(kind, value)

    return check


def id_option(name: str, kind: str, help_text: str):
    """An option holding a user/chat id, refused before it becomes a path, a filter or a request."""
    return click.option(name, kind, default=None, metavar="ID", callback=_checked_id(kind), help=help_text)


def resolve_home(home: Path | None) -> Path:
    """``--home`` (or $SYNCD_HOME) when given, else the nearest enclosing home; checked to be a
    syncd home here, so a wrong folder is one clear line before anything heavy loads."""
    from ..home import Home, find_home

    if home is None:
        return find_home()
    if not home.exists():
        raise HomeError(f"the home {home} does not exist; run `syncd init {home}` to create it")
    if not home.is_dir():
        raise HomeError(f"the home {home} is not a folder")
    Home(home).require()
    return home


def load_settings():
    """Settings from the environment; a bad SYNCD_* value is one clear error, not a traceback."""
    from ..config import Settings

    try:
        return Settings()
    except ValueError as exc:
        # pydantic's ValidationError, a ValueError: imported only once a value was refused.
        from pydantic import ValidationError

        if not isinstance(exc, ValidationError):
            raise
        problems = "; ".join(
            f"SYNCD_{'_'.join(str(p) for p in err['loc']).upper()}: {err['msg']}" for err in exc.errors()
        )
        raise ConfigError(f"invalid setting in the environment: {problems}") from None


def print_json(value: object) -> None:
    click.echo(json.dumps(value, indent=2, ensure_ascii=False, default=str))
