"""Plan a sync (pure): compare content hashes on disk with the index's, and say what is new, changed,
moved (a deleted path's sha reappearing elsewhere), deleted or only touched.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..index.records import FileRecord
from .scan import DiskFile

__all__ = ["SyncPlan", "combined_plan", "plan_sync"]


@dataclass(frozen=True)
class SyncPlan:
    new: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    moved: tuple[tuple[str, str], ...] = ()  # (old path, new path)
    deleted: tuple[str, ...] = ()
    touched: tuple[str, ...] = ()  # same content, new stat: record it, parse nothing
    unchanged: int = 0

    @property
    def changed_paths(self) -> list[str]:
        """Every path whose index entry this plan changes: new, changed, deleted, both ends of a move."""
        return [*self.new, *self.changed, *self.deleted, *(p for pair in self.moved for p in pair)]

    @property
    def empty(self) -> bool:
        return not (self.new or self.changed or self.moved or self.deleted or self.touched)

    def summary(self) -> str:
        # A touched file (same bytes, new stat) is unchanged to a person: counted with them, or a
        # first sync after a fresh index of 11 files said "0 unchanged" for every one of them.
        return (
            f"{len(self.new)} new, {len(self.changed)} changed, {len(self.moved)} moved, "
            f"{len(self.deleted)} deleted, {self.unchanged + len(self.touched)} unchanged"
        )


def combined_plan(plans: Sequence[SyncPlan]) -> SyncPlan:
    """Syncs run one after another told as one (the daemon's, for a `syncd sync` that waited on
    them): every file any of them indexed, moved or deleted, in the order they did, and as
    unchanged what the last one found unchanged less the files an earlier one had indexed."""
    if not plans:
        return SyncPlan()
    last = plans[-1]
    earlier = {path for plan in plans[:-1] for path in (*plan.new, *plan.changed, *(new for _, new in plan.moved))}
    counted_again = len(earlier - set(last.changed_paths))
    return SyncPlan(
        new=tuple(path for plan in plans for path in plan.new),
        changed=tuple(path for plan in plans for path in plan.changed),
        moved=tuple(pair for plan in plans for pair in plan.moved),
        deleted=tuple(path for plan in plans for path in plan.deleted),
        unchanged=max(0, last.unchanged + len(last.touched) - counted_again),  # touched: unchanged to a person
    )


def plan_sync(disk: Mapping[str, DiskFile], index: Mapping[str, FileRecord], unreadable_dirs=()) -> SyncPlan:
    """Pure: what to do so that the index reflects ``disk``."""
    new, changed, touched = [], [], []
    unchanged = 0
    for path, f in disk.items():
        record = index.get(path)
        if f.sha is None:
            unchanged += 1
        elif record is None:
            new.append(path)
        elif f.error:
            # Unreadable now: a change unless it was already recorded as this same failure.
            if record.sha or record.error != f.error:
                changed.append(path)
            else:
                unchanged += 1
        elif f.sha != record.sha:
            changed.append(path)
        elif record.size != f.size or record.mtime_ns != f.mtime_ns:
            touched.append(path)
        else:
            unchanged += 1
    hidden = tuple(d.rstrip("/") + "/" for d in unreadable_dirs)
    deleted = [p for p in index if p not in disk and not (hidden and p.startswith(hidden))]
    # A new path with the sha of a deleted one is that file moved: pair them once each.
    by_sha: dict[str, list[str]] = {}
    for path in sorted(deleted):
        if index[path].sha and not index[path].error:
            by_sha.setdefault(index[path].sha, []).append(path)
    moved = []
    for path in sorted(new):
        olds = by_sha.get(disk[path].sha or "")
        if olds:
            moved.append((olds.pop(0), path))
    moved_old = {o for o, _ in moved}
    moved_new = {n for _, n in moved}
    return SyncPlan(
        new=tuple(sorted(p for p in new if p not in moved_new)),
        changed=tuple(sorted(changed)),
        moved=tuple(moved),
        deleted=tuple(sorted(p for p in deleted if p not in moved_old)),
        touched=tuple(sorted(touched)),
        unchanged=unchanged,
    )
