"""Git for the home's repository: run git, and tell when the user's git work is under way.

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

What changed is read in status.py, and commits are made with plumbing in staging.py (one exact
commit) and chain.py (a chain of turns). The unmerged-paths check is answered again only when the
index file changed. Paths travel on stdin, never as pathspecs: git matches pathspecs against every
index entry (quadratic at 10k paths) and a command line has a size limit (60k paths overflow it),
while ``update-index --stdin`` is linear and literal (a file named ``[draft].md`` is that file, not
a pattern).
"""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ..errors import GitBusyError, HistoryError, InvalidInputError, NotFoundError
from ..home import git_dir, ignore_write_temp_files

log = logging.getLogger(__name__)

__all__ = [
    "PATHSPEC_MAX",
    "Busy",
    "blob_at_head",
    "busy_state",
    "check_tree_writable",
    "detached_head",
    "git_folder_kind",
    "git_reason",
    "git_busy",
    "git_dir",
    "head_sha",
    "identity_env",
    "index_identity",
    "open_or_init_repo",
    "operation_in_progress",
    "repo_or_raise",
    "run_git",
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

# Above this many paths, one whole-tree `git status` filtered here beats a pathspec (which git
# matches against every entry: quadratic).
PATHSPEC_MAX = 100


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
    # The git command is named after any ``-c key=value`` settings given before it.
    skip = 0
    while args[skip : skip + 1] == ("-c",):
        skip += 2
    command = args[skip] if len(args) > skip else "git"
    for arg in args:
        if "\0" in arg:
            # What a person types (a path, a revision) reaches git here; no path or revision can
            # hold a NUL, and the OS would refuse the argument list with a bare ValueError.
            raise InvalidInputError(f"{arg!r} holds a NUL character: no path or revision in git can")
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
        raise GitBusyError(state.reason if state else git_reason(stderr))
    marker = _operation_marker(root)
    if marker is not None:
        raise GitBusyError(marker)
    raise HistoryError(command, git_reason(stderr) or f"exit status {done.returncode}")


# How many of the files git lists under its reason are named in it (the rest are counted).
_LISTED = 5


def git_reason(stderr: str) -> str:
    """Why git failed, in one of its own lines: the first ``fatal:`` or ``error:`` line (git says
    the cause first and often ends with a bare "fatal: revert failed"), else its last line (hints
    and progress come before it); "" when it said nothing. A reason ending in a colon is followed
    by the files it is about, one a line indented by a tab ("Your local changes to the following
    files would be overwritten by merge:"): they are named in the line, or it tells a person
    nothing they can act on."""
    raw = stderr.splitlines()
    lines = [line.strip() for line in raw if line.strip()]
    for n, line in enumerate(raw):
        if line.strip().startswith(("fatal:", "error:")):
            reason = line.strip()
            if not reason.endswith(":"):
                return reason
            listed = []
            for item in raw[n + 1 :]:
                if not item.startswith("\t"):
                    break
                listed.append(item.strip())
            if not listed:
                return reason
            more = f" and {len(listed) - _LISTED} more" if len(listed) > _LISTED else ""
            return f"{reason} {', '.join(listed[:_LISTED])}{more}"
    return lines[-1] if lines else ""


def git_folder_kind(path: Path) -> str | None:
    """What git says ``path`` (or, not made yet, its nearest existing folder) is when it is git's
    own folder rather than a working tree: "bare" (a bare repository, or inside one), or "git-dir"
    (inside a repository's .git folder); None otherwise."""
    folder = Path(path).absolute()
    while not folder.is_dir() and folder != folder.parent:
        folder = folder.parent
    # 128: not in any repository.
    out = run_git(folder, "rev-parse", "--is-inside-git-dir", "--is-bare-repository", ok=(0, 128)).split()
    if out[:1] != [b"true"]:
        return None
    return "bare" if out[1:] == [b"true"] else "git-dir"


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


def index_identity(folder: Path) -> tuple | None:
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
    identity = index_identity(folder) if folder is not None else None
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


def carry_unmerged(root: Path, before: tuple | None, after: tuple | None) -> None:
    """The index of identity ``after`` was made from the one of identity ``before`` by staging
    stage-0 entries only (a commit pass's update-index, under git's index lock): staging never
    makes a path unmerged, so if ``before`` held none, neither does ``after``, and the answer is
    filed under ``after`` without running ``ls-files -u`` again (once per pass, and again by the
    next writer's check). Nothing is filed when ``before`` held some or was never asked about:
    staging may have resolved them."""
    folder = git_dir(root)
    if folder is None or before is None or after is None:
        return
    key = Path(os.path.abspath(folder))
    with _UNMERGED_LOCK:
        seen = _UNMERGED_SEEN.get(key)
        if seen is not None and seen[0] == before and not seen[1]:
            _UNMERGED_SEEN[key] = (after, [])


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
    return (
        f"git has unmerged paths ({named}): resolve each (edit it, or `git checkout --ours/--theirs "
        f"<path>`) and `git add` it; after a conflicted `git stash pop`, `git stash drop` once resolved"
    )


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
            return Busy(
                f"{lock} has been held for over {_STALE_LOCK_S} s: if no git command is running, a "
                f"crashed one left it; remove it (rm {lock}) and the commit follows"
            )
        return Busy(
            f"git is busy ({name} present: a git command is running; if none is, remove {lock})", transient=True
        )
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
    return (
        f"HEAD is detached (at {head[:10]}): syncd does not commit there, since nothing would keep "
        f"that commit once you switch back; the changes stay on disk and indexed. Run "
        f"`git switch <branch>` (or `git switch -c <new-branch>`) and they are committed on it"
    )


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
            ref = head[len("ref: ") :]
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
            names.append(head[len("ref: ") :])
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
    return head, index_identity(folder)
