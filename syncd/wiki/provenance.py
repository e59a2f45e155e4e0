"""Read-only git facts for lint: when each page and source last changed, and whether ``log.md``
was ever rewritten instead of appended to. Plain ``git`` subprocesses (two or three per lint,
whatever the vault's size); nothing here writes to the repository or the work tree.

Results are cached in the wiki's derived store keyed by the HEAD commit and the question asked,
so a lint with nothing committed since the last one runs no git history walk at all.
"""

from __future__ import annotations

import hashlib
import logging
import os
import stat
import subprocess
from collections.abc import Iterable
from pathlib import Path

from .lint import GitFacts, LogRewrite
from .store import GraphCache, sources_digest

__all__ = [
    "is_regular",
    "git_root",
    "head_commit",
    "last_changed",
    "log_versions",
    "log_rewrites",
    "git_location",
    "git_facts",
]

log = logging.getLogger(__name__)

LOG_HISTORY_LIMIT = 200
# Answers kept in the store hold for the code that read them from git, as well as for the HEAD.
_CODE = sources_digest("wiki.provenance")[:12]


def _git(root: Path, *args: str, stdin: bytes | None = None) -> bytes | None:
    try:
        done = subprocess.run(
            ["git", "-C", str(root), "--literal-pathspecs", "-c", "core.quotepath=off", *args],
            input=stdin,
            capture_output=True,
            check=False,
        )
    except OSError as exc:
        log.warning("git is not available: %s", exc)
        return None
    if done.returncode != 0:
        log.debug("git %s failed: %s", " ".join(args), done.stderr.decode(errors="replace").strip())
        return None
    return done.stdout


def git_root(path: Path) -> Path | None:
    out = _git(path, "rev-parse", "--show-toplevel")
    # The path as the file system names it: not UTF-8 on a Latin-1 system, and maybe ending
    # in a space.
    return Path(os.fsdecode(out.removesuffix(b"\n"))) if out else None


def head_commit(root: Path) -> str | None:
    out = _git(root, "rev-parse", "--verify", "-q", "HEAD")
    return out.decode().strip() if out else None


def last_changed(root: Path, paths: Iterable[str]) -> dict[str, tuple[int, int, str]]:
    """For each git-root-relative path, ``(order, commit time, sha)`` of the last commit that
    touched it; ``order`` grows with recency (topological, so commits in the same second still
    compare). Paths never committed are absent."""
    wanted = sorted(set(paths))
    if not wanted:
        return {}
    stdin = ("--\n" + "".join(p + "\n" for p in wanted)).encode()
    # -z: names as they are. Without it git quotes a name holding '"', '\\' or a control
    # character, which then matched no page: such a page was never found stale.
    out = _git(root, "log", "HEAD", "--stdin", "--topo-order", "--no-renames", "--name-only", "-z",
               "--format=%x01%H %ct", stdin=stdin)  # fmt: skip
    if not out:
        return {}
    records = out.decode("utf-8", errors="replace").split("\x01")[1:]
    found: dict[str, tuple[int, int, str]] = {}
    total = len(records)
    for position, record in enumerate(records):
        head, _, names = record.partition("\0")
        sha, _, when = head.partition(" ")
        for name in names.removeprefix("\n").split("\0"):
            if name and name not in found:
                found[name] = (total - position, int(when), sha)
    return found


def log_versions(root: Path, path: str, limit: int = LOG_HISTORY_LIMIT) -> list[tuple[str, int, str]]:
    """``(sha, commit time, text)`` of the last ``limit`` committed versions of ``path``, oldest
    first (a commit that deleted it gives ``''``)."""
    out = _git(root, "log", "HEAD", f"-n{limit}", "--topo-order", "--format=%H %ct", "--", path)
    if not out:
        return []
    commits = [line.split(" ") for line in out.decode().split("\n") if line]
    commits.reverse()
    batch = "".join(f"{sha}:{path}\n" for sha, _ in commits).encode()
    blobs = _git(root, "cat-file", "--batch", stdin=batch)
    if blobs is None:
        return []
    versions = []
    pos = 0
    for sha, when in commits:
        eol = blobs.index(b"\n", pos)
        header = blobs[pos:eol].split(b" ")
        pos = eol + 1
        if len(header) == 3:
            size = int(header[2])
            text = blobs[pos : pos + size].decode("utf-8", errors="replace")
            pos += size + 1
        else:  # "<object> missing": the commit deleted the file
            text = ""
        versions.append((sha, int(when), text))
    return versions


