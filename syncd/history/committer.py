"""Intents -> commits: what changed is grouped by agent turn (each group's intent gives author and
trailers), the rest is committed as the human editor, under the user's own git identity.
"""

from __future__ import annotations

from collections.abc import Iterable

from .git import (
    DiffEntry,
    changed_paths,
    commit_exact,
    open_or_init_repo,
    read_blobs,
    user_identity,
)
from .intents import Intent, drop_intents, find_intents
from .messages import (
    DETAILED_FILES,
    counts_facts,
    describe_change,
    file_changes,
    format_message,
)

__all__ = ["commit_changes"]


def _turn_key(intent: Intent | None) -> object:
    """Writes of one agent turn share a commit even if each left its own summary."""
    if intent is None or intent.turn is None:
        return intent
    return ("turn", intent.author, intent.email, intent.session, intent.turn)


def _message(root, settings, intent: Intent | None):
    """The commit message as a function of what the commit really changes."""

    def build(entries: list[DiffEntry]) -> str:
        blobs: dict = {}
        if len(entries) <= DETAILED_FILES:
            wanted = [sha for e in entries if counts_facts(e.path) for sha in (e.old_sha, e.new_sha) if sha]
            blobs = read_blobs(root, wanted, settings.max_file_bytes)
        subject, body, trailers = describe_change(file_changes(entries, blobs))
        if intent is None:
            return format_message(subject, body, {"Syncd-Source": "editor", **trailers})
        if intent.summary:
            body = f"{subject}\n{body}".strip()
            subject = intent.summary
        return format_message(subject, body, {"Syncd-Source": "api", **intent.trailers(), **trailers})

    return build


def commit_changes(home, settings, paths: Iterable[str] | None = None) -> list[str]:
    """Commit what git shows as changed under ``paths`` (default: everywhere): one commit per
    agent turn (its intent gives author and trailers), the rest as the person editing (their
    ``git config user.name``/``user.email``, else the settings' human identity). Returns the new
    shas, oldest first.

    Raises GitBusyError while the user's git work is under way or HEAD is detached (nothing is
    committed; the changes stay on disk and indexed, and a later call commits them), HistoryError
    when git fails otherwise. A turn's provenance is kept until its commit is made."""
    root = home.root
    open_or_init_repo(root)
    changes = changed_paths(root, paths)
    if not changes.paths:
        return []
    removed = set(changes.removed)
    intents = find_intents(home, changes.present)
    groups: dict[object, list[str]] = {}
    first: dict[object, Intent | None] = {}
    for rel in changes.paths:
        intent = intents[rel][1] if rel in intents else None
        key = _turn_key(intent)
        groups.setdefault(key, []).append(rel)
        first.setdefault(key, intent)
    human: tuple[str, str] | None = None
    shas = []
    for key, group in groups.items():
        intent = first[key]
        if intent is None:
            if human is None:
                name, email = user_identity(root)
                human = (name or settings.human_name, email or settings.human_email)
            name, email = human
        else:
            name = intent.author
            email = intent.email or f"{intent.author}@{settings.agent_email_domain}"
        sha, _ = commit_exact(
            root,
            [p for p in group if p not in removed],
            [p for p in group if p in removed],
            _message(root, settings, intent),
            name,
            email,
        )
        # Committed, or already matching HEAD: either way the intent has been honoured.
        drop_intents(home, {p: intents[p][0] for p in group if p in intents})
        if sha:
            shas.append(sha)
    return shas
