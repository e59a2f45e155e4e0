"""Git plumbing for the home's repository: run git, tell when the user's git work is under way,
and commit exact paths.

Everything here runs the ``git`` command itself (no library in between), and every failure leaves
this module as a :class:`~syncd.errors.SyncdError`: :class:`GitBusyError` when the user's own git
work is in the way (a held ``index.lock``, a merge, rebase, cherry-pick, revert or bisect, paths
left unmerged by any of them or by ``git stash pop``), :class:`HistoryError` for anything else.

The user's git work always wins:
- while it is under way we commit nothing, and the engine writes nothing into the tree
  (:func:`check_tree_writable`): ``git merge --abort``, ``git rebase --abort`` or
  ``git checkout --theirs`` would silently drop a write made in the middle of them, so the agent is
  told to retry instead of being told its fact is saved;
- we never commit onto a detached HEAD: such a commit is unreachable once the user switches back to
  a branch, so the change waits on disk (indexed) until a branch is checked out;
- we only commit what ``git status`` still shows as changed, so whatever the user committed,
  pulled or checked out is never committed twice, and a change they staged themselves (``git rm``,
  ``git mv``, ``git add``) is committed like any other;
- unmerged paths are never staged: staging one would mark its conflict resolved.

Commits are made with plumbing. ``commit_exact`` (one commit, used by revert and the tools):
our paths are staged in the real index, its tree is written, and when that tree differs from HEAD
in our paths only (the user has nothing else staged) it is the commit's tree; otherwise the tree
is built aside in a private index (``read-tree HEAD`` + our paths); then ``commit-tree`` and
``update-ref`` against the HEAD we started from. The committer commits queued turns as a chain
instead (chain.py: trees and commits written by syncd itself, objects.py, one ``update-ref``).
The unmerged-paths check is answered again only when the index file changed. Paths travel on
stdin, never as pathspecs: git matches pathspecs against every index entry (quadratic at 10k
paths) and a command line has a size limit (60k paths overflow it), while ``update-index
--stdin`` is linear and literal (a file named ``[draft].md`` is that file, not a pattern).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from ..errors import GitBusyError, HistoryError, NotFoundError
from ..home import git_dir, ignore_write_temp_files, is_indexable
from .processes import process_clock, wait_for_git_writers

log = logging.getLogger(__name__)

__all__ = [
    "PATHSPEC_MAX",
    "Busy",
    "Changes",
    "DiffEntry",
    "blob_at_head",
    "busy_state",
    "changed_paths",
    "check_tree_writable",
    "commit_exact",
    "commit_paths",
    "detached_head",
    "git_busy",
    "git_dir",
    "guard_commit",
    "head_sha",
    "identity_env",
    "open_or_init_repo",
    "operation_in_progress",
    "repo_or_raise",
    "run_git",
    "stage_paths",
    "uncommitted_paths",
    "user_identity",
]

# What git leaves in its folder while an operation of the user's is under way, and how to end it.
_OPERATIONS = (
    ("MERGE_HEAD", "a git merge", "resolve the conflicts, `git add` them and `git commit`, or `git merge --abort`"),
    ("rebase-merge", "a git rebase", "`git rebase --continue` once resolved, or `git rebase --abort`"),
    ("rebase-apply", "a git rebase or git am", "`git rebase --continue` / `git am --continue`, or `--abort`"),
    ("CHERRY_PICK_HEAD", "a git cherry-pick", "`git cherry-pick --continue` once resolved, or `--abort`"),
    ("REVERT_HEAD", "a git revert", "`git revert --continue` once resolved, or `--abort`"),
    ("BISECT_LOG", "a git bisect", "`git bisect reset` when done"),
)

# Locks git holds for the length of one command.
_LOCKS = ("index.lock", "HEAD.lock")

# A lock older than this is most likely left by a crashed git: worth a warning with the fix at once.
# We never remove it ourselves: a slow git command (a huge checkout) may still be running.
_STALE_LOCK_S = 10

# `git status --porcelain` XY codes of an unmerged path.
_UNMERGED = frozenset({"DD", "AU", "UD", "UA", "DU", "AA", "UU"})

# Above this many paths, one whole-tree `git status` filtered here beats a pathspec (which git
# matches against every entry: quadratic).
PATHSPEC_MAX = 100

_EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"

# From this many files on, new blobs go into git as one pack rather than a loose file each; files
# above the size bound are left to update-index (a pack stream needs each file read whole).
_PACK_MIN_FILES = 256
_PACK_MAX_BYTES = 1 << 20


# -- running git -----------------------------------------------------------------------------------


def run_git(
    root: Path,
    *args: str,
    input: bytes | None = None,
    env: Mapping[str, str] | None = None,
    ok: tuple[int, ...] = (0,),
) -> bytes:
    """``git args`` in ``root``; its stdout. An exit status outside ``ok`` becomes
    GitBusyError (a held lock, the user's operation) or HistoryError (anything else)."""
    command = args[0] if args else "git"
    try:
        done = subprocess.run(
            ["git", *args],
            cwd=root,
            input=input,
            env={**os.environ, **(env or {})},
            capture_output=True,
            check=False,
        )
    except OSError as exc:  # git missing, an argument list the system refuses, no such folder
        raise HistoryError(command, exc.strerror or str(exc)) from None
    if done.returncode in ok:
        return done.stdout
    stderr = done.stderr.decode("utf-8", "replace")
    if ".lock" in stderr and ("File exists" in stderr or "Unable to create" in stderr):
        state = busy_state(root)
        raise GitBusyError(state.reason if state else _last_line(stderr))
    marker = _operation_marker(root)
    if marker is not None:
        raise GitBusyError(marker)
    raise HistoryError(command, _last_line(stderr) or f"exit status {done.returncode}")


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""


def open_or_init_repo(root: Path) -> tuple[Path, bool]:
    """The repository whose top is ``root`` (its path, for :func:`commit_paths`), and whether it
    had to be created (branch ``main``). Either way git is told to ignore syncd's temp files."""
    created = git_dir(root) is None
    if created:
        run_git(root, "init", "-q", "--initial-branch=main")
    ignore_write_temp_files(root)
    return Path(root), created


def repo_or_raise(root: Path) -> Path:
    if git_dir(root) is None:
        raise NotFoundError(f"{root} is not a git repository; run `syncd init` to start its history")
    return Path(root)


def identity_env(name: str, email: str) -> dict[str, str]:
    return {
        "GIT_AUTHOR_NAME": name,
        "GIT_AUTHOR_EMAIL": email,
        "GIT_COMMITTER_NAME": name,
        "GIT_COMMITTER_EMAIL": email,
    }


def user_identity(root: Path) -> tuple[str | None, str | None]:
    """``user.name`` and ``user.email`` as git itself would read them (the repository's config,
    then the global one), each None when unset."""
    out = run_git(root, "config", "-z", "--get-regexp", r"^user\.(name|email)$", ok=(0, 1))
    found: dict[str, str] = {}
    for item in out.decode("utf-8", "replace").split("\0"):
        key, _, value = item.partition("\n")
        if value.strip():
            found[key.lower()] = value.strip()  # the last one wins, as in git
    return found.get("user.name"), found.get("user.email")


# -- is the user's git work under way? -------------------------------------------------------------


@dataclass(frozen=True)
class Busy:
    """Why we leave git alone now. ``transient``: a lock a running git command holds for a moment
    (worth a retry, not a warning)."""

    reason: str
    transient: bool = False


def _operation_marker(root: Path) -> str | None:
    folder = git_dir(root)
    if folder is None:
        return None
    for marker, what, fix in _OPERATIONS:
        if (folder / marker).exists():
            return f"{what} is under way ({marker} present): {fix}"
    return None


def _index_identity(folder: Path) -> tuple | None:
    """What tells one version of the git index file from another without reading it: git never
    rewrites it in place (it writes ``index.lock`` and renames it over), so a new version has a new
    inode or times, and its last 20 bytes are git's checksum of its whole content. None when it
    cannot be told (no such file is an identity too: nothing is staged, nothing unmerged)."""
    path = folder / "index"
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return ("absent",)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        trailer = os.pread(fd, 20, max(st.st_size - 20, 0))
    except OSError:
        return None
    finally:
        os.close(fd)
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, trailer)


