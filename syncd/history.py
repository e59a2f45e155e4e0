"""Git history of the memory tree (gitpython): commits with provenance trailers, log, blame, revert.

Every commit sets its author and committer explicitly, so a machine with no git identity
configured (CI, a fresh server) still commits, and the author is the agent or person who made the
change rather than whoever happens to run the daemon.

The user's own git work always wins: while git holds ``index.lock`` or is in the middle of a
merge, rebase, cherry-pick, revert or bisect, we commit nothing (:func:`git_busy`) and try later;
and we only ever commit what ``git status`` still shows as changed, so whatever the user committed,
pulled or checked out themselves is never committed a second time.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import git

from .errors import NotFoundError, RevertError, SyncdError

__all__ = [
    "FactHistory",
    "LogEntry",
    "RevertError",
    "commit_changes",
    "commit_paths",
    "describe_change",
    "fact_history",
    "format_message",
    "git_busy",
    "head_sha",
    "open_or_init_repo",
    "read_log",
    "revert_commit",
    "uncommitted_paths",
]

log = logging.getLogger(__name__)

# What git leaves in its folder while an operation of the user's is under way.
_BUSY_MARKERS = ("index.lock", "HEAD.lock", "MERGE_HEAD", "CHERRY_PICK_HEAD", "REVERT_HEAD", "rebase-merge",
                 "rebase-apply", "BISECT_LOG")
# A lock file this old is probably left by a crashed git; we still never remove it ourselves.
_STALE_LOCK_S = 60
# Above this many files a commit message names counts only: reading every old blob to count
# facts would cost more than the commit.
_DETAILED_FILES = 50
# Above this many paths, one whole-tree `git status` filtered here beats a huge pathspec.
_PATHSPEC_MAX = 100
_FIELD = "\x1f"
_RECORD = "\x1d"
_LOG_FORMAT = f"{_RECORD}%H{_FIELD}%an{_FIELD}%ae{_FIELD}%aI{_FIELD}%s{_FIELD}%(trailers:unfold,separator=%x1e){_FIELD}"


def open_or_init_repo(root: Path) -> tuple[git.Repo, bool]:
    """The repository whose top is ``root``; created (branch ``main``) when there is none."""
    try:
        repo = git.Repo(root)
        if Path(repo.working_tree_dir or "").resolve() == root.resolve():
            return repo, False
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        pass
    repo = git.Repo.init(root, initial_branch="main")
    return repo, True


def _open_repo(root: Path) -> git.Repo | None:
    """The home's repository, or None when the home is not (yet) under git."""
    try:
        repo = git.Repo(root)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        return None
    if Path(repo.working_tree_dir or "").resolve() != Path(root).resolve():
        return None
    return repo


def _identity_env(name: str, email: str) -> dict[str, str]:
    return {
        "GIT_AUTHOR_NAME": name,
        "GIT_AUTHOR_EMAIL": email,
        "GIT_COMMITTER_NAME": name,
        "GIT_COMMITTER_EMAIL": email,
    }


def git_busy(root: Path) -> str | None:
    """Why committing now would fight the user's own git operation, or None when it would not."""
    repo = _open_repo(root)
    if repo is None:
        return None
    folder = Path(repo.git_dir)
    for marker in _BUSY_MARKERS:
        try:
            age = time.time() - (folder / marker).stat().st_mtime
        except FileNotFoundError:
            continue
        if age > _STALE_LOCK_S and marker.endswith(".lock"):
            return (f"git is busy ({marker} present for {age:.0f} s; if no git command is running, "
                    f"a crashed one left it: remove {folder / marker})")
        return f"git is busy ({marker} present)"
    return None


def head_sha(root: Path) -> str | None:
    repo = _open_repo(root)
    if repo is None or not repo.head.is_valid():
        return None
    return repo.head.commit.hexsha


