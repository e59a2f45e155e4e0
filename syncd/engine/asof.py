"""Memory as it was: search the memory at any past commit (issue 29, first floor).

``search_at(engine, query, at="HEAD~20")`` answers from the tree of that commit: the revision is
anything git names (a sha, ``HEAD~3``, a branch, a tag) or a date/time (``2026-11-20T14:00``,
``yesterday``, ``2 days ago``: the last commit on the current branch at or before it). The answer
is exact by construction: the tree of the commit is checked out from git's objects into
``.syncd/asof/<sha>/`` (git's own index and working tree are never touched) and indexed there by
the same sync every home gets.

Cheap to make because the past index does not start empty: it starts as a copy of the rows of the
index nearest to that commit (the home's own index, or a past one kept here, whichever differs
from the commit in the fewest files), and the sync then redoes only the files whose content
differs from what those rows were made of. Exact because that is the incremental = rebuild law
every sync keeps (tests/test_rows_incremental.py and the as-of law in tests/test_asof.py): rows
of a file whose content is the commit's are the rows a rebuild would make of it. A text embedded
once, now or then, is never embedded again (the home's embedding cache stands behind the sync).

Cheap to keep because a kept revision shares its vectors: once synced, the past index is frozen
(syncd/index/frozen.py) into its rows without vectors (a small part of the index, whose vectors
are most of its size; bench_asof.py measures both), and a reader takes the vectors from the home's
embedding cache, which holds each text's vector once for now and every revision (and every
vector of the frozen rows, freezing makes sure). The checked-out files and the LanceDB tables
the sync wrote are deleted. So nothing of a kept revision refers to the home's index: the index
of now may change, compact or be rebuilt, and the past stays exact; evicting a revision deletes
its folder, which frees all it took. The files of the commit are checked out again only for a
reader of files (the workbench: ``past_engine(..., files=True)``).

Who protects what. A past folder is built aside (a private name) by one thread of one process
(``_LOCK``, also guarding the open engines and the use counts of this process) and published
whole by a rename, with a mark that it is complete (``_COMPLETE``); after that it is never
written again, so any process reads it without a lock, and two processes building the same
revision at once both answer (the second rename loses and uses the first). The home's index is
only read, beside a daemon writing it, and without a lock: its two tables as of one point its
writer vouched for (index/snapshot.py: records and rows of different writes would make a wrong
past); the embedding cache takes its writers in turns (SQLite's lock). The files of a
revision are checked out into its folder once, under an flock on ``files.lock`` (two processes
asking at once wait for one checkout). The few most recently asked revisions are kept on disk
(``KEEP``) and the last ``OPEN_KEEP`` stay open in the process (asking again costs one search);
one in use in this process (the workbench viewing the past) is never evicted nor closed.

Why not rows carrying the span of commits in which they hold, filtered by the revision: the
index follows the working tree, not commits (rows are written before their commit, and many
writes share one), and the word statistics of a past revision (document frequencies, lengths)
are those of its own rows, so an exact answer would need them per revision anyway.
"""

from __future__ import annotations

import collections
import contextlib
import datetime as dt
import fcntl
import logging
import os
import re
import shutil
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import IndexError_, InvalidInputError, NotFoundError, StorageError
from ..history.git import run_git
from ..history.log import commit_files, first_parents
from ..home import Home, disk_failure, write_refused
from ..index.records import meta_compatible
from .visibility import sees

if TYPE_CHECKING:
    from ..index.search import Hit
    from .facade import Engine

log = logging.getLogger(__name__)

__all__ = [
    "KEEP",
    "close_past_engines",
    "describe_revision",
    "past_engine",
    "past_files",
    "resolve_revision",
    "search_at",
]

