"""Three-way merges of the home's files by kind, for homes shared through git remotes: never a
conflict marker in memory, never a fact dropped without a trace.

git calls these (through ``syncd merge-driver``, history/remote.py) with the common ancestor, our
version and theirs. Each returns the merged text and the places where both sides changed the same
thing differently, which the caller reports. The rules:

* **Daily logs** (facts carry ids): everything of ours stays; their new lines follow ours, in
  their order, each fact once (a fact both sides appended is one line). A fact they edited and we
  did not takes their edit; one they deleted and we did not touch goes; one we deleted and they
  edited comes back as theirs (an edit outweighs a deletion: nothing dropped silently). Edited on
  both sides, differently: ours stays the fact, theirs follows as a fact of its own (same text,
  another id) under a comment naming the fact it restates, and the merge reports it. Text lines
  they deleted stay (text carries no id to tell a deletion from a move).
* **Append-only files** (transcripts): ours, then their lines we do not have, in their order.
* **Session state** (JSON): the side that changed wins; changed on both sides, the later one by
  its ``last_active_at`` / ``serialized_at`` (else ours). A session's ``session.json`` also
  counts the turns of both sides, as the merged transcript holds them (:func:`merge_session_meta`).
* **Pages, MEMORY.md, core blocks**: git's own line merge (``git merge-file``); where it
  conflicts, :func:`callouts_for_conflicts` keeps our lines in place and shows theirs right below in
  a folded Obsidian callout, ``> [!conflict]-``, which the person resolves by keeping one
  (``syncd status`` and ``syncd lint`` list them; formats/conflicts.py finds and resolves them).
"""

from __future__ import annotations

import datetime as dt
import difflib
import json
from dataclasses import dataclass, replace
from typing import Any

from .conflicts import CALLOUT_END, callout_title, restated_fact_comment
from .facts import DailyLog, FactLine, TextLine, parse_daily_log

__all__ = [
    "CONFLICT_CALLOUT",
    "MARKER_SIZE",
    "Merged",
    "callouts_for_conflicts",
    "merge_appends",
    "merge_daily_log",
    "merge_json_kind",
    "merge_session_meta",
    "merge_state",
]

# git merge-file's conflict markers are this long: no line of a note starts with 31 '<'.
MARKER_SIZE = 31
CONFLICT_CALLOUT = "> [!conflict]-"


@dataclass(frozen=True)
class Merged:
    """A merge's text and what it kept both versions of (fact ids or line numbers, for a report)."""

    text: str
    kept_both: tuple[str, ...] = ()


def _keyed(log: DailyLog, rel: str) -> list[tuple[tuple[str, str], FactLine | TextLine]]:
    """Each line with its key: ``("f", id)`` for a fact, ``("t", text)`` for anything else."""
    ids = iter(log.fact_ids(rel))
    return [(("f", next(ids)) if isinstance(e, FactLine) else ("t", e.text), e) for e in log.elements]


def _same(a: FactLine | TextLine, b: FactLine | TextLine) -> bool:
    return a.text == b.text


_Element = FactLine | TextLine
_Keyed = list[tuple[tuple[str, str], _Element]]


def _ours_merged(mine: _Keyed, old_facts: dict, their_facts: dict) -> tuple[list[_Element], list[tuple[str, FactLine]]]:
    """Our lines, each fact of the base as the rules make it; and their versions of the facts
    both sides edited differently (restated after ours)."""
    out: list[_Element] = []
    restated: list[tuple[str, FactLine]] = []
    for key, element in mine:
        if key[0] != "f" or key not in old_facts:
            out.append(element)
            continue
        before, after = old_facts[key], their_facts.get(key)
        if after is None:  # they deleted it: it goes unless we edited it
            if not _same(element, before):
                out.append(element)
        elif _same(after, before) or _same(element, after):  # they left it, or did as we did
            out.append(element)
        elif _same(element, before):  # they edited it, we did not
            out.append(replace(after, ending=element.ending or "\n"))
        else:
            out.append(element)
            restated.append((key[1], after))
    return out, restated