def format_message(subject: str, body: str = "", trailers: Mapping[str, str] | None = None) -> str:
    """Subject, optional body, then ``Key: value`` trailers that ``git interpret-trailers`` reads."""
    parts = [subject.strip()]
    if body.strip():
        parts.append(body.strip())
    if trailers:
        lines = [f"{k}: {' '.join(str(v).split())}" for k, v in trailers.items() if v not in (None, "")]
        if lines:
            parts.append("\n".join(lines))
    return "\n\n".join(parts) + "\n"


def _tracked_or_present(repo: git.Repo, paths: Iterable[str]) -> list[str]:
    """Paths git can stage: present on disk, or tracked (a deletion). A file created and removed
    again before the commit is neither, and naming it would make ``git add`` fail."""
    root = Path(repo.working_tree_dir or ".")
    wanted = sorted(set(paths))
    present = [p for p in wanted if (root / p).exists()]
    missing = [p for p in wanted if p not in set(present)]
    if missing:
        tracked = set(repo.git.ls_files("-z", "--", *missing).split("\0")) - {""}
        present.extend(p for p in missing if p in tracked)
    return sorted(present)


def commit_paths(
    repo: git.Repo,
    paths: Iterable[str],
    message: str,
    author_name: str,
    author_email: str,
    trailers: Mapping[str, str] | None = None,
) -> str | None:
    """Commit exactly ``paths`` (additions, edits, deletions); return the sha, or None if nothing
    under those paths changed. Other staged work of the user is left staged and uncommitted."""
    stageable = _tracked_or_present(repo, paths)
    if not stageable:
        return None
    full = format_message(message, trailers=trailers) if trailers else message
    before = _head(repo)
    with repo.git.custom_environment(**_identity_env(author_name, author_email)):
        repo.git.add("-A", "--", *stageable)
        try:
            repo.git.commit("--no-verify", "-q", "-m", full, "--only", "--", *stageable)
        except git.GitCommandError:
            # "nothing to commit" is how git says these paths already match HEAD; asking first
            # (a diff) would cost every commit one more process. Any other failure re-raises.
            if _head(repo) == before and not _staged_differs(repo, stageable):
                return None
            raise
    return repo.head.commit.hexsha


def _head(repo: git.Repo) -> str | None:
    return repo.head.commit.hexsha if repo.head.is_valid() else None


def _staged_differs(repo: git.Repo, paths: list[str]) -> bool:
    if not repo.head.is_valid():
        return bool(paths)
    return bool(repo.git.diff("--cached", "--name-only", "HEAD", "--", *paths).strip())


def _changed_paths(repo: git.Repo, paths: Iterable[str] | None) -> dict[str, str]:
    """``{path: blob sha, or '' when deleted}`` of what git sees as changed (untracked, modified,
    deleted). A file we cannot read is left out: git could not stage it either."""
    args = ["--porcelain=v1", "-z", "--untracked-files=all", "--no-renames"]
    wanted: set[str] | None = None
    if paths is not None:
        wanted = set(paths)
        if not wanted:
            return {}
        if len(wanted) <= _PATHSPEC_MAX:
            args += ["--", *sorted(wanted)]
    out = _status(repo, *args)
    root = Path(repo.working_tree_dir or ".")
    changed: dict[str, str] = {}
    for entry in out.split("\0"):
        if len(entry) < 4:
            continue
        rel = entry[3:]
        if rel.startswith(".syncd/") or (wanted is not None and rel not in wanted):
            continue
        try:
            changed[rel] = _blob_sha_of(root / rel)
        except OSError as exc:
            log.warning("not committing %s: %s", rel, exc.strerror or exc)
    return changed


def _status(repo: git.Repo, *args: str) -> str:
    """``git status`` without the index refresh it would write under index.lock: a status that
    takes the lock makes the user's own git command (or our commit) fail with "index.lock exists"."""
    with repo.git.custom_environment(GIT_OPTIONAL_LOCKS="0"):
        return repo.git.status(*args)


def _blob_sha_of(path: Path) -> str:
    from .home import file_blob_sha

    return file_blob_sha(path) or ""