# Past revisions kept indexed under .syncd/asof/ (the most recently asked).
KEEP = 4
_FOLDER = "asof"
_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
_SHA_PREFIX = re.compile(r"[0-9a-fA-F]{4,63}")
# In a revision (HEAD~2, main^, @{1}, HEAD:path, :/text), never in a date.
_REVISION_SYNTAX = re.compile(r"[~^]|@\{|\A(?:[A-Za-z_][^\s:]*)?:")
# A date written the ISO way, perhaps with a time: its numbers must make a date and a time, or
# git's lenient parser reads it as something else (2026-13-45 as now, 9999-99-99 as 1999).
_ISO_DATE = re.compile(r"\s*(\d{4})-(\d{1,2})-(\d{1,2})(?:[T ](\d{1,2}):(\d{1,2})(?::(\d{1,2}))?)?")
# For a reader bound to one user (resolve_revision's ``reader``): a revision, then steps back
# along first parents (HEAD~2, main^^, HEAD~); and what searches or walks every commit (^{/text},
# ^2, @{N}, :/text), which such a reader may not name a past by.
_STEPS = re.compile(r"(?P<base>[^~^]+)(?P<steps>(?:~[0-9]*|\^1?)+)")
_STEP = re.compile(r"~[0-9]*|\^1?")
_WALKS = re.compile(r"[~^]|@\{|\A\s*:")
# The words of a date git's parser reads (its date.c): the rest it skips, reading what digits are
# left as a day or a time, so "v2" (a tag mistyped) was the 2nd of this month and "ticket-42" now.
# A text holding any other word is no date. Months and weekdays from their first three letters.
_DATE_WORD = re.compile(r"[A-Za-z]+")
# "3rd", "1st of March": git reads the number and skips the suffix.
_ORDINAL = re.compile(r"(?<=[0-9])(?:st|nd|rd|th)\b", re.IGNORECASE)
_MONTHS_AND_DAYS = (
    "january", "february", "march", "april", "may", "june", "july", "august", "september", "october", "november",
    "december", "sunday", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday",
)  # fmt: skip
_DATE_WORDS = frozenset(
    "yesterday today now noon midnight tea am pm ago last at of and t z second seconds minute minutes hour hours day days "
    "week weeks month months year years zero one two three four five six seven eight nine ten "
    # git's time zone names
    "idlw nt cat hst hdt yst ydt pst pdt mst mdt cst cdt est edt ast adt wat gmt utc bst wet west cet met mewt mest "
    "cest mesz fwt fst eet eest wast wadt cct jst east eadt gst nzt nzst nzdt idle".split()
)
_LOCK = threading.Lock()  # one past index built at a time per process: they share the folder
# Past folders in use in this process (a workbench viewing the past holds one for long): never
# evicted, their engines never closed; and the engines kept open, the most recently asked last.
_IN_USE: collections.Counter[Path] = collections.Counter()
_OPEN: collections.OrderedDict[Path, Engine] = collections.OrderedDict()
OPEN_KEEP = 2
# In a past folder once its frozen index is whole (see _build). An older syncd marked its folders,
# which held LanceDB tables, "complete": this one makes those again.
_COMPLETE = "frozen"
# In a past folder once the commit's files are checked out into its tree (past_engine's files).
_FILES = "files"


# The last time git's date parser reads (--before=2100-01-01 is no date to it).
_GIT_LAST = dt.datetime(2099, 12, 31, 23, 59, 59, tzinfo=dt.UTC)


