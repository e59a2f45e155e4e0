"""Git objects written by syncd itself: the trees and commits of a commit chain.

A pass of the commit queue commits a few agent turns at once. Having git write their commits
(``fast-import``, which then runs ``unpack-objects`` to leave loose objects behind as ``git
commit`` does) was the largest share of a pass's CPU, two processes started for objects of a few
hundred bytes (bench_adds.py measures the CPU an add costs, git's children included). Here they
are written the way git writes a loose object: the header ``<kind> <size>\\0`` and the content,
hashed (SHA-1, or SHA-256 in a repository made with it), deflated, written to a temporary file
beside its place and renamed there; like ``git commit``, without an fsync (the markdown it records
is fsynced; the ref moves through git).

Trees are read through one ``git cat-file --batch`` process, which finds them packed or loose, and
kept in memory by id: an object never changes, and the parent of the next pass is usually the
commit this process just wrote, whose trees are then all at hand. Blobs are never written here:
``update-index`` stores them when it stages the files.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import subprocess
import threading
import zlib
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from ..errors import HistoryError, SyncdError
from ..home import replace_unsynced
from .git import head_sha, run_git

__all__ = ["BlobReader", "ObjectStore", "committed_blob", "object_format", "tree_bytes"]

# name -> (mode, binary object id), as a tree object lists its entries.
Tree = dict[bytes, tuple[bytes, bytes]]
# path -> (mode, hex id) of a blob, or None to remove the path.
Entry = tuple[str, str]

# read(shas, limit) -> {sha: bytes, or None when missing or above limit}: ObjectStore.read_blobs.
BlobReader = Callable[[Iterable[str], int], dict[str, "bytes | None"]]

TREE_MODE = b"40000"
_GITLINK_MODE = b"160000"
_CACHED_TREES = 4096
_ALGORITHMS = {"sha1": 20, "sha256": 32}  # name -> id length in bytes


class _Recent:
    """A bounded map of the most recently used objects, shared by threads (ids are content
    hashes, so one map serves every repository). ``weigh(value)`` is what an entry counts
    against ``limit`` (1 each by default); an entry heavier than the whole limit is not kept."""

    def __init__(self, limit: int, weigh: Callable[[object], int] = lambda value: 1):
        self._limit = limit
        self._weigh = weigh
        self._items: OrderedDict[bytes, object] = OrderedDict()
        self._held = 0
        self._lock = threading.Lock()

    def get(self, key: bytes):
        with self._lock:
            value = self._items.get(key)
            if value is not None:
                self._items.move_to_end(key)
            return value

    def put(self, key: bytes, value: object) -> None:
        weight = self._weigh(value)
        if weight > self._limit:
            return
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._held -= self._weigh(old)
            self._items[key] = value
            self._held += weight
            while self._held > self._limit:
                _, dropped = self._items.popitem(last=False)
                self._held -= self._weigh(dropped)


_TREES = _Recent(_CACHED_TREES)
_COMMIT_TREES = _Recent(_CACHED_TREES)
# Blobs a commit pass's message read (it counts the facts each log gained or lost, from the old
# and the new version), up to this many bytes in all: pass after pass, a log's old version is the
# new version of the pass before, so the next pass finds it here and starts no reader for it.
_CACHED_BLOB_BYTES = 8 << 20
_BLOBS = _Recent(_CACHED_BLOB_BYTES, weigh=lambda value: len(value))  # type: ignore[arg-type]
# Per repository top: (object folder, hash algorithm), asked of git once per process.
_LAYOUTS: dict[str, tuple[Path, str]] = {}
_LAYOUTS_LOCK = threading.Lock()


def tree_bytes(entries: Tree) -> bytes:
    """A tree object's content: entries sorted as git sorts them (a folder as if its name ended
    in ``/``), each ``<mode> <name>\\0<binary id>``."""

    def order(item: tuple[bytes, tuple[bytes, bytes]]) -> bytes:
        name, (mode, _) = item
        return name + b"/" if mode == TREE_MODE else name

    return b"".join(b"%s %s\0%s" % (mode, name, oid) for name, (mode, oid) in sorted(entries.items(), key=order))


def _parse_tree(data: bytes, id_length: int) -> Tree:
    entries: Tree = {}
    at = 0
    try:
        while at < len(data):
            space = data.index(b" ", at)
            nul = data.index(b"\0", space)
            oid = data[nul + 1 : nul + 1 + id_length]
            if len(oid) != id_length:
                raise ValueError("truncated entry")
            entries[data[space + 1 : nul]] = (data[at:space], oid)
            at = nul + 1 + id_length
    except ValueError as exc:
        raise HistoryError("cat-file", f"cannot read a tree object: {exc}") from None
    return entries


def _layout(root: Path) -> tuple[Path, str]:
    """Where the repository keeps its objects (a linked worktree's are in the main repository;
    ``GIT_OBJECT_DIRECTORY`` moves them) and which hash names them."""
    key = os.path.abspath(root)
    with _LAYOUTS_LOCK:
        known = _LAYOUTS.get(key)
    if known is not None:
        return known
    out = run_git(root, "rev-parse", "--show-object-format", "--git-path", "objects").decode("utf-8", "surrogateescape")
    lines = out.splitlines()
    if len(lines) != 2 or lines[0] not in _ALGORITHMS:
        raise HistoryError("rev-parse", f"unexpected answer about the object store: {out.strip()!r}")
    layout = (Path(root) / lines[1], lines[0])
    with _LAYOUTS_LOCK:
        _LAYOUTS[key] = layout
    return layout


class ObjectStore:
    """One repository's objects for one commit pass: reads trees and commits (through a
    ``cat-file --batch`` started on the first one not already in memory), writes trees and commits
    as loose objects. Use it as a context manager: leaving it ends the reader."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self._reader: subprocess.Popen | None = None
        self._layout: tuple[Path, str] | None = None

    @property
    def objects(self) -> Path:
        if self._layout is None:
            self._layout = _layout(self.root)
        return self._layout[0]

    @property
    def algorithm(self) -> str:
        if self._layout is None:
            self._layout = _layout(self.root)
        return self._layout[1]

    def __enter__(self) -> ObjectStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        reader, self._reader = self._reader, None
        if reader is not None:
            assert reader.stdin is not None and reader.stdout is not None
            try:
                reader.stdin.close()
            except OSError:
                pass
            reader.wait()
            reader.stdout.close()

    # -- reading ---------------------------------------------------------------------------------

    def _ask(self, name: str) -> tuple[bytes, int] | None:
        """Ask the reader for an object: its kind and size (its bytes follow), None if missing."""
        if self._reader is None:
            try:
                self._reader = subprocess.Popen(["git", "cat-file", "--batch"], cwd=self.root, stdin=subprocess.PIPE,
                                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)  # fmt: skip
            except OSError as exc:
                raise HistoryError("cat-file", exc.strerror or str(exc)) from None
        assert self._reader.stdin is not None and self._reader.stdout is not None
        try:
            self._reader.stdin.write(name.encode() + b"\n")
            self._reader.stdin.flush()
            header = self._reader.stdout.readline().split()
            return (header[1], int(header[2])) if len(header) == 3 else None
        except (OSError, ValueError) as exc:
            self.close()
            raise HistoryError("cat-file", f"reading {name}: {exc}") from None

    def _take(self, name: str, size: int, keep: bool = True) -> bytes:
        """The ``size`` bytes of the object just asked for (and its newline); read in pieces and
        dropped unless ``keep``, so an object too big to hold is never held."""
        assert self._reader is not None and self._reader.stdout is not None
        parts, remaining = [], size + 1
        try:
            while remaining:
                chunk = self._reader.stdout.read(min(remaining, 1 << 20))
                if not chunk:
                    raise OSError("the reader stopped early")
                remaining -= len(chunk)
                if keep:
                    parts.append(chunk)
        except OSError as exc:
            self.close()
            raise HistoryError("cat-file", f"reading {name}: {exc}") from None
        return b"".join(parts)[:size]

    def _read(self, oid: bytes, kind: bytes) -> bytes:
        name = oid.hex()
        found = self._ask(name)
        if found is None or found[0] != kind:
            if found is not None:
                self._take(name, found[1], keep=False)
            raise HistoryError("cat-file", f"{name} is not a {kind.decode()} in this repository")
        return self._take(name, found[1])

    def read_blobs(
        self, shas: Iterable[str], limit: int, on_disk: Mapping[str, Path] | None = None
    ) -> dict[str, bytes | None]:
        """The bytes of blobs; None for a missing one, or one above ``limit`` bytes (skipped as
        it streams by rather than held in memory). A blob read lately comes from memory; one
        that ``on_disk`` names a file for (``{sha: path}``: a file just staged) is read from that
        file when its bytes still hash to it; only the rest are asked of git."""
        out: dict[str, bytes | None] = {}
        for sha in dict.fromkeys(shas):
            data = _BLOBS.get(bytes.fromhex(sha))
            if data is None and on_disk and sha in on_disk:
                data = self._blob_from_file(sha, on_disk[sha], limit)
            if data is not None:
                out[sha] = data if len(data) <= limit else None
                continue
            found = self._ask(sha)
            out[sha] = None
            if found is not None:
                small = found[0] == b"blob" and found[1] <= limit
                data = self._take(sha, found[1], keep=small)
                out[sha] = data if small else None
                if small:
                    _BLOBS.put(bytes.fromhex(sha), data)
        return out

    def _blob_from_file(self, sha: str, path: Path, limit: int) -> bytes | None:
        """The bytes of ``path`` if they are the blob ``sha`` (at most ``limit`` of them)."""
        try:
            with open(path, "rb") as handle:
                data = handle.read(limit + 1)
        except OSError:
            return None
        if len(data) > limit or hashlib.new(self.algorithm, b"blob %d\0%s" % (len(data), data)).hexdigest() != sha:
            return None  # too big to hold, or changed since it was staged: git has the blob
        _BLOBS.put(bytes.fromhex(sha), data)
        return data

    def tree(self, oid: bytes) -> Tree:
        known = _TREES.get(oid)
        if known is None:
            known = _parse_tree(self._read(oid, b"tree"), len(oid))
            _TREES.put(oid, known)
        return known  # shared: never changed in place

    def commit_tree(self, commit: str) -> bytes:
        """The id of a commit's tree."""
        oid = bytes.fromhex(commit)
        known = _COMMIT_TREES.get(oid)
        if known is None:
            first = self._read(oid, b"commit").split(b"\n", 1)[0]
            if not first.startswith(b"tree "):
                raise HistoryError("cat-file", f"commit {commit} names no tree")
            known = bytes.fromhex(first[5:].decode("ascii", "replace"))
            _COMMIT_TREES.put(oid, known)
        return known

    def blobs(self, tree: bytes | None, paths: Iterable[str]) -> dict[str, Entry]:
        """``{path: (mode, hex id)}`` of the files among ``paths`` in ``tree`` (None: empty)."""
        found: dict[str, Entry] = {}
        if tree is None:
            return found
        for rel in paths:
            *folders, name = rel.encode("utf-8", "surrogateescape").split(b"/")
            entries: Tree | None = self.tree(tree)
            for folder in folders:
                entry = entries.get(folder) if entries is not None else None
                entries = self.tree(entry[1]) if entry is not None and entry[0] == TREE_MODE else None
            entry = entries.get(name) if entries is not None else None
            if entry is not None and entry[0] not in (TREE_MODE, _GITLINK_MODE):
                found[rel] = (entry[0].decode(), entry[1].hex())
        return found

    # -- writing ---------------------------------------------------------------------------------

    def _id(self, name: str) -> bytes:
        """A hex id as bytes, checked against the repository's hash: ids of the other length mean
        the repository was made anew under us (the object format is remembered per process), so
        nothing is written and the next pass asks git again."""
        oid = bytes.fromhex(name)
        if len(oid) != _ALGORITHMS[self.algorithm]:
            with _LAYOUTS_LOCK:
                _LAYOUTS.pop(os.path.abspath(self.root), None)
            raise HistoryError("commit", f"{name} is not a {self.algorithm} id; the repository changed, retrying")
        return oid

    def write(self, kind: bytes, content: bytes) -> bytes:
        """Store an object (unless it is there already, loose); its binary id."""
        raw = b"%s %d\0%s" % (kind, len(content), content)
        oid = hashlib.new(self.algorithm, raw).digest()
        name = oid.hex()
        folder = self.objects / name[:2]
        final = folder / name[2:]
        if final.exists():
            return oid
        # Made read-only, as git's objects are, by the mode it is created with (the descriptor
        # still writes): no chmod, and a name of our own rather than mkstemp's search for one.
        temporary = folder / f"tmp_obj_{os.getpid()}_{secrets.token_hex(6)}"
        try:
            replace_unsynced(final, zlib.compress(raw), temporary, 0o444)
        except OSError as exc:
            raise HistoryError("commit", f"cannot write a git object in {folder}: {exc.strerror or exc}") from None
        return oid

    def write_tree(self, base: bytes | None, changes: Mapping[str, Entry | None]) -> bytes:
        """The id of ``base`` (None: the empty tree) with ``changes`` made: each path set to a
        blob, or removed (None); folders left empty go, as git never stores an empty folder."""
        split = [(rel.encode("utf-8", "surrogateescape").split(b"/"), entry) for rel, entry in changes.items()]
        oid = self._rebuild(base, split)
        return oid if oid is not None else self._store_tree({})

    def _rebuild(self, base: bytes | None, changes: list[tuple[list[bytes], Entry | None]]) -> bytes | None:
        entries = dict(self.tree(base)) if base is not None else {}
        below: dict[bytes, list[tuple[list[bytes], Entry | None]]] = {}
        for parts, entry in changes:
            if len(parts) > 1:
                below.setdefault(parts[0], []).append((parts[1:], entry))
            elif entry is None:
                if entries.get(parts[0], (TREE_MODE,))[0] != TREE_MODE:  # a file's removal leaves a folder be
                    del entries[parts[0]]
            else:
                entries[parts[0]] = (entry[0].encode(), self._id(entry[1]))
        # Files first, then folders: a file removed where a folder now begins makes way for it.
        for name, inside in below.items():
            current = entries.get(name)
            folder = current[1] if current is not None and current[0] == TREE_MODE else None
            rebuilt = self._rebuild(folder, inside)
            if rebuilt is not None:
                entries[name] = (TREE_MODE, rebuilt)
            elif folder is not None:
                del entries[name]
        return self._store_tree(entries) if entries else None

    def _store_tree(self, entries: Tree) -> bytes:
        oid = self.write(b"tree", tree_bytes(entries))
        _TREES.put(oid, entries)
        return oid

    def write_commit(self, tree: bytes, parent: str | None, author: bytes, committer: bytes, message: bytes) -> str:
        """Store a commit; its hex id."""
        lines = [b"tree " + tree.hex().encode()]
        if parent:
            lines.append(b"parent " + self._id(parent).hex().encode())
        lines += [b"author " + author, b"committer " + committer]
        oid = self.write(b"commit", b"\n".join(lines) + b"\n\n" + message)
        _COMMIT_TREES.put(oid, tree)
        return oid.hex()


def committed_blob(root: Path, rel: str) -> str | None:
    """The blob id of ``rel`` in HEAD (None: not there, or no commit yet), read from the objects
    (trees are kept in memory), so the common case runs no git process."""
    head = head_sha(root)
    if head is None:
        return None
    with ObjectStore(root) as store:
        entry = store.blobs(store.commit_tree(head), [rel]).get(rel)
    return None if entry is None else entry[1]


def object_format(root: Path) -> str | None:
    """The hash algorithm of the repository at ``root`` ("sha1", "sha256"), None when git cannot
    say (no repository)."""
    try:
        return ObjectStore(root).algorithm
    except SyncdError:
        return None