def uncommitted_paths(root: Path) -> list[str]:
    """Markdown (and transcripts) that git shows as changed since HEAD: what the next commit
    will hold. Empty when the home is not a git repository."""
    from .home import is_indexable

    repo = _open_repo(root)
    if repo is None:
        return []
    try:
        out = _status(repo, "--porcelain=v1", "-z", "--untracked-files=all", "--no-renames")
    except git.GitCommandError as exc:
        # A repository git refuses to read (another owner, a broken index) leaves status without
        # this one list rather than without an answer at all.
        log.warning("git status failed in %s: %s", root, (exc.stderr or str(exc)).strip())
        return []
    return sorted(e[3:] for e in out.split("\0") if len(e) >= 4 and is_indexable(e[3:]))


# -- commit messages ------------------------------------------------------------------------------


def _fact_texts(rel: str, data: bytes | None) -> list[str]:
    from .documents import parse_file

    if not data:
        return []
    try:
        return [row.text for row in parse_file(rel, data) if row.kind == "fact"]
    except SyncdError:
        return []


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


@dataclass
class _FileChange:
    path: str
    action: str  # add, edit, delete, move
    added: int = 0
    removed: int = 0
    source: str | None = None  # a move's old path

    def line(self) -> str:
        facts = ", ".join(
            s for s in (f"+{_plural(self.added, 'fact')}" if self.added else "",
                        f"-{_plural(self.removed, 'fact')}" if self.removed else "") if s
        )
        if self.action == "move":
            return f"move {self.source} -> {self.path}"
        if facts:
            return f"{facts} in {self.path}"
        return f"{self.action} {self.path}"


def _old_blobs(repo: git.Repo, paths: Iterable[str]) -> dict[str, tuple[str, bytes | None]]:
    """``{path: (sha, bytes)}`` in HEAD for the paths it has; bytes only when there are few, since
    they serve to count facts. One ``ls-tree`` answers for any number of paths."""
    if not repo.head.is_valid():
        return {}
    wanted = set(paths)
    # Naming the paths keeps the listing small in a big tree; past a few hundred, the full listing
    # is cheaper than a command line that could outgrow the system's argument limit.
    limit = ["--", *sorted(wanted)] if len(wanted) <= 500 else []
    listing = repo.git.ls_tree("-r", "-z", "--full-tree", "HEAD", *limit)
    out: dict[str, tuple[str, bytes | None]] = {}
    for entry in listing.split("\0"):
        meta, _, rel = entry.partition("\t")
        if rel in wanted and meta.split(" ")[1:2] == ["blob"]:
            out[rel] = (meta.split(" ")[2], None)
    if len(wanted) <= _DETAILED_FILES:
        for rel, (sha, _) in out.items():
            out[rel] = (sha, repo.odb.stream(bytes.fromhex(sha)).read())
    return out