def resolve_revision(root: Path, at: str, reader: str | None = None) -> str:
    """The commit ``at`` names: a revision git knows, else a date or date-time (ISO 8601, or one
    git understands, such as ``yesterday``; the last commit at or before it on the current branch).
    InvalidInputError / NotFoundError.

    ``reader``: the user the answer is for (None: the home's own tools, which see everything). A
    user may learn nothing of the commits that touched only other users' files: not their shas,
    not their number, not their messages (the log they are shown leaves them out:
    syncd.engine.visibility). So for a reader, a sha or a prefix names only the commits they may
    see; ``HEAD~N`` (``^``, ``~``) steps back over those commits alone; and what searches or walks
    every commit (``HEAD^{/text}`` matching a commit message, ``@{N}``, ``:/text``, ``^2``) is
    refused. A date or a name (HEAD, a branch, a tag) may still land on another user's commit:
    its tree holds what the reader sees exactly as the commit before it did."""
    if not isinstance(at, str) or not at.strip() or at.startswith("-"):
        raise InvalidInputError(f"bad revision {at!r}: a commit, HEAD~N, a branch, a tag or a date")
    if reader is not None:
        return _resolve_for(root, at, reader)
    out = run_git(root, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{at}^{{commit}}", ok=(0, 1))
    # One commit, or nothing: a range (``A..B``) or an exclusion (``^A``) prints several lines or
    # a ``^sha``, which no checkout can take.
    if _SHA.fullmatch(out.decode().strip()):
        return out.decode().strip()
    if out.strip():
        raise InvalidInputError(
            f"bad revision {at!r}: a range or an exclusion, not one commit (--at takes one commit or a date)"
        )
    if _SHA_PREFIX.fullmatch(at):
        _refuse_ambiguous(root, at)
    when = _date(root, at)
    if when is None:
        raise NotFoundError(f"no commit {at!r} in this home's history (nor is it a date)")
    # Past git's last year (its parser reads none after 2099), --before held every commit back
    # ("no commit at or before 2100-01-01"): such a time is git's last second. Not now: a commit
    # made where the clock runs ahead (pulled here) is dated after this machine's now.
    before = min(when, _GIT_LAST)
    found = run_git(root, "rev-list", "-1", "--first-parent", f"--before={before.isoformat()}", "HEAD", ok=(0, 128))
    if not found.strip():
        shown = when.astimezone().strftime("%Y-%m-%d %H:%M")
        raise NotFoundError(f"no commit at or before {at} ({shown}) in this home's history")
    return found.decode().strip()


def _date(root: Path, at: str) -> dt.datetime | None:
    """The time ``at`` names (ISO 8601, naive meaning local; else any date git's ``--before``
    understands: ``yesterday``, ``2 days ago``, ``last friday 14:00``), or None when it names none.

    git is asked through ``git config --type=expiry-date``, the one command that says when its
    date parser found no date: ``rev-list --before=nonsense`` quietly reads "now". That parser is
    lenient (``HEAD~5`` reads as the 5th of the month, ``abc123`` as now), so a text in revision
    syntax or a sha prefix that named no commit is never taken for a date: a missing commit
    answering with today's memory would be a wrong answer, not an error."""
    try:
        when = dt.datetime.fromisoformat(at.strip())
    except ValueError:
        pass
    else:
        return when if when.tzinfo is not None else when.astimezone()
    words = _DATE_WORD.findall(_ORDINAL.sub("", at))
    if _REVISION_SYNTAX.search(at) or _SHA_PREFIX.fullmatch(at) or not all(map(_date_word, words)):
        return None
    iso = _ISO_DATE.match(at)
    if iso is not None:
        try:
            year, month, day, hour, minute, second = (int(part or 0) for part in iso.groups())
            dt.datetime(year, month, day, hour, minute, second)
        except ValueError as exc:
            raise InvalidInputError(f"bad date {at!r}: {exc}") from None
    out = run_git(root, "-c", f"syncd.at={at}", "config", "--type=expiry-date", "syncd.at", ok=(0, 128))
    if not out.strip().isdigit():
        return None
    seconds = int(out)
    if seconds == 0:  # "never", "false": expiry words, not a time
        return None
    # "now" (and "all") read as the largest time there is: now it is.
    return dt.datetime.fromtimestamp(min(seconds, int(time.time())), dt.UTC)


def _date_word(word: str) -> bool:
    word = word.lower()
    return word in _DATE_WORDS or (len(word) >= 3 and any(name.startswith(word) for name in _MONTHS_AND_DAYS))


def _commits_starting(root: Path, prefix: str) -> list[str]:
    """The commits whose shas start with ``prefix`` (4 hex digits or more)."""
    found = run_git(root, "rev-parse", f"--disambiguate={prefix.lower()}", ok=(0, 128)).decode().split()
    if not found:
        return []
    kinds = run_git(root, "cat-file", "--batch-check=%(objecttype)", input="\n".join(found).encode() + b"\n")
    return [sha for sha, kind in zip(found, kinds.decode().split(), strict=True) if kind == "commit"]


def _refuse_ambiguous(root: Path, prefix: str, commits: int | None = None) -> None:
    """InvalidInputError when several commits' shas start with ``prefix`` (git then names none,
    and "no commit" would be wrong); ``commits``: how many, when the caller counted them."""
    if commits is None:
        commits = len(_commits_starting(root, prefix))
    if commits > 1:
        raise InvalidInputError(f"ambiguous revision {prefix!r}: {commits} commits start with it; give more of the sha")


def _resolve_for(root: Path, at: str, reader: str) -> str:
    """:func:`resolve_revision` for ``reader`` (see there)."""
    walk = _STEPS.fullmatch(at)
    base = walk["base"] if walk else at
    if _WALKS.search(base):
        raise InvalidInputError(
            f"bad revision {at!r}: a past read for one user is named by a date, a branch, a tag, HEAD or one of "
            "their commits (see their log), or N of their commits back from one (HEAD~N); ^{/text}, @{N}, "
            ":/text and ^2 search or walk every user's commits"
        )
    sha = _their_commit(root, base, reader) if _SHA_PREFIX.fullmatch(base) else resolve_revision(root, base)
    if walk is None:
        return sha
    steps = sum(int(step[1:] or 1) if step[0] == "~" else 1 for step in _STEP.findall(walk["steps"]))
    back = _steps_back(root, sha, steps, reader)
    if back is None:
        raise NotFoundError(f"no commit {at!r} in this home's history (nor is it a date)")
    return back


def _their_commit(root: Path, prefix: str, reader: str) -> str:
    """The one commit ``reader`` may see whose sha starts with ``prefix``: those of other users
    are no commits to them, nor do they make a prefix ambiguous."""
    touched = commit_files(root, _commits_starting(root, prefix))
    theirs = [sha for sha, files in touched.items() if sees(files, reader)]
    _refuse_ambiguous(root, prefix, len(theirs))
    if not theirs:
        raise NotFoundError(f"no commit {prefix!r} in this home's history (nor is it a date)")
    return theirs[0]


def _steps_back(root: Path, sha: str, steps: int, reader: str) -> str | None:
    """The commit ``steps`` back from ``sha`` along its first parents, counting only the commits
    ``reader`` may see (``sha`` itself is step 0 when they see it); None past the first commit.
    Read in pages that double, so a step or two costs one small git call."""
    seen, skip, page = 0, 0, 64
    while True:
        entries = first_parents(root, sha, page, skip)
        for entry in entries:
            if sees(entry.files, reader):
                if seen == steps:
                    return entry.sha
                seen += 1
        if len(entries) < page:
            return None
        skip, page = skip + page, min(page * 2, 4096)


def describe_revision(root: Path, sha: str) -> str:
    """``<sha10> <date> <subject>`` of a commit: what a person reads to know which past this is."""
    out = run_git(root, "show", "-s", "--format=%h %cd %s", "--date=format:%Y-%m-%d %H:%M", "--abbrev=10",
                  "--end-of-options", sha)  # fmt: skip
    return out.decode("utf-8", "replace").strip()


def _check_out(root: Path, sha: str, folder: Path) -> None:
    """The tree of ``sha`` as files under ``folder``, through a private index (git's own index,
    HEAD and working tree stay as they are)."""
    folder.mkdir(parents=True)
    _check_out_files(root, sha, folder)
    # A home of its own (the engine's locks and journals live in a git directory), never committed;
    # without the template's sample hooks (~70 KB a revision of nothing).
    run_git(folder, "init", "--quiet", "--template=")


def _check_out_files(root: Path, sha: str, folder: Path) -> None:
    """The files of ``sha`` written into the existing folder ``folder``."""
    private = folder.parent / f"index-{uuid.uuid4().hex[:8]}"
    env = {"GIT_INDEX_FILE": str(private)}
    try:
        run_git(root, "read-tree", sha, env=env)
        # A commit holding .syncd/ (a `git add -A` once .gitignore was gone) would write its old
        # files where the past engine keeps its own index: never part of the memory, left out.
        run_git(root, "rm", "-r", "--cached", "--force", "--quiet", "--ignore-unmatch", "--", ".syncd", env=env)
        run_git(root, "--work-tree", str(folder), "checkout-index", "--all", "--force", env=env)
    finally:
        private.unlink(missing_ok=True)


def _only_home(tree: Path) -> None:
    """Leave of ``tree`` a home with nothing in it (its git directory, an empty state folder):
    what a frozen index's engine stands on. The files and the tables they were synced into go."""
    for entry in tree.iterdir():
        if entry.name == ".git":
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()
    Home(tree).ensure_state_dir()


def _with_files(root: Path, sha: str, folder: Path) -> None:
    """The files of commit ``sha`` in the tree of its past folder, checked out once: for readers
    of files (the workbench browses the past through them). An flock on ``files.lock`` makes two
    processes asking at once wait for one checkout; the mark says it is whole."""
    if (folder / _FILES).is_file():
        return
    with open(folder / "files.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (folder / _FILES).is_file():
            _check_out_files(root, sha, folder / "tree")
            (folder / _FILES).touch()


@contextlib.contextmanager
def past_files(home: Home, at: str, folders: Sequence[str]) -> Iterator[Home]:
    """A scratch home holding the files under ``folders`` (home-relative) as commit ``at`` left
    them, nothing else and no index: for reads of a few files (core memory as of a revision),
    which need no past index. Removed when the block ends."""
    root = home.root
    sha = resolve_revision(root, at)
    listed = run_git(root, "ls-tree", "-r", "-z", "--name-only", sha, "--", *folders) if folders else b""
    names = [n for n in listed.decode("utf-8", "surrogateescape").split("\0") if n]
    scratch = home.ensure_state_dir() / _FOLDER / f".read-{uuid.uuid4().hex[:8]}"
    scratch.mkdir(parents=True)
    try:
        if names:
            private = scratch / "index"
            env = {"GIT_INDEX_FILE": str(private)}
            run_git(root, "read-tree", sha, env=env)
            tree = scratch / "tree"
            tree.mkdir()
            paths = "\0".join(names).encode("utf-8", "surrogateescape") + b"\0"
            run_git(root, "--work-tree", str(tree), "checkout-index", "--force", "-z", "--stdin",
                    env=env, input=paths)  # fmt: skip
        yield Home(scratch / "tree")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _changed_files(root: Path, sha: str, since: str | None) -> int:
    """How many files differ between commit ``sha`` and commit ``since`` (None: the working tree)."""
    args = ["diff", "--name-only", "--no-renames", "-z", sha] + ([since] if since else [])
    return run_git(root, *args, "--").count(b"\0")


def _start_from_nearest(engine: Engine, sha: str, tree: Path) -> None:
    """Copy into the past index at ``tree`` the rows of the index nearest to commit ``sha``: the
    home's own (when it is a LanceDB index of the same model and layout) or a kept past one."""
    from ..index.frozen import FrozenIndex
    from ..index.snapshot import consistent_tables
    from ..index.store import Index  # LanceDB: loaded only when a past index is made

    root = engine.home.root
    candidates: list[tuple[int, Path | None]] = []
    own = engine.index
    if isinstance(own, Index) and own.compatible():
        candidates.append((_changed_files(root, sha, None), None))
    base = tree.parent.parent
    for kept in base.iterdir():
        if kept.name != sha and _is_kept(kept) and _usable(kept, own.model_id):
            candidates.append((_changed_files(root, sha, kept.name), kept))
    if not candidates:
        return  # the sync builds it from nothing (the embedding cache still spares the model)
    differ, nearest = min(candidates, key=lambda c: (c[0], c[1] is None))
    files = run_git(root, "ls-tree", "-r", "-z", "--name-only", sha).count(b"\0")
    if differ * 2 > files:
        return  # mostly other files (an old revision of a grown home): copying would cost more
    source: Index | FrozenIndex
    if nearest is None:
        assert isinstance(own, Index)  # the home's own index is a candidate only if it is one
        source = own
    else:
        source = FrozenIndex(nearest, own.dim, own.model_id, _cache_path(engine), embedder=_model(engine))
    index_dir = Home(tree).ensure_state_dir() / "index"
    target = Index(index_dir, source.dim, source.model_id)
    try:
        if isinstance(source, FrozenIndex):
            source.copy_into(target)
        else:
            pair = consistent_tables(source.folder, source.dim)
            if pair is None:
                raise IndexError_("its writer vouched for no state of its tables in time")
            target.fill_rows(*pair)
        # Whose rows these are (model, layout, transcript setting), as the source says; not its
        # aligned commit, which names the source's history, not this revision.
        target.write_meta(**{k: v for k, v in source.meta().items() if k == "transcripts"})
        target.close()
    except Exception as exc:  # noqa: BLE001 (a failed copy costs the head start, never the answer)
        # Only a head start is lost (a kept index evicted by another process meanwhile, a full
        # disk): the sync then builds this revision from nothing, as exactly.
        log.warning("past index of %s made from nothing: copying the nearest index failed: %s", sha[:12], exc)
        target.close()
        shutil.rmtree(index_dir, ignore_errors=True)


def _usable(folder: Path, model_id: str) -> bool:
    """Whether ``folder`` holds a whole frozen index of this model and row layout."""
    from ..index.frozen import frozen_meta

    return (folder / _COMPLETE).is_file() and meta_compatible(frozen_meta(folder), model_id, empty=False)


def _is_kept(folder: Path) -> bool:
    """A published past revision (named by its sha), not a folder still being made or read."""
    return folder.is_dir() and bool(_SHA.fullmatch(folder.name))


def _evict(base: Path, keep: Path) -> None:
    past = sorted(
        (p for p in base.iterdir() if _is_kept(p) and p != keep and not _IN_USE[p]), key=lambda p: p.stat().st_mtime
    )
    for old in past[: max(0, len(past) - (KEEP - 1))]:
        if old in _OPEN:
            _OPEN.pop(old).close()
        shutil.rmtree(old, ignore_errors=True)


def _build(engine: Engine, sha: str, folder: Path) -> Any:
    """Make the past index of ``sha`` aside and publish it at ``folder`` whole: checked out, its
    rows copied from the nearest index, synced (with the home's embedding cache behind it),
    frozen (its rows without vectors, every vector in the home's cache), its files and tables
    deleted, and only then renamed into place with a mark that it is complete. So a published
    past index is never written again, and any process may read it without a lock. Returns its
    rows with their vectors (a pyarrow Table), for the engine opened on it next."""
    from ..index.embed_cache import EmbeddingCache
    from ..index.frozen import freeze

    engine_class = type(engine)  # the facade's, without importing the module that imports this one
    building = folder.parent / f".{sha}-{uuid.uuid4().hex[:8]}"
    try:
        tree = building / "tree"
        _check_out(engine.home.root, sha, tree)
        _start_from_nearest(engine, sha, tree)
        with engine_class(Home(tree), _local(engine), embedder=engine.embedder) as past:
            past.sync()
            with EmbeddingCache(_cache_path(engine)) as cache:
                rows = freeze(past.index, building, cache)
        _only_home(tree)
        (building / _COMPLETE).touch()
        shutil.rmtree(folder, ignore_errors=True)  # an incomplete one an older syncd or a kill left
        try:
            os.replace(building, folder)
        except OSError:
            if not (folder / _COMPLETE).is_file():
                raise
            # another process published it meanwhile: theirs is as good
    finally:
        shutil.rmtree(building, ignore_errors=True)
    return rows


def _build_here(engine: Engine, sha: str, folder: Path) -> Any:
    """:func:`_build`, refused in syncd's words where the home's state cannot be written: the
    revisions built before still answer there, a new one cannot be made."""
    try:
        return _build(engine, sha, folder)
    except OSError as exc:
        reason = disk_failure(exc, folder.parent) or ("permission denied" if write_refused(exc) else None)
        if reason is None:
            raise
        raise StorageError(
            f"cannot search the memory as {sha[:10]} left it: its index is built in {folder.parent}, which "
            f"cannot be written ({reason}); the revisions built there before are searched as ever",
            folder.parent,
            saved=False,
        ) from exc


def _cache_path(engine: Engine) -> Path:
    """The home's embedding cache: where a frozen index's vectors are."""
    return Path(engine.embedder.cache.path)


def _model(engine: Engine) -> Any:
    # Queries need the model, not the home's embedding cache (which its engine may close).
    return getattr(engine.embedder, "embedder", engine.embedder)


def _local(engine: Engine) -> Any:
    # Always the embedded index: a past tree is this machine's scratch, never a shared database's.
    return engine.settings.model_copy(update={"index_url": None, "index_schema": None})


def _close_unused() -> None:
    """Close the open past engines beyond OPEN_KEEP that nobody is using (under _LOCK)."""
    for folder in list(_OPEN)[: max(0, len(_OPEN) - OPEN_KEEP)]:
        if not _IN_USE[folder]:
            _OPEN.pop(folder).close()


def close_past_engines() -> None:
    """Close the past engines this process keeps open that nobody is using: the next question at
    a revision opens its folder again (for a process letting go of their memory)."""
    with _LOCK:
        for folder in [f for f in _OPEN if not _IN_USE[f]]:
            _OPEN.pop(folder).close()


@contextlib.contextmanager
def past_engine(engine: Engine, at: str, files: bool = False) -> Iterator[Engine]:
    """A read-only engine over the home as commit ``at`` left it (see the module docstring).
    The first call for a revision builds its past index; later ones in this process reuse the
    engine while it is one of the OPEN_KEEP most recent (a repeated question costs one search).
    ``files``: the commit's files are also in the engine's home (``past.home.root``), for a
    reader of files; search needs none."""
    from ..index.frozen import FrozenIndex

    engine_class = type(engine)  # as in _build
    base = engine.home.ensure_state_dir() / _FOLDER
    model_id = engine.embedder.model_id
    # A full sha already made into a past index names a commit: no git process to ask again.
    known = isinstance(at, str) and _SHA.fullmatch(at) is not None and _usable(base / at, model_id)
    sha = at if known else resolve_revision(engine.home.root, at)
    folder = base / sha
    with _LOCK:
        base.mkdir(exist_ok=True)
        past = _OPEN.get(folder)
        if past is None or not _usable(folder, model_id):
            if past is not None and not _IN_USE[folder]:
                _OPEN.pop(folder).close()  # its folder was deleted under it (rm -rf .syncd)
            built = None if _usable(folder, model_id) else _build_here(engine, sha, folder)
            model = _model(engine)
            rows = FrozenIndex(folder, model.dim, model_id, _cache_path(engine), embedder=model, rows=built)
            past = _OPEN[folder] = engine_class(Home(folder / "tree"), _local(engine), read_only=True, embedder=model,
                                                index=rows)  # fmt: skip
        if files:
            _with_files(engine.home.root, sha, folder)
        _OPEN.move_to_end(folder)
        # The mark of the most recently asked revision, which eviction spares: a home this
        # process may not write (a read-only mount) still answers from the revisions kept.
        with contextlib.suppress(OSError):
            os.utime(folder)
        _IN_USE[folder] += 1
        _evict(base, folder)
        _close_unused()
    try:
        yield past
    finally:
        with _LOCK:
            _IN_USE[folder] -= 1
            _close_unused()


def search_at(engine: Engine, query: str, at: str, **options: Any) -> list[Hit]:
    """``engine.search(query, **options)`` over the memory as commit ``at`` left it."""
    with past_engine(engine, at) as past:
        return past.search(query, **options)
