"""Derived ids of hand-written facts: stable across edits elsewhere in the file, never written back.

A fact typed by a person has no ``id:`` in its comment. Its id is derived from the file's relative
path, its normalised content (NFC, casefolded, whitespace collapsed) and its occurrence number
among the file's id-less facts with that same content, so an edit to another line changes
nothing, and two identical lines still get two ids.
"""

from __future__ import annotations

import hashlib
import unicodedata
from dataclasses import dataclass, field

__all__ = ["FactIdMemo", "derive_fact_id", "derive_id", "normalise_content"]


@dataclass
class FactIdMemo:
    """What deriving one file's fact ids computed (normalised contents, ids by normalised content
    and occurrence), kept by a caller that reads the file again after an edit: the next read
    derives only the ids of what changed. Holds what the last read used, nothing older."""

    rel_path: str
    norms: dict[str, str] = field(default_factory=dict)
    ids: dict[tuple[str, int], str] = field(default_factory=dict)


def normalise_content(content: str) -> str:
    return " ".join(unicodedata.normalize("NFC", content).casefold().split())


def derive_id(rel_path: str, normalised: str, occurrence: int) -> str:
    """The id for already normalised content (callers that normalise once per fact use this)."""
    key = f"{rel_path}\x00{normalised}\x00{occurrence}".encode("utf-8", "surrogatepass")
    return "h-" + hashlib.blake2b(key, digest_size=8).hexdigest()


def derive_fact_id(rel_path: str, content: str, occurrence: int) -> str:
    """``h-`` + 16 hex digits identifying a hand-written fact.

    ``rel_path`` is the POSIX path relative to the home (``memory/users/u/2026-11-22.md``);
    ``occurrence`` counts from 0 among the file's id-less facts with the same normalised content.
    """
    return derive_id(rel_path, normalise_content(content), occurrence)
