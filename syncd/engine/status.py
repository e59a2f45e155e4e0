"""What the index reflects, exactly: counts, and every file that is stale or in error.

``Engine.status()`` builds it from the open index. :func:`read_status` builds the same answer for
``syncd status`` without LanceDB or the model, from the index's mirror of its files table
(``index/files_mirror.py``); when the mirror cannot vouch for itself it opens the index instead,
so the light answer is never a guess.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from ..errors import HistoryError
from ..home import Home
from ..index.records import FileRecord

__all__ = [
    "INDEX_MISSING",
    "INDEX_OK",
    "Status",
    "build_status",
    "count_stale",
    "incompatibility",
    "is_fresh",
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
    # The person's git work under way (a merge, a rebase, unmerged paths, a detached HEAD), with
    # how to finish it: meanwhile syncd indexes the files as they are and commits none of them.
    git_busy: str | None = None
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
        return is_fresh(self.index, self.compatible, self.stale)

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


def is_fresh(index: str, compatible: bool, stale: Mapping[str, list[str]]) -> bool:
    """:attr:`Status.fresh` of these fields: also what a user's view of the status (the files it
    may see) says, so an index that is missing is never fresh to anyone."""
    return index == INDEX_OK and compatible and not any(stale.values())


def _plan(home: Home, known: Mapping[str, FileRecord], max_file_bytes: int):
    """The sync plan of the tree against ``known``; None when :func:`tree_agrees` (nothing to do)."""
    from ..sync.scan import scan_disk, tree_agrees

    if tree_agrees(home, known):
        return None
    from ..sync.plan import plan_sync

    scan = scan_disk(home, known, max_file_bytes)
    return plan_sync(scan.files, known, scan.unreadable_dirs)


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


def incompatibility(meta: Mapping, model_id: str, compatible: bool, remedy: bool = False) -> str | None:
    """Why an index whose ``meta.json`` says ``meta`` cannot serve ``model_id`` (None when it
    can), in words that never blame the model for what is not the model's doing; ``remedy``:
    and what rebuilds it (for a person: `syncd status`)."""
    from ..index.records import SCHEMA_VERSION, model_mismatch

    if compatible:
        return None
    rebuilds = ": the next `syncd sync` (or `syncd reindex`) rebuilds it" if remedy else ""
    if not meta:
        return (
            "the index does not say which model built its rows (its meta.json is missing or "
            f"damaged, or a syncd older than this one stopped during a first sync){rebuilds}"
        )
    # Another model's rows, or a rebuild to another model under way. For a person, what is true
    # whoever asks: a sync here would rebuild the index for the model this process has.
    other = model_mismatch(meta, model_id, meta.get("dim", 0))
    if other is not None and remedy:
        return other
    if meta.get("model_id") != model_id:
        return f"the index was built with another model ({meta.get('model_id')})"
    return f"the index has another layout (version {meta.get('schema')}; this syncd writes {SCHEMA_VERSION}){rebuilds}"


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
    from ..history.git import detached_head, operation_in_progress
    from ..history.status import uncommitted_paths
    from ..sync.progress_file import read_progress
    from ..sync.scan import printable_path

    plan = _plan(home, known, max_file_bytes)
    stale = set(plan.changed_paths) if plan is not None else set()
    running = read_progress(home)
    try:
        git_busy = operation_in_progress(home.root) or detached_head(home.root)
        # A name that is not UTF-8 is shown escaped, as the scan records it, or no one could print it.
        uncommitted = [printable_path(p) for p in uncommitted_paths(home.root) if p not in stale]
    except HistoryError as exc:
        # A repository git cannot read (a damaged .git/index) is the status's git line, not the
        # end of the status: what the index holds is still known.
        git_busy, uncommitted = f"{exc} (`git -C {home.root} status` says what is wrong)", []
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
        git_busy=git_busy,
        uncommitted=uncommitted,
        incompatible=incompatibility(meta, model_id, compatible, remedy=True),
        sync=running.to_dict() if running is not None else None,
        # What Index.rebuilding leaves aside, with the meta that lets the next rebuild go on from it.
        reindex_interrupted=(home.state_dir / "index" / "rebuild" / "meta.json").is_file(),
    )


def missing_status(home: Home, model_id: str, max_file_bytes: int) -> Status:
    """The status of ``home`` when its index is not on disk: nothing indexed, every file new.
    Built without opening the index, which would only make an empty one where it is missing."""
    empty = {"files": 0, "facts": 0, "chunks": 0}
    return replace(build_status(home, {}, empty, model_id, True, {}, max_file_bytes), index=INDEX_MISSING)
