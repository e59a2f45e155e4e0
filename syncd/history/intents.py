"""Why a file changed: the provenance an API write leaves for whoever commits it.

A write through syncd's API (an agent's turn, a CLI command) records an Intent next to the exact
content it produced, keyed by path and blob sha, under ``<git dir>/syncd/intents/`` (the home's
private folder: not under the derived ``.syncd/``, which may be deleted at any moment, taking the
authorship of writes not committed yet with it). Whoever indexes and
commits that content (this process, or a daemon in another one) takes the intent and turns it into
the commit's author and trailers. Content with no intent was written by a person in an editor.
Keying by sha is what makes this echo-safe: if the file changes again before the commit, the
intent no longer matches and the change is rightly attributed to whoever made it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import secrets
import time
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from ..errors import StorageError
from ..home import Home, atomic_write, file_blob_sha, replace_unsynced

__all__ = ["Intent", "drop_intents", "find_intents", "peek_intent", "record_intent"]

log = logging.getLogger(__name__)

# Intents nobody claimed (the write was reverted before it was indexed) are dropped after a day.
_STALE_AFTER_S = 24 * 3600


@dataclass(frozen=True)
class Intent:
    """Who made a change and from what. Every field but ``author`` is optional provenance."""

    author: str
    email: str | None = None
    summary: str = ""
    user: str | None = None
    chat: str | None = None
    session: str | None = None
    turn: str | None = None
    transcript_line: int | None = None
    model: str | None = None
    prompt_version: str | None = None
    created: float = field(default_factory=time.time, compare=False)

    def trailers(self) -> dict[str, str]:
        """Git trailers (``Syncd-Session: s1`` ...) for the provenance that is present."""
        names = {
            "user": "Syncd-User",
            "chat": "Syncd-Chat",
            "session": "Syncd-Session",
            "turn": "Syncd-Turn",
            "transcript_line": "Syncd-Transcript-Line",
            "model": "Syncd-Model",
            "prompt_version": "Syncd-Prompt-Version",
        }
        return {name: str(getattr(self, key)) for key, name in names.items() if getattr(self, key) is not None}

    @classmethod
    def from_dict(cls, data: Mapping) -> Intent:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


def _path_digest(rel: str) -> str:
    return hashlib.blake2b(rel.encode("utf-8", "surrogateescape"), digest_size=8).hexdigest()


def _intents_dir(home: Home) -> Path:
    return home.private_dir / "intents"


def _intent_path(home: Home, rel: str, sha: str) -> Path:
    return _intents_dir(home) / f"{_path_digest(rel)}-{sha}.json"


def record_intent(home: Home, rel: str, sha: str, intent: Intent, durable: bool = True) -> None:
    """Leave the provenance of ``rel`` at ``sha`` for the committer (before the file is written:
    a StorageError here means nothing was written).

    ``durable``: fsynced, for a committer that may come after a power cut (a daemon in another
    process, to which the write is handed). Without it the intent is renamed into place whole but
    not synced: enough for a write this process commits itself before acknowledging it, whose
    intent need outlive only the process's own death, as the group's journal does (a dead
    group's write is put back and its intents dropped, journal.py), and two fsyncs less under the
    write turn, which every writer waits for."""
    data = {"path": rel, "sha": sha, "intent": asdict(intent)}
    home.ensure_private_dir()
    target = _intent_path(home, rel, sha)
    try:
        if durable:
            atomic_write(target, json.dumps(data, sort_keys=True).encode())
        else:
            # Renamed into place whole; a kill before the rename leaves a hidden temporary file,
            # dropped with the stale intents.
            temporary = target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")
            replace_unsynced(target, json.dumps(data, sort_keys=True).encode(), temporary, 0o644)
    except OSError as exc:
        raise StorageError(
            f"cannot record the provenance of {rel} in {target.parent}: {exc.strerror or exc}; nothing was written",
            target,
            saved=False,
        ) from None


def peek_intent(home: Home, rel: str, sha: str) -> Intent | None:
    try:
        data = json.loads(_intent_path(home, rel, sha).read_text(encoding="utf-8"))
    except (OSError, ValueError):  # absent, unreadable, or half-written by a killed process
        return None
    if data.get("path") != rel:
        return None
    return Intent.from_dict(data.get("intent") or {})


def find_intents(home: Home, paths: Iterable[str]) -> dict[str, tuple[str, Intent]]:
    """``{path: (sha, intent)}`` for the paths whose current bytes on disk have an intent. One
    listing of the intents folder decides which files are worth hashing at all, so committing
    100,000 files a person added reads none of them here."""
    folder = _intents_dir(home)
    try:
        names = {entry.name for entry in os.scandir(folder)}
    except OSError:
        return {}
    digests = {name.split("-", 1)[0] for name in names}
    found: dict[str, tuple[str, Intent]] = {}
    for rel in paths:
        if _path_digest(rel) not in digests:
            continue
        try:
            sha = file_blob_sha(home.root / rel)
        except OSError:
            continue  # unreadable: not committed either
        intent = peek_intent(home, rel, sha) if sha else None
        if sha and intent is not None:
            found[rel] = (sha, intent)
    _drop_stale(home)
    return found


def drop_intents(home: Home, taken: Mapping[str, str]) -> None:
    """Forget the intents of ``{path: sha}`` once their change is committed (the writer waiting
    for its commit watches for exactly this)."""
    for rel, sha in taken.items():
        try:
            _intent_path(home, rel, sha).unlink(missing_ok=True)
        except OSError as exc:  # a leftover intent is dropped as stale within a day
            log.warning("cannot remove the intent of %s: %s", rel, exc.strerror or exc)


def _drop_stale(home: Home) -> None:
    folder = _intents_dir(home)
    if not folder.is_dir():
        return
    cutoff = time.time() - _STALE_AFTER_S
    for path in [*folder.glob("*.json"), *folder.glob(".*.tmp")]:
        try:
            if path.stat().st_mtime < cutoff:
                path.unlink()
        except OSError:
            continue
