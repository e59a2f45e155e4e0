"""Pending index writes (pending.py) written to the LanceDB tables: the rows in one delete by
path, one by (path, id) and one add; the records in place or by one delete and one add. Filters
are built from escaped literals only. The tables are handed in: nothing here imports LanceDB.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa

from ..errors import IndexDamaged, IndexError_, StorageError, SyncdError
from ..home import disk_failure
from .damage import REMEDY, damaged_index, describe_error
from .pending import PendingWrites, row_delete_filters
from .records import FileRecord
from .table_rows import FILE_SCHEMA, entries_table

if TYPE_CHECKING:
    import lancedb

__all__ = ["describe_error", "paths_with_rows", "sql_literal", "write_entries", "write_error", "write_records"]

# Delete/add in slices so one SQL filter never grows without bound on a huge batch.
_PATHS_PER_FILTER = 500


def write_error(exc: Exception, where: Path, files: int) -> SyncdError:
    """What a failed write of the tables at ``where`` (``files`` files being indexed) is raised as."""
    reason = disk_failure(exc, where)
    if reason is not None:
        return StorageError(
            f"cannot write the index at {where}: {reason}; the {files} file(s) being indexed "
            "stay stale and the next sync redoes them",
            where,
            saved=False,
        )
    if damaged_index(exc) is not None:
        # LanceDB's own error, not the disk's: its tables are damaged (a write reads them too).
        return IndexDamaged(f"cannot write the index at {where}: {describe_error(exc)}; {REMEDY}")
    return IndexError_(f"cannot write the index at {where}: {describe_error(exc)}")


def sql_literal(value: str) -> str:
    """A SQL string literal for ``value``. Only used for paths read from our own tree walk and for
    already validated ids, but escaped anyway so a quote in a file name cannot change a filter."""
    if "\x00" in value:
        raise IndexError_(f"NUL in a filter value: {value!r}")
    return "'" + value.replace("'", "''") + "'"


def _in_filter(column: str, values: Sequence[str]) -> str:
    return f"{column} IN ({', '.join(sql_literal(v) for v in values)})"


def paths_with_rows(entries: lancedb.table.Table, paths: Sequence[str]) -> set[str]:
    """Which of ``paths`` the entries table holds rows of: a read, where a delete that matches
    nothing would still be a commit (a new version and fragment that every later write pays for)."""
    found: set[str] = set()
    for start in range(0, len(paths), _PATHS_PER_FILTER):
        where = _in_filter("path", paths[start : start + _PATHS_PER_FILTER])
        found.update(entries.search().where(where).select(["path"]).limit(None).to_arrow()["path"].to_pylist())
    return found


def write_entries(entries: lancedb.table.Table, batch: PendingWrites, dim: int) -> int | None:
    """Delete and add the pending rows: deletes of whole files by path, changed rows of the
    others by (path, id) in one filter, then one add. The table's new version, if any."""
    version = None
    whole = batch.whole_deletes()
    for start in range(0, len(whole), _PATHS_PER_FILTER):
        version = entries.delete(_in_filter("path", whole[start : start + _PATHS_PER_FILTER])).version
    for where in row_delete_filters(batch.row_deletes(), _PATHS_PER_FILTER, sql_literal):
        version = entries.delete(where).version
    rows, vectors = batch.new_rows()
    if rows and vectors is not None:  # rows come with their vectors
        version = entries.add(entries_table(rows, vectors, dim)).version
    return version


def write_records(files: lancedb.table.Table, batch: PendingWrites) -> int | None:
    """Write the files' latest records, after their rows. A new file's record is appended;
    the common write, one known file changed, updates its record in place: one LanceDB
    commit where a delete and an append took two (an upsert, merge_insert, costs more)."""
    latest = {path: w.record for path, w in batch.paths.items()}
    held = [path for path, w in batch.paths.items() if w.record_in_table]
    records = [record for record in latest.values() if record is not None]
    version = None
    only = latest[held[0]] if len(held) == 1 else None
    if only is not None:
        version = _update_record(files, only)
        if version is not None:
            records = [record for record in records if record.path != held[0]]
            held = []
    for start in range(0, len(held), _PATHS_PER_FILTER):
        version = files.delete(_in_filter("path", held[start : start + _PATHS_PER_FILTER])).version
    if records:
        version = files.add(pa.Table.from_pylist([r.__dict__ for r in records], schema=FILE_SCHEMA)).version
    return version


def _update_record(files: lancedb.table.Table, record: FileRecord) -> int | None:
    """Update the one row of ``record.path`` in place; the table's new version, or None when
    it has no such row (or a value no SQL literal can carry): then it is deleted and added."""
    if any("\x00" in value for value in (record.kind, record.sha, record.error or "")):
        return None
    values = {
        "kind": sql_literal(record.kind),
        "sha": sql_literal(record.sha),
        "size": str(int(record.size)),
        "mtime_ns": str(int(record.mtime_ns)),
        "error": "NULL" if record.error is None else sql_literal(record.error),
    }
    result = files.update(where=f"path = {sql_literal(record.path)}", values_sql=values)
    return result.version if result.rows_updated else None
