"""``syncd``'s command line run in this process: its own ``main()``, under click's CliRunner
(which swaps in the environment and the standard streams), answering as a process would.

For a command whose answer is the point (its output, its exit status, its one-line error), a
process of its own proves nothing more and pays an interpreter's start and syncd's imports each
time. What only a process shows (what it imports, a signal, a kill, the terminal, ``__main__``)
stays a real process: tests/test_cli_errors.py runs a handful of cases both ways and checks they
end alike."""

from __future__ import annotations

import subprocess
import sys

from click.testing import CliRunner

from syncd.cli import main


def run_main(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``syncd ARGS`` through ``main()`` here (``env`` added to the environment meanwhile): its
    exit status, stdout and stderr, as ``subprocess.run(..., text=True)`` would give them."""
    with CliRunner().isolation(env=env) as (stdout, stderr, _):
        code = main(list(args))
        sys.stdout.flush()
        sys.stderr.flush()
        return subprocess.CompletedProcess(list(args), code, stdout.getvalue().decode(), stderr.getvalue().decode())
