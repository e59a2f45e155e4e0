"""The rows a query reads, persisted beside the index: what a one-shot search opens instead of
LanceDB.

A process that searches once (``syncd search`` without a daemon) used to import LanceDB, read
every row with its vector and analyse every row's text into BM25 postings before it could answer:
~4 s of CPU at 30,000 rows, for one query. The image (``index/rows.image``) holds the same rows as
the arrays a query reads, laid out to be memory-mapped: the vectors (float32 and int8), the scope
codes, the conversation links, the full-text postings (one segment, terms in sorted order, so a
query binary-searches its few terms and touches only their postings) and each row's payload as a
JSON line. Opening it reads a header; a query then pages in the int8 codes, its terms' postings and
the payloads of its candidates.

Exactness: an image is only believed when it names the entries table's version on disk (the
newest manifest of ``entries.lance``, as the files mirror names them: files_mirror.table_stamp)
and the code that made it (a digest of the modules that analyse text and lay rows out): a write
to the table after it, a rebuild, a compaction or another syncd's analysis leave it unbelieved,
and the reader loads the rows from LanceDB as before. It is written from rows just loaded from
the table, in the table's order, with the stamp read before the table was: rows newer than the
stamp can only make it mismatch. Search over an image equals search over those rows in memory
(the same functions answer both: rowcache.nearest_rows, neighbours, fulltext.query_signals), a
law in tests/test_rows_image.py.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import mmap
import os
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from .files_mirror import table_stamp
from .fulltext import best_rows, query_signals
from .records import SCHEMA_VERSION
from .rowcache import RowCache, ScopeMask, exact_cosines, nearest_rows, neighbours, scope_rows

__all__ = ["IMAGE_NAME", "ImageKeeper", "ImageRows", "entries_stamp", "open_image", "write_image"]

log = logging.getLogger(__name__)

IMAGE_NAME = "rows.image"
_MAGIC = b"syncd rows image\n"
_ALIGN = 64
_LENGTH_BYTES = 8
# The modules whose code decides what an image holds: text analysis, row layout, the image's own.
_MADE_BY = ("syncd.index.fulltext", "syncd.index.rowcache", "syncd.index.rows_image", "syncd.index.table_rows",
            "syncd.index.records")
_code_digest: str | None = None


def _code() -> str:
    """A digest of the modules that make an image: an image made by other code (another
    syncd's stop words, stemmer, payload fields) is never believed."""
    global _code_digest
    if _code_digest is None:
        digest = hashlib.blake2b(str(SCHEMA_VERSION).encode(), digest_size=16)
        for name in _MADE_BY:
            source = getattr(sys.modules.get(name), "__file__", None)
            try:
                digest.update(Path(source).read_bytes() if source else name.encode())
            except OSError:
                digest.update(name.encode())
        _code_digest = digest.hexdigest()
    return _code_digest


def entries_stamp(folder: Path) -> str | None:
    """Which version of the entries table is on disk now (None when there is none)."""
    return table_stamp(folder / "lance", "entries")


def write_image(folder: Path, stamp: str, rows: RowCache) -> None:
    """Persist ``rows`` (just loaded from the entries table at ``stamp``) as ``folder``'s image.
    Derived data: a failure to write is logged and leaves the old image, which its stamp already
    disowns. Written to a temporary file, synced and renamed, so a reader sees a whole image or
    the one before."""
    parts = rows.image()
    payloads = [json.dumps(p, separators=(",", ":")).encode() for p in parts["payloads"]]
    terms = [t.encode("utf-8", "surrogatepass") for t in parts["terms"]]
    arrays: dict[str, np.ndarray] = dict(parts["arrays"])
    arrays["payload_bytes"] = np.frombuffer(b"".join(payloads), dtype=np.uint8)
    arrays["payload_starts"] = np.cumsum([0, *map(len, payloads)], dtype=np.int64)
    arrays["term_bytes"] = np.frombuffer(b"".join(terms), dtype=np.uint8)
    arrays["term_starts"] = np.cumsum([0, *map(len, terms)], dtype=np.int64)
    layout: dict[str, tuple[str, list[int], int]] = {}
    offset = 0
    for name, array in arrays.items():
        layout[name] = (array.dtype.str, list(array.shape), offset)
        offset += -(-array.nbytes // _ALIGN) * _ALIGN
    header = json.dumps({"stamp": stamp, "code": _code(), "dim": rows.dim, "rows": len(payloads),
                         "codes": [[value, code] for value, code in parts["codes"].items()], "arrays": layout}).encode()
    start = -(-(len(_MAGIC) + _LENGTH_BYTES + len(header)) // _ALIGN) * _ALIGN
    target = folder / IMAGE_NAME
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{IMAGE_NAME}.", suffix=".tmp", dir=folder)
        with os.fdopen(fd, "wb") as out:
            out.write(_MAGIC + len(header).to_bytes(_LENGTH_BYTES, "little") + header)
            for name, array in arrays.items():
                out.seek(start + layout[name][2])
                out.write(np.ascontiguousarray(array).data.cast("B"))
            out.truncate(start + offset)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, target)
        tmp = None
    except OSError as exc:
        log.debug("rows image not written at %s: %s", target, exc)
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def open_image(folder: Path, stamp: str | None, dim: int) -> ImageRows | None:
    """``folder``'s image when it holds the entries table at ``stamp``, made by this code for
    vectors of ``dim``; None otherwise (missing, stale, torn, another layout)."""
    if stamp is None:
        return None
    try:
        with open(folder / IMAGE_NAME, "rb") as f:
            mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError):
        return None
    try:
        head = len(_MAGIC) + _LENGTH_BYTES
        if mapped[: len(_MAGIC)] != _MAGIC:
            raise ValueError("not an image")
        size = int.from_bytes(mapped[len(_MAGIC) : head], "little")
        header = json.loads(mapped[head : head + size])
        if header.get("stamp") != stamp or header.get("code") != _code() or header.get("dim") != dim:
            raise ValueError("stale")
        start = -(-(head + size) // _ALIGN) * _ALIGN
        arrays = {}
        for name, (dtype, shape, offset) in header["arrays"].items():
            count = int(np.prod(shape)) if shape else 1
            arrays[name] = np.frombuffer(mapped, dtype=np.dtype(dtype), count=count, offset=start + offset).reshape(shape)
        return ImageRows(header, arrays, mapped)
    except (ValueError, KeyError, TypeError):
        mapped.close()
        return None


class ImageRows:
    """One image, read-only: the query side of :class:`syncd.index.rowcache.RowCache` (what
    ``Index.reading()`` yields), answered from the mapped arrays."""

    def __init__(self, header: dict, arrays: dict[str, np.ndarray], mapped: mmap.mmap):
        self.stamp: str = header["stamp"]
        self.dim: int = header["dim"]
        self._a = arrays
        self._mapped = mapped
        self._codes: dict[str | None, int] = dict(header["codes"])
        self._n = int(header["rows"])
        self._scope_cache: dict[ScopeMask, np.ndarray] = {}
        self._decoded: dict[int, dict] = {}
        self._keys: dict[tuple[str, str], int] | None = None

    def __len__(self) -> int:
        return self._n

    def _mask(self, scope: ScopeMask) -> np.ndarray:
        mask = self._scope_cache.get(scope)
        if mask is None:
            a = self._a
            mask = scope_rows(scope, self._codes, a["user_codes"], a["chat_codes"],
                              (a["transcript_rows"], a["fact_rows"], a["memory_rows"], a["heading_rows"]))
            if len(self._scope_cache) > 64:
                self._scope_cache.clear()
            self._scope_cache[scope] = mask
        return mask

    def _postings(self, term: str) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """The postings of ``term``: a binary search of the sorted terms, then their slices."""
        a, wanted = self._a, term.encode("utf-8", "surrogatepass")
        starts, blob = a["term_starts"], a["term_bytes"]
        lo, hi = 0, len(starts) - 1
        while lo < hi:
            mid = (lo + hi) // 2
            if blob[starts[mid] : starts[mid + 1]].tobytes() < wanted:
                lo = mid + 1
            else:
                hi = mid
        if lo == len(starts) - 1 or blob[starts[lo] : starts[lo + 1]].tobytes() != wanted:
            return None
        begin, end = a["term_offsets"][lo], a["term_offsets"][lo + 1]
        return a["post_rows"][begin:end], a["post_freqs"][begin:end], a["post_own"][begin:end]

    def _payload(self, row: int) -> dict:
        found = self._decoded.get(row)
        if found is None:
            starts = self._a["payload_starts"]
            found = self._decoded[row] = json.loads(self._a["payload_bytes"][starts[row] : starts[row + 1]].tobytes())
        return found

    def prefetch(self, query: np.ndarray, text: str, scope: ScopeMask, pool: int, reach: int) -> None:
        """Nothing to gather: every array is mapped."""

    def count(self, scope: ScopeMask) -> int:
        return int(np.count_nonzero(self._mask(scope))) if self._n else 0

    def text_signals(self, query: str, scope: ScopeMask) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return query_signals(query, self._postings, self._mask(scope), self._a["passage_lengths"])

    def _nearest(self, query: np.ndarray, scope: ScopeMask, k: int) -> tuple[np.ndarray, np.ndarray]:
        if not self._n or k <= 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        mask = self._mask(scope)
        allowed = int(mask.sum())
        if not allowed:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        a = self._a
        return nearest_rows(a["vectors"], a["codes8"], a["scales"], mask, allowed, query, k)

    def search(self, query: np.ndarray, scope: ScopeMask, k: int) -> list[tuple[str, str, float]]:
        rows, exact = self._nearest(query, scope, k)
        return [(self._payload(int(r))["path"], self._payload(int(r))["id"], float(s)) for r, s in zip(rows, exact)]

    def search_rows(self, query: np.ndarray, scope: ScopeMask, k: int) -> np.ndarray:
        # As the rows in memory map a hit back through its (path, id): to that key's first row.
        return self._a["key_row"][self._nearest(query, scope, k)[0]].astype(np.int64)

    def around(self, rows: np.ndarray, scope: ScopeMask, reach: int) -> tuple[np.ndarray, np.ndarray]:
        return neighbours(self._a["prev"], self._a["next"], self._mask(scope), rows, reach)

    def row_cosines(self, query: np.ndarray, rows: np.ndarray) -> np.ndarray:
        return exact_cosines(self._a["vectors"], rows, query)

    def row_created(self, rows: np.ndarray) -> np.ndarray:
        return self._a["created"][np.asarray(rows, dtype=np.int64)]

    def row_payloads(self, rows: Iterable[int]) -> list[dict]:
        return [self._payload(int(row)) for row in rows]

    def payloads(self, keys: Iterable[tuple[str, str]]) -> dict[tuple[str, str], dict]:
        if self._keys is None:
            self._keys = {}
            for row in range(self._n):
                payload = self._payload(row)
                self._keys.setdefault((payload["path"], payload["id"]), row)
        return {key: self._payload(self._keys[key]) for key in keys if key in self._keys}

    def text_search(self, query: str, scope: ScopeMask, k: int) -> list[tuple[str, str, float]]:
        if not self._n or k <= 0:
            return []
        scores = self.text_signals(query, scope)[0]
        return [(self._payload(int(r))["path"], self._payload(int(r))["id"], float(scores[r])) for r in best_rows(scores, k)]

    def close(self) -> None:
        """Let the mapping go once nothing reads the arrays (a reader switching to the table)."""
        self._a = {}
        self._decoded = {}
        with contextlib.suppress(BufferError):
            self._mapped.close()



class ImageKeeper:
    """An index's image on its reader's side: the one open, and whether this process wrote one."""

    def __init__(self, folder: Path, dim: int):
        self.folder = folder
        self.dim = dim
        self._image: ImageRows | None = None
        self._written = False

    def stamp(self) -> str | None:
        """The entries table's stamp now. Read before the table is: rows newer than the stamp
        can then only make the image written from them mismatch, never pass for it."""
        return entries_stamp(self.folder)

    def current(self) -> ImageRows | None:
        """The image when it holds the table on disk now; None otherwise."""
        stamp = self.stamp()
        if self._image is None or self._image.stamp != stamp:
            self._image = open_image(self.folder, stamp, self.dim)
        return self._image

    def loaded(self, stamp: str, rows: RowCache) -> None:
        """``rows`` were just loaded from the table at ``stamp``: the first load of a process
        writes them as the image. Only the first: a reader that outlives many writes (the
        workbench) would otherwise rewrite it after each; the next one-shot search does."""
        self._image = None
        if not self._written:
            self._written = True
            write_image(self.folder, stamp, rows)