def log_rewrites(versions: list[tuple[str, int, str]], current: str | None) -> list[LogRewrite]:
    """Commits (and uncommitted changes, commit ``''``) after which ``log.md`` no longer began
    with its previous version, limited to those whose lost lines are still missing now, so
    restoring the lines clears the finding. Pure."""
    chain = list(versions)
    if current is not None:
        chain.append(("", 0, current))
    now_lines = set((current if current is not None else (chain[-1][2] if chain else "")).split("\n"))
    found = []
    for (_, _, before), (sha, when, after) in zip(chain, chain[1:], strict=False):
        if after.startswith(before) or (before.endswith("\n") and after == before[:-1]):
            continue
        old, new = before.split("\n"), after.split("\n")
        first = 0
        while first < min(len(old), len(new)) and old[first] == new[first]:
            first += 1
        lost = tuple(line for line in old[first:] if line.strip() and line not in now_lines)
        if lost:
            found.append(LogRewrite(sha, when, first + 1, lost))
    return found


def _cached(cache: GraphCache | None, question: str, state: str, compute):
    """The answer to ``question`` as of ``state`` (the HEAD, the code, what was asked): kept
    under the question alone, so a new HEAD replaces the answer rather than adding one. Keyed by
    the HEAD, each lint after a commit added a row holding every version of log.md (8 MB a row
    for a 280 KB log of 60 versions), and the store grew with the history for good."""
    if cache is None:
        return compute()
    hit = cache.fact(question)
    if isinstance(hit, dict) and hit.get("state") == state:
        return hit["answer"]
    value = compute()
    cache.set_fact(question, {"state": state, "answer": value})
    return value


def is_regular(root: Path, rel: str) -> bool:
    """Whether ``rel`` (under ``root``) is a regular file reached without a symbolic link:
    ``(root / rel).is_file()`` followed one, so a source through a link in the home
    (``notes/etc -> /etc``) told lint's reader whether any file of the machine exists."""
    path = root
    for part in rel.split("/"):
        path = path / part
        try:
            mode = os.lstat(path).st_mode
        except OSError:
            return False
        if stat.S_ISLNK(mode):
            return False
    return stat.S_ISREG(mode)


def git_location(vault_root: Path) -> tuple[Path, str] | None:
    """``(git root, vault prefix)`` (``'vault/'`` in a home, ``''`` when the vault is the repo),
    or None when the vault is not in a git work tree."""
    root = git_root(vault_root)
    if root is None:
        return None
    try:
        rel = vault_root.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return None
    return root, ("" if rel == "." else rel + "/")


def git_facts(
    location: tuple[Path, str],
    page_paths: Iterable[str],
    outside_paths: Iterable[str],
    log_text: str | None,
    cache: GraphCache | None = None,
) -> GitFacts:
    """Everything lint asks git. ``page_paths`` are vault paths whose last change matters
    (pages with sources and the vault files they name); ``outside_paths`` are home-relative
    files that sources name outside the vault (checked for existence here too)."""
    root, prefix = location
    outside = sorted(set(outside_paths))
    existing = frozenset(p for p in outside if is_regular(root, p))
    head = head_commit(root)
    if head is None:
        return GitFacts(prefix, {}, (), existing)
    wanted = sorted({prefix + p for p in page_paths} | set(existing))
    digest = hashlib.sha1("\n".join(wanted).encode()).hexdigest()
    times = _cached(cache, "last_changed", f"{_CODE}:{head}:{digest}", lambda: last_changed(root, wanted))
    versions = _cached(
        cache, f"log_versions:{prefix}", f"{_CODE}:{head}", lambda: log_versions(root, prefix + "log.md")
    )
    rewrites = tuple(log_rewrites([tuple(v) for v in versions], log_text))
    return GitFacts(prefix, {k: tuple(v) for k, v in times.items()}, rewrites, existing)
