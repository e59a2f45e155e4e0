"""Intents -> commits: what changed is grouped by agent turn (each group's intent gives author and
trailers), the rest is committed as the human editor, under the user's own git identity.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ..errors import ChangedMeanwhileError
from ..home import file_blob_sha
from .chain import PlannedCommit, commit_chain
from .git import open_or_init_repo, user_identity
from .intents import Intent, drop_intents, find_intents
from .messages import (
    DETAILED_FILES,
    counts_facts,
    describe_change,
    file_changes,
    format_message,
)
from .objects import BlobReader
from .staging import DiffEntry
from .status import changed_paths

__all__ = ["commit_changes"]


def _turn_key(intent: Intent | None) -> object:
    """Writes of one agent turn share a commit even if each left its own summary."""
    if intent is None or intent.turn is None:
        return intent
    return ("turn", intent.author, intent.email, intent.session, intent.turn)


def _describe(settings, intents: list[Intent | None]):
    """Each commit's message as a function of what it really changes; the blobs the messages
    quote are read once for the whole chain."""

    def build(changes: list[list[DiffEntry]], read_blobs: BlobReader) -> list[str]:
        wanted = [
            sha
            for entries in changes
            if len(entries) <= DETAILED_FILES
            for e in entries
            if counts_facts(e.path)
            for sha in (e.old_sha, e.new_sha)
            if sha
        ]
        blobs = read_blobs(wanted, settings.max_file_bytes) if wanted else {}
        return [_message(intent, entries, blobs) for intent, entries in zip(intents, changes)]

    return build


def _message(intent: Intent | None, entries: list[DiffEntry], blobs: dict) -> str:
    if not entries:
        return ""
    subject, body, trailers = describe_change(file_changes(entries, blobs if len(entries) <= DETAILED_FILES else {}))
    if intent is None:
        return format_message(subject, body, {"Syncd-Source": "editor", **trailers})
    if intent.summary:
        body = f"{subject}\n{body}".strip()
        subject = intent.summary
    return format_message(subject, body, {"Syncd-Source": "api", **intent.trailers(), **trailers})


def commit_changes(
    home, settings, paths: Iterable[str] | None = None, expected: Mapping[str, str] | None = None
) -> list[str]:
    """Commit what git shows as changed under ``paths`` (default: everywhere): one commit per
    agent turn (its intent gives author and trailers), the rest as the person editing (their
    ``git config user.name``/``user.email``, else the settings' human identity), all in one chain
    (see chain.py). Returns the new shas, oldest first.

    Raises GitBusyError while the user's git work is under way or HEAD is detached (nothing is
    committed; the changes stay on disk and indexed, and a later call commits them), HistoryError
    when git fails otherwise. A turn's provenance is kept until its commit is made. ``expected``
    (``{path: blob sha}``): see commit_chain."""
    root = home.root
    open_or_init_repo(root)
    changes = changed_paths(root, paths)
    if expected:
        # A writer's path git no longer sees as changed holds HEAD's version: if that is not what
        # was written, a git command of the person's put it back, and none of the batch commits.
        listed = set(changes.paths)
        gone = sorted(rel for rel, sha in expected.items() if rel not in listed and file_blob_sha(root / rel) != sha)
        if gone:
            raise ChangedMeanwhileError(
                f"{', '.join(gone)} changed under the commit (a git command of yours put it "
                "back meanwhile); nothing was committed"
            )
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
    planned = []
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
        planned.append(PlannedCommit(tuple(p for p in group if p not in removed),
                                     tuple(p for p in group if p in removed), name, email))  # fmt: skip
    made = commit_chain(root, planned, _describe(settings, [first[key] for key in groups]), expected)
    # Committed, or already matching HEAD: either way each intent has been honoured.
    drop_intents(home, {p: intents[p][0] for group in groups.values() for p in group if p in intents})
    return [sha for sha, _ in made if sha]
