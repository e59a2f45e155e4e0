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
  its ``last_active_at`` (else ours).
* **Pages, MEMORY.md, core blocks**: git's own line merge (``git merge-file``); where it
  conflicts, :func:`callouts_for_conflicts` keeps our lines in place and shows theirs right below in
  a folded Obsidian callout, ``> [!conflict]-``, which the person resolves by keeping one.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass, replace

from .facts import DailyLog, FactLine, TextLine, parse_daily_log

__all__ = ["CONFLICT_CALLOUT", "MARKER_SIZE", "Merged", "callouts_for_conflicts", "merge_appends", "merge_daily_log",
           "merge_state"]

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


def merge_daily_log(base: str, ours: str, theirs: str, rel: str) -> Merged:
    """Merge three versions of the daily log ``rel`` (its home-relative path: ids of hand-written
    facts derive from it). See the module docstring for the rules."""
    old, mine, their = (_keyed(parse_daily_log(t), rel) for t in (base, ours, theirs))
    old_facts = {k: e for k, e in old if k[0] == "f"}
    their_facts = {k: e for k, e in their if k[0] == "f"}
    mine_keys = {k for k, _ in mine}
    kept_both: list[str] = []
    out: list[FactLine | TextLine] = []
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
            kept_both.append(key[1])
    present = {k for k, _ in mine if k[0] == "f"}
    ours_added = {k: e for k, e in mine if k[0] == "f" and k not in old_facts}
    # Their lines that are new to the base (and facts of the base we deleted that they edited),
    # in their order, in runs; a run whose facts we already have all is only their headings.
    matcher = difflib.SequenceMatcher(None, [k for k, _ in old], [k for k, _ in their], autojunk=False)
    runs: list[list[FactLine | TextLine]] = []
    for tag, _i1, _i2, j1, j2 in matcher.get_opcodes():
        if tag not in ("insert", "replace"):
            continue
        run = []
        for key, element in their[j1:j2]:
            if key[0] == "f":
                if key in present and key not in old_facts and not _same(element, ours_added[key]):
                    # Appended on both sides under one id, with other words: both stay.
                    restated.append((key[1], element))
                    kept_both.append(key[1])
                    continue
                if key in present or (key in old_facts and key not in mine_keys and _same(element, old_facts[key])):
                    continue
                present.add(key)
            run.append(element)
        if any(isinstance(e, FactLine) or (e.text.strip() and not e.text.startswith("#")) for e in run):
            runs.append(run)
    for key, element in their:
        # A fact we deleted that they edited in place (not an insertion: the matcher kept it).
        if (key[0] == "f" and key in old_facts and key not in mine_keys and key not in present
                and not _same(element, old_facts[key])):
            runs.append([element])
            present.add(key)
    for fact_id, element in restated:
        # Without its id, their version reads as a fact of its own (an id derived from its words).
        note = f"<!-- syncd merge: both machines changed fact {fact_id}; the other machine's version follows -->"
        runs.append([TextLine(note), FactLine(replace(element.fact, id=None), element.ending or "\n")])
    tail = [e for run in runs for e in run]
    if tail:
        if out and out[-1].ending == "":
            out[-1] = replace(out[-1], ending="\n")
        tail[-1] = replace(tail[-1], ending=tail[-1].ending or "\n")
    # Rendered as the lines are, not re-read as a DailyLog: were ours to end inside an open code
    # fence, their facts would read as text there, which is still better than refusing the merge.
    return Merged("".join(e.text + e.ending for e in out + tail), tuple(kept_both))


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


def merge_state(base: str, ours: str, theirs: str) -> Merged:
    """Session state (JSON): the side that changed; changed on both, the later ``last_active_at``."""
    if theirs == base or theirs == ours:
        return Merged(ours)
    if ours == base:
        return Merged(theirs)

    def when(text: str) -> str:
        try:
            value = json.loads(text)
        except ValueError:
            return ""
        return str(value.get("last_active_at", "")) if isinstance(value, dict) else ""

    return Merged(theirs if when(theirs) > when(ours) else ours, ("state",))


def callouts_for_conflicts(text: str, theirs_label: str) -> Merged:
    """Turn ``git merge-file --marker-size MARKER_SIZE`` output into text with no markers: our
    side of each conflict in place, theirs below it in a folded callout. Reports the line where
    each conflict starts."""
    start, middle, end = "<" * MARKER_SIZE, "=" * MARKER_SIZE, ">" * MARKER_SIZE
    out: list[str] = []
    kept: list[str] = []
    state, theirs = "", []
    for line in text.splitlines(keepends=True):
        bare = line.rstrip("\r\n")
        if state == "" and bare.startswith(start):
            state = "ours"
            kept.append(f"line {sum(1 for _ in out) + 1}")
        elif state == "ours" and bare == middle:
            state, theirs = "theirs", []
        elif state == "theirs" and bare.startswith(end):
            if out and not out[-1].endswith("\n"):
                out[-1] += "\n"
            out.append(f"{CONFLICT_CALLOUT} Both machines changed this; {theirs_label} had:\n")
            out.extend(f"> {t.rstrip(chr(13) + chr(10))}\n" if t.strip() else ">\n" for t in theirs)
            state = ""
        elif state == "theirs":
            theirs.append(line)
        else:
            out.append(line)
    return Merged("".join(out), tuple(kept))