# The last answer of ``git ls-files -u`` per index file, with that file's identity when asked: the
# same identity is the same content, so the answer holds without running git again. A change group
# asks once (not once per write), and the commit's own guard then costs nothing.
_UNMERGED_SEEN: dict[Path, tuple[tuple, list[str]]] = {}
_UNMERGED_LOCK = threading.Lock()


def _unmerged(root: Path) -> list[str]:
    folder = git_dir(root)
    key = Path(os.path.abspath(folder)) if folder is not None else None
    # Taken before git reads the file: if it changes meanwhile, the next identity differs and git
    # is asked again; never an answer about one version filed under another's identity.
    identity = _index_identity(folder) if folder is not None else None
    if key is not None and identity is not None:
        with _UNMERGED_LOCK:
            seen = _UNMERGED_SEEN.get(key)
        if seen is not None and seen[0] == identity:
            return list(seen[1])
    out = run_git(root, "ls-files", "-u", "-z")
    found = sorted({entry.partition("\t")[2] for entry in out.decode("utf-8", "replace").split("\0") if "\t" in entry})
    if key is not None and identity is not None:
        with _UNMERGED_LOCK:
            _UNMERGED_SEEN[key] = (identity, found)
    return list(found)


def operation_in_progress(root: Path) -> str | None:
    """What the user's git is in the middle of (a merge, rebase, cherry-pick, revert, bisect, or
    paths left unmerged by any of them or by ``git stash pop``), with how to finish it; None when
    nothing is, or the home is not under git. Writing into the tree now could be undone by the
    operation's own ``--abort`` or ``checkout --theirs``."""
    marker = _operation_marker(root)
    if marker is not None or git_dir(root) is None:
        return marker
    unmerged = _unmerged(root)
    if not unmerged:
        return None
    named = ", ".join(unmerged[:3]) + (f" and {len(unmerged) - 3} more" if len(unmerged) > 3 else "")
    return (f"git has unmerged paths ({named}): resolve each (edit it, or `git checkout --ours/--theirs "
            f"<path>`) and `git add` it; after a conflicted `git stash pop`, `git stash drop` once resolved")


