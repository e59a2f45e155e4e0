"""``python -m syncd``: the same as the ``syncd`` command."""

from .cli import run

run()
