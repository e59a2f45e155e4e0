"""A mirror of the index's ``files`` table in sqlite, so ``syncd status`` needs no LanceDB.

Importing LanceDB costs seconds; answering "which files are stale" needs only what the index
knows of each file (path, kind, blob sha, size, mtime, error) plus how many facts and chunks it
holds. The writer keeps that here, in ``index/files.sqlite``, changed in the same steps as the
LanceDB tables, and readers take it instead of opening LanceDB.

Exactness: the mirror is only believed when it names the LanceDB versions it reflects. Its
``stamp`` holds, for both tables, the newest manifest in ``<table>.lance/_versions`` (its version,
inode and mtime), read from the directory listing, which costs microseconds. Every write to the
tables makes a new manifest, so a write the mirror missed (a crash between the two, a write by an
older syncd, a lost sqlite commit) leaves a stamp that no longer matches, and readers fall back
to LanceDB. A writer whose mirror does not match rebuilds it from the tables.

One difference from the tables is allowed: a file's stat (size, mtime) here may be newer than
the files table's, for the same bytes (store.py: a restat made by a process with no table open
goes to the mirror alone). A stat only spares a hash, so a reader of either copy gets the same
plan; the table's older one costs its reader that hash.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..home import write_refused
from .records import FileRecord, read_meta

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "MIRROR_NAME",
    "FilesMirror",
    "MirrorSnapshot",
    "folder_identity",
    "lance_stamp",
    "read_meta",
    "read_mirror",
    "table_stamp",
]

log = logging.getLogger(__name__)

MIRROR_NAME = "files.sqlite"
_TABLES = ("entries", "files")
_FORMAT = "1"
# Lance's newer manifest names count down from 2**64 - 1 so the newest sorts first.
_U64_MAX = 2**64 - 1
_READ_ATTEMPTS = 3

_SCHEMA = """
CREATE TABLE IF NOT EXISTS files (
    path TEXT PRIMARY KEY, kind TEXT NOT NULL, sha TEXT NOT NULL, size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL, error TEXT, facts INTEGER NOT NULL, chunks INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT);
