"""The rows a query reads, persisted beside the index: what a one-shot search opens instead of
LanceDB.

A process that searches once (``syncd search`` without a daemon) used to import LanceDB, read
every row with its vector and analyse every row's text into BM25 postings before it could answer:
CPU in proportion to the rows, for one query (bench_cli.py measures a one-shot search). The image
(``index/rows.image``) holds the same rows as the arrays a query reads, laid out to be
memory-mapped: the vectors (float32 and int8), the scope
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
stamp can only make it mismatch. A writer that loads no rows (``syncd sync``) keeps a current
image in step with each write it makes to the table (patch_image: the new rows' texts analysed,
the kept rows' renumbered); a writer holding the rows (a daemon) does not, and the next reader
to load the table writes a new one. Search over an image equals search over those rows in memory
(the same functions answer both: rowcache.nearest_rows, neighbours, fulltext.query_signals), a
law in tests/test_rows_image.py.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import logging
import mmap
import os
import tempfile
from collections.abc import Collection, Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np

from ..home.page_cache import boot_id, unsynced_boot
from .files_mirror import table_stamp
from .fulltext import TextIndex, best_rows, query_signals
from .pending import PendingWrites
from .records import SCHEMA_VERSION, EntryRow
from .rowcache import (
    RowCache,
    ScopeMask,
    exact_cosines,
    exact_pair_cosines,
    nearest_rows,
    neighbours,
    quantize,
    row_columns,
    scope_rows,
)

__all__ = ["IMAGE_NAME", "ImageKeeper", "ImageRows", "entries_stamp", "open_image", "patch_image", "write_image"]

log = logging.getLogger(__name__)

IMAGE_NAME = "rows.image"
_MAGIC = b"syncd rows image\n"
_ALIGN = 64
_LENGTH_BYTES = 8
# The modules whose code decides what an image holds: text analysis, row layout, the image's own.
_MADE_BY = (
    "syncd.index.fulltext",
    "syncd.index.rowcache",
    "syncd.index.rows_image",
    "syncd.index.table_rows",
    "syncd.index.records",
)
_code_digest: str | None = None


def _code() -> str:
    """A digest of the modules that make an image: an image made by other code (another
    syncd's stop words, stemmer, payload fields) is never believed."""
    global _code_digest
    if _code_digest is None:
        digest = hashlib.blake2b(str(SCHEMA_VERSION).encode(), digest_size=16)
        for name in _MADE_BY:
            # Found, not looked up among the loaded modules: a reader that never loads one of
            # them (table_rows, pyarrow's) must reckon the same digest as the writer that did.
            spec = importlib.util.find_spec(name)
            source = spec.origin if spec is not None else None
            try:
                digest.update(Path(source).read_bytes() if source else name.encode())
            except OSError:
                digest.update(name.encode())
        _code_digest = digest.hexdigest()
    return _code_digest


def entries_stamp(folder: Path) -> str | None:
    """Which version of the entries table is on disk now (None when there is none)."""
    return table_stamp(folder / "lance", "entries")


def _blob(strings: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Strings as one UTF-8 byte array and the offsets of each (surrogates kept as they are)."""
    encoded = [t.encode("utf-8", "surrogatepass") for t in strings]
    return np.frombuffer(b"".join(encoded), dtype=np.uint8), np.cumsum([0, *map(len, encoded)], dtype=np.int64)


def _strings(data: np.ndarray, starts: np.ndarray) -> list[str]:
    raw = data.tobytes()
    return [raw[a:b].decode("utf-8", "surrogatepass") for a, b in zip(starts[:-1].tolist(), starts[1:].tolist())]


def write_image(folder: Path, stamp: str, rows: RowCache) -> None:
    """Persist ``rows`` (just loaded from the entries table at ``stamp``) as ``folder``'s image."""
    parts = rows.image()
    arrays: dict[str, np.ndarray] = dict(parts["arrays"])
    arrays["payload_bytes"], arrays["payload_starts"] = _blob([_json(p) for p in parts["payloads"]])
    arrays["term_bytes"], arrays["term_starts"] = _blob(parts["terms"])
    # What a write's patch reads of each row without decoding its payload: its path, id, and
    # the heading and line its conversation is linked by.
    arrays["path_bytes"], arrays["path_starts"], arrays["path_codes"] = _coded(parts["paths"])
    payloads = parts["payloads"]
    arrays["heading_bytes"], arrays["heading_starts"], arrays["heading_codes"] = _coded([_heading(p) for p in payloads])
    arrays["id_bytes"], arrays["id_starts"] = _blob([p["id"] for p in payloads])
    arrays["lines"] = np.fromiter((p.get("line") or 0 for p in payloads), np.int64, len(payloads))
    _write(folder, stamp, rows.dim, parts["codes"], arrays)


def _heading(payload: dict) -> str:
    return payload.get("heading") or ""


def _coded(values: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The distinct ``values`` as a blob (see _blob) and each value's number in it."""
    distinct = list(dict.fromkeys(values))
    code_of = {value: n for n, value in enumerate(distinct)}
    return (*_blob(distinct), np.fromiter((code_of[v] for v in values), np.int32, len(values)))


def _pick(data: np.ndarray, starts: np.ndarray, rows: np.ndarray) -> list[str]:
    """The strings of a blob at ``rows``."""
    raw = data.tobytes()
    return [raw[starts[r] : starts[r + 1]].decode("utf-8", "surrogatepass") for r in rows.tolist()]


def _json(payload: dict) -> str:
    return json.dumps(payload, separators=(",", ":"))


def _write(folder: Path, stamp: str, dim: int, codes: dict[str | None, int], arrays: dict[str, np.ndarray]) -> None:
    """Write an image. Derived data: a failure is logged and leaves the old image, which its
    stamp already disowns. Written to a temporary file and renamed, so a reader sees a whole
    image or the one before.

    Not fsynced where the page cache keeps it for every reader until the machine stops (a local
    filesystem of a machine that names its boot: syncd.home.page_cache): the image then says
    the boot it was written in and is believed only in that boot, so a power cut or a system
    crash, which could lose its bytes, disowns it (the next reader loads the table and writes
    a new one). The fsync of tens of megabytes was most of a one-shot ``syncd sync`` of one
    line in a big log (bench_log_edit.py). Elsewhere it is synced."""
    layout: dict[str, tuple[str, list[int], int]] = {}
    offset = 0
    for name, array in arrays.items():
        layout[name] = (array.dtype.str, list(array.shape), offset)
        offset += -(-array.nbytes // _ALIGN) * _ALIGN
    header_boot = unsynced_boot(folder)
    header = json.dumps(
        {
            "stamp": stamp,
            "code": _code(),
            "boot": header_boot,
            "dim": dim,
            "rows": len(arrays["payload_starts"]) - 1,
            "codes": [[value, code] for value, code in codes.items()],
            "arrays": layout,
        }
    ).encode()
    start = -(-(len(_MAGIC) + _LENGTH_BYTES + len(header)) // _ALIGN) * _ALIGN
    target = folder / IMAGE_NAME
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{IMAGE_NAME}.", suffix=".tmp", dir=folder)
        with os.fdopen(fd, "wb") as out:
            out.write(_MAGIC + len(header).to_bytes(_LENGTH_BYTES, "little") + header)
            for name, array in arrays.items():
                if not array.nbytes:
                    continue  # an index without rows (or without a term): nothing to lay out
                out.seek(start + layout[name][2])
                out.write(np.ascontiguousarray(array).data.cast("B"))
            out.truncate(start + offset)
            out.flush()
            if header_boot is None:
                os.fsync(out.fileno())
        os.replace(tmp, target)
        tmp = None
    except OSError as exc:
        log.debug("rows image not written at %s: %s", target, exc)
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def patch_image(
    folder: Path,
    image: ImageRows,
    stamp: str,
    dropped: Collection[str],
    dropped_rows: Mapping[str, Collection[str]],
    added: Sequence[EntryRow],
    vectors: np.ndarray,
) -> None:
    """Write the image of the entries table at ``stamp``, which one write made of the table
    ``image`` holds: the rows of the ``dropped`` paths deleted, those of ``dropped_rows`` ({path:
    ids}) too, then ``added`` appended with their ``vectors``, as table_writes.write_entries
    writes them (a delete keeps the other rows in their order; an add appends). A sync that
    does not load the rows keeps the image so without reading the table: only the new rows'
    texts are analysed, the kept rows' postings renumbered. A law holds it equal to an image
    written from the table's rows (tests/test_rows_image.py)."""
    a = image._a
    paths = _strings(a["path_bytes"], a["path_starts"])
    code_of = {path: n for n, path in enumerate(paths)}
    path_codes = a["path_codes"]
    keep = np.ones(len(image), dtype=bool)
    for path in dropped:
        if path in code_of:
            keep &= path_codes != code_of[path]
    for path, listed in dropped_rows.items():
        ids = set(listed)
        if path in code_of and ids:
            rows = np.flatnonzero(path_codes == code_of[path])
            found = _pick(a["id_bytes"], a["id_starts"], rows)
            keep[rows[np.fromiter((i in ids for i in found), bool, len(rows))]] = False
    kept = np.flatnonzero(keep)
    m = len(kept)
    renumbered = np.full(len(image) + 1, -1, dtype=np.int64)
    renumbered[kept] = np.arange(m)
    from .table_rows import payload as table_payload  # pyarrow's: a search of the image needs none

    new = [table_payload(row) for row in added]
    codes = dict(image._codes)
    for value in [p["user"] for p in new] + [p["chat"] for p in new]:
        codes.setdefault(value, len(codes))
    headings = _strings(a["heading_bytes"], a["heading_starts"])
    heading_of = {heading: n for n, heading in enumerate(headings)}
    for payload in new:
        for value, values, number in ((payload["path"], paths, code_of), (_heading(payload), headings, heading_of)):
            if value not in number:
                number[value] = len(values)
                values.append(value)
    out: dict[str, np.ndarray] = {}
    vectors = np.asarray(vectors, dtype=np.float32).reshape(len(new), image.dim)
    codes8, scales = quantize(vectors)
    fact, memory, transcript, heading, created = row_columns(new)
    for name, column in (
        ("vectors", vectors),
        ("codes8", codes8),
        ("scales", scales),
        ("fact_rows", fact),
        ("memory_rows", memory),
        ("transcript_rows", transcript),
        ("heading_rows", heading),
        ("created", created),
        ("user_codes", np.array([codes[p["user"]] for p in new], dtype=np.int32)),
        ("chat_codes", np.array([codes[p["chat"]] for p in new], dtype=np.int32)),
        ("path_codes", np.array([code_of[p["path"]] for p in new], dtype=np.int32)),
        ("heading_codes", np.array([heading_of[_heading(p)] for p in new], dtype=np.int32)),
        ("lines", np.array([p.get("line") or 0 for p in new], dtype=np.int64)),
    ):
        out[name] = np.concatenate([a[name][kept], column.astype(a[name].dtype, copy=False)])
    _patch_postings(image, keep, renumbered, [row.search_text or "" for row in added], out)
    lengths = np.diff(a["payload_starts"])
    bytes_kept = a["payload_bytes"][np.repeat(keep, lengths)]
    added_bytes, added_starts = _blob([_json(p) for p in new])
    out["payload_bytes"] = np.concatenate([bytes_kept, added_bytes])
    out["payload_starts"] = np.concatenate(
        [np.cumsum([0, *lengths[keep].tolist()], dtype=np.int64), len(bytes_kept) + added_starts[1:]]
    )
    out["path_bytes"], out["path_starts"] = _blob(paths)
    out["heading_bytes"], out["heading_starts"] = _blob(headings)
    ids_kept = a["id_bytes"][np.repeat(keep, np.diff(a["id_starts"]))]
    new_ids, new_id_starts = _blob([p["id"] for p in new])
    out["id_bytes"] = np.concatenate([ids_kept, new_ids])
    out["id_starts"] = np.concatenate(
        [np.cumsum([0, *np.diff(a["id_starts"])[keep].tolist()], dtype=np.int64), len(ids_kept) + new_id_starts[1:]]
    )
    touched = [code_of[p] for p in {*dropped, *dropped_rows, *(q["path"] for q in new)} if p in code_of]
    _relink(image, kept, renumbered, len(new), touched, out)
    _write(folder, stamp, image.dim, codes, out)


def _patch_postings(
    image: ImageRows, keep: np.ndarray, renumbered: np.ndarray, texts: list[str], out: dict[str, np.ndarray]
) -> None:
    """The kept rows' postings renumbered and the new rows' added, terms in sorted order, a term
    no row holds any more dropped (as a load from the table would never have it)."""
    a = image._a
    fresh = TextIndex()
    fresh.add(texts)
    new_terms, new_offsets, new_rows, new_freqs, new_own, new_lengths = fresh.image(np.ones(len(texts), dtype=bool))
    old_terms = _strings(a["term_bytes"], a["term_starts"])
    merged = sorted(set(old_terms).union(new_terms))
    at = {term: n for n, term in enumerate(merged)}
    old_ids = np.repeat(np.array([at[t] for t in old_terms], dtype=np.int64), np.diff(a["term_offsets"]))
    held = keep[a["post_rows"]]
    new_ids = np.repeat(np.array([at[t] for t in new_terms], dtype=np.int64), np.diff(new_offsets))
    # Both sides are sorted by (term, row) already (the old ids and the renumbering keep order):
    # the new postings are inserted where they belong, with no sort of the whole.
    total = int(keep.sum()) + len(texts) + 1
    old_rows, new_rows = renumbered[a["post_rows"][held]], int(keep.sum()) + new_rows
    at_old = np.searchsorted(old_ids[held] * total + old_rows, new_ids * total + new_rows)
    terms = np.insert(old_ids[held], at_old, new_ids)
    rows = np.insert(old_rows, at_old, new_rows)
    freqs = np.insert(a["post_freqs"][held], at_old, new_freqs)
    own = np.insert(a["post_own"][held], at_old, new_own)
    starts = np.flatnonzero(np.diff(terms, prepend=-1)) if len(terms) else np.zeros(0, dtype=np.int64)
    out["term_bytes"], out["term_starts"] = _blob([merged[t] for t in terms[starts].tolist()])
    out["term_offsets"] = np.append(starts, len(terms)).astype(np.int64)
    out["post_rows"], out["post_freqs"], out["post_own"] = rows, freqs, own
    out["passage_lengths"] = np.concatenate([a["passage_lengths"][keep], new_lengths])


def _relink(
    image: ImageRows,
    kept: np.ndarray,
    renumbered: np.ndarray,
    added: int,
    touched: list[int],
    out: dict[str, np.ndarray],
) -> None:
    """Conversation links and key rows: kept as they were (renumbered) for the paths the write
    did not touch; made again, as a load makes them (RowCache._link: a section's facts in line
    order, ties in row order; a key's first row), for the rows of the paths it touched."""
    a = image._a
    m = len(kept)
    prev = np.concatenate([renumbered[a["prev"][kept]], np.full(added, -1, dtype=np.int64)])
    nxt = np.concatenate([renumbered[a["next"][kept]], np.full(added, -1, dtype=np.int64)])
    key_row = np.concatenate([renumbered[a["key_row"][kept]], np.zeros(added, dtype=np.int64)])
    rows = np.concatenate([np.flatnonzero(np.isin(out["path_codes"][:m], touched)), np.arange(m, m + added)])
    prev[rows] = nxt[rows] = -1
    facts = rows[out["fact_rows"][rows]]
    path, heading = out["path_codes"][facts], out["heading_codes"][facts]
    order = np.lexsort((facts, out["lines"][facts], heading, path))
    chain, path, heading = facts[order], path[order], heading[order]
    same = (path[1:] == path[:-1]) & (heading[1:] == heading[:-1])
    prev[chain[1:][same]] = chain[:-1][same]
    nxt[chain[:-1][same]] = chain[1:][same]
    first: dict[tuple[int, str], int] = {}
    for row, code, row_id in zip(
        rows.tolist(), out["path_codes"][rows].tolist(), _pick(out["id_bytes"], out["id_starts"], rows)
    ):
        key_row[row] = first.setdefault((code, row_id), row)
    out["prev"], out["next"], out["key_row"] = prev, nxt, key_row


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
        if header.get("boot") is not None and header["boot"] != boot_id():
            raise ValueError("written unsynced before the machine last started")
        start = -(-(head + size) // _ALIGN) * _ALIGN
        arrays = {}
        for name, (dtype, shape, offset) in header["arrays"].items():
            count = int(np.prod(shape)) if shape else 1
            arrays[name] = np.frombuffer(mapped, dtype=np.dtype(dtype), count=count, offset=start + offset).reshape(
                shape
            )
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
            mask = scope_rows(
                scope,
                self._codes,
                a["user_codes"],
                a["chat_codes"],
                (a["transcript_rows"], a["fact_rows"], a["memory_rows"], a["heading_rows"]),
            )
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

    def pair_cosines(self, rows: np.ndarray, others: np.ndarray) -> np.ndarray:
        return exact_pair_cosines(self._a["vectors"], rows, others)

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
        return [
            (self._payload(int(r))["path"], self._payload(int(r))["id"], float(scores[r])) for r in best_rows(scores, k)
        ]

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

    def patched(self, image: ImageRows, batch: PendingWrites) -> None:
        """``batch`` was just written to the table ``image`` held (write_entries): write the
        image of the table it made (see patch_image)."""
        rows, vectors = batch.new_rows()
        stamp = self.stamp()
        if stamp is not None:
            patch_image(
                self.folder,
                image,
                stamp,
                batch.whole_deletes(),
                batch.row_deletes(),
                rows,
                vectors if vectors is not None else np.zeros((0, self.dim), dtype=np.float32),
            )
        self._image = None
