"""Shared by the workbench tests: import it as users do, and a small home with something in it."""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import syncd

from .daemon_helpers import new_home
from .helpers import write

ANA_LOG_REL = "memory/users/ana/2026-11-22.md"
ANA_DAY = (
    "# 2026-11-22\n\n"
    "## 19:42 chat:phone session:s-117\n"
    "- [preference] Likes green tea in the morning. `drinks` <!-- id:f-tea imp:0.8 src:s-117#12 -->\n"
    "- [goal] Wants to run a half marathon.\n"
    "Some prose that stays as it is.\n"
)
BOB_DAY = (
    "# 2026-11-21\n\n"
    "## 14:03 chat:laptop session:s-204\n"
    "- [technical] Deploys with a blue-green switch. <!-- id:f-deploy imp:0.6 -->\n"
)
FILES = {
    "memory/users/ana/2026-11-22.md": ANA_DAY,
    "memory/users/bob/2026-11-21.md": BOB_DAY,
    "memory/core/persona.md": "I am the household assistant.\n",
    "memory/users/ana/core/context.md": "Ana prefers short answers.\n",
    "memory/users/ana/chats/phone/core/context.md": "On the phone: one line at most.\n",
    "vault/people/Ana.md": "# Ana\n\nNurse in [[Lyon]]; see [[Nowhere]].\n",
    "vault/Lyon.md": "# Lyon\n\nA city. Home of [[people/Ana|Ana]].\n",
}


def import_workbench():
    """``syncd.workbench`` as installed (``pip install -e '.[workbench]'``), or, in a source
    checkout run over another install of syncd (PYTHONPATH), this checkout's workbench/ loaded
    under the same name."""
    try:
        return importlib.import_module("syncd.workbench")
    except ModuleNotFoundError:
        pass
    folder = Path(syncd.__file__).resolve().parents[1] / "workbench"
    spec = importlib.util.spec_from_file_location(
        "syncd.workbench", folder / "__init__.py", submodule_search_locations=[str(folder)]
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules["syncd.workbench"] = module
    spec.loader.exec_module(module)
    return module


@contextlib.contextmanager
def open_workbench(home: Path, embedder) -> Iterator[Any]:
    """A Workbench on ``home`` that does not poll (a test refreshes it by hand), closed after."""
    bench = import_workbench().Workbench(home, poll=0, embedder=embedder)
    try:
        yield bench
    finally:
        bench.close()


def build_home(root: Path, embedder, extra: dict[str, str] | None = None) -> Path:
    home = new_home(root, embedder)
    for rel, text in {**FILES, **(extra or {})}.items():
        write(home, rel, text)
    with syncd.open(home, embedder=embedder) as engine:
        engine.sync()
        engine.commit()
    return home


def git(home: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=home, capture_output=True, text=True, check=True).stdout