def check_tree_writable(root: Path) -> None:
    """Raise GitBusyError, before anything is written, while the user's git operation is under
    way (see :func:`operation_in_progress`) or HEAD is detached (nothing written now could be
    committed on a branch): the caller retries once it is finished."""
    reason = operation_in_progress(root) or detached_head(root)
    if reason is not None:
        raise GitBusyError(f"not written, retry once git is done: {reason}")


def busy_state(root: Path) -> Busy | None:
    """Why committing now would fight the user's own git work, or None when it would not."""
    folder = git_dir(root)
    if folder is None:
        return None
    for name in _LOCKS:
        lock = folder / name
        try:
            age = time.time() - lock.stat().st_mtime
        except FileNotFoundError:
            continue
        if age > _STALE_LOCK_S:
            return Busy(f"{lock} has been held for over {_STALE_LOCK_S} s: if no git command is running, a "
                        f"crashed one left it; remove it (rm {lock}) and the commit follows")
        return Busy(f"git is busy ({name} present: a git command is running; if none is, remove {lock})",
                    transient=True)
    reason = operation_in_progress(root)
    return Busy(reason) if reason else None


def git_busy(root: Path) -> str | None:
    """The reason of :func:`busy_state`, or None."""
    state = busy_state(root)
    return state.reason if state else None