"""


def _newest_manifest(versions: Path) -> str | None:
    best: tuple[int, str] | None = None
    for name in os.listdir(versions):
        stem, _, ext = name.partition(".")
        if ext != "manifest" or not stem.isdigit():
            continue
        number = int(stem)
        version = _U64_MAX - number if number > 2**63 else number
        if best is None or version > best[0]:
            best = (version, name)
    if best is None:
        return None
    st = os.stat(versions / best[1])
    return f"{best[0]}:{st.st_ino}:{st.st_mtime_ns}"


def folder_identity(folder: Path) -> tuple[tuple[int, int], ...] | None:
    """The folders the index at ``folder`` lives in (device and inode of that folder, of its
    LanceDB folder and of each table's), or None when one of them is missing: a table deleted
    or made anew under an open index changes it."""
    lance = folder / "lance"
    found = []
    for path in (folder, lance, *(lance / f"{table}.lance" for table in _TABLES)):
        try:
            st = os.stat(path)
        except OSError:
            return None
        found.append((st.st_dev, st.st_ino))
    return tuple(found)


def table_stamp(lance_dir: Path, table: str) -> str | None:
    """Which version of one LanceDB table is on disk now (its newest manifest's version, inode
    and mtime); None when it is missing or not laid out as expected."""
    try:
        return _newest_manifest(lance_dir / f"{table}.lance" / "_versions")
    except OSError:
        return None


def lance_stamp(lance_dir: Path) -> str | None:
    """Which versions of the LanceDB tables are on disk now; None when a table is missing or
    its folder is not laid out as expected (then nothing is believed)."""
    parts = []
    for table in _TABLES:
        newest = table_stamp(lance_dir, table)
        if newest is None:
            return None
        parts.append(f"{table}={newest}")
    return " ".join(parts)


@dataclass(frozen=True)
class MirrorSnapshot:
    """What the index knows of files, as of one LanceDB version."""

    files: dict[str, FileRecord]
    facts: int
    chunks: int


def _connect(path: Path, read_only: bool) -> sqlite3.Connection:
    if read_only:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5.0)
    else:
        conn = sqlite3.connect(path, timeout=30.0, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA journal_mode=WAL")
        # The stamp, not fsync, guarantees exactness: a lost commit only makes the mirror mismatch.
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.executescript(_SCHEMA)
    return conn


def _read_once(conn: sqlite3.Connection, lance_dir: Path) -> MirrorSnapshot | None:
    before = lance_stamp(lance_dir)
    if before is None:
        return None
    conn.execute("BEGIN")
    try:
        meta = dict(conn.execute("SELECT key, value FROM meta"))
        if meta.get("format") != _FORMAT or meta.get("stamp") != before:
            return None
        # One query for the records, one for the sums: a one-shot search reads them all.
        rows = conn.execute("SELECT path, kind, sha, size, mtime_ns, error FROM files").fetchall()
        files = {row[0]: FileRecord(*row) for row in rows}
        facts, chunks = conn.execute("SELECT TOTAL(facts), TOTAL(chunks) FROM files").fetchone()
    finally:
        conn.execute("COMMIT")
    return MirrorSnapshot(files, int(facts), int(chunks))


def read_mirror(folder: Path) -> MirrorSnapshot | None:
    """What the index at ``folder`` knows of files, or None when the mirror cannot vouch for it
    (missing, or not of the LanceDB version on disk): then ask LanceDB itself. An index never
    created holds nothing."""
    lance_dir = folder / "lance"
    if not lance_dir.exists():
        return MirrorSnapshot({}, 0, 0)
    path = folder / MIRROR_NAME
    if not path.is_file():
        return None
    try:
        conn = _connect(path, read_only=True)
    except sqlite3.Error:
        return None
    try:
        # A writer between our two looks makes them disagree; it is done in a few milliseconds.
        for _ in range(_READ_ATTEMPTS):
            snapshot = _read_once(conn, lance_dir)
            if snapshot is not None:
                return snapshot
    except sqlite3.Error as exc:
        log.debug("cannot read the files mirror %s: %s", path, exc)
    finally:
        conn.close()
    return None


def _not_kept(what: str, exc: sqlite3.Error) -> None:
    """Say that a change of the mirror was not made. Quietly when this process may not write
    there at all (a search or a status of a home on a read-only mount, or someone else's): that
    costs only the speed of the next status, and is no news to the person who made it so."""
    level = logging.INFO if write_refused(exc) else logging.WARNING
    log.log(level, "files mirror not %s (status will read the index instead): %s", what, exc)


class _Abandon(Exception):
    """Leave a mirror transaction without changing anything: the mirror no longer matches."""


class FilesMirror:
    """The writer's side: changed with the tables, under the home lock. Never fails a write of
    the index: a mirror that could not be updated simply stops matching, and is rebuilt."""

    def __init__(self, folder: Path):
        self.path = folder / MIRROR_NAME
        self.lance_dir = folder / "lance"
        self._conn: sqlite3.Connection | None = None

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            self._conn = _connect(self.path, read_only=False)
        return self._conn

    def stamp(self) -> str | None:
        return lance_stamp(self.lance_dir)

    def current(self, stamp: str | None) -> bool:
        """Whether the mirror reflects the tables at ``stamp``."""
        if stamp is None:
            return False
        try:
            row = self._connection().execute("SELECT value FROM meta WHERE key = 'stamp'").fetchone()
            fmt = self._connection().execute("SELECT value FROM meta WHERE key = 'format'").fetchone()
        except sqlite3.Error:
            return False
        return row is not None and row[0] == stamp and fmt is not None and fmt[0] == _FORMAT

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction: committed when the block ends, rolled back if it raises."""
        conn = self._connection()
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def update(
        self, before: str | None, changes: Iterable[tuple[str, FileRecord | None, tuple[int, int] | None]]
    ) -> bool:
        """Apply one index write: ``(path, record or None when gone, (facts, chunks) or None when
        its rows stayed)``. Only if the mirror reflected the tables at ``before``; returns whether
        it now reflects them as they are."""
        try:
            with self._transaction() as conn:
                row = conn.execute("SELECT value FROM meta WHERE key = 'stamp'").fetchone()
                if before is None or row is None or row[0] != before:
                    raise _Abandon
                for path, record, counts in changes:
                    if record is None:
                        conn.execute("DELETE FROM files WHERE path = ?", (path,))
                    elif counts is None:
                        cursor = conn.execute(
                            "UPDATE files SET kind = ?, sha = ?, size = ?, mtime_ns = ?, error = ? WHERE path = ?",
                            (record.kind, record.sha, record.size, record.mtime_ns, record.error, path),
                        )
                        if cursor.rowcount != 1:
                            raise _Abandon  # rows kept for a file we do not know: we cannot count them
                    else:
                        conn.execute(
                            "INSERT OR REPLACE INTO files VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                            (path, record.kind, record.sha, record.size, record.mtime_ns, record.error, *counts),
                        )
                self._set_stamp(conn, self.stamp())
        except _Abandon:
            return False
        except sqlite3.Error as exc:
            _not_kept("updated", exc)
            return False
        return True

    def refill(self, files: pa.Table, entries: pa.Table) -> None:
        """:meth:`replace` from the tables themselves (each file's fact and chunk counts too)."""
        from .table_rows import files_and_counts

        self.replace(*files_and_counts(files, entries))

    def replace(self, records: Iterable[FileRecord], counts: Mapping[str, tuple[int, int]]) -> None:
        """Make the mirror a copy of the tables as they are now (after a crash, an old syncd)."""
        stamp = self.stamp()
        try:
            with self._transaction() as conn:
                conn.execute("DELETE FROM files")
                conn.executemany(
                    "INSERT OR REPLACE INTO files VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    [
                        (r.path, r.kind, r.sha, r.size, r.mtime_ns, r.error, *counts.get(r.path, (0, 0)))
                        for r in records
                    ],
                )
                self._set_stamp(conn, stamp)
        except sqlite3.Error as exc:
            _not_kept("rebuilt", exc)

    def restamp(self, before: str | None) -> None:
        """The tables got new versions with the same content (compaction): carry the mirror over,
        if it reflected them before."""
        try:
            conn = self._connection()
            conn.execute("BEGIN IMMEDIATE")
            row = conn.execute("SELECT value FROM meta WHERE key = 'stamp'").fetchone()
            if before is not None and row is not None and row[0] == before:
                self._set_stamp(conn, self.stamp())
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            _not_kept("restamped", exc)

    def invalidate(self) -> None:
        """Before the tables are dropped: until rebuilt, the mirror vouches for nothing."""
        try:
            self._set_stamp(self._connection(), None)
        except sqlite3.Error as exc:
            log.warning("cannot invalidate the files mirror, removing it: %s", exc)
            self.close()
            self.path.unlink(missing_ok=True)

    @staticmethod
    def _set_stamp(conn: sqlite3.Connection, stamp: str | None) -> None:
        conn.execute("INSERT OR REPLACE INTO meta VALUES ('format', ?)", (_FORMAT,))
        conn.execute("INSERT OR REPLACE INTO meta VALUES ('stamp', ?)", (stamp,))

    def close(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(sqlite3.Error):
                self._conn.close()
            self._conn = None