def _their_runs(old: _Keyed, mine: _Keyed, their: _Keyed, restated: list[tuple[str, FactLine]]) -> list[list[_Element]]:
    """Their lines that are new to the base (and facts of the base we deleted that they edited),
    in their order, in runs; a run whose facts we already have all is only their headings. A
    fact both appended under one id with other words is added to ``restated``."""
    old_facts = {k: e for k, e in old if k[0] == "f"}
    mine_keys = {k for k, _ in mine}
    present = {k for k, _ in mine if k[0] == "f"}
    ours_added = {k: e for k, e in mine if k[0] == "f" and k not in old_facts}
    matcher = difflib.SequenceMatcher(None, [k for k, _ in old], [k for k, _ in their], autojunk=False)
    runs: list[list[_Element]] = []
    for tag, _i1, _i2, j1, j2 in matcher.get_opcodes():
        if tag not in ("insert", "replace"):
            continue
        run = []
        for key, element in their[j1:j2]:
            if isinstance(element, FactLine):  # keyed ("f", id)
                if key in present and key not in old_facts and not _same(element, ours_added[key]):
                    restated.append((key[1], element))  # appended on both sides under one id: both stay
                    continue
                if key in present or (key in old_facts and key not in mine_keys and _same(element, old_facts[key])):
                    continue
                present.add(key)
            run.append(element)
        if any(isinstance(e, FactLine) or (e.text.strip() and not e.text.startswith("#")) for e in run):
            runs.append(run)
    for key, element in their:
        # A fact we deleted that they edited in place (not an insertion: the matcher kept it).
        if (
            key[0] == "f"
            and key in old_facts
            and key not in mine_keys
            and key not in present
            and not _same(element, old_facts[key])
        ):
            runs.append([element])
            present.add(key)
    return runs


def merge_daily_log(base: str, ours: str, theirs: str, rel: str) -> Merged:
    """Merge three versions of the daily log ``rel`` (its home-relative path: ids of hand-written
    facts derive from it). See the module docstring for the rules."""
    old, mine, their = (_keyed(parse_daily_log(t), rel) for t in (base, ours, theirs))
    old_facts = {k: e for k, e in old if k[0] == "f"}
    out, restated = _ours_merged(mine, old_facts, {k: e for k, e in their if k[0] == "f"})
    runs = _their_runs(old, mine, their, restated)
    for fact_id, element in restated:
        # Without its id, their version reads as a fact of its own (an id derived from its words).
        their_version = FactLine(replace(element.fact, id=None), element.ending or "\n")
        runs.append([TextLine(restated_fact_comment(fact_id)), their_version])
    tail = [e for run in runs for e in run]
    if tail:
        if out and out[-1].ending == "":
            out[-1] = replace(out[-1], ending="\n")
        tail[-1] = replace(tail[-1], ending=tail[-1].ending or "\n")
    # Rendered as the lines are, not re-read as a DailyLog: were ours to end inside an open code
    # fence, their facts would read as text there, which is still better than refusing the merge.
    return Merged("".join(e.text + e.ending for e in out + tail), tuple(fact_id for fact_id, _ in restated))


def merge_appends(base: str, ours: str, theirs: str) -> Merged:
    """An append-only file (a transcript): ours, then their lines we do not have, in order (any
    line of theirs, not only those past the base: a file someone rewrote loses nothing either)."""
    have = set(ours.splitlines())
    new = []
    for line in theirs.splitlines():
        if line not in have:
            have.add(line)
            new.append(line)
    if not new:
        return Merged(ours)
    head = ours if not ours or ours.endswith("\n") else ours + "\n"
    return Merged(head + "".join(line + "\n" for line in new))


def _object(text: str) -> dict[str, Any] | None:
    try:
        value = json.loads(text) if text.strip() else {}
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _when(value: dict[str, Any] | None) -> dt.datetime | None:
    """When this state was last written: a session's ``last_active_at``, an agent state's
    ``serialized_at`` (an ISO time; one without an offset is UTC, as syncd writes them)."""
    for key in ("last_active_at", "serialized_at"):
        stamp = (value or {}).get(key)
        if isinstance(stamp, str):
            try:
                when = dt.datetime.fromisoformat(stamp)
            except ValueError:
                continue
            return when if when.tzinfo is not None else when.replace(tzinfo=dt.UTC)
    return None


def _later_is_theirs(ours: dict[str, Any] | None, theirs: dict[str, Any] | None) -> bool:
    mine, their = _when(ours), _when(theirs)
    return their is not None and (mine is None or their > mine)


def merge_state(base: str, ours: str, theirs: str) -> Merged:
    """Agent state (``state.json``, JSON): the side that changed; changed on both, the later
    by its ``serialized_at`` (``last_active_at``), else ours. The other stays in git's history
    (its side's commit), and the merge reports it."""
    if theirs == base or theirs == ours:
        return Merged(ours)
    if ours == base:
        return Merged(theirs)
    return Merged(theirs if _later_is_theirs(_object(ours), _object(theirs)) else ours, ("state",))


def _count(value: dict[str, Any] | None, key: str) -> int:
    n = (value or {}).get(key, 0)
    return n if isinstance(n, int) and not isinstance(n, bool) and n >= 0 else 0


