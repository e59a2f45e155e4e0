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

import contextlib
import logging
import os
import re
import shutil
import time
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
    the embedding cache beside it is kept, and the rebuild embeds nothing again. A folder that
    is a link is not followed: the link is removed, what it links to left as it is."""
    try:
        return opened()
    except Exception as exc:
        if not remove or damaged_index(exc) is None:
            raise
        log.warning("the index cannot be read (%s): removing it to rebuild it", describe_error(exc))
    folder = state_dir / "index"
    if folder.is_symlink():
        # Kept elsewhere by a link (a bigger disk): nothing is removed through it (it may lead
        # anywhere); the link goes, and the index is made anew under the home's .syncd/.
        log.warning(
            "the index folder is a link to %s: removing the link, leaving what it links to", os.readlink(folder)
        )
    # What an earlier removal left (a kill halfway, a link, files not ours to remove) is removed
    # first; what of it stays takes no new name's place: a rename onto it fails ("Directory not
    # empty", "Not a directory"), and every `syncd reindex` after it did.
    for left in state_dir.glob("index.damaged*"):
        _remove(left)
    aside = state_dir / "index.damaged"
    if os.path.lexists(aside):
        aside = state_dir / f"index.damaged-{os.getpid()}-{time.time_ns()}"
    os.replace(folder, aside)
    _remove(aside)
    return opened()


def _remove(path: Path) -> None:
    """Remove ``path`` as far as we may: a link itself (never what it links to), else the tree."""
    if path.is_symlink() or path.is_file():
        with contextlib.suppress(OSError):
            path.unlink()
    else:
        shutil.rmtree(path, ignore_errors=True)
