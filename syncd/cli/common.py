"""What every command shares: the ``--home`` option, settings, checked ids, JSON output, and
text output that shows the control characters of what it prints as escapes.

Nothing here imports pydantic, LanceDB or the model: a command pays only for what it
uses, so ``syncd --help`` and a search the daemon answers start in a blink (pydantic only
when a SYNCD_* value needs its reading, see syncd.config).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import click

from ..errors import ConfigError, HomeError

__all__ = [
    "home_option",
    "json_option",
    "resolve_home",
    "load_settings",
    "print_json",
    "id_option",
    "PathArg",
    "shown",
    "say",
    "echo_json",
]


class PathArg(click.Path):
    """A folder or file given on the command line, never an empty one: ``syncd init "$DIR"``
    with DIR unset would otherwise make a home of the current folder (click reads "" as ".")."""

    def convert(self, value, param, ctx):
        if isinstance(value, str) and not value.strip():
            self.fail("an empty path; name a folder ('.' is the current one)", param, ctx)
        return super().convert(value, param, ctx)


home_option = click.option(
    "--home",
    type=PathArg(path_type=Path),
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


# Control characters (category Cc). File content, file names, commit messages and the arguments
# echoed in an error may hold any, and a terminal acts on them: an escape sequence retitles or
# recolours it or moves the cursor over what was printed, a newline makes one entry read as two.
# And lone surrogates: the bytes of a file name that is not UTF-8, as Python reads it, which no
# encoder takes.
_UNSHOWABLE = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
_JSON_UNSHOWABLE = re.compile(r"[\x7f-\x9f\ud800-\udfff]")


def _escape(char: str) -> str:
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:  # os.fsdecode's stand-in for the byte it could not decode
        return f"\\x{code - 0xDC00:02x}"
    return repr(char)[1:-1]


def shown(text: str) -> str:
    """``text`` with each control character written as its escape, as repr() does (``\\x1b``),
    and each undecodable byte of a file name as ``\\xe9``."""
    return _UNSHOWABLE.sub(lambda m: _escape(m.group()), text)


def say(line: str, err: bool = False) -> None:
    """Print one line of text output (stdout, or stderr with ``err``), its control characters
    shown as escapes: what every text line holding a file's or git's words goes through."""
    click.echo(shown(line), err=err)


def print_json(value: object) -> None:
    echo_json(json.dumps(value, indent=2, ensure_ascii=False, default=str) + "\n")


def echo_json(text: str) -> None:
    """JSON text on stdout. json.dumps escapes the control characters below U+0020; the rest
    (DEL and C1, which some terminals act on too) and lone surrogates (which no encoder takes)
    are escaped here: the same JSON value."""
    click.echo(_JSON_UNSHOWABLE.sub(lambda m: f"\\u{ord(m.group()):04x}", text), nl=False)