def detached_head(root: Path) -> str | None:
    """Why we do not commit now because HEAD is detached (a commit there is unreachable once the
    user switches back to a branch), or None when HEAD is on a branch."""
    folder = git_dir(root)
    if folder is None:
        return None
    try:
        head = (folder / "HEAD").read_text(encoding="utf-8").strip()
    except OSError:
        return None
    if head.startswith("ref:"):
        return None
    return (f"HEAD is detached (at {head[:10]}): syncd does not commit there, since nothing would keep "
            f"that commit once you switch back; the changes stay on disk and indexed. Run "
            f"`git switch <branch>` (or `git switch -c <new-branch>`) and they are committed on it")


def blob_at_head(root: Path, rel: str) -> str | None:
    """The blob sha of ``rel`` in HEAD, or None (no such path, no commit yet, git busy)."""
    try:
        out = run_git(root, "rev-parse", "--verify", "--quiet", f"HEAD:{rel}", ok=(0, 1, 128))
    except (GitBusyError, HistoryError):
        return None
    return out.decode().strip() or None


_HEX = frozenset("0123456789abcdef")


def _head_from_files(folder: Path) -> str | None:
    """HEAD's commit read from ``HEAD`` and its loose ref, as git itself stores them, or None when
    that is not the plain case (a packed or missing ref, a linked worktree's shared refs, reftable):
    the caller then asks git. Saves a process on every commit; update-ref, which commits, still
    checks the old value itself."""
    if (folder / "commondir").exists():
        return None
    try:
        head = (folder / "HEAD").read_text(encoding="utf-8").strip()
        if head.startswith("ref: refs/"):
            ref = head[len("ref: "):]
            if ".." in ref:
                return None
            head = (folder / ref).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return head if len(head) in (40, 64) and set(head) <= _HEX else None


def head_sha(root: Path) -> str | None:
    folder = git_dir(root)
    if folder is None:
        return None
    sha = _head_from_files(folder)
    if sha is not None:
        return sha
    out = run_git(root, "rev-parse", "-q", "--verify", "HEAD^{commit}", ok=(0, 1)).decode().strip()
    return out or None


def git_last_moved(root: Path) -> float | None:
    """When (epoch seconds) git's HEAD, its branch or its index file last changed, from their
    modification times (git replaces each by a rename, so the time is the change's). None when
    the home is not under git."""
    folder = git_dir(root)
    if folder is None:
        return None
    names = ["index", "HEAD"]
    with contextlib.suppress(OSError, UnicodeDecodeError):
        head = (folder / "HEAD").read_text(encoding="utf-8").strip()
        if head.startswith("ref: refs/") and ".." not in head:
            names.append(head[len("ref: "):])
    latest = 0.0
    for name in names:
        with contextlib.suppress(OSError):
            latest = max(latest, os.stat(folder / name).st_mtime)
    return latest


def git_fingerprint(root: Path) -> tuple | None:
    """What tells whether git's own state moved: HEAD and the index file's identity. Two equal
    fingerprints a while apart mean no git command changed either meanwhile (a command that
    rewrites the working tree rewrites the index too). None when the home is not under git."""
    folder = git_dir(root)
    if folder is None:
        return None
    try:
        head = head_sha(root)
    except (GitBusyError, HistoryError):
        head = "?"
    return head, _index_identity(folder)


# -- what changed ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Changes:
    """What ``git status`` shows as changed, split by what committing it means: ``present`` paths
    are committed as they are on disk, ``removed`` ones as deletions; ``unmerged`` ones are the
    user's to resolve and never staged by us."""

    present: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    unmerged: tuple[str, ...] = ()

    @property
    def paths(self) -> tuple[str, ...]:
        return self.present + self.removed


