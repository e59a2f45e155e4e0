"""The LanceDB index under ``HOME/.syncd/index``: files and entries (facts and chunks).

Two tables: ``files`` (one row per markdown file: its blob sha, stat and last error) and
``entries`` (facts and chunks in one table, told apart by ``kind``, so one vector search and one
full-text search answer a query over both). Rows change only file by file: delete the file's rows,
add its new ones, then record its new sha, in that order, so a crash in between leaves the file
looking stale and the next sync redoes it. A write that fails (a full disk) is raised as a
StorageError, or an IndexError_ for any other LanceDB failure, never as LanceDB's own RuntimeError;
the paths it was writing are remembered (``unwritten_paths``) so the next sync of any path in this
process redoes them too, rather than only a full sync.

Queries run on an in-memory copy of the entries (rowcache.py: exact vectors, BM25 postings, the
rows themselves), loaded from the table and patched by our own writes; LanceDB is the durable
store every process shares. A reader with no rows loaded (a one-shot ``syncd search``) answers
from the rows image instead (rows_image.py) while it holds the table on disk: no LanceDB imported. The files table is kept in memory the same way (``files()``), and a
write knows from both copies which LanceDB operations it can skip: each one, even a delete that
matches nothing, is a LanceDB commit of several milliseconds.

The copy of the entries is loaded by the first query, not by writes: a process that only syncs
(``syncd sync``, a daemon before its first search) compares a changed file with the table's rows
of that file alone and writes the tables directly (``_apply_to_tables``). LanceDB itself is
imported and its tables opened on first use; until then a writer takes the files from the files
mirror (files_mirror.py) when it vouches for the tables, so a sync that finds nothing changed
never loads LanceDB.

Filters are built from validated ids and from paths escaped as SQL literals; nothing a query or a
user typed is ever pasted into a filter.
"""

from __future__ import annotations

import logging
import shutil
import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import IndexError_, SyncdError
from .compaction import WRITES_BEFORE_OPTIMIZE, compact_table, ensure_id_index, writes_before_optimize
from .files_mirror import FilesMirror, folder_identity, lance_stamp, read_mirror
from .pending import PendingWrites, replaces_whole
from .records import (
    REPLACING,
    SCHEMA_VERSION,
    EntryRow,
    FileRecord,
    FileUpdate,
    StaleRows,
    mark_replacing,
    meta_compatible,
    only_restats,
    read_meta,
    rebuild_resumable,
    rows_of_model,
    write_meta,
)
from .table_open import open_tables
from .write_behind import BackgroundWriter

if TYPE_CHECKING:
    # numpy and pyarrow, with the modules made of them (the rows in memory, the rows image, the
    # tables' rows), are imported where rows are read or written: a writer whose files mirror
    # vouches for the tables and finds nothing changed (a no-op `syncd sync`) needs none of them.
    import lancedb
    import pyarrow as pa

    from .rowcache import RowCache
    from .rows_image import ImageKeeper, ImageRows

__all__ = ["Index", "SCHEMA_VERSION", "StaleRows"]

log = logging.getLogger(__name__)

# Paths whose last applied rows are remembered (_applied_rows): those being written to.
_REMEMBERED_PATHS = 64


