"""The ``syncd`` command: a thin click shell over the library, one module per command group.

  home_commands     init, demo
  index_commands    sync, reindex, search, status
  history_commands  log, blame, revert
  remote_commands   remote, pull, push (and the merge driver git calls)
  daemon_commands   watch
  serve_commands    serve, mcp, token
  wiki_commands     lint, links, backlinks
  session_commands  sessions (show, state)

Every command takes ``--home`` (default: ``$SYNCD_HOME``, then the nearest enclosing home). Bad
input never shows a traceback: a SyncdError, a usage error or an OS error is one line on stderr
starting ``syncd: error:`` and a non-zero exit (1 for errors, 2 for usage); a closed stdout
(``syncd demo | head -3``) ends the command quietly with 141, as SIGPIPE would. Anything else is a
bug and keeps its traceback.

Heavy modules (LanceDB, the model, pydantic) are imported inside the commands that use
them, so ``--help``, ``--version`` and a search answered by the daemon start quickly.
"""

from __future__ import annotations

import errno
import gc
import io
import logging
import os
import sys
from typing import NoReturn

import click

from .._version import __version__
from ..errors import SyncdError
from . import (
    daemon_commands,
    history_commands,
    home_commands,
    index_commands,
    remote_commands,
    serve_commands,
    session_commands,
    wiki_commands,
)
from .common import say

__all__ = ["main", "cli", "run"]

log = logging.getLogger("syncd")

# 128 + SIGPIPE: what a shell reports for a command whose reader went away.
_EXIT_PIPE_CLOSED = 141
_EXIT_ERROR = 1
_EXIT_USAGE = 2
_EXIT_INTERRUPTED = 130


class _PipeClosed(Exception):
    """stdout's reader went away; raised past click, which would otherwise exit 1 on EPIPE."""


class _SyncdGroup(click.Group):
    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except BrokenPipeError:
            raise _PipeClosed() from None


@click.group(
    cls=_SyncdGroup,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(__version__, "--version", prog_name="syncd", message="%(prog)s %(version)s")
@click.option("-v", "--verbose", count=True, help="More log output (-vv for debug).")
def cli(verbose: int) -> None:
    """Filesystem-native memory for AI agents: markdown is the truth, LanceDB the index, git the
    history."""
    level = logging.WARNING - 10 * min(verbose, 2)
    handler = logging.StreamHandler()
    handler.setFormatter(_ShownFormatter("%(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=level, handlers=[handler])


class _ShownFormatter(logging.Formatter):
    """Log lines on the terminal with their control characters shown as escapes, as every other
    line the CLI prints: a message names files (a vault page called ``\x1b]0;...\x07.md``
    retitled the terminal from ``syncd -v sync``, or from a warning at any level)."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        from .common import shown

        return shown(super().formatMessage(record))


_GROUPS = (
    home_commands,
    index_commands,
    history_commands,
    remote_commands,
    daemon_commands,
    serve_commands,
    wiki_commands,
    session_commands,
)
for _group in _GROUPS:
    for _command in _group.COMMANDS:
        cli.add_command(_command)


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _error(message: str) -> None:
    # An error may name what the user typed or what a file holds: its control characters are shown.
    say(f"syncd: error: {_one_line(message)}", err=True)


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush cannot raise again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        # stdout is not a real file (a test's capture): nothing will flush into a closed pipe.
        pass


class _ClosedStdout(io.RawIOBase):
    """What stands for a stdout that was closed when syncd started (``syncd ... >&-``), for which
    Python leaves sys.stdout None and click prints nothing, silently: a command that writes to it
    fails as writing to a closed descriptor does (a token shown only once is not lost unsaid),
    and one that writes nothing there (``syncd watch >&-``, a daemon) runs as usual."""

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        raise OSError(errno.EBADF, "standard output is closed")


def main(argv: list[str] | None = None) -> int:
    """Run ``syncd`` with ``argv`` (default: sys.argv[1:]) and return its exit status."""
    if sys.stdout is None:
        sys.stdout = io.TextIOWrapper(_ClosedStdout(), encoding="utf-8", write_through=True)
    try:
        result = cli.main(args=argv, prog_name="syncd", standalone_mode=False)
        # Here, not at exit: a reader that went away must surface while we can still handle it.
        sys.stdout.flush()
    except _PipeClosed:
        _silence_stdout()
        return _EXIT_PIPE_CLOSED
    except click.UsageError as exc:
        command = exc.ctx.command_path if exc.ctx is not None else "syncd"
        _error(f"{exc.format_message()} (see `{command} --help`)")
        return _EXIT_USAGE
    except click.ClickException as exc:
        _error(exc.format_message())
        return exc.exit_code
    except click.Abort:
        click.echo("syncd: interrupted", err=True)
        return _EXIT_INTERRUPTED
    except SyncdError as exc:
        _error(str(exc))
        return _EXIT_ERROR
    except BrokenPipeError:
        _silence_stdout()
        return _EXIT_PIPE_CLOSED
    except OSError as exc:
        # The disk or the OS refused (a permission, a full disk): the user's to fix, not a bug.
        log.debug("OS error", exc_info=True)
        where = f": {exc.filename}" if exc.filename else ""
        _error(f"{exc.strerror or exc}{where}")
        return _EXIT_ERROR
    except RuntimeError as exc:
        # LanceDB's own error, reading tables that are damaged or not ours to read: every
        # command met it, `syncd reindex` too, as a traceback.
        from ..index.damage import damaged_index

        damaged = damaged_index(exc)
        if damaged is None:
            raise
        _error(str(damaged))
        return _EXIT_ERROR
    except SystemExit as exc:
        # click exits by itself only when writing its own output (help) hit a closed pipe.
        return exc.code if isinstance(exc.code, int) else _EXIT_ERROR
    return int(result or 0)


def run() -> NoReturn:
    """The ``syncd`` program (its console script, and ``python -m syncd``): :func:`main`, then
    exit with its status."""
    status = main()
    # At exit the interpreter's collector walks every object the command left behind (LanceDB's
    # modules, the model's, the rows it read; for `syncd serve` or `watch` on a large home,
    # millions of rows and word postings: seconds of a stop on a busy machine), CPU in proportion
    # to them for memory the process hands back whole anyway. Frozen, they are not walked;
    # atexit handlers, flushes and module teardown run as before. Here, not in main(): tests
    # run main() in-process, beside others.
    gc.freeze()
    sys.exit(status)
