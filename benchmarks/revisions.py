"""The code of another revision beside this one, so a benchmark runs both side by side in one run.

``extract(rev, into)`` writes the ``syncd`` package of git revision ``rev`` under ``into`` (git
archive: the repository is only read). A child process runs that code with ``PYTHONPATH=into``
(``env_for``), and this checkout's with ``PYTHONPATH`` set to this checkout.
"""

from __future__ import annotations

import os
import subprocess
import tarfile
import tempfile
from pathlib import Path

__all__ = ["REPO", "env_for", "extract"]

REPO = Path(__file__).resolve().parents[1]


def extract(rev: str, into: Path) -> Path:
    """``into``, holding the ``syncd`` package as revision ``rev`` has it."""
    into.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryFile() as archive:
        subprocess.run(["git", "archive", rev, "syncd"], cwd=REPO, stdout=archive, check=True)
        archive.seek(0)
        with tarfile.open(fileobj=archive) as tar:
            tar.extractall(into, filter="data")
    return into


def env_for(code: Path) -> dict[str, str]:
    """The environment of a child process that imports ``syncd`` from ``code``."""
    return {**os.environ, "PYTHONPATH": str(code)}
