"""Intents -> commits: what changed is grouped by agent turn (each group's intent gives author and
trailers), the rest is committed as the human editor.
"""

from __future__ import annotations

from collections.abc import Iterable

from .git import changed_paths, commit_paths, open_or_init_repo
from .messages import describe_change, format_message

__all__ = ["commit_changes"]


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
    changed = changed_paths(repo, paths)
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