def _status(root: Path, *args: str) -> list[tuple[str, str]]:
    """``(XY, path)`` from ``git status --porcelain -z``. It runs without the index refresh it
    would write under index.lock: a status that takes the lock makes the user's own git command
    fail with "index.lock exists". Pathspecs are literal (``[x].md`` is a name, not a pattern)."""
    out = run_git(
        root,
        "status", "--porcelain=v1", "-z", "--untracked-files=all", "--no-renames", *args,
        env={"GIT_OPTIONAL_LOCKS": "0", "GIT_LITERAL_PATHSPECS": "1"},
    )
    entries = []
    for entry in out.decode("utf-8", "surrogateescape").split("\0"):
        if len(entry) >= 4:
            entries.append((entry[:2], entry[3:]))
    return entries


def _ours(rel: str) -> bool:
    """What we commit: files the index holds (markdown, transcripts), never our temp files,
    never ``.syncd/``; whatever else is in the tree (images, configs) is the user's to commit."""
    return not rel.startswith(".syncd/") and is_indexable(rel)


def changed_paths(root: Path, paths: Iterable[str] | None = None) -> Changes:
    """Of ``paths`` (default: all), what git sees as changed (untracked, modified, deleted, staged
    by the user), split into :class:`Changes`."""
    wanted: set[str] | None = None
    args: list[str] = []
    if paths is not None:
        wanted = set(paths)
        if not wanted:
            return Changes()
        if len(wanted) <= PATHSPEC_MAX:
            args = ["--", *sorted(wanted)]
    codes: dict[str, list[str]] = {}
    for xy, rel in _status(root, *args):
        if _ours(rel) and (wanted is None or rel in wanted):
            codes.setdefault(rel, []).append(xy)
    present, removed, unmerged = [], [], []
    top = os.fspath(root)
    linked: dict[str, bool] = {}
    for rel, xys in sorted(codes.items()):
        path = os.path.join(top, rel)
        if any(xy in _UNMERGED for xy in xys):
            unmerged.append(rel)
        elif xys == ["D "] or _behind_symlink(top, rel, linked) or not os.path.lexists(path):
            # "D " alone while the file is still there: the user untracked it (``git rm
            # --cached``, and it is ignored, else status would list it as untracked too). A file
            # reached through a symlinked folder is, for git, a deletion: it never follows links.
            removed.append(rel)
        elif not os.path.islink(path) and not os.access(path, os.R_OK):
            # Staging it would fail the whole commit; it is committed once it can be read.
            log.warning("not committing %s: permission denied", rel)
        else:
            present.append(rel)
    return Changes(tuple(present), tuple(removed), tuple(unmerged))


def _behind_symlink(top: str, rel: str, seen: dict[str, bool]) -> bool:
    """Whether a folder on the way to ``rel`` is a symlink (memoised per folder: linear)."""
    folder = os.path.dirname(rel)
    if not folder:
        return False
    if folder not in seen:
        seen[folder] = _behind_symlink(top, folder, seen) or os.path.islink(os.path.join(top, folder))
    return seen[folder]


def uncommitted_paths(root: Path) -> list[str]:
    """Markdown (and transcripts) that git shows as changed since HEAD: what the next commit
    will hold. Empty when the home is not a git repository."""
    if git_dir(root) is None:
        return []
    try:
        entries = _status(root)
    except HistoryError as exc:
        # A repository git refuses to read (another owner, a broken index) leaves status without
        # this one list rather than without an answer at all.
        log.warning("git status failed in %s: %s", root, exc.detail)
        return []
    return sorted({rel for _, rel in entries if _ours(rel)})


# -- committing exact paths ------------------------------------------------------------------------


@dataclass(frozen=True)
class DiffEntry:
    """One path a commit changes: ``status`` A, M, D or T, with the blob shas before and after
    (``None`` where there is none)."""

    path: str
    status: str
    old_sha: str | None
    new_sha: str | None


def _paths_stdin(paths: Iterable[str]) -> bytes:
    return b"".join(p.encode("utf-8", "surrogateescape") + b"\0" for p in paths)


