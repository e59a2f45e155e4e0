"""The ``syncd`` program: its console script (:func:`launch`) and ``python -m syncd``.

Here, outside ``syncd.cli``: importing the CLI (click, the commands' modules) takes a few tens of
milliseconds, in which a Ctrl-C raised KeyboardInterrupt with a Python traceback, before the
CLI's own handling of it was there to catch it."""

from __future__ import annotations

import sys

_EXIT_INTERRUPTED = 130


def launch() -> None:
    """Import the CLI and run it; interrupted while importing, say so in one line."""
    try:
        from .cli import run
    except KeyboardInterrupt:
        sys.stderr.write("syncd: interrupted\n")
        raise SystemExit(_EXIT_INTERRUPTED) from None
    run()


if __name__ == "__main__":
    launch()
