"""What the index reflects, exactly: counts, and every file that is stale or in error.

``Engine.status()`` builds it from the open index. :func:`read_status` builds the same answer for
``syncd status`` without LanceDB or the model, from the index's mirror of its files table
(``index/files_mirror.py``); when the mirror cannot vouch for itself it opens the index instead,
so the light answer is never a guess.
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from ..home import Home, is_indexable
from ..index.records import FileRecord

__all__ = [
    "INDEX_MISSING",
    "INDEX_OK",
    "Status",
    "build_status",
    "count_stale",
    "incompatibility",
    "missing_status",
    "stale_paths",
]

log = logging.getLogger(__name__)

# Status.index: the index on disk is the one the answer describes, or it is not there to describe.
INDEX_OK = "ok"
INDEX_MISSING = "missing"


@dataclass
class Status:
    """What the index reflects, exactly: counts, and every file that is stale or in error."""

    home: str
    model_id: str
    files: int
    facts: int
    chunks: int
    stale: dict[str, list[str]] = field(default_factory=dict)  # new/changed/moved/deleted paths
    errors: dict[str, str] = field(default_factory=dict)
    compatible: bool = True
    aligned_commit: str | None = None
    # Indexed (or deleted) files whose change git has not committed yet: the daemon's next commit.
    uncommitted: list[str] = field(default_factory=list)
    # INDEX_MISSING: there is no index on disk (never built, or deleted with .syncd/, which a
    # running daemon notices and rebuilds) or not the one the answering process has open; the
    # counts are then zero and every file is stale.
    index: str = INDEX_OK
    # Why the index cannot serve this model (another model, another layout, rows of unknown
    # origin), in words; None when it can (``compatible``).
    incompatible: str | None = None
    # The sync or rebuild running now, or the last one if it was interrupted (``running`` says
    # which): progress_file.SyncInProgress.to_dict(). None when no sync is running or cut short.
    sync: dict | None = None
    # A `syncd reindex` was interrupted; the next one goes on from the rows it built aside.
    reindex_interrupted: bool = False

    @property
    def fresh(self) -> bool:
        """The index reflects every file on disk as it is now (a file in error included: its
        error is what the index records for it)."""
        return self.index == INDEX_OK and self.compatible and not any(self.stale.values())

    @property
    def healthy(self) -> bool:
        """Fresh, and no file in error: every file is indexed whole. A damaged daily log, a
        symbolic link, a folder with an invalid user id keep this False until a person fixes them."""
        return self.fresh and not self.errors

    def to_dict(self) -> dict:
        out = dict(self.__dict__)
        out["fresh"] = self.fresh
        out["healthy"] = self.healthy
        return out


def _plan(home: Home, known: Mapping[str, FileRecord], max_file_bytes: int):
    """The sync plan of the tree against ``known``; None when :func:`tree_agrees` (nothing to do)."""
    if tree_agrees(home, known):
        return None
    from ..sync.plan import plan_sync
    from ..sync.scan import scan_disk

    scan = scan_disk(home, known, max_file_bytes)
    return plan_sync(scan.files, known, scan.unreadable_dirs)


def tree_agrees(home: Home, known: Mapping[str, FileRecord]) -> bool:
    """Whether the tree on disk is, by every file's stat, what the index recorded: the same
    indexable files, each a regular file of the recorded size and mtime, none in error. Then the
    scan would hash nothing and its plan is empty, so nothing is stale: the answer of a search
    or a status almost always, found here with one listing per folder and one lstat per file,
    and none of the scan's per-file work (its records, hashes, the plan). False when anything
    differs or cannot be looked at (a new or missing file, another stat, a link, an unlistable
    folder, a file in error, a racy mtime recorded as 0): the scan and plan then say what is
    stale, exactly. The folders entered and the files taken are the scan's (sync.scan.list_tree:
    is_indexable, no linked folder entered; scan_disk: a FIFO or a device is no file), a law in
    tests/test_tree_agrees.py."""
    seen = 0
    # is_indexable(rel) for a file of a folder the walk entered: its name's rules (the same for a
    # name in any such folder, so asked once per name), or a session's file by its whole path.
    names: dict[str, bool] = {}
    folders = [(os.fspath(home.root), "")]
    try:
        while folders:
            folder, prefix = folders.pop()
            with os.scandir(folder) as entries:
                for entry in entries:
                    rel = prefix + entry.name
                    record = known.get(rel)
                    if record is not None:
                        # A recorded path this syncd would not index (an older one's rules) is
                        # one the scan drops: not agreeing.
                        indexable = names.get(entry.name)
                        if indexable is None:
                            indexable = names[entry.name] = is_indexable(entry.name)
                        if record.error is not None or not (indexable or is_indexable(rel)):
                            return False
                        st = entry.stat(follow_symlinks=False)
                        if not stat.S_ISREG(st.st_mode):
                            return False
                        if st.st_size != record.size or st.st_mtime_ns != record.mtime_ns:
                            return False
                        seen += 1
                    elif _is_folder(entry):
                        if is_indexable(rel + "/x.md"):
                            if entry.is_symlink():
                                return False  # the scan reports a linked folder
                            folders.append((entry.path, rel + "/"))
                    elif is_indexable(rel) and (entry.is_symlink() or entry.is_file(follow_symlinks=False)):
                        return False  # a file the index does not know, or a link the scan reports
    except OSError:
        return False
    return seen == len(known)


def _is_folder(entry: os.DirEntry) -> bool:
    """As the scan's walk sorts an entry (a link to a folder is a folder, a dangling one not)."""
    try:
        return entry.is_dir()
    except OSError:
        return False