def describe_change(repo: git.Repo, changed: Mapping[str, str]) -> tuple[str, str, dict[str, str]]:
    """Subject, body and trailers for committing ``changed`` (``{path: new sha or ''}``):
    "+3 facts in memory/users/ana/2026-11-22.md", "-1 fact in ...", "edit vault/Tea.md",
    "move a.md -> b.md", or counts over many files with one line per file in the body."""
    root = Path(repo.working_tree_dir or ".")
    detailed = len(changed) <= _DETAILED_FILES
    old = _old_blobs(repo, changed)
    old_by_sha = {sha: rel for rel, (sha, _) in old.items() if not changed[rel]}
    changes: list[_FileChange] = []
    moved_from: set[str] = set()
    for rel, sha in sorted(changed.items()):
        if not sha:
            continue
        source = old_by_sha.pop(sha, None) if rel not in old else None
        if source is not None:
            moved_from.add(source)
            changes.append(_FileChange(rel, "move", source=source))
            continue
        change = _FileChange(rel, "edit" if rel in old else "add")
        if detailed:
            try:
                new_facts = _fact_texts(rel, (root / rel).read_bytes())
            except OSError:
                new_facts = []
            old_facts = _fact_texts(rel, old.get(rel, ("", None))[1])
            change.added = sum(1 for t in new_facts if t not in set(old_facts))
            change.removed = sum(1 for t in old_facts if t not in set(new_facts))
        changes.append(change)
    for rel, sha in sorted(changed.items()):
        if not sha and rel not in moved_from:
            removed = len(_fact_texts(rel, old.get(rel, ("", None))[1])) if detailed else 0
            changes.append(_FileChange(rel, "delete", removed=removed))
    added = sum(c.added for c in changes)
    removed = sum(c.removed for c in changes)
    if len(changes) == 1:
        subject, body = changes[0].line(), ""
    else:
        counts = ", ".join(s for s in (f"+{_plural(added, 'fact')}" if added else "",
                                       f"-{_plural(removed, 'fact')}" if removed else "") if s)
        actions = sorted({c.action for c in changes})
        verb = actions[0] if len(actions) == 1 else "change"
        subject = f"{counts} in {len(changes)} files" if counts else f"{verb} {len(changes)} files"
        body = "\n".join(c.line() for c in changes[:200])
        if len(changes) > 200:
            body += f"\n... and {len(changes) - 200} more"
    trailers = {}
    if added:
        trailers["Syncd-Facts-Added"] = str(added)
    if removed:
        trailers["Syncd-Facts-Removed"] = str(removed)
    return subject, body, trailers


def _turn_key(intent) -> object:
    """Writes of one agent turn share a commit even if each left its own summary."""
    if intent is None or intent.turn is None:
        return intent
    return ("turn", intent.author, intent.email, intent.session, intent.turn)


def commit_changes(home, settings, paths: Iterable[str] | None = None) -> list[str]:
    """Commit what changed under ``paths``: one commit per agent turn (its intent gives author and
    trailers), the rest as the human editor. Returns the new shas, oldest first."""
    from .intents import take_intents

    repo, _ = open_or_init_repo(home.root)
    changed = _changed_paths(repo, paths)
    if not changed:
        return []
    intents = take_intents(home, changed)
    groups: dict[object, list[str]] = {}
    first: dict[object, object] = {}
    for rel in sorted(changed):
        key = _turn_key(intents.get(rel))
        groups.setdefault(key, []).append(rel)
        first.setdefault(key, intents.get(rel))
    shas = []
    for key, group in groups.items():
        intent = first[key]
        subject, body, trailers = describe_change(repo, {p: changed[p] for p in group})
        if intent is None:
            name, email = settings.human_name, settings.human_email
            trailers = {"Syncd-Source": "editor", **trailers}
        else:
            name = intent.author
            email = intent.email or f"{intent.author}@{settings.agent_email_domain}"
            trailers = {"Syncd-Source": "api", **intent.trailers(), **trailers}
            if intent.summary:
                body = f"{subject}\n{body}".strip()
                subject = intent.summary
        sha = commit_paths(repo, group, format_message(subject, body, trailers), name, email)
        if sha:
            shas.append(sha)
    return shas


# -- reading history -------------------------------------------------------------------------------


@dataclass(frozen=True)
class LogEntry:
    sha: str
    author: str
    email: str
    date: str
    subject: str
    trailers: dict[str, str] = field(default_factory=dict)
    files: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        return {**self.__dict__, "files": list(self.files)}


def _parse_record(record: str) -> LogEntry | None:
    parts = record.split(_FIELD)
    if len(parts) < 7:
        return None
    sha, author, email, date, subject, raw_trailers, rest = parts[:7]
    trailers = {}
    for item in raw_trailers.split("\x1e"):
        key, sep, value = item.partition(":")
        if sep and key.strip():
            trailers[key.strip()] = value.strip()
    files = tuple(line for line in rest.splitlines() if line.strip())
    return LogEntry(sha.strip(), author, email, date, subject, trailers, files)