class Index:
    """One home's index. Writers are serialised by the home lock; readers may run beside them."""

    def __init__(self, folder: Path, dim: int, model_id: str, read_only: bool = False, shared: bool = False):
        self.folder = folder
        self.dim = dim
        self.model_id = model_id
        self.read_only = read_only
        # Other processes write this index too (we are a reader, or a writer only while we hold
        # the home lock for one change): every read re-checks the table's version.
        self.shared = shared or read_only
        # _lock guards the in-memory copies (rows, records) and is all a reader takes; _writing
        # makes writers take turns. A write does its LanceDB commits holding _writing only and
        # takes _lock just to patch the copies: a query never waits for the disk.
        self._lock = threading.RLock()
        self._writing = threading.RLock()
        self._rows: RowCache | None = None  # made on first use (_matrix)
        self._matrix_version: int | None = None
        # The files table by path, kept like the rows: loaded on first use, patched by our
        # writes, and in a shared index re-read whenever the table has a newer version.
        self._records: dict[str, FileRecord] | None = None
        self._records_version: int | None = None
        # A reader's records taken from the files mirror: the tables' stamp they hold for.
        self._records_stamp: str | None = None
        # A reader with no rows loaded answers from the rows image (rows_image.py).
        self._image_keeper: ImageKeeper | None = None  # made on first use (_images)
        # Writes to each table since it was last compacted (see writes_before_optimize).
        self._writes = {"entries": 0, "files": 0}
        self._unwritten: set[str] = set()
        # Bumped whenever the in-memory rows change; unchanged_rows() answers for one generation
        # and apply() only trusts an answer of the current one (see StaleRows).
        self._generation = 0
        self._diffed: dict[str, int] = {}
        # With no rows in memory, the ids the table held of each path unchanged_rows() read, and
        # the generation it read them in: what apply() deletes of them (_apply_to_tables).
        self._table_ids: dict[str, tuple[int, frozenset[str]]] = {}
        # The row objects of the latest apply of recently written paths, while the rows in memory
        # are still those: a row handed in again as the very same object is unchanged without
        # being compared (the rows module reuses the objects of what an edit did not touch).
        self._applied_rows: OrderedDict[str, dict[str, EntryRow]] = OrderedDict()
        # Writes applied in memory, not yet to the tables (pending.py), the background writer
        # that writes them and counts what is written (write_behind.py), and the applies so far.
        self._pending = PendingWrites()
        self._behind = BackgroundWriter(self.persist)
        self._applied = 0
        # The LanceDB tables, opened on first use (_open_tables): importing LanceDB and opening
        # them costs most of a second, which a writer whose files mirror is current does not pay
        # until it reads or writes rows (a no-op `syncd sync` never does).
        self._db: lancedb.DBConnection | None = None
        self._lance_files: lancedb.table.Table | None = None
        self._lance_entries: lancedb.table.Table | None = None
        # True while the tables open are empty stand-ins in memory: a shared index found missing
        # on disk is never made by a read (see _open_tables).
        self._standin = False
        self._opening = threading.Lock()
        self._has_id_index = False
        # What `syncd status` reads instead of LanceDB; kept by the writer, checked by readers.
        self._mirror = None if read_only else FilesMirror(folder)
        # A shared index found missing opens nothing: only a write makes it (_open_tables).
        missing = self._disk_identity() is None
        if not (self.shared and missing) and (
            self._mirror is None or missing or not self._mirror.current(self._mirror.stamp())
        ):
            self._open_tables()
            if self._mirror is not None and not self._mirror.current(self._mirror.stamp()):
                self._rebuild_mirror()
        self._disk = self._disk_identity()

    @property
    def _matrix(self) -> RowCache:
        """The rows in memory (rowcache.py), made on first use: see the imports."""
        if self._rows is None:
            with self._lock:
                if self._rows is None:
                    from .rowcache import RowCache

                    self._rows = RowCache(self.dim)
        return self._rows

    @property
    def _images(self) -> ImageKeeper:
        """The rows image on this side (rows_image.py), made on first use: see the imports."""
        if self._image_keeper is None:
            with self._lock:
                if self._image_keeper is None:
                    from .rows_image import ImageKeeper

                    self._image_keeper = ImageKeeper(self.folder, self.dim)
        return self._image_keeper

    def _open_tables(self, create: bool = False) -> None:
        """Open the tables, made where missing only for a writer: a shared index (a reader, or a
        writer between its changes) that finds them missing (never built, or deleted with
        ``.syncd/``) and is not writing (``create``) opens empty stand-ins (table_open.py),
        which give way to the tables on disk once they exist, or to new ones on a write."""
        with self._opening:
            missing = self.shared and self._disk_identity() is None
            # Open tables stay while they are what is wanted: stand-ins give way to tables made
            # on disk or to a write, and a reader's tables deleted under it give way to stand-ins.
            wanted = missing and not create
            if self._lance_entries is not None and self._standin == wanted:
                return
            # A reader meeting tables half made reads stand-ins too (open_tables says so).
            writer = create or not self.shared
            tables = open_tables(self.folder, self.dim, shared=self.shared, standin=wanted, create=writer)
            self._standin, (self._db, self._lance_files, self._lance_entries) = tables

    def _tables(self) -> None:
        """The tables open for reading; stand-ins give way to tables someone made on disk, and a
        reader's tables deleted under it (``.syncd/`` removed) to stand-ins."""
        if self._lance_entries is None or (self.shared and self._standin == (self._disk_identity() is not None)):
            self._swap(create=False)

    def _writable(self) -> None:
        """The tables open for writing (under ``_writing``): stand-ins give way to new tables."""
        if self._lance_entries is None or self._standin:
            self._swap(create=True)

    def _swap(self, create: bool) -> None:
        # _lock before _opening, the order _outlive_lost_tables takes them in.
        with self._lock:
            was_standin = self._standin
            self._open_tables(create=create)
            if was_standin != self._standin:
                # What was read of the stand-ins (nothing) must not pass for the tables on disk,
                # nor what was read of deleted tables for the stand-ins.
                self._records = self._records_stamp = self._matrix_version = None
                self._generation += 1

    @property
    def _files(self) -> lancedb.table.Table:
        self._tables()
        assert self._lance_files is not None
        return self._lance_files

    @property
    def _entries(self) -> lancedb.table.Table:
        self._tables()
        assert self._lance_entries is not None
        return self._lance_entries

    def _disk_identity(self) -> tuple[tuple[int, int], ...] | None:
        return folder_identity(self.folder)

    def on_disk(self) -> bool:
        """Whether the tables on disk are the ones this index was opened on (or last rebuilt).
        False once its folder is deleted (``.syncd/`` is derived and may go at any moment) or
        made anew by someone else: what a writer holds in memory then describes nothing on disk
        until a rebuild (``Engine.reindex``). A reader takes tables made anew as its own, since
        it reads them from disk anyway, and forgets what it had loaded of the old ones."""
        now = self._disk_identity()
        if now is None:
            return False
        if now != self._disk:
            if not self.shared:
                return False
            with self._lock:
                self._disk = now
                self._records = None
                self._matrix_version = None
        return True

    # -- lifecycle -------------------------------------------------------------------------------

    def meta(self) -> dict:
        return read_meta(self.folder)

    def write_meta(self, **fields: object) -> None:
        mine = {"schema": SCHEMA_VERSION, "model_id": self.model_id, "dim": self.dim}  # a rebuild's mark goes
        write_meta(self.folder, drop=(REPLACING,), **(mine | fields))

    def compatible(self) -> bool:
        """False when the stored vectors come from another model (or another layout)."""
        meta = self.meta()
        return meta_compatible(meta, self.model_id, empty=not meta and self._entries.count_rows() == 0)

    @contextmanager
    def rebuilding(self, **meta: object) -> Iterator[Index]:
        """An index built aside in ``<folder>/rebuild``, whose rows replace this index's when the
        block ends without an error (``syncd reindex``); this index's meta then says ``meta``.
        A crash, a kill or an error halfway leaves this index as it was, never empty, and the
        rows built so far aside: the next rebuild for the same model, layout and ``meta`` goes
        on from them (a sync into the aside index redoes only the files it lacks or that changed
        since), any other starts it anew. The embedding cache lives elsewhere and survives too."""
        aside_dir = self.folder / "rebuild"
        if aside_dir.exists() and not rebuild_resumable(aside_dir, self.model_id, self.dim, meta):
            shutil.rmtree(aside_dir, ignore_errors=True)
        if not self.on_disk():
            self._outlive_lost_tables()
        else:
            self.persist()  # the tables stay whole if the rebuild fails
            with self._lock:
                if self._mirror is not None:
                    self._mirror.invalidate()
                # Our in-memory copy would sit beside the new one for the whole rebuild: free it
                # (a query meanwhile reloads it from the table, which still holds every row).
                self._forget_rows_in_memory()
        aside = Index(aside_dir, self.dim, self.model_id)
        # Before its first row: what an interrupted rebuild left is known by this.
        aside.write_meta(**meta)
        yield aside
        settled = mark_replacing(self.folder, self.model_id, self.dim)  # readers refuse meanwhile
        self._replace_rows(aside)
        # The rows are in place: say whose they are before the aside goes, so that a kill in
        # between leaves a rebuild to finish, never new rows under an old model's name.
        self.write_meta(**meta, **settled)
        shutil.rmtree(aside_dir, ignore_errors=True)

    def _outlive_lost_tables(self) -> None:
        """Before rebuilding tables that were deleted under us (``rm -rf .syncd``): the rows in
        memory are the only copy left, so keep them, and queries go on answering from them until
        the new tables are swapped in. Writes not yet in the tables have nowhere to go: drop
        them, as written, since the rebuild reads every file from disk again. The tables' handles
        go too: they hold the versions of the deleted tables, where the swap's writes must build
        on whatever tables are at that path then (a writer's change meanwhile may make new
        ones; a reader never does), so the swap opens them anew."""
        with self._writing, self._lock, self._opening:  # in the order persist() takes them
            self._pending = PendingWrites()
            upto = self._applied
            self._db = self._lance_files = self._lance_entries = None
        self._behind.mark_written(upto)

    def _replace_rows(self, aside: Index) -> None:
        """Overwrite both tables with ``aside``'s, streamed batch by batch. Each overwrite is one
        LanceDB commit. Entries go first: a crash between the two leaves new rows under the old
        file records, and any file whose sha moved on since looks stale and is redone by the next
        sync; the other order would leave old rows under new records, which no sync would notice."""
        with self._writing, self._lock:  # in the order persist() takes them
            self._writable()
            for mine, theirs in ((self._entries, aside._entries), (self._files, aside._files)):
                mine.add(theirs.search().limit(None).to_batches(), mode="overwrite")
            self._forget_rows_in_memory()
            self._has_id_index = False
            self.optimize()
            # The tables may be new folders (the old ones were deleted): these are ours now.
            self._disk = self._disk_identity()
            self._remake_mirror()

    def _forget_rows_in_memory(self) -> None:
        """Drop the rows and records held in memory (under ``_lock``): the next query reloads them."""
        self._generation += 1
        self._matrix.clear()
        self._applied_rows.clear()
        self._matrix_version = None
        self._records = None

    def fill_rows(self, files: pa.Table, entries: pa.Table | pa.RecordBatchReader) -> None:
        """Overwrite this new index's tables with ``files`` (file records) and then ``entries``
        (rows with their vectors): a past revision's index starts so (engine/asof.py), from
        another index's tables as one consistent pair (snapshot.py) or a frozen index's rows.
        Under both locks, in persist()'s order; the index is new, so no other process has it."""
        with self._writing, self._lock:
            self._writable()
            self._files.add(files, mode="overwrite")
            self._entries.add(entries, mode="overwrite")
            self._forget_rows_in_memory()
            self._remake_mirror()

    # -- reading ---------------------------------------------------------------------------------

    def files(self, paths: Iterable[str] | None = None) -> dict[str, FileRecord]:
        """What the index knows of each file, or of just ``paths`` (those it has a record of):
        a path-limited sync then copies a few records, not one per file of the home."""
        with self._lock:
            records = self._ensure_records()
            if paths is None:
                return dict(records)
            return {path: records[path] for path in paths if path in records}

    def _ensure_records(self) -> dict[str, FileRecord]:
        """The files table by path. A writable index trusts its copy as ``_ensure_matrix`` does
        its rows; a shared one asks for the table's version (well under a millisecond, where
        reading the table costs several) and reads the table again only when it has moved on."""
        if self._records is not None and not self.shared:
            return self._records
        if self._records is None and not self.shared:
            # The files mirror, when it vouches for the tables on disk, holds these records.
            mirrored = read_mirror(self.folder)
            if mirrored is not None:
                self._records = dict(mirrored.files)
                return self._records
        if self.shared:
            # A reader too takes the mirror while it names the tables on disk: no LanceDB to
            # import for a one-shot search's count of stale files. The stamp is read first, so
            # a write in between leaves records newer than it, read again next time.
            stamp = lance_stamp(self.folder / "lance")
            if stamp is not None and self._records is not None and stamp == self._records_stamp:
                return self._records
            mirrored = read_mirror(self.folder) if stamp is not None else None
            if mirrored is not None:
                self._records, self._records_stamp, self._records_version = dict(mirrored.files), stamp, None
                return self._records
            self._records_stamp = None
        version = self._files.version
        if self._records is None or self._records_version != version:
            # Read after the version: a write in between leaves a newer table under an older
            # number, read again next time; never an older table under a newer number.
            self._records = {row["path"]: FileRecord(**row) for row in self._files.to_arrow().to_pylist()}
            self._records_version = version
        return self._records

    @property
    def rows_loaded(self) -> bool:
        """Whether the rows are in memory (a query loads them; a process that only syncs never
        does, and writes the tables directly: see ``apply``)."""
        with self._lock:
            return self._matrix_version is not None

    def table_versions(self) -> tuple[int, int]:
        """The LanceDB versions of the entries and files tables: each write to a table is one
        more (a commit of its own, which is what writes try to spend as few of as they can)."""
        return self._entries.version, self._files.version

    def counts(self) -> dict[str, int]:
        self.persist()  # these read the tables: pending writes first
        return {
            "files": self._files.count_rows(),
            "facts": self._entries.count_rows("kind = 'fact'"),
            "chunks": self._entries.count_rows("kind = 'chunk'"),
        }

    def all_rows(self, with_vectors: bool = False) -> pa.Table:
        self.persist()
        table = self._entries.to_arrow()
        return table if with_vectors else table.drop_columns(["vector"])

    def find_fact(self, fact_id: str) -> list[dict]:
        from .table_rows import ENTRY_FIELDS
        from .table_writes import sql_literal

        self.persist()
        return (
            self._entries.search()
            .where(f"kind = 'fact' AND id = {sql_literal(fact_id)}")
            .select(ENTRY_FIELDS)
            .limit(None)
            .to_list()
        )

    # -- writing ---------------------------------------------------------------------------------

    def unchanged_rows(self, path: str, rows: Sequence[EntryRow]) -> frozenset[str]:
        """Ids of ``rows`` (a file's new rows) that the index already holds for ``path`` exactly
        so: same fields, same full-text string, so the same vector. An edit of one line in a log
        of 100,000 facts then embeds and writes the few rows it changed, not the file. The answer
        holds until the index next changes; apply() checks that (StaleRows).

        With no rows in memory (a fresh process: a one-shot ``syncd sync``, a daemon's first
        pass) only this path's rows are read from the table, without their vectors: loading every
        row of the home to compare one file's cost seconds at 16,000 facts, and a sync that does
        not search never needs them (apply then writes the table without them)."""
        with self._lock:
            self._diffed[path] = self._generation
            if len({r.id for r in rows}) != len(rows):
                return frozenset()  # the file is replaced whole (see RowCache.unchanged)
            if self._matrix_version is None:
                return self._unchanged_in_table(path, rows)
            from .table_rows import payload

            self._ensure_matrix()
            applied = self._applied_rows.get(path, {})
            rest = [r for r in rows if applied.get(r.id) is not r]
            same = self._matrix.unchanged(path, [(r.id, payload(r), r.search_text) for r in rest]) if rest else set()
            return frozenset(same).union(r.id for r in rows if applied.get(r.id) is r)

    def apply(self, updates: Sequence[FileUpdate], defer: bool = False) -> None:
        """Replace the rows of each updated path (only those not in its ``unchanged``), then
        record the files' new state. Raises StaleRows, before changing anything, when an
        update's ``unchanged`` was answered for rows that have changed since.

        The rows and records in memory, which queries and ``files()`` answer from, change at once.
        The tables are written before this returns, or with ``defer`` behind it (pending.py): by a
        background writer, folded with the writes that follow, and by anything that needs the
        tables current (``persist()``). A failed write marks its paths unwritten (the next sync
        redoes them); a direct write raises it, a deferred one raises it in ``wait_written``.

        Restats alone (``only_restats``: a one-shot sync after one whose mtime was too recent to
        trust) in a process with no table open go to the files mirror alone: the table keeps an
        older stat of the same bytes (a hash to its reader) and LanceDB is not imported (a second)."""
        if self.read_only:
            raise IndexError_("this index was opened read-only")
        if not updates:
            return
        with self._lock:
            loaded = self._matrix_version is not None
        if not loaded and self._lance_entries is None and self._mirror is not None:
            with self._writing, self._lock:
                if self._restated_in_mirror(updates):
                    return
        if not loaded:
            # No rows in memory: write the tables now and leave memory unloaded (the next query
            # loads it from them). Both locks, in persist()'s order, stay held until the tables
            # are written, so no query loads a table that lacks this write.
            with self._writing, self._lock:
                if self._matrix_version is None:
                    self._apply_to_tables(updates)
                    return
        with self._lock:
            self._ensure_matrix()
            records = self._ensure_records()
            self._check_diffed(updates)
            self._apply_in_memory(updates, records)
            self._applied += 1
        if defer:
            self._behind.soon()
        else:
            self.persist()

    def _restated_in_mirror(self, updates: Sequence[FileUpdate]) -> bool:
        """apply() of restats only, in the files mirror alone, if it vouches for the tables on
        disk and nothing is pending (under both locks); False, with nothing done, otherwise."""
        records = self._ensure_records()
        if self._pending or not all(only_restats(u, records.get(u.path)) for u in updates):
            return False
        assert self._mirror is not None
        if not self._mirror.update(self._mirror.stamp(), [(u.path, u.record, None) for u in updates]):
            return False
        records.update((u.path, u.record) for u in updates if u.record is not None)
        self._applied += 1
        self._behind.mark_written(self._applied)
        return True

    def _check_diffed(self, updates: Sequence[FileUpdate]) -> None:
        """Raise StaleRows unless every update's ``unchanged`` was answered for the rows held
        now; then start a new generation (under ``_lock``)."""
        stale = [u.path for u in updates if u.unchanged and self._diffed.get(u.path) != self._generation]
        for u in updates:
            self._diffed.pop(u.path, None)
        if stale:
            raise StaleRows(stale)
        self._generation += 1

    def _unchanged_in_table(self, path: str, rows: Sequence[EntryRow]) -> frozenset[str]:
        """unchanged_rows() from the table's rows of ``path`` (no vectors), under ``_lock`` with
        no rows in memory. Their ids are kept for apply(), which deletes those not kept."""
        from .table_rows import ENTRY_FIELDS, unchanged_in_table
        from .table_writes import sql_literal

        self._table_ids.pop(path, None)
        if path in self._pending.paths:
            return frozenset()  # the table is behind memory for this path: replace it whole
        held = (
            self._entries.search()
            .where(f"path = {sql_literal(path)}")
            .select([*ENTRY_FIELDS, "search_text"])
            .limit(None)
            .to_arrow()
        )
        found = unchanged_in_table(held, rows)
        if found is None:
            return frozenset()
        ids, same = found
        self._table_ids[path] = (self._generation, ids)
        return same

    def _apply_to_tables(self, updates: Sequence[FileUpdate]) -> None:
        """apply() with no rows in memory, holding both locks: the records change in memory, the
        rows only in the tables, written before this returns (never behind: memory, unloaded,
        could not answer for rows still pending). Which paths replaced whole the table holds rows
        of is read in one query (a new file has none to delete); a path diffed by
        unchanged_rows() loses exactly the rows not kept."""
        from .table_writes import paths_with_rows

        self._writable()
        records = self._ensure_records()
        held = paths_with_rows(self._entries, [u.path for u in updates if replaces_whole(u)])
        gone: dict[int, list[str]] = {}
        for n, update in enumerate(updates):
            if update.rows is not None and not replaces_whole(update):
                known = self._table_ids.pop(update.path, None)
                if known is None or known[0] != self._generation:
                    # Diffed against rows in memory, since unloaded: redo the file whole.
                    self._diffed.pop(update.path, None)
                    raise StaleRows([update.path])
                gone[n] = sorted(known[1] - update.unchanged)
                if known[1]:
                    held.add(update.path)
        self._check_diffed(updates)
        for n, update in enumerate(updates):
            path = update.path
            self._pending.add(update, path in held, gone.get(n, []), path in records)
            if update.record is None:
                records.pop(path, None)
            else:
                records[path] = update.record
        self._applied += 1
        self.persist()

    def _apply_in_memory(self, updates: Sequence[FileUpdate], records: dict[str, FileRecord]) -> None:
        """Patch the rows and records in memory with ``updates`` and leave their table writes
        pending (under ``_lock``). New rows go in with one add: rows added are merged into the
        matrix on its next read, which a sync batch of 256 files should pay once, not per file."""
        adds: list[tuple[FileUpdate, list[EntryRow]]] = []
        for update in updates:
            path = update.path
            if any(u.path == path for u, _ in adds):  # the same path twice: its first rows first
                self._add_rows(adds)
                adds = []
            held = self._matrix.holds(path)
            whole = replaces_whole(update)
            gone = (
                sorted(self._matrix.ids_of(path) - update.unchanged)
                if held and not whole and update.rows is not None
                else []
            )
            self._pending.add(update, held, gone, path in records)
            if whole and held:
                self._matrix.remove_paths([path])
            elif gone:
                self._matrix.remove_rows(path, gone)
            changed = update.changed_rows if update.rows else []
            if changed:
                adds.append((update, changed))
            if update.record is None:
                records.pop(path, None)
            else:
                records[path] = update.record
            if update.rows is not None or whole:
                self._remember_applied(path, update.rows or [])
        self._add_rows(adds)

    def _add_rows(self, adds: list[tuple[FileUpdate, list[EntryRow]]]) -> None:
        if adds:
            import numpy as np

            from .table_rows import payload

            vectors = np.concatenate(
                [np.asarray(u.vectors, dtype=np.float32).reshape(len(rows), -1) for u, rows in adds]
            )
            rows = [row for _, changed in adds for row in changed]
            self._matrix.add(vectors, [payload(r) for r in rows], [r.search_text for r in rows])

    def _remember_applied(self, path: str, rows: Sequence[EntryRow]) -> None:
        """Note ``rows`` as what memory now holds for ``path``."""
        self._applied_rows.pop(path, None)
        by_id = {row.id: row for row in rows}
        if len(by_id) == len(rows):
            self._applied_rows[path] = by_id
            while len(self._applied_rows) > _REMEMBERED_PATHS:
                self._applied_rows.popitem(last=False)

    def persist(self) -> None:
        """Write every pending change to the tables (see apply); raises what writing raised."""
        if self.read_only:
            return
        with self._writing:
            with self._lock:
                batch, self._pending = self._pending, PendingWrites()
                upto = self._applied
            if not batch:
                self._behind.mark_written(upto)
                return
            from .table_writes import describe_error, write_entries, write_error, write_records

            before = self._mirror.stamp() if self._mirror is not None else None
            # A writer with no rows loaded (a one-shot sync) keeps a current image in step.
            image = self._images.current() if self._matrix_version is None else None
            try:
                self._writable()
                entries_version = write_entries(self._entries, batch, self.dim)
                records_version = write_records(self._files, batch)
            except BaseException as exc:
                with self._lock:
                    # Memory ran ahead of tables that now hold something else: reload both on
                    # next use, and redo every path written since (later writes folded on top).
                    lost = set(batch.paths) | set(self._pending.paths)
                    self._pending = PendingWrites()
                    self._matrix_version = None
                    self._records = None
                    self._generation += 1
                    self._unwritten |= lost
                    upto = self._applied
                if isinstance(exc, SyncdError):
                    error = exc
                elif isinstance(exc, Exception):
                    error = write_error(exc, self.folder / "lance", len(lost))
                else:  # interrupted: waiters still learn that these writes did not happen
                    error = IndexError_(f"the index write was interrupted ({type(exc).__name__})")
                self._behind.mark_written(upto, error)
                if error is exc or not isinstance(exc, Exception):
                    raise
                raise error from exc
            self._behind.mark_written(upto)
            if image is not None and entries_version is not None:
                self._images.patched(image, batch)
            with self._lock:
                if entries_version is not None and self._matrix_version is not None:
                    self._matrix_version = entries_version
                if records_version is not None and self._records is not None:
                    self._records_version = records_version
                self._unwritten -= set(batch.paths)
                if self._mirror is not None and not self._mirror.update(before, batch.mirror):
                    self._rebuild_mirror()
            for name, version in (("entries", entries_version), ("files", records_version)):
                self._writes[name] += version is not None
            due = [name for name, writes in self._writes.items()
                   if writes >= WRITES_BEFORE_OPTIMIZE and writes >= writes_before_optimize(self._held_rows(name))]  # fmt: skip
            if due:
                try:
                    self._compact(due)
                except Exception as exc:  # noqa: BLE001 (housekeeping: the rows are written, compact later)
                    self._writes.update(dict.fromkeys(due, 0))
                    log.warning("could not compact the index at %s: %s", self.folder, describe_error(exc))

    def _held_rows(self, table: str) -> int:
        with self._lock:  # len() merges pending rows: the matrix is only touched under the lock
            if table == "entries":
                return len(self._matrix)
            return len(self._records) if self._records is not None else 0

    @property
    def applied(self) -> int:
        """How many applies this index has taken: what ``wait_written`` waits for."""
        with self._lock:
            return self._applied

    def wait_written(self, applied: int) -> None:
        """Return once the first ``applied`` applies are in the tables (write_behind.py)."""
        self._behind.wait_written(applied)

    def close(self) -> None:
        """Write what is pending, stop the background writer, close the files mirror."""
        self._behind.close()
        self.persist()
        if self._mirror is not None:
            # Left to the garbage collector, its connection keeps a -wal file for the process's
            # life, and past it under the program's exit freeze (cli.run).
            self._mirror.close()

    @property
    def unwritten_paths(self) -> frozenset[str]:
        """Paths whose last write failed in this process; each stays stale in the files table."""
        with self._lock:
            return frozenset(self._unwritten)

    def _remake_mirror(self) -> None:
        """After the tables were overwritten: the mirror anew (its file may have gone with the
        tables' old folder)."""
        if self._mirror is not None:
            self._mirror.close()
            self._rebuild_mirror()

    def _rebuild_mirror(self) -> None:
        """Copy the files table, with each file's fact and chunk counts, into the mirror: read
        from the table itself, not from memory, which may run ahead of it (pending writes)."""
        assert self._mirror is not None  # only a writer keeps the mirror, and only it rebuilds it
        self._mirror.refill(self._files.to_arrow(), self._entries.to_arrow())

    def optimize(self) -> None:
        """Compact small writes, fold new rows into the id index, drop old versions."""
        self._compact(["files", "entries"])

    def _compact(self, names: Sequence[str]) -> None:
        """Optimize the tables named (``entries``, ``files``), each on its own cadence (the files
        table is a twentieth of the entries one: cheap to compact, and each fragment left costs
        every later write). Holds only the writers' turn while LanceDB works: queries and
        in-memory writes go on meanwhile."""
        with self._writing:
            self._writable()
            before = self._mirror.stamp() if self._mirror is not None else None
            if "entries" in names:
                self.ensure_id_index()
            for name in names:
                compact_table(self._entries if name == "entries" else self._files)
            with self._lock:
                # Compaction moves rows between files but changes none: the loaded copy stays
                # valid (a new version of the same rows). One never loaded stays unloaded.
                if "entries" in names and self._matrix_version is not None:
                    self._matrix_version = self._entries.version
                if "files" in names and self._records is not None:
                    self._records_version = self._files.version
            self._writes.update(dict.fromkeys(names, 0))
            if self._mirror is not None:
                self._mirror.restamp(before)

    def ensure_id_index(self) -> None:
        """A scalar index on ``id``, so looking a fact up by id (find_fact) is not a scan."""
        if self._has_id_index or self.read_only or self._standin:
            return
        ensure_id_index(self._entries)
        self._has_id_index = True

    # -- searching -------------------------------------------------------------------------------

    def _ensure_matrix(self) -> None:
        """Load the rows on first use, and in a reader whenever another process has written.

        A writable index belongs to the process holding the home lock, so its table changes only
        through our own writes, which patch the rows as they go: it never has to ask LanceDB for
        the version, a call through LanceDB's async runtime that every search would pay.
        """
        if self._matrix_version is not None and not self.shared:
            return
        stamp = self._images.stamp() if self.shared else None  # before the table: see ImageKeeper
        version = self._entries.version
        if self._matrix_version == version:
            return
        from .table_rows import ENTRY_FIELDS, load_into

        table = self._entries.to_arrow().select([*ENTRY_FIELDS, "search_text", "vector"])
        self._generation += 1
        self._matrix.clear()
        self._applied_rows.clear()
        load_into(self._matrix, table)
        self._matrix_version = version
        if stamp is not None:
            self._images.loaded(stamp, self._matrix)

    @contextmanager
    def reading(self, same_model: bool = False) -> Iterator[RowCache | ImageRows]:
        """The rows as of now, held still (no write, no reload) for the length of one query: a
        reader's rows image while it holds the table on disk (no LanceDB, no postings to build),
        else the rows in memory. ``same_model``: IndexError_ unless their vectors are of this
        index's model (records.rows_of_model: checked against meta.json around taking them)."""
        with self._lock:
            take = self._query_rows
            yield rows_of_model(self.meta, take, self.model_id, self.dim) if same_model else take()

    def _query_rows(self) -> RowCache | ImageRows:
        image = self._images.current() if self.shared and self._matrix_version is None else None
        if image is not None:
            return image
        self._ensure_matrix()
        return self._matrix