def stale_paths(home: Home, known: Mapping[str, FileRecord], max_file_bytes: int) -> dict[str, list[str]]:
    """New, changed, moved and deleted files: where the tree on disk and the index disagree."""
    plan = _plan(home, known, max_file_bytes)
    return _stale_of(plan)


def _stale_of(plan) -> dict[str, list[str]]:
    if plan is None:
        return {"new": [], "changed": [], "moved": [], "deleted": []}
    return {
        "new": list(plan.new),
        "changed": list(plan.changed),
        "moved": [f"{a} -> {b}" for a, b in plan.moved],
        "deleted": list(plan.deleted),
    }


def count_stale(home: Home, known: Mapping[str, FileRecord], max_file_bytes: int) -> int:
    """How many files :func:`stale_paths` names (a move counts once)."""
    return sum(len(paths) for paths in stale_paths(home, known, max_file_bytes).values())


def incompatibility(meta: Mapping, model_id: str, compatible: bool) -> str | None:
    """Why an index whose ``meta.json`` says ``meta`` cannot serve ``model_id`` (None when it
    can), in words that never blame the model for what is not the model's doing."""
    from ..index.records import SCHEMA_VERSION

    if compatible:
        return None
    if not meta:
        return (
            "the index does not say which model built its rows (a first sync interrupted "
            "by a syncd older than this one)"
        )
    if meta.get("model_id") != model_id:
        return f"the index was built with another model ({meta.get('model_id')})"
    return f"the index has another layout (version {meta.get('schema')}; this syncd writes {SCHEMA_VERSION})"


def build_status(
    home: Home,
    known: Mapping[str, FileRecord],
    counts: Mapping[str, int],
    model_id: str,
    compatible: bool,
    meta: Mapping,
    max_file_bytes: int,
) -> Status:
    """The status of ``home`` given what its index knows of files (``known``) and holds (``counts``)."""
    from ..history.status import uncommitted_paths
    from ..sync.progress_file import read_progress
    from ..sync.scan import printable_path

    plan = _plan(home, known, max_file_bytes)
    stale = set(plan.changed_paths) if plan is not None else set()
    running = read_progress(home)
    return Status(
        home=str(home.root),
        model_id=model_id,
        files=counts["files"],
        facts=counts["facts"],
        chunks=counts["chunks"],
        stale=_stale_of(plan),
        errors={p: r.error for p, r in known.items() if r.error},
        compatible=compatible,
        aligned_commit=meta.get("aligned_commit"),
        # A name that is not UTF-8 is shown escaped, as the scan records it, or no one could print it.
        uncommitted=[printable_path(p) for p in uncommitted_paths(home.root) if p not in stale],
        incompatible=incompatibility(meta, model_id, compatible),
        sync=running.to_dict() if running is not None else None,
        # What Index.rebuilding leaves aside, with the meta that lets the next rebuild go on from it.
        reindex_interrupted=(home.state_dir / "index" / "rebuild" / "meta.json").is_file(),
    )


def missing_status(home: Home, model_id: str, max_file_bytes: int) -> Status:
    """The status of ``home`` when its index is not on disk: nothing indexed, every file new.
    Built without opening the index, which would only make an empty one where it is missing."""
    empty = {"files": 0, "facts": 0, "chunks": 0}
    return replace(build_status(home, {}, empty, model_id, True, {}, max_file_bytes), index=INDEX_MISSING)