def merge_session_meta(base: str, ours: str, theirs: str) -> Merged:
    """A session's lifecycle fields (``session.json``) when both machines ran turns of it: the
    later side's fields (by ``last_active_at``), with the counts the merged transcript holds.
    The transcript keeps both sides' turns (:func:`merge_appends`), so while neither side reset
    the session since the base, ``turn_count`` (and ``compressions``) is the base's plus the
    turns each side added; after a reset on either side the later side's count stands (the
    turns before a reset do not count); failed flushes (``flush_failures``, never set back) are
    the base's plus each side's new ones. Flushed step digests are kept from both, so no run is
    flushed to memory twice. A file that is not a JSON object falls back to :func:`merge_state`."""
    if theirs == base or theirs == ours:
        return Merged(ours)
    if ours == base:
        return Merged(theirs)
    old, mine, their = _object(base), _object(ours), _object(theirs)
    if old is None or mine is None or their is None:
        return merge_state(base, ours, theirs)
    later = their if _later_is_theirs(mine, their) else mine
    out = dict(later)
    if _count(mine, "resets") == _count(their, "resets") == _count(old, "resets"):
        for key in ("turn_count", "compressions"):
            if key in out:
                out[key] = _count(mine, key) + _count(their, key) - _count(old, key)
    # Failed flushes count over the session's whole life (a reset does not set them back): each
    # side's new ones, whatever either side reset. The later side's alone lost the other's.
    if "flush_failures" in out:
        out["flush_failures"] = max(
            0, _count(mine, "flush_failures") + _count(their, "flush_failures") - _count(old, "flush_failures")
        )
    flushed = [d for side in (later, mine, their) for d in (side.get("flushed") or []) if isinstance(d, str)]
    if "flushed" in out:
        out["flushed"] = list(dict.fromkeys(flushed))
    return Merged(json.dumps(out, ensure_ascii=False, indent=2, sort_keys=True) + "\n")


def merge_json_kind(name: str, base: str | None, ours: str, theirs: str) -> Merged | None:
    """The merge of a session's JSON files by the file's ``name``: a transcript (``.jsonl``) by
    :func:`merge_appends`, ``session.json`` by :func:`merge_session_meta`, another ``.json``
    (agent state) by :func:`merge_state`; None for any other file. Git's line merges would
    make them invalid JSON (both sides' lines of one object). Without a ``base`` (the file is
    new on both sides) the later side's fields stand: counts cannot be added from nothing."""
    if name.endswith(".jsonl"):
        return merge_appends(base or "", ours, theirs)
    if name == "session.json" and base is not None:
        return merge_session_meta(base, ours, theirs)
    if name.endswith(".json"):
        return merge_state(base or "", ours, theirs)
    return None


def callouts_for_conflicts(text: str, theirs_label: str) -> Merged:
    """Turn ``git merge-file --marker-size MARKER_SIZE`` output into text with no markers: our
    side of each conflict in place, theirs below it in a folded callout whose title counts our
    lines (formats/conflicts.py finds and resolves it). A base section (``merge.conflictStyle``
    diff3) is dropped: the callout shows the two versions, not their ancestor. Reports the line
    where each conflict starts."""
    start, base, middle, end = "<" * MARKER_SIZE, "|" * MARKER_SIZE, "=" * MARKER_SIZE, ">" * MARKER_SIZE
    out: list[str] = []
    kept: list[str] = []
    state = ""
    ours: list[str] = []
    theirs: list[str] = []
    after_callout = False  # the last line out is a callout's
    for line in text.splitlines(keepends=True):
        bare = line.rstrip("\r\n")
        if after_callout and state in ("", "ours") and not bare.startswith((start, middle, base, end)):
            if bare.startswith(">"):
                out.append(CALLOUT_END + "\n")  # else this quote would read as more of theirs
            after_callout = False
        if state == "" and bare.startswith(start):
            state, ours = "ours", []
            kept.append(f"line {len(out) + 1}")
        elif state in ("ours", "base") and bare == middle:
            state, theirs = "theirs", []
        elif state == "ours" and bare.startswith(base):
            state = "base"
        elif state == "theirs" and bare.startswith(end):
            if out and not out[-1].endswith("\n"):
                out[-1] += "\n"
            out.append(callout_title(ours, theirs_label) + "\n")
            out.extend(f"> {t.rstrip(chr(13) + chr(10))}\n" if t.strip() else ">\n" for t in theirs)
            state, after_callout = "", True
        elif state == "theirs":
            theirs.append(line)
        elif state == "ours":
            out.append(line)
            ours.append(line)
        elif state == "":
            out.append(line)
    return Merged("".join(out), tuple(kept))
