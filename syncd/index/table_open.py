"""Opening the index's two LanceDB tables: on disk (made where missing, for a writer), or empty
stand-ins in memory for a shared index that finds them missing and is not writing.

Why stand-ins: tables made on disk by a read (a search, ``syncd status``, a read-only home's
reader after ``.syncd/`` was deleted) would pose as a built, empty index, and ``syncd status``
would say fresh where it must say ``index missing`` until the index is rebuilt. Only a write,
under the home lock, makes the index.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from ..compat.patches import import_lancedb
from ..errors import IndexError_

if TYPE_CHECKING:
    import lancedb
    import pyarrow as pa

__all__ = ["FILES", "ENTRIES", "open_tables"]

log = logging.getLogger(__name__)

FILES = "files"
ENTRIES = "entries"

Tables = tuple["lancedb.DBConnection", "lancedb.table.Table", "lancedb.table.Table"]


class _Unmade(Exception):
    """A table's folder is there without a first version, and the caller may not make it."""


def open_tables(folder: Path, dim: int, *, shared: bool, standin: bool, create: bool = True) -> tuple[bool, Tables]:
    """Whether stand-ins were opened, and ``(db, files, entries)`` of the index at ``folder``: in
    memory when ``standin``, else in ``folder/lance``, made there where missing when ``create``.
    Without ``create``, tables half made (their folders before a first version: a writer making
    them, or killed while it did) are never made here: stand-ins are opened instead. A shared
    index (others write it too) re-checks the latest version on every read so that it sees their
    writes, and refuses an older layout (its writer rebuilds it); a writer drops and makes a
    table of an older layout anew."""
    try:
        return standin, _open(folder, dim, shared, standin, create)
    except _Unmade:
        return True, _open(folder, dim, shared, True, True)


def _open(folder: Path, dim: int, shared: bool, standin: bool, create: bool) -> Tables:
    lancedb = import_lancedb()

    from .table_rows import FILE_SCHEMA, entry_schema

    if standin:
        db = lancedb.connect("memory://")
    else:
        folder.mkdir(parents=True, exist_ok=True)
        db = lancedb.connect(str(folder / "lance"), read_consistency_interval=timedelta(0) if shared else None)
    create = create or standin
    files = _open_or_create(db, folder, FILES, FILE_SCHEMA, shared, create)
    entries = _open_or_create(db, folder, ENTRIES, entry_schema(dim), shared, create)
    return db, files, entries


def _open_or_create(
    db: lancedb.DBConnection, folder: Path, name: str, schema: pa.Schema, shared: bool, create: bool
) -> lancedb.table.Table:
    try:
        table = db.open_table(name)
    except (ValueError, FileNotFoundError):
        if not create:
            raise _Unmade(name) from None
        return db.create_table(name, schema=schema, exist_ok=True)
    if table.schema != schema:
        if shared:
            raise IndexError_(f"the index at {folder} has an older layout; run `syncd reindex`")
        log.warning("index table %s has an outdated schema; recreating it", name)
        db.drop_table(name)
        table = db.create_table(name, schema=schema)
    return table
