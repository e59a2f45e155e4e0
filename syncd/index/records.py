"""The rows the index holds, as plain values: what a file of the tree becomes once parsed."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from ..errors import IndexError_
from ..home import atomic_write

__all__ = [
    "HEADING_SEPARATOR",
    "NEIGHBOURS",
    "SCHEMA_VERSION",
    "EntryRow",
    "FileRecord",
    "FileUpdate",
    "StaleRows",
    "heading_only",
    "REPLACING",
    "meta_compatible",
    "mark_replacing",
    "model_mismatch",
    "rows_of_model",
    "vectors_key",
    "read_meta",
    "write_meta",
    "only_restats",
    "rebuild_resumable",
    "page_breadcrumb",
]

HEADING_SEPARATOR = " > "
# In a row's search text, what follows this line is its neighbours' words (a daily-log fact's
# conversation): full text finds the row by them (its passage), but never counts them as its own
# words (fulltext.py).
NEIGHBOURS = "\x1f"
_COMMENT_RE = re.compile(r"<!--.*?-->", re.DOTALL)
_HEADING_RE = re.compile(r" {0,3}#{1,6}(?:[ \t]|$)")

# The layout of the index's rows; an index of another layout is rebuilt (`syncd reindex`).
# 2: daily-log facts carry their section heading and a context window in their search text.
# 3: vault chunks carry their page's title (a new column), in their embedded and searched text too.
# 4: a fact's search text holds its date words and the dates its relative time expressions mean
#    (syncd.formats.when), no longer its neighbours' words (they reach it once, as search context).
SCHEMA_VERSION = 4


def read_meta(folder: Path) -> dict:
    """The ``meta.json`` of the index at ``folder`` (which model and layout made it), {} if none
    or if it is no JSON object (damaged: a writer's next sync rebuilds the index and writes it
    anew, as for none). Every search and every change reads it: a damaged one must not be a
    traceback in each of them."""
    try:
        meta = json.loads((folder / "meta.json").read_text(encoding="utf-8"))
    except (FileNotFoundError, UnicodeDecodeError, json.JSONDecodeError):
        return {}
    return meta if isinstance(meta, dict) else {}


def write_meta(folder: Path, drop: Iterable[str] = (), **fields: object) -> None:
    """Update the index's ``meta.json`` with ``fields`` (and without the keys in ``drop``); an
    unchanged one is not written (every sync ends here, and a write costs two fsyncs). The folder
    is made: a shared index makes it on a write only."""
    current = read_meta(folder)
    meta = {k: v for k, v in current.items() if k not in drop} | fields
    if meta != current:
        folder.mkdir(parents=True, exist_ok=True)
        atomic_write(folder / "meta.json", json.dumps(meta, indent=2, sort_keys=True).encode())


# The meta key a rebuild sets while it replaces the rows ({"model_id", "dim"} of the new rows)
# and removes once the meta names their model: in between, the rows are either model's.
REPLACING = "replacing"


def meta_compatible(meta: Mapping, model_id: str, empty: bool) -> bool:
    """Whether an index whose ``meta.json`` says ``meta`` can serve ``model_id``: False when its
    vectors come from another model or its rows have another layout. No meta: only if empty."""
    if not meta:
        return empty
    return meta.get("model_id") == model_id and meta.get("schema") == SCHEMA_VERSION and _settled(meta) == model_id


def _settled(meta: Mapping) -> object:
    """The model every row of an index whose meta is ``meta`` comes from; None while a rebuild
    replaces rows of one model by another's (or was killed doing so): its rows may be either's."""
    replacing = meta.get(REPLACING)
    if isinstance(replacing, Mapping) and (replacing.get("model_id"), replacing.get("dim")) != (
        meta.get("model_id"),
        meta.get("dim"),
    ):
        return None
    return meta.get("model_id")


def model_mismatch(meta: Mapping, model_id: str, dim: int) -> str | None:
    """Why the vectors of an index whose meta is ``meta`` cannot be compared with those of
    ``model_id`` (a query's, a fact's to deduplicate, rows to write beside them), or None when
    they can. An index with no meta holds no rows of any model yet: nothing to mismatch."""
    if not meta:
        return None
    theirs, their_dim = meta.get("model_id", model_id), meta.get("dim", dim)
    if _settled(meta) is None:
        new = meta[REPLACING]
        return (
            f"the index is being rebuilt with another model ({new.get('model_id')}) than it was built with "
            f"({theirs}), by a `syncd reindex` under way or interrupted: try again once it ends (an interrupted "
            "one goes on with the next `syncd reindex`)"
        )
    if theirs == model_id and their_dim == dim:
        return None
    return (
        f"the index was built with another model ({theirs}, {their_dim} dimensions) than the one this process "
        f"is configured with ({model_id}): set SYNCD_EMBED_MODEL / SYNCD_EMBED_MODEL_PATH to the index's model, "
        "or run `syncd reindex` to rebuild the index with this one"
    )


def mark_replacing(folder: Path, model_id: str, dim: int) -> dict[str, str]:
    """Before a rebuild replaces the rows of the index at ``folder`` by rows of ``model_id``:
    when those differ from the model its meta names, mark the meta (REPLACING), so that until
    it names the new rows' model a reader refuses them (rows_of_model) and a writer rebuilds
    (meta_compatible). Returns what the meta must say once it names it: a new ``rebuild``
    after a switch, which tells a reader that took rows meanwhile they may not be the old ones."""
    old = read_meta(folder)
    if not old or (old.get("model_id"), old.get("dim")) == (model_id, dim):
        return {}
    write_meta(folder, **{REPLACING: {"model_id": model_id, "dim": dim}})
    return {"rebuild": uuid.uuid4().hex}


def vectors_key(meta: Mapping) -> tuple:
    """What of an index's meta says whose vectors its rows hold: a reader that finds it the same
    before and after it took the rows took rows of that model (see :func:`rows_of_model`)."""
    return meta.get("model_id"), meta.get("dim"), meta.get(REPLACING), meta.get("rebuild")


_Rows = TypeVar("_Rows")


def rows_of_model(read: Callable[[], dict], take: Callable[[], _Rows], model_id: str, dim: int) -> _Rows:
    """``take()`` (the rows of an index, as of one moment), checked to hold vectors of
    ``model_id``: IndexError_ saying why not (model_mismatch) otherwise. ``read()`` is the
    index's meta, read before and after the rows were taken: a rebuild marks its meta before it
    replaces the rows (REPLACING) and names their model after, so meta that says the same
    before and after, with no replacement under way, names the model of the rows taken between
    (a meta that moved on meanwhile is read again, with the rows)."""
    for _ in range(3):
        before = read()
        rows = take()
        after = read()
        problem = model_mismatch(after, model_id, dim)
        if problem is not None:
            raise IndexError_(problem)
        if vectors_key(before) == vectors_key(after):
            return rows
    raise IndexError_(
        "the index is being rebuilt with another model again and again (a `syncd reindex` of each model at once?): "
        "try again once they end"
    )


def rebuild_resumable(aside_dir: Path, model_id: str, dim: int, meta: Mapping[str, object]) -> bool:
    """Whether the rows an interrupted rebuild left in ``aside_dir`` are what a rebuild for
    ``meta`` would write (same model, layout and settings): then it goes on from them."""
    try:
        found = json.loads((aside_dir / "meta.json").read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return False
    wanted = {"schema": SCHEMA_VERSION, "model_id": model_id, "dim": dim, **meta}
    return isinstance(found, dict) and all(found.get(k) == v for k, v in wanted.items())


def page_breadcrumb(title: str | None, heading: str) -> str:
    """A chunk's place as a person reads it: the page's title, then its heading path
    (``Page > Section > Subsection``). A page whose first heading is its title (its H1) does not
    say it twice; without a title this is the heading path alone."""
    if not title:
        return heading
    first = heading.split(HEADING_SEPARATOR, 1)[0]
    if first.strip().casefold() == title.strip().casefold():
        return heading
    return f"{title}{HEADING_SEPARATOR}{heading}" if heading else title


def heading_only(text: str) -> bool:
    """Whether a chunk's text holds nothing but headings and HTML comments ("## Projects", "# Ana",
    a managed region's markers): a chunk that says nothing of its own, never a search hit (its
    words still reach the chunks under it, through their heading path)."""
    body = _COMMENT_RE.sub("", text)
    return all(not line.strip() or _HEADING_RE.match(line) for line in body.splitlines())


@dataclass(frozen=True)
class FileRecord:
    """What the index knows of one file: enough to say exactly whether it is stale."""

    path: str
    kind: str
    sha: str
    size: int
    mtime_ns: int
    error: str | None = None


@dataclass(frozen=True)
class EntryRow:
    """One searchable unit: a fact line, or a heading-sized chunk of free text.

    ``id`` is stable for the same content at the same place, so a rebuild reproduces it.
    """

    id: str
    kind: str  # "fact" or "chunk"
    source: str  # the file's kind: daily_log, memory_md, block, vault_page, note
    path: str
    line: int
    text: str
    user: str | None = None
    chat: str | None = None
    session: str | None = None
    category: str | None = None
    tags: tuple[str, ...] = ()
    importance: float | None = None
    created_at: str | None = None
    heading: str = ""
    provenance: str = ""
    label: str | None = None
    # The page a vault chunk belongs to: its frontmatter title, else its first H1, else its file
    # name; None for rows of other files.
    title: str | None = None
    # Words about the row that full text should also find it by (a daily-log fact's day, and the
    # days its relative time expressions mean); derived from the file, so not a column.
    context: str = ""

    @property
    def breadcrumb(self) -> str:
        """Where a chunk sits: ``Page > Section > Subsection`` (see :func:`page_breadcrumb`)."""
        return page_breadcrumb(self.title, self.heading)

    @property
    def embed_text(self) -> str:
        """What the embedder sees: a chunk's page and heading path give its text the context it
        lacks; a fact is embedded alone (its heading is the section it was said in, not its meaning)."""
        where = self.breadcrumb if self.kind != "fact" else ""
        return f"{where}\n{self.text}" if where else self.text

    @property
    def search_text(self) -> str:
        """What full-text search sees: the text plus the words around it a person would search by."""
        heading = self.breadcrumb if self.kind != "fact" else ""
        parts = [heading, self.category or "", self.text, " ".join(self.tags), self.label or ""]
        own = "\n".join(p.replace(NEIGHBOURS, " ") for p in parts if p)
        return f"{own}\n{self.context}" if self.context else own


@dataclass
class FileUpdate:
    """The new state of one path. ``record`` None means the file is gone; ``rows`` None means its
    rows stay as they are (only its stat changed, e.g. a ``touch``). ``unchanged``: ids among
    ``rows`` that the index already holds exactly so (kept, not rewritten); ``vectors`` are those
    of ``changed_rows`` only."""

    path: str
    record: FileRecord | None
    rows: list[EntryRow] | None = None
    vectors: object = field(default=None, repr=False)
    # A wiki page's parse (``ParsedFile.page``), for the link graph kept beside the index.
    page: object = field(default=None, repr=False)
    unchanged: frozenset[str] = frozenset()
    # The file's whole text, for a core block or MEMORY.md (rows.KEPT_TEXT_KINDS): a PostgreSQL
    # index keeps it so that a reader holding no copy of the home serves core blocks and stats.
    text: str | None = field(default=None, repr=False)

    @property
    def changed_rows(self) -> list[EntryRow]:
        if not self.unchanged:
            return self.rows or []
        return [row for row in self.rows or () if row.id not in self.unchanged]


def only_restats(update: FileUpdate, held: FileRecord | None) -> bool:
    """Whether ``update`` only restats the file ``held`` records: the same bytes (sha), kind and
    error found again under a new size or mtime (a sync plan's ``touched``), its rows kept."""
    new = update.record
    return (
        update.rows is None
        and new is not None
        and held is not None
        and (new.sha, new.kind, new.error) == (held.sha, held.kind, held.error)
    )


class StaleRows(Exception):
    """An update's ``unchanged`` rows were answered before the index last changed: the caller
    redoes those files whole (embeds every row). Internal to a sync; never reaches a user."""

    def __init__(self, paths: Sequence[str]):
        super().__init__(f"rows changed since they were compared: {', '.join(paths[:3])}")
        self.paths = list(paths)
