"""The journal of an open change group: what each of its files held before the group wrote it.

A group (one agent turn) writes several files one after the other and is committed once, at its
end. Until then its writes are provisional: if the turn fails (an exception inside the group) or
its process dies (kill -9 during the LLM call), every file it wrote goes back to what it was, so
a turn is committed whole or not at all and a retried turn finds nothing of the failed one.

Before each write the group appends one line to its journal (``<private_dir>/groups/<name>``, a
file the group's process keeps ``flock``-ed): the path, the blob sha the write will leave, and,
for the first write of that path, how to get the original back (absent, its bytes, or the size
to cut an append back to). The line is on disk before the file is touched, so whatever point a
crash hits, the journal knows every file the group may have changed.

The journal is also the group's *hold*: a committer in another process (the daemon) commits none
of the paths of a live journal, so a slow turn still lands as one commit. A journal whose flock is
free belongs to a process that ended before its group was committed: :func:`recover_abandoned`
puts each of its files back, unless someone changed the file since (then it is theirs and stays)
or lines the group wrote are committed (the process died after its commit, or a commit of the
person's took them in): taking committed lines back out would make the next commit a deletion
nobody asked for (rewind.undo_would_uncommit).

It lives under the git directory, not under the disposable ``.syncd/``: deleting ``.syncd/``
must never turn a half-written turn into a committed one.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import logging
import os
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..history.intents import drop_intents
from ..home import Home, atomic_write, blob_sha, read_regular

__all__ = ["GroupJournal", "Original", "held_paths", "recover_abandoned"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Original:
    """What a file held before a group first wrote it: absent (``data`` and ``size`` None), its
    whole bytes (``data``), or, before an append, only its size (the append is cut back)."""

    data: bytes | None = None
    size: int | None = None

    @property
    def absent(self) -> bool:
        return self.data is None and self.size is None

    def restore(self, current: bytes | None) -> bytes | None:
        """The file's bytes with the group's writes undone (None: the file did not exist), given
        what it holds now (None: absent)."""
        if self.data is not None:
            return self.data
        if self.size is not None:
            # Only an append is undone by size, and an appended file is there to cut back.
            assert current is not None
            return current[: self.size]
        return None

    def to_json(self) -> dict:
        if self.data is not None:
            return {"data": base64.b64encode(self.data).decode("ascii")}
        return {"size": self.size} if self.size is not None else {"absent": True}

    @classmethod
    def from_json(cls, raw: dict) -> Original:
        if "data" in raw:
            return cls(data=base64.b64decode(raw["data"]))
        return cls(size=int(raw["size"])) if "size" in raw else cls()


def _folder(home: Home) -> Path:
    return home.private_dir / "groups"


# ``keep(rel, current, before)``: leave ``rel`` as it is rather than put ``before`` (None: absent)
# back in place of ``current``, because that would take committed lines out of the tree.
Keep = Callable[[str, bytes, "bytes | None"], bool]


@dataclass
class _Entry:
    original: Original
    shas: list[str]  # every sha a write of the group left in the file, oldest first


class GroupJournal:
    """The journal of one live group (see the module doc); not thread-safe: a group writes one
    file at a time (the engine's write turn)."""

    def __init__(self, path: Path, fd: int):
        self.path = path
        self._fd: int | None = fd
        self.entries: dict[str, _Entry] = {}

    @classmethod
    def open(cls, home: Home) -> GroupJournal:
        folder = _folder(home)
        folder.mkdir(parents=True, exist_ok=True)
        name = f"{os.getpid()}-{secrets.token_hex(6)}"
        # Locked before it gets its visible name: an unlocked journal reads as a dead process's.
        tmp = folder / f".{name}.tmp"
        fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            path = folder / name
            os.replace(tmp, path)
        except BaseException:
            os.close(fd)
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
            raise
        return cls(path, fd)

    def before_write(self, rel: str, sha: str, original: Callable[[], Original]) -> None:
        """Record, durably and before the file is touched, that ``rel`` will hold ``sha``; on the
        group's first write of ``rel``, ``original()`` says what it holds now."""
        entry = self.entries.get(rel)
        record: dict = {"path": rel, "sha": sha}
        if entry is None:
            entry = _Entry(original(), [])
            record["original"] = entry.original.to_json()
        if self._fd is not None:
            os.write(self._fd, (json.dumps(record) + "\n").encode())
        entry.shas.append(sha)
        self.entries[rel] = entry

    def paths(self) -> set[str]:
        return set(self.entries)

    def rollback(self, root: Path, keep: Keep = lambda rel, current, before: False) -> list[str]:
        """Put every file the group wrote back as it was, where it still holds one of the group's
        writes (else someone changed it since, and their version stays) and ``keep(rel, current,
        before)`` does not say to leave it (its lines are committed). Returns the paths put back."""
        return _restore(root, self.entries, keep)

    def close(self) -> None:
        """The group is over (committed, or rolled back): forget its journal."""
        if self._fd is None:
            return
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        os.close(self._fd)
        self._fd = None


def _restore(root: Path, entries: dict[str, _Entry], keep: Keep) -> list[str]:
    restored = []
    for rel, entry in sorted(entries.items()):
        try:
            current = read_regular(root, rel)
        except OSError as exc:
            log.warning("cannot read %s to undo an unfinished change: %s", rel, exc.strerror or exc)
            continue
        sha = None if current is None else blob_sha(current)
        if sha not in entry.shas:
            continue  # changed by someone else since: their version stays
        target = root / rel
        try:
            before = entry.original.restore(current)
            if current is not None and keep(rel, current, before):
                continue  # what the group wrote is committed (by whoever): never taken back out
            if before is None:
                target.unlink()
            else:
                atomic_write(target, before, expected_sha=sha)
        except Exception as exc:  # noqa: BLE001 - one file that cannot be put back must not stop the rest
            log.warning("cannot undo the unfinished change of %s: %s", rel, exc)
            continue
        restored.append(rel)
    return restored


def _read_journal(path: Path) -> dict[str, _Entry]:
    entries: dict[str, _Entry] = {}
    data = path.read_bytes()
    for line in data.decode("utf-8", errors="replace").splitlines(keepends=True):
        if not line.endswith("\n"):
            continue  # cut short by the crash: the write it announced never started
        try:
            record = json.loads(line)
            rel, sha = record["path"], record["sha"]
            if rel not in entries:
                entries[rel] = _Entry(Original.from_json(record.get("original") or {"absent": True}), [])
            entries[rel].shas.append(sha)
        except (ValueError, KeyError, TypeError):
            log.warning("skipping an unreadable line of the journal %s", path.name)
    return entries


def _journals(home: Home) -> list[tuple[Path, bool]]:
    """``(journal, alive)`` for every journal of the home."""
    try:
        names = [p for p in _folder(home).iterdir() if not p.name.startswith(".")]
    except FileNotFoundError:
        return []
    found = []
    for path in names:
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            continue
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                found.append((path, True))
            else:
                found.append((path, False))
        finally:
            os.close(fd)
    return found


def held_paths(home: Home, besides: GroupJournal | None = None) -> set[str]:
    """Paths written by change groups still open in live processes (but ``besides``): not to be
    committed, or written, by anyone else yet."""
    held: set[str] = set()
    for path, alive in _journals(home):
        if alive and (besides is None or path != besides.path):
            with contextlib.suppress(OSError):
                held |= set(_read_journal(path))
    return held


def recover_abandoned(home: Home, keep: Keep) -> list[str]:
    """Undo the groups whose process ended before their commit (see the module doc).
    ``keep(rel, current, before)`` says to leave a file as it is (see Keep). Returns the paths
    put back; the caller re-indexes them."""
    restored: list[str] = []
    for path, alive in _journals(home):
        if alive:
            continue
        try:
            entries = _read_journal(path)
        except OSError as exc:
            log.warning("cannot read the journal %s: %s", path.name, exc.strerror or exc)
            continue
        undone = _restore(home.root, entries, keep)
        # Its provenance goes with it: no commit of these shas will ever be the dead group's.
        for rel, entry in entries.items():
            for sha in entry.shas:
                drop_intents(home, {rel: sha})
        if undone:
            log.warning("undid the unfinished change of a process that ended (%s): %s", path.name, ", ".join(undone))
        restored += undone
        path.unlink(missing_ok=True)
    return restored