def _pack_blobs(root: Path, paths: list[str]) -> None:
    """Write the small files among ``paths`` into git as one pack (``git fast-import``), so that
    staging them finds their blobs there instead of writing one loose object file each: 100,000
    new notes are then one file in .git, not 100,000 (three times faster, and kinder to the disk).
    Only an optimisation: whatever it leaves out, ``update-index`` stores itself."""
    try:
        proc = subprocess.Popen(["git", "fast-import", "--quiet"], cwd=root, stdin=subprocess.PIPE,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    except OSError as exc:
        log.info("no bulk pack (%s); staging file by file", exc)
        return
    assert proc.stdin is not None
    top = os.fspath(root)
    try:
        for rel in paths:
            path = os.path.join(top, rel)
            try:
                if os.path.islink(path) or os.path.getsize(path) > _PACK_MAX_BYTES:
                    continue
                with open(path, "rb") as handle:
                    data = handle.read(_PACK_MAX_BYTES + 1)
            except OSError:
                continue
            if len(data) <= _PACK_MAX_BYTES:
                proc.stdin.write(b"blob\ndata %d\n%s\n" % (len(data), data))
        proc.stdin.close()
    except BrokenPipeError:
        pass
    assert proc.stderr is not None
    err = proc.stderr.read()  # a few lines at most (--quiet): it cannot fill the pipe while we write
    if proc.wait():
        log.info("no bulk pack (%s); staging file by file", _last_line(err.decode("utf-8", "replace")))


def stage_paths(root: Path, present: Iterable[str], removed: Iterable[str], env: Mapping[str, str] | None = None,
           pack: bool | None = None) -> None:
    """Make the index (the real one, or ``GIT_INDEX_FILE`` in ``env``) hold ``present`` as they
    are on disk and not hold ``removed``. Literal paths on stdin: linear, no argument limit.
    ``pack``: write many new blobs as one pack first (default: for the real index only)."""
    present, removed = list(present), list(removed)
    if len(present) >= _PACK_MIN_FILES and (env is None if pack is None else pack):
        _pack_blobs(root, present)
    if present:
        # --remove: a file deleted since git status listed it is staged as the deletion it now is.
        run_git(root, "update-index", "--add", "--remove", "-z", "--stdin", input=_paths_stdin(present), env=env)
    if removed:
        run_git(root, "update-index", "--force-remove", "-z", "--stdin", input=_paths_stdin(removed), env=env)


def _index_entries(root: Path, paths: list[str]) -> dict[str, bytes]:
    """``{path: "mode sha stage\\tpath\\0"}`` of the real index for ``paths`` (those it holds)."""
    if not paths:
        return {}
    wanted = set(paths)
    spec = ["--", *paths] if len(paths) <= PATHSPEC_MAX else []
    out = run_git(root, "ls-files", "-s", "-z", *spec, env={"GIT_LITERAL_PATHSPECS": "1"})
    entries = {}
    for record in out.split(b"\0"):
        meta, tab, raw = record.partition(b"\t")
        rel = raw.decode("utf-8", "surrogateescape")
        if tab and rel in wanted and meta.endswith(b" 0"):
            entries[rel] = record + b"\0"
    return entries


def _diff_trees(root: Path, old: str, new: str) -> list[DiffEntry]:
    out = run_git(root, "diff-tree", "-r", "-z", "--no-renames", "--no-commit-id", old, new)
    fields = out.decode("utf-8", "surrogateescape").split("\0")
    entries = []
    for meta, rel in zip(fields[0::2], fields[1::2]):
        parts = meta.lstrip(":").split(" ")
        if len(parts) < 5:
            continue
        old_sha, new_sha, status = parts[2], parts[3], parts[4][:1]
        zero = set(old_sha) == {"0"}, set(new_sha) == {"0"}
        entries.append(DiffEntry(rel, status, None if zero[0] else old_sha, None if zero[1] else new_sha))
    return entries


def _tree_of_real_index(root: Path, parent: str | None, ours: set[str]) -> tuple[str | None, list[DiffEntry]]:
    """The tree of the real index and its diff from ``parent``, when that diff touches only
    ``ours``: the common case (the user has nothing else staged), one ``write-tree`` instead of a
    private index built from HEAD. Otherwise (something of the user's is staged, or git cannot
    write a tree from it now) ``(None, [])``: the caller builds the tree aside. The check is on the
    tree actually written, so a ``git add`` of the user's landing meanwhile is seen, never committed."""
    try:
        tree = run_git(root, "write-tree").decode().strip()
    except HistoryError as exc:  # an unmerged entry of the user's appeared meanwhile, say
        log.debug("no tree from the index (%s); building it aside", exc.detail)
        return None, []
    changes = _diff_trees(root, parent or _EMPTY_TREE, tree)
    if all(entry.path in ours for entry in changes):
        return tree, changes
    return None, []


def _tree_of_private_index(root: Path, folder: Path, parent: str | None, present: list[str], removed: list[str]) -> str:
    """The tree of ``parent`` with exactly our paths as the real index now holds them, built in a
    private index: what the user staged besides stays out of it."""
    private = Path(os.path.abspath(folder)) / f"syncd-index-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    env = {"GIT_INDEX_FILE": str(private)}
    try:
        if parent:
            run_git(root, "read-tree", parent, env=env)
        else:
            run_git(root, "read-tree", "--empty", env=env)
        # The private index takes the entries just staged, not a second read of the files: the
        # commit holds exactly what the real index now holds, and big files are hashed once.
        entries = _index_entries(root, present)
        if entries:
            run_git(root, "update-index", "-z", "--index-info", input=b"".join(entries.values()), env=env)
        stage_paths(root, (), [*removed, *(p for p in present if p not in entries)], env)
        return run_git(root, "write-tree", env=env).decode().strip()
    finally:
        private.unlink(missing_ok=True)


class HeldIndex:
    """A commit pass's view of git's index: staged into a private copy, taken in by git's own
    index lock for just the moment HEAD moves. The copy is made first (``env`` points git at it);
    :meth:`locked` then takes ``index.lock`` the way every git command that writes the index does,
    refuses (GitBusyError, retried) if the index changed since the copy was made, and keeps a git
    command of the person's from writing the index until :meth:`publish` has put the copy in
    place, as git renames its lock over the index. So their command and our pass never
    interleave, and their command waits (fails with "index.lock exists") only for the few
    milliseconds of our ref update, not for the whole pass. Leaving without publishing leaves the
    index as it was."""

    def __init__(self, root: Path):
        folder = git_dir(root)
        if folder is None:
            raise HistoryError("commit", f"{root} is not a git repository")
        self.root = root
        self._folder = folder
        self._lock = folder / "index.lock"
        self._index = folder / "index"
        self._work = folder / f"syncd-index-{os.getpid()}-{threading.get_ident()}"
        self._identity: tuple | None = None
        self.env = {"GIT_INDEX_FILE": str(self._work)}

    def __enter__(self) -> HeldIndex:
        self._identity = _index_identity(self._folder)
        try:
            shutil.copy2(self._index, self._work)
        except FileNotFoundError:
            pass  # no index yet: the pass starts from an empty one, as git would
        return self

    @contextlib.contextmanager
    def locked(self):
        try:
            os.close(os.open(self._lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
        except FileExistsError:
            state = busy_state(self.root)
            raise GitBusyError(state.reason if state else "git is busy (index.lock present)") from None
        except OSError as exc:
            raise HistoryError("commit", f"cannot take {self._lock}: {exc.strerror or exc}") from None
        try:
            if self._identity is None or _index_identity(self._folder) != self._identity:
                raise GitBusyError("git's index changed while syncd was committing (a git command of yours); "
                                   "it commits on top of it next time")
            yield
        finally:
            self._lock.unlink(missing_ok=True)

    def publish(self) -> None:
        """Put the staged copy in place (call it inside :meth:`locked`)."""
        if self._work.exists():
            os.replace(self._work, self._index)

    def settle(self) -> None:
        """Keep the lock (call it inside :meth:`locked`, once HEAD moved) until the person's git
        commands that began before now have ended: one that read the old HEAD then stops at our
        lock instead of writing an index computed from it (see processes.py)."""
        wait_for_git_writers(self.root, process_clock(), _SETTLE_LIMIT_S)

    def __exit__(self, *exc: object) -> None:
        self._work.unlink(missing_ok=True)


# How long a pass holds git's index lock for commands of the person's begun before it moved HEAD.
_SETTLE_LIMIT_S = 2.0


def guard_commit(root: Path) -> None:
    state = busy_state(root)
    if state is not None:
        raise GitBusyError(state.reason)
    detached = detached_head(root)
    if detached is not None:
        raise GitBusyError(detached)


def commit_exact(
    root: Path,
    present: Iterable[str],
    removed: Iterable[str],
    message: str | Callable[[list[DiffEntry]], str],
    author_name: str,
    author_email: str,
) -> tuple[str | None, list[DiffEntry]]:
    """Commit exactly ``present`` (as on disk) and ``removed`` (as deletions) on the current
    branch; everything else the user staged stays staged and uncommitted. ``message`` may be a
    function of what the commit really changes. Returns the new sha (None when those paths already
    match HEAD: nothing to commit) and the changes. Afterwards git status shows those paths clean.

    Raises GitBusyError when the user's git work is under way or HEAD is detached (nothing is
    done), or when HEAD moved while we committed (our paths are then staged, and the next attempt
    commits them); HistoryError when git fails otherwise."""
    root = Path(root)
    present, removed = sorted(set(present)), sorted(set(removed))
    guard_commit(root)
    if not (present or removed):
        return None, []
    folder = git_dir(root)
    if folder is None:
        raise HistoryError("commit", f"{root} is not a git repository")
    parent = head_sha(root)
    # The real index first: if the user's git holds it we stop before anything is committed, and
    # once committed, git status shows these paths clean (and a user's `git commit` cannot commit
    # their old versions over ours).
    stage_paths(root, present, removed)
    ours = set(present) | set(removed)
    tree, changes = _tree_of_real_index(root, parent, ours)
    if tree is None:
        tree = _tree_of_private_index(root, folder, parent, present, removed)
        changes = _diff_trees(root, parent or _EMPTY_TREE, tree)
    if not changes:
        return None, []
    text = message(changes) if callable(message) else message
    identity = identity_env(author_name, author_email)
    sha = run_git(root, "commit-tree", tree, *(["-p", parent] if parent else []), "-F", "-",
                  input=text.encode("utf-8", "replace"), env=identity).decode().strip()
    subject = text.strip().splitlines()[0] if text.strip() else ""
    try:
        run_git(root, "update-ref", "-m", f"commit: {subject}", "HEAD", sha, parent or "", env=identity)
    except HistoryError as exc:
        if head_sha(root) != parent:
            raise GitBusyError("HEAD moved while syncd was committing (a commit of yours at the same moment); "
                               "it commits its changes on top of yours next time") from None
        raise exc from None
    return sha, changes


def commit_paths(
    repo: Path,
    paths: Iterable[str],
    message: str,
    author_name: str,
    author_email: str,
    trailers: Mapping[str, str] | None = None,
) -> str | None:
    """Commit exactly ``paths`` (additions, edits, deletions, as they are on disk); the sha, or None
    when nothing under them changed. Other staged work of the user stays staged."""
    from .messages import format_message

    root = Path(repo)
    present: list[str] = []
    removed: list[str] = []
    for rel in set(paths):
        (present if os.path.lexists(root / rel) else removed).append(rel)
    full = format_message(message, trailers=trailers) if trailers else message
    return commit_exact(root, present, removed, full, author_name, author_email)[0]