def _repo_or_raise(root: Path) -> git.Repo:
    repo = _open_repo(root)
    if repo is None:
        raise NotFoundError(f"{root} is not a git repository; run `syncd init` to start its history")
    return repo


def read_log(root: Path, path: str | None = None, limit: int = 20) -> list[LogEntry]:
    """Recent commits (newest first), only those touching ``path`` when given, with their
    trailers and the files they touched."""
    repo = _repo_or_raise(root)
    if not repo.head.is_valid():
        return []
    args = [f"-n{limit}", f"--format={_LOG_FORMAT}", "--name-only"]
    if path:
        args += ["--", path]
    out = repo.git.log(*args)
    return [e for e in (_parse_record(r) for r in out.split(_RECORD)) if e is not None]


@dataclass(frozen=True)
class FactHistory:
    """Where a fact came from: the commit that introduced its line, and the later ones that
    changed it (newest first). ``uncommitted`` when its current text is not committed yet."""

    path: str
    line: int
    text: str
    introduced: LogEntry | None
    edits: tuple[LogEntry, ...] = ()
    uncommitted: bool = False

    def to_dict(self) -> dict:
        return {
            "path": self.path,
            "line": self.line,
            "text": self.text,
            "uncommitted": self.uncommitted,
            "introduced": self.introduced.to_dict() if self.introduced else None,
            "edits": [e.to_dict() for e in self.edits],
        }


def fact_history(root: Path, path: str, line: int, text: str) -> FactHistory:
    """Blame one line of the working tree, then follow that line back through history
    (``git log -L``): the oldest commit is the one that introduced it."""
    repo = _repo_or_raise(root)
    if not repo.head.is_valid():
        return FactHistory(path, line, text, None, (), True)
    try:
        porcelain = repo.git.blame("--porcelain", f"-L{line},{line}", "--", path)
    except git.GitCommandError as exc:
        raise NotFoundError(f"{path}:{line} has no history in git: {exc.stderr.strip()}") from None
    sha, orig_line = porcelain.split()[0], int(porcelain.split()[1])
    if set(sha) == {"0"}:
        return FactHistory(path, line, text, None, (), True)
    # The line may have been elsewhere (another path, another number) in the blamed commit.
    orig_path = path
    for row in porcelain.splitlines():
        if row.startswith("filename "):
            orig_path = row[len("filename "):]
    out = repo.git.log(f"-L{orig_line},{orig_line}:{orig_path}", "-s", f"--format={_LOG_FORMAT}", sha)
    entries = [e for e in (_parse_record(r) for r in out.split(_RECORD)) if e is not None]
    entries = [LogEntry(e.sha, e.author, e.email, e.date, e.subject, e.trailers) for e in entries]
    if not entries:
        return FactHistory(path, line, text, None, (), False)
    return FactHistory(path, line, text, entries[-1], tuple(entries[:-1]), False)


def revert_commit(root: Path, commit: str, name: str, email: str) -> str:
    """``git revert`` one commit (an agent turn, say) as ``name <email>``; return the new HEAD.
    On a conflict the revert is aborted, the tree left as it was, and RevertError raised."""
    repo = _repo_or_raise(root)
    busy = git_busy(root)
    if busy:
        raise RevertError(f"cannot revert now: {busy}; finish or abort that git operation first")
    try:
        target = repo.commit(commit).hexsha
    except (git.BadName, ValueError, git.GitCommandError):
        raise NotFoundError(f"no commit {commit!r} in {root}") from None
    with repo.git.custom_environment(**_identity_env(name, email)):
        try:
            repo.git.revert("--no-edit", target)
        except git.GitCommandError as exc:
            if (Path(repo.git_dir) / "REVERT_HEAD").exists():
                repo.git.revert("--abort")
            detail = (exc.stderr or str(exc)).strip().splitlines()
            raise RevertError(f"cannot revert {target[:10]}: {detail[-1] if detail else exc}") from None
    return repo.head.commit.hexsha
