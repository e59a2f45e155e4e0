"""A home shared through git remotes: fetch, merge with syncd's merge driver, push.

git does the work (transport, authentication through the person's ssh agent or credential
helpers, three-way merges); syncd adds what memory needs:

* ``.gitattributes`` routes the home's files to one merge driver, ``syncd merge-driver``, which
  merges each by kind (formats/merging.py): never a conflict marker in memory. The driver is
  configured in the repository's own ``.git/config`` (a clone made elsewhere gets it on its first
  ``syncd pull``; a plain ``git pull`` before that merges with git's default and may leave
  markers, which ``syncd pull`` then turns into callouts).
* A merge git cannot finish alone (a file edited on one machine and deleted on the other, a
  driver that failed) is finished by keeping what is there: the edited file stays, and any
  marker left becomes a callout. Nothing is dropped silently; what kept both versions is reported.
* A push never forces: a remote that moved on is pulled first, then pushed again.
* A pull killed or interrupted mid-merge (kill -9, a power cut, Ctrl-C) is finished or undone by the next one
  (:func:`recover_merge`): the merge writes a journal (who, from where, onto what) before it
  starts, and the pull removes it once what came in is indexed. Found with its process gone,
  the journal says what that process left: git's ``index.lock`` it held (taken before the
  merge drivers run; removed, the merge never having written the tree, with the copies git gave
  the driver), a merge git had stopped at conflicts (``MERGE_HEAD`` naming the journal's
  commit: finished as :func:`merge_fetched` finishes one), or a merge whose result is in the
  index but whose commit was never made (the moment git runs ``pre-merge-commit``: that index
  is committed as the merge); a merge committed but not indexed is indexed by the caller. A
  kill in the middle of git's checkout of the result, the one moment left, leaves files of the
  merge in the tree uncommitted: they are committed as edits before the next pull merges
  again, so nothing is lost, though a page may then show its callout twice.

Callers hold the write path quiesced around :func:`merge_fetched` and :func:`recover_merge`
(engine/sharing.py), so no agent write lands in the tree mid-merge.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shlex
import sys
import time
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from urllib.parse import urlsplit, urlunsplit

from ..errors import GitBusyError, HistoryError, InvalidInputError, RemoteRefused
from ..formats.merging import (
    MARKER_SIZE,
    Merged,
    callouts_for_conflicts,
    merge_daily_log,
    merge_json_kind,
)
from ..home import classify_path, common_git_dir, git_dir
from .git import head_sha, identity_env, run_git
from .processes import running_git_writers
from .remote_failures import failed

__all__ = [
    "MergeResult",
    "add_remote",
    "configure_merges",
    "current_branch",
    "fetch",
    "holds",
    "merge_driver",
    "merge_fetched",
    "push",
    "recover_merge",
    "remote_config",
    "remotes",
    "shown_url",
    "untrack_derived",
]

log = logging.getLogger(__name__)

DRIVER = "syncd"
# Where the merge driver lists the files whose merge kept both versions (in the git directory).
_KEPT_BOTH = "syncd-merge-kept-both"
_ATTRIBUTES = (
    "# syncd: files merged by kind when this home is shared through a git remote (never a conflict marker)",
    f"memory/** merge={DRIVER}",
    f"vault/** merge={DRIVER}",
)


@dataclass(frozen=True)
class MergeResult:
    """What a pull did: the new HEAD (None: nothing came in), whether it was a fast-forward, and
    the files where both machines changed the same thing (both versions kept)."""

    head: str | None
    fast_forward: bool = False
    kept_both: tuple[str, ...] = ()


def _driver_command() -> str:
    return f"{shlex.quote(sys.executable)} -m syncd merge-driver %O %A %B %P"


def configure_merges(root: Path) -> bool:
    """Route the home's files to syncd's merge driver: the driver in ``.git/config``, the routes in
    ``.gitattributes`` (shared, so a clone's plain ``git pull`` uses them too) and in the
    repository's own ``info/attributes``, which git reads before any ``.gitattributes``: a line
    a remote's commit adds to the shared file (``memory/** merge=binary``, say: keep ours, drop
    theirs) cannot turn the driver off here. Returns True when ``.gitattributes`` changed (the
    caller commits it)."""
    run_git(root, "config", f"merge.{DRIVER}.name", "syncd: memory merged by file kind")
    run_git(root, "config", f"merge.{DRIVER}.driver", _driver_command())
    shared = common_git_dir(root)  # info/ is the repository's, shared by its worktrees
    if shared is not None:
        _add_lines(shared / "info" / "attributes", _ATTRIBUTES)
    return _add_lines(root / ".gitattributes", _ATTRIBUTES)


def _add_lines(path: Path, lines: tuple[str, ...]) -> bool:
    """Append to ``path`` those of ``lines`` it lacks, as lines of their own (made with its folder
    when missing); whether it changed. Lines a person put there stay, in their order."""
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    missing = [line for line in lines if line not in text.splitlines()]
    if not missing:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    head = text if not text or text.endswith("\n") else text + "\n"
    path.write_text(head + "".join(f"{line}\n" for line in missing), encoding="utf-8")
    return True


def remote_config(root: Path, remote: str) -> str:
    """Every setting of ``remote`` in git's config (its URL, its refspecs, ...), as one text: what
    a daemon that stopped retrying the remote watches for a change."""
    return run_git(root, "config", "-z", "--get-regexp", rf"^remote\.{re.escape(remote)}\.", ok=(0, 1)).decode(
        "utf-8", "replace"
    )


# What a remote's git says when it declines a push because another push to the same branch held
# its lock or moved it at that moment (two homes sharing one remote): it passes once that is done.
_PASSING_REJECTION = re.compile(r"\((failed to update ref|failed to lock|cannot lock ref|incorrect old value provided)")


def _failed(root: Path, remote: str, command: str, detail: str) -> HistoryError:
    """The error of a fetch or push that git could not do: RemoteRefused when only someone's
    action (the URL, the credentials) can make it work (remote_failures.py). Judged by the URL
    git used: for a push, the remote's ``pushurl`` when it has one (git's own choice, rewrites
    by ``insteadOf`` included)."""
    try:
        said = run_git(root, "remote", "get-url", *(["--push"] if command == "push" else []), remote)
        url = said.decode("utf-8", "surrogateescape").splitlines()[0].strip() or None
    except (GitBusyError, HistoryError, IndexError):
        url = remotes(root).get(remote)
    return failed(command, detail, root, url)


def remotes(root: Path) -> dict[str, str]:
    """``{name: fetch url}`` of the repository's remotes. Read from git's config with ``-z`` (each
    entry "key\\nvalue\\0"), so a URL holding spaces (a folder like "My Drive/mem.git") is whole;
    exit 1 is no remote at all."""
    out = run_git(root, "config", "-z", "--get-regexp", r"^remote\..*\.url$", ok=(0, 1)).decode("utf-8", "replace")
    found: dict[str, str] = {}
    for entry in filter(None, out.split("\0")):
        key, _, url = entry.partition("\n")
        found.setdefault(key[len("remote.") : -len(".url")], url)
    return found


def shown_url(url: str) -> str:
    """``url`` as syncd prints it: a password in it (``https://me:secret@host/``) masked, and so is
    the lone name of an http(s) URL, where access tokens go (``https://TOKEN@github.com/``); a
    terminal's scrollback, a shared screen or a bug report is no place for them. ssh's user
    (``ssh://git@host``) and scp-like addresses (``git@host:path``) say no secret and stay."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    if not parts.scheme or "@" not in parts.netloc:
        return url
    user, _, host = parts.netloc.rpartition("@")
    if ":" in user:
        user = user.partition(":")[0] + ":***"
    elif parts.scheme.lower() in ("http", "https"):
        user = "***"
    return urlunsplit(parts._replace(netloc=f"{user}@{host}"))


def add_remote(root: Path, name: str, url: str) -> None:
    """``git remote add``; InvalidInputError for a bad name or one already naming another URL."""
    if not name or name.startswith("-") or any(c.isspace() for c in name) or "/" in name:
        raise InvalidInputError(f"bad remote name {name!r}: one word, no slash")
    if not url.strip():
        raise InvalidInputError("the remote's URL is empty")
    if url.startswith("-"):
        # git would read it as one of its options ("--mirror=fetch" sets up a mirror, others fail
        # with git's usage text); a path starting with "-" can be given as ./-name.
        raise InvalidInputError(f"bad remote URL {url!r}: it starts with '-' (a path? write ./{url})")
    known = remotes(root)
    if known.get(name) == url:
        return
    if name in known:
        raise InvalidInputError(
            f"remote {name!r} already points at {shown_url(known[name])}; remove it with `git remote remove {name}` first"
        )
    run_git(root, "remote", "add", name, url)


def current_branch(root: Path) -> str:
    out = run_git(root, "symbolic-ref", "--quiet", "--short", "HEAD", ok=(0, 1)).decode().strip()
    if not out:
        raise GitBusyError("HEAD is detached: check out a branch before pulling or pushing")
    return out


def _check_remote(root: Path, remote: str) -> None:
    if remote not in remotes(root):
        raise InvalidInputError(f"no remote {remote!r} in this home; add it with `syncd remote add {remote} URL`")


def fetch(root: Path, remote: str, branch: str) -> str | None:
    """Fetch ``branch`` of ``remote``; its sha, or None when the remote has no such branch yet."""
    _check_remote(root, remote)
    try:
        # Pruned: a branch the remote no longer has (its URL changed to another repository, say)
        # must not be merged from what an earlier fetch left of it.
        run_git(root, "fetch", "--quiet", "--prune", remote, env={"GIT_TERMINAL_PROMPT": "0"})
    except HistoryError as exc:
        raise _failed(root, remote, "fetch", f"cannot reach remote {remote!r}: {exc.detail}") from None
    out = run_git(root, "rev-parse", "--verify", "--quiet", f"refs/remotes/{remote}/{branch}^{{commit}}", ok=(0, 1))
    return out.decode().strip() or None


def _unmerged(root: Path) -> list[str]:
    out = run_git(root, "ls-files", "-u", "-z").decode("utf-8", "surrogateescape")
    return sorted({entry.partition("\t")[2] for entry in out.split("\0") if "\t" in entry})


def _finish(root: Path, label: str) -> list[str]:
    """Resolve what git left unmerged by keeping what is in the tree (an edit outweighs a
    deletion; a marker left by git's default merge becomes a callout). The paths resolved."""
    resolved = _unmerged(root)
    for rel in resolved:
        path = root / rel
        if rel.startswith(_DERIVED + "/"):
            # Derived state one side stopped tracking (untrack_derived): never kept, whatever git left on disk.
            run_git(root, "rm", "--cached", "--quiet", "--ignore-unmatch", "--", rel)
        elif path.is_file() and not path.is_symlink():
            data = path.read_bytes()
            if b"<" * MARKER_SIZE in data or b"<<<<<<< " in data:
                text = data.decode("utf-8", "surrogateescape").replace("<<<<<<< ", "<" * MARKER_SIZE + " ")
                text = (
                    text.replace("\n=======\n", "\n" + "=" * MARKER_SIZE + "\n")
                    .replace("\n>>>>>>> ", "\n" + ">" * MARKER_SIZE + " ")
                    .replace("\n||||||| ", "\n" + "|" * MARKER_SIZE + " ")
                )
                path.write_bytes(callouts_for_conflicts(text, label).text.encode("utf-8", "surrogateescape"))
            run_git(root, "add", "--", rel)
        else:
            run_git(root, "rm", "--cached", "--quiet", "--ignore-unmatch", "--", rel)
    return [rel for rel in resolved if not rel.startswith(_DERIVED + "/")]


# syncd's own folder in a home: derived state, rebuilt on every machine, never to be tracked.
_DERIVED = ".syncd"


def untrack_derived(root: Path, name: str, email: str) -> str | None:
    """Commit ``.syncd/`` out of git's index when a commit tracks it (a ``git add -f`` somewhere,
    or a machine whose .gitignore was gone): its files stay on disk as this home's own derived
    state. Tracked, they are the remote's bytes written over the index's on every pull, and a
    merge refused while this home's copy differs ("local changes would be overwritten"), with
    nothing a person can commit to clear it. The new commit's sha, None when nothing was tracked."""
    from .staging import commit_exact

    listed = run_git(root, "ls-files", "-z", "--", _DERIVED).split(b"\0")
    tracked = [os.fsdecode(rel) for rel in listed if rel]
    if not tracked:
        return None
    message = "Stop tracking .syncd/: syncd's derived state, rebuilt on every machine\n\nSyncd-Source: sharing\n"
    return commit_exact(root, [], tracked, message, name, email)[0]


def without_derived(root: Path, theirs: str, name: str, email: str) -> str:
    """``theirs`` as merged here: when its tree tracks ``.syncd/`` (a ``git add -f`` on another
    machine), a commit on top of it that stops tracking it (the same as :func:`untrack_derived`'s,
    made on their side). Merged as it came, git would write the remote's ``.syncd/`` bytes over
    this home's own (ignored files are expendable to git): an embedding cache trusted by text,
    index tables and their mirrors, all another machine's, or anyone's who can push there. Merging
    the commit without them, their side adds nothing under ``.syncd/`` and git writes nothing
    there. Made in a scratch index: this home's index and tree are not touched."""
    listed = run_git(root, "ls-tree", "-r", "-z", "--name-only", theirs, "--", _DERIVED)
    if not listed.strip(b"\0"):
        return theirs
    folder = git_dir(root)
    scratch = (folder if folder is not None else root) / f"syncd-pull-index-{os.getpid()}"
    env = {**identity_env(name, email), "GIT_INDEX_FILE": str(scratch)}
    try:
        run_git(root, "read-tree", theirs, env=env)
        run_git(root, "rm", "-r", "-q", "-f", "--cached", "--ignore-unmatch", "--", _DERIVED, env=env)
        tree = run_git(root, "write-tree", env=env).decode().strip()
    finally:
        scratch.unlink(missing_ok=True)
    message = "Stop tracking .syncd/: syncd's derived state, rebuilt on every machine\n\nSyncd-Source: sharing\n"
    return run_git(root, "commit-tree", tree, "-p", theirs, input=message.encode(), env=env).decode().strip()


def _message(remote: str, branch: str) -> str:
    return f"Merge {remote}/{branch} (syncd pull)\n\nSyncd-Source: merge\nSyncd-Remote: {remote}\n"


def _commit_stopped_merge(root: Path, label: str, identity: dict[str, str]) -> list[str]:
    """Finish a merge git stopped at conflicts (MERGE_HEAD set): keep what is in the tree, then
    commit. The paths resolved; GitBusyError (the merge undone) when the commit fails."""
    kept = _finish(root, label)
    try:
        run_git(root, "commit", "--no-edit", "--quiet", env=identity)
    except (HistoryError, GitBusyError) as again:
        run_git(root, "merge", "--abort", ok=(0, 128))
        raise GitBusyError(f"not pulled: the merge could not be finished ({again}); nothing changed") from None
    return kept


def holds(root: Path, theirs: str) -> bool:
    """Whether HEAD already holds the commit ``theirs`` (nothing to merge)."""
    before = head_sha(root)
    if before is None:
        return False
    return before == theirs or run_git(root, "merge-base", before, theirs, ok=(0, 1)).decode().strip() == theirs


def merge_fetched(
    root: Path, remote: str, branch: str, theirs: str, name: str, email: str, journal: Path | None = None
) -> MergeResult:
    """Merge the fetched ``theirs`` into the current branch, with syncd's driver, as ``name``.
    GitBusyError (nothing merged, the merge undone) when git refuses to start (changes not
    committed yet in the way) or cannot finish. ``journal``: where to say that a merge is under
    way, for :func:`recover_merge` should this process die before its commit; it is left there
    after a merge, for the caller to remove once it has indexed what came in (a kill before that
    is then found too), and removed here when the merge fails."""
    if holds(root, theirs):
        return MergeResult(None)
    theirs = without_derived(root, theirs, name, email)
    before = head_sha(root)
    if before is not None and not run_git(root, "merge-base", before, theirs, ok=(0, 1)).strip():
        # git refuses such a merge; merging it anyway would pour whatever that repository holds
        # (a mistyped URL's code project, say) into the memory.
        raise RemoteRefused(
            "pull",
            f"{remote}/{branch} shares no history with this home (another home or repository, not a clone"
            " of this one's remote); to share a home, `git clone` its remote and run `syncd init` in the clone",
        )
    identity = identity_env(name, email)
    folder = git_dir(root)
    kept_list = folder / _KEPT_BOTH if folder is not None else None
    if kept_list is not None:
        kept_list.unlink(missing_ok=True)
    config = ["-c", f"merge.{DRIVER}.driver={_driver_command()}", "-c", f"merge.{DRIVER}.name=syncd"]
    started = time.time()
    if journal is not None:
        _write_journal(
            journal,
            {
                "pid": os.getpid(),
                "started": started,
                "before": before,
                "theirs": theirs,
                "remote": remote,
                "branch": branch,
            },
        )
    try:
        try:
            run_git(root, *config, "merge", "--no-edit", "-m", _message(remote, branch), theirs, env=identity)
        except (HistoryError, GitBusyError) as exc:
            if folder is None or not (folder / "MERGE_HEAD").exists():
                if _left_staged(root, before):
                    raise GitBusyError(
                        f"not pulled: git stopped half-way through the merge ({exc}); run `syncd pull` again "
                        "to finish it"
                    ) from None
                raise GitBusyError(f"not pulled: {exc}; {_in_the_way(str(exc))}") from None
            if not _unmerged(root):
                # Merged whole, its commit refused: the repository's pre-merge-commit hook said
                # no, which is the person's to say (a merge stopped at conflicts leaves paths
                # unmerged, and only that one is syncd's to finish).
                run_git(root, "merge", "--abort", ok=(0, 128))
                raise GitBusyError(
                    "not pulled: git merged but did not commit the merge (the repository's"
                    " pre-merge-commit hook declined it?); nothing changed"
                ) from None
            label = f"{remote}/{branch}"
            kept = _commit_stopped_merge(root, label, identity)
            kept_both = sorted({*kept, *_read_kept(kept_list)})
            log.warning("pull from %s kept both versions in %s", label, ", ".join(kept_both))
            return MergeResult(head_sha(root), False, tuple(kept_both))
    except Exception:
        # The merge was undone or never began. An interrupt (Ctrl-C, which git gets too, halting
        # it wherever it was) keeps the journal, as a kill does, for the next pull to finish. git
        # may die of the Ctrl-C first, and this process see its failure before its own interrupt:
        # - if git had staged the merge's result (it died in a pre-merge-commit hook, before
        #   MERGE_HEAD), that is the merge: the journal stays for the next pull to commit it as
        #   one (recover_merge), never for the daemon to commit it as the person's change;
        # - else the merge is over here, and the copies git gave a driver it was running (which a
        #   git that dies never removes) go with it, as recover_merge would take them.
        if journal is not None and not _left_staged(root, before):
            journal.unlink(missing_ok=True)
        if not running_git_writers(root):
            _remove_driver_files(root, started)
        raise
    after = head_sha(root)
    return MergeResult(after, fast_forward=after == theirs, kept_both=tuple(_read_kept(kept_list)))


def _in_the_way(reason: str) -> str:
    """What to do about what kept git from starting the merge. Everything syncd indexes was
    committed just before (and ``.syncd/`` untracked), so files git names as in the way are ones
    syncd does not commit (a file that is not memory, a name it cannot index): waiting never
    clears them."""
    if "would be overwritten" not in reason:
        return "commit or wait for the changes in the way, then pull again"
    return (
        "syncd commits only the memory it indexes, so these stay until you commit them with git or "
        "move them away; then pull again"
    )


def _left_staged(root: Path, before: str | None) -> bool:
    """Whether git's index differs from HEAD, HEAD being still ``before``: a merge that failed
    got as far as staging its result (a pull starts with nothing staged in its way)."""
    if before is None or head_sha(root) != before:
        return False
    try:
        return bool(run_git(root, "diff", "--cached", "--name-only", "-z", "HEAD", "--").strip(b"\0"))
    except (GitBusyError, HistoryError):
        return False


def _write_journal(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.write(json.dumps(data))
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def _alive(pid: object) -> bool:
    """Whether the pull that wrote a journal may still run: its pid is alive and (where /proc
    says) still a syncd process, not another program the pid was given to since."""
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return b"syncd" in handle.read()
    except FileNotFoundError:
        return not Path("/proc/self").exists()  # no /proc here: alive is all we can know
    except OSError:
        return True


def recover_merge(root: Path, journal: Path, name: str, email: str) -> str | None:
    """Finish or undo what a pull killed mid-merge left (see the module docstring); a line
    saying what was done, or None when no pull was interrupted. GitBusyError while the pull
    that wrote the journal is still running."""
    try:
        state = json.loads(journal.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(state, dict):
        journal.unlink(missing_ok=True)
        return None
    if state.get("pid") != os.getpid() and _alive(state.get("pid")):
        raise GitBusyError(f"a pull (pid {state['pid']}) is merging now; try again once it is done")
    folder = git_dir(root)
    done = "nothing was left half-done"
    if folder is not None:
        lock = folder / "index.lock"
        try:
            ours = lock.stat().st_mtime >= float(state.get("started", 0)) - 1
        except OSError:
            ours = False
        idle = not running_git_writers(root)
        # The killed merge's lock (taken after the journal was written), and no git command of
        # the person's running that could be holding it now.
        if ours and idle:
            lock.unlink(missing_ok=True)
            done = "git's index.lock of the killed merge removed (the tree was not written yet)"
        # Also where git, interrupted, removed its lock itself but not these.
        if idle and _remove_driver_files(root, float(state.get("started", 0))) and not ours:
            done = "the merge driver's copies of the interrupted merge removed (the tree was not written yet)"
        identity = identity_env(name, email)
        remote, branch, theirs = str(state.get("remote")), str(state.get("branch")), str(state.get("theirs"))
        merge_head = folder / "MERGE_HEAD"
        stopped = merge_head.read_text(encoding="utf-8").strip() if merge_head.exists() else None
        if stopped == theirs:
            kept = _commit_stopped_merge(root, f"{remote}/{branch}", identity)
            done = "the merge git had stopped at conflicts finished" + (
                f" (both kept in {', '.join(kept)})" if kept else ""
            )
        elif stopped is None and state.get("before") and head_sha(root) == state["before"] and _index_moved(root):
            # git wrote the merge's result to the index, then died before its commit: commit it.
            tree = run_git(root, "write-tree").decode().strip()
            commit = (
                run_git(
                    root,
                    "commit-tree",
                    tree,
                    "-p",
                    state["before"],
                    "-p",
                    theirs,
                    input=_message(remote, branch).encode(),
                    env=identity,
                )
                .decode()
                .strip()
            )
            run_git(root, "update-ref", "-m", "syncd: a killed pull's merge committed", "HEAD", commit, state["before"])
            done = "the killed pull's merge, written but not committed, committed"
    journal.unlink(missing_ok=True)
    log.warning("an interrupted pull found: %s", done)
    return done


def _remove_driver_files(root: Path, since: float) -> int:
    """The copies git hands a merge driver (``.merge_file_XXXXXX`` at the top of the tree), left
    by a merge killed while its driver ran: git removes them itself when it lives. How many."""
    removed = 0
    for path in root.glob(".merge_file_*"):
        try:
            if path.is_file() and not path.is_symlink() and path.stat().st_mtime >= since - 1:
                path.unlink()
                removed += 1
        except OSError:
            continue
    return removed


def _index_moved(root: Path) -> bool:
    """Whether the index differs from HEAD with nothing unmerged (a merge's result staged)."""
    if _unmerged(root):
        return False
    return run_git(root, "diff-index", "--cached", "--name-only", "HEAD", "--").strip() != b""


def _read_kept(path: Path | None) -> list[str]:
    if path is None or not path.exists():
        return []
    found = sorted(set(path.read_text(encoding="utf-8").splitlines()))
    path.unlink(missing_ok=True)
    return found


def push(root: Path, remote: str, branch: str) -> bool:
    """Push the current branch to ``remote`` (never forced). False when the remote moved on
    meanwhile (pull, then push again); HistoryError when it cannot be reached or refuses the push
    for a reason of its own (a hook, a branch checked out there)."""
    _check_remote(root, remote)
    try:
        # Exit 1 with a "!" line: the update was refused ("[rejected]": the remote moved on;
        # "[remote rejected]": the remote declined it); 128: unreachable.
        out = run_git(
            root,
            "push",
            "--porcelain",
            remote,
            f"HEAD:refs/heads/{branch}",
            env={"GIT_TERMINAL_PROMPT": "0"},
            ok=(0, 1),
        )
    except HistoryError as exc:
        raise _failed(root, remote, "push", f"cannot push to remote {remote!r}: {exc.detail}") from None
    refused = [line.split("\t")[-1] for line in out.decode("utf-8", "replace").splitlines() if line.startswith("!")]
    if refused and all(summary.startswith("[rejected]") for summary in refused):
        return False
    if refused:
        # "[remote rejected] (branch is currently checked out)", "(pre-receive hook declined)": the
        # remote refuses this push whatever we merge first, so pulling and pushing again cannot help.
        # Its branch locked or moved by another push at the same moment passes, though: tried again.
        kind = HistoryError if any(_PASSING_REJECTION.search(s) for s in refused) else RemoteRefused
        raise kind("push", f"remote {remote!r} refused the push: {refused[0]}")
    tip = run_git(root, "rev-parse", "--verify", "--quiet", f"refs/remotes/{remote}/{branch}", ok=(0, 1))
    if tip.decode().strip() != head_sha(root):
        raise RemoteRefused("push", f"remote {remote!r} did not take the push (a hook of the remote's declined it?)")
    return True


def merge_driver(base: Path, ours: Path, theirs: Path, rel: str) -> Merged:
    """What ``syncd merge-driver`` does for git: merge the three versions of ``rel`` by its kind
    and leave the result in ``ours``. Files that are not UTF-8 text get git's line merge alone."""
    texts = []
    for path in (base, ours, theirs):
        try:
            texts.append(path.read_bytes().decode("utf-8"))
        except UnicodeDecodeError:
            texts = []
            break
    by_kind = merge_json_kind(PurePosixPath(rel).name, *texts) if texts else None
    if texts and classify_path(rel).kind == "daily_log":
        merged = merge_daily_log(texts[0], texts[1], texts[2], rel)
    elif by_kind is not None:
        merged = by_kind
    else:
        out = run_git(
            Path.cwd(),
            "merge-file",
            "-p",
            f"--marker-size={MARKER_SIZE}",
            "-L",
            "ours",
            "-L",
            "base",
            "-L",
            "theirs",
            str(ours),
            str(base),
            str(theirs),
            ok=tuple(range(128)),
        )
        if not texts:
            ours.write_bytes(out)
            return Merged("")
        merged = callouts_for_conflicts(out.decode("utf-8", "surrogateescape"), "the other machine")
    ours.write_bytes(merged.text.encode("utf-8", "surrogateescape"))
    if merged.kept_both:
        # git runs its drivers at the top of the tree: the pull reads this list when git is done.
        folder = git_dir(Path.cwd())
        if folder is not None:
            with open(folder / _KEPT_BOTH, "a", encoding="utf-8") as handle:
                handle.write(rel + "\n")
    return merged
