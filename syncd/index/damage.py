"""LanceDB's own errors, met reading the index's tables, in syncd's words: the one place every
surface (the command line, the daemon's log, the REST API, the MCP tools, the control socket)
maps them, so each says the same line with the same remedy.

LanceDB raises them as a bare ``RuntimeError("lance error: ...")`` from its Rust core, from any
read of a table whose files were cut short (a disk error, a bad copy) or are not readable by this
account; they end with a location in LanceDB's Rust source, of no use to a reader. The index is
derived from the markdown, so the remedy is always the same: remove it and rebuild it.

Nothing here imports LanceDB (the command line maps an error without loading it).
"""

from __future__ import annotations

import logging
import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from ..errors import IndexDamaged

__all__ = ["LANCE_ERROR", "REMEDY", "damaged_index", "describe_error", "open_or_remove_damaged"]

log = logging.getLogger(__name__)
Opened = TypeVar("Opened")

# How LanceDB's errors begin (a RuntimeError from its Rust core).
LANCE_ERROR = "lance error:"
# LanceDB's errors that say the process ran short, not that the tables are damaged (ENOMEM,
# ENFILE, EMFILE): removing the index would not help, and a bug of ours shown as "damaged" would
# send a person to rebuild for nothing. They stay the errors they are.
_SHORT_OF = (12, 23, 24)
# LanceDB ends its messages with where in its Rust source they were raised: no use to a reader.
_RUST_LOCATION = re.compile(r",?\s*/\S+\.rs:\d+:\d+")
# `syncd reindex` removes tables it cannot read (open_or_remove_damaged) and builds them anew;
# beside a running daemon, which keeps answering from the rows it holds in memory, it asks the
# daemon, whose rebuild swaps the new tables in.
REMEDY = (
    "it is derived from the markdown: run `syncd reindex` to rebuild it "
    "(the embedding cache beside it keeps every vector, so nothing is embedded again)"
)


def describe_error(exc: BaseException) -> str:
    """LanceDB's message without the Rust source locations it appends."""
    return _RUST_LOCATION.sub("", str(exc)).strip() or type(exc).__name__


def damaged_index(exc: BaseException) -> IndexDamaged | None:
    """The :class:`IndexDamaged` that ``exc`` is shown as when it is LanceDB's own error (its
    message the one line every surface prints), None for any other error."""
    if isinstance(exc, IndexDamaged):
        return exc
    if not isinstance(exc, RuntimeError) or not str(exc).startswith(LANCE_ERROR):
        return None
    if any(f"os error {code})" in str(exc) for code in _SHORT_OF):
        return None
    found = IndexDamaged(f"the index cannot be read ({describe_error(exc)}); {REMEDY}")
    found.__cause__ = exc
    return found


def open_or_remove_damaged(opened: Callable[[], Opened], state_dir: Path, remove: bool) -> Opened:
    """``opened()``, the index under ``state_dir``; when that finds its LanceDB tables damaged
    and ``remove`` (the caller holds the home's lock and rebuilds next: ``syncd reindex``), the
    ``index`` folder is removed and ``opened()`` makes an empty index instead. It is renamed
    aside first, so that a kill halfway never leaves part of a folder to be read as an index;
    the embedding cache beside it is kept, and the rebuild embeds nothing again."""
    try:
        return opened()
    except Exception as exc:
        if not remove or damaged_index(exc) is None:
            raise
        log.warning("the index cannot be read (%s): removing it to rebuild it", describe_error(exc))
    aside = state_dir / "index.damaged"
    shutil.rmtree(aside, ignore_errors=True)
    os.replace(state_dir / "index", aside)
    shutil.rmtree(aside, ignore_errors=True)
    return opened()
