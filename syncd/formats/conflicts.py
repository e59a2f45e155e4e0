"""What a merge that kept both versions leaves in a file, found and resolved (pure, no I/O).

formats/merging.py never writes a conflict marker; where both machines changed the same thing
differently it keeps both, in one of two shapes:

* **A callout** (pages, MEMORY.md, core blocks, and any file git's own merge left markers in):
  our lines stay in place and theirs follow in a folded Obsidian callout whose title says how
  many lines above are ours::

      Our words.
      > [!conflict]- Both machines changed the line above; origin/main had:
      > Their words.

  The title reads ``the line above``, ``the N lines above`` or ``this: removed here`` (ours has
  no line there); the body is every following line that starts with ``>``. A title over lines
  of ours ends in a comment holding a digest of them (``<!-- ours:<12 hex> -->``, invisible when
  rendered): keeping only theirs deletes those lines, so it is done only when the N lines above
  are still the ones the merge wrote. A count edited by hand, a line added or changed among
  them, or a callout with no digest (written by an older syncd, or before the count was part of
  the title: ``Both machines changed this; ...``) can only be kept as it is, as mine or with
  both versions: which lines are ours is not known any more.
* **A restated fact** (daily logs): the fact keeps our words and id where it is, and their
  version follows later as a fact of its own under a comment naming the fact::

      <!-- syncd merge: both machines changed fact f-1; the other machine's version follows -->
      - [preference] Their words.

Resolving keeps ``mine`` (theirs goes), ``theirs`` (it takes the place of ours; a fact keeps
its id) or ``both`` (both stay as plain content, the marking goes). Callouts inside code fences
are examples in a page, not conflicts.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from ..errors import InvalidInputError, NotFoundError
from .facts import parse_daily_log, parse_fact_line, render_fact_line
from .text import closes_fence, fence_opener, split_lines_keepends

__all__ = [
    "CALLOUT_END",
    "KEEP",
    "Conflict",
    "callout_title",
    "find_conflicts",
    "restated_fact_comment",
    "resolve_conflict",
]

KEEP = ("mine", "theirs", "both")

# Where a callout ends when the page goes on with a quote (a line starting with ">") right below
# it: without it, that quote reads as more of their version, which "keep mine" deleted and "keep
# theirs" unquoted. Invisible when rendered; resolving the callout removes it too.
CALLOUT_END = "<!-- syncd merge: the conflict callout above ends here -->"

_CALLOUT_RE = re.compile(
    r"> \[!conflict\][-+]? Both machines changed "
    r"(?:(?P<one>the line above)|the (?P<many>\d+) lines above|(?P<none>this: removed here)|this); "
    r"(?P<label>.*) had:[ \t]*(?:<!-- ours:(?P<digest>[0-9a-f]{12}) -->[ \t]*)?"
)
_RESTATED_RE = re.compile(
    r"<!-- syncd merge: both machines changed fact (?P<id>\S+); "
    r"the other machine's version follows -->[ \t]*"
)


def _digest(ours: Sequence[str]) -> str:
    """What a callout's title records of our lines (as written, line endings aside)."""
    joined = "\n".join(line.rstrip("\r\n") for line in ours)
    return hashlib.sha256(joined.encode("utf-8", "surrogatepass")).hexdigest()[:12]


def callout_title(ours: Sequence[str], label: str) -> str:
    """The first line of a conflict callout (no ending) over ``ours``, our lines right above
    it: their count, and a digest of them that "keep theirs" checks before deleting them."""
    n = len(ours)
    what = {0: "this: removed here", 1: "the line above"}.get(n, f"the {n} lines above")
    digest = f" <!-- ours:{_digest(ours)} -->" if n else ""
    return f"> [!conflict]- Both machines changed {what}; {label} had:{digest}"


def restated_fact_comment(fact_id: str) -> str:
    """The comment above the other machine's version of fact ``fact_id`` (no ending)."""
    return f"<!-- syncd merge: both machines changed fact {fact_id}; the other machine's version follows -->"


@dataclass(frozen=True)
class Conflict:
    """Both versions of one thing, kept in ``path`` at 1-based ``line`` (the callout's title or
    the restated fact's comment). ``ours`` is None when the file no longer says which lines are
    ours (an older callout); a fact's ``ours`` is empty when our fact is gone from the file."""

    path: str
    line: int
    kind: str  # "callout" or "fact"
    label: str  # who had theirs
    ours: tuple[str, ...] | None
    theirs: tuple[str, ...]
    fact_id: str | None = None

    def to_dict(self) -> dict[str, object]:
        return {
            "path": self.path,
            "line": self.line,
            "kind": self.kind,
            "label": self.label,
            "ours": None if self.ours is None else list(self.ours),
            "theirs": list(self.theirs),
            "fact_id": self.fact_id,
        }

    def describe(self) -> str:
        if self.kind == "fact":
            return f"both machines changed fact {self.fact_id}: both versions kept; keep one"
        return f"both machines changed this: {self.label}'s version kept in a conflict callout; keep one"


@dataclass(frozen=True)
class _Found:
    conflict: Conflict
    start: int  # 0-based first line the resolution may replace (ours of a callout)
    end: int  # 0-based line after the marking (the callout's body, the restated fact)
    ours_line: int | None = None  # a fact's: 0-based line of our fact
    unknown: str = ""  # a callout's: why which lines are ours is not known (its ours is None)


def _bare(line: str) -> str:
    return line.rstrip("\r\n")


def _outside_fences(lines: list[str]) -> list[bool]:
    out, fence = [], None
    for line in lines:
        bare = _bare(line)
        if fence is None:
            fence = fence_opener(bare)
            out.append(fence is None)
        else:
            out.append(False)
            if closes_fence(bare, *fence):
                fence = None
    return out


def _quoted(line: str) -> str:
    bare = _bare(line)
    return bare[2:] if bare.startswith("> ") else bare[1:]


def _callout(lines: list[str], i: int, rel: str) -> _Found | None:
    m = _CALLOUT_RE.fullmatch(_bare(lines[i]))
    if m is None:
        return None
    count = 1 if m["one"] else int(m["many"]) if m["many"] else 0 if m["none"] else None
    unknown = ""
    if count is None:
        unknown = "this callout does not say which lines above are ours"
    elif count > i:
        count, unknown = None, f"the {m['many'] or 1} lines above it are not all there any more"
    elif count and m["digest"] is None:
        count, unknown = None, "this callout does not record which lines above are ours (an older syncd wrote it)"
    elif count and _digest(lines[i - count : i]) != m["digest"]:
        # The count edited by hand, or a line added, removed or changed among ours: deleting
        # "the N lines above" now would delete lines the merge did not write.
        what = "the line" if count == 1 else f"the {count} lines"
        count, unknown = None, f"{what} above it are not the ones the merge wrote (edited since)"
    end = i + 1
    while end < len(lines) and lines[end].startswith(">") and _CALLOUT_RE.fullmatch(_bare(lines[end])) is None:
        end += 1
    ours = None if count is None else tuple(_bare(line) for line in lines[i - count : i])
    theirs = tuple(_quoted(line) for line in lines[i + 1 : end])
    conflict = Conflict(rel, i + 1, "callout", m["label"], ours, theirs)
    closed = end < len(lines) and _bare(lines[end]) == CALLOUT_END
    return _Found(conflict, i - (count or 0), end + closed, unknown=unknown)


def _facts(text: str, lines: list[str], outside: list[bool], rel: str, daily_log: bool) -> list[_Found]:
    if not daily_log or "<!-- syncd merge:" not in text:
        return []
    log = parse_daily_log(text)
    where = {fid: located.line - 1 for located, fid in zip(log.facts(), log.fact_ids(rel), strict=True)}
    found = []
    for i, line in enumerate(lines):
        m = _RESTATED_RE.fullmatch(_bare(line)) if outside[i] else None
        if m is None:
            continue
        theirs = lines[i + 1] if i + 1 < len(lines) and parse_fact_line(lines[i + 1]) is not None else None
        mine = where.get(m["id"])
        conflict = Conflict(
            rel,
            i + 1,
            "fact",
            "the other machine",
            () if mine is None else (_bare(lines[mine]),),
            () if theirs is None else (_bare(theirs),),
            m["id"],
        )
        found.append(_Found(conflict, i, i + 1 + (theirs is not None), mine))
    return found


def _find(text: str, rel: str, daily_log: bool) -> list[_Found]:
    lines = split_lines_keepends(text)
    outside = _outside_fences(lines)
    found = [c for i in range(len(lines)) if outside[i] and (c := _callout(lines, i, rel)) is not None]
    found += _facts(text, lines, outside, rel, daily_log)
    return sorted(found, key=lambda f: f.conflict.line)


def find_conflicts(text: str, rel: str, daily_log: bool = False) -> list[Conflict]:
    """Every conflict kept in ``text`` (the file ``rel``; restated facts are looked for only in a
    daily log), in file order."""
    return [f.conflict for f in _find(text, rel, daily_log)]


def _ending(lines: list[str], i: int) -> str:
    line = lines[min(i, len(lines) - 1)] if lines else "\n"
    return "\r\n" if line.endswith("\r\n") else "\n"


def resolve_conflict(text: str, rel: str, line: int, keep: str, daily_log: bool = False) -> str:
    """``text`` with the conflict at ``line`` resolved by keeping ``mine``, ``theirs`` or
    ``both``. NotFoundError when no conflict is at that line (any more); InvalidInputError for
    another ``keep``, or ``theirs`` where the file no longer says which lines are ours."""
    if keep not in KEEP:
        raise InvalidInputError(f"keep what? {keep!r}: one of {', '.join(KEEP)}")
    found = next((f for f in _find(text, rel, daily_log) if f.conflict.line == line), None)
    if found is None:
        raise NotFoundError(f"no conflict at {rel}:{line} (resolved already, or the file changed: look again)")
    lines = split_lines_keepends(text)
    conflict, nl = found.conflict, _ending(lines, found.conflict.line - 1)
    if conflict.kind == "callout":
        if keep == "theirs" and conflict.ours is None:
            raise InvalidInputError(
                f"{rel}:{line}: {found.unknown}, so keeping theirs could delete lines that are not part of "
                "the conflict; nothing was changed: keep mine or both, or edit the file"
            )
        theirs = [t + nl for t in conflict.theirs]
        head = found.start if keep == "theirs" else conflict.line - 1
        body = [] if keep == "mine" else theirs
        out = lines[:head] + body + lines[found.end :]
    else:
        out = _resolve_fact(lines, found, keep)
    joined = "".join(out)
    if joined and text.endswith(("\n",)) and not joined.endswith("\n"):
        joined += nl
    return joined


def _resolve_fact(lines: list[str], found: _Found, keep: str) -> list[str]:
    conflict, comment, mine = found.conflict, found.conflict.line - 1, found.ours_line
    if keep == "both" or not conflict.theirs:
        return lines[:comment] + lines[comment + 1 :]  # their version stays as a fact of its own
    out = list(lines)
    if keep == "theirs":
        ours_fact = parse_fact_line(lines[mine]) if mine is not None else None
        their_fact = parse_fact_line(conflict.theirs[0])
        if mine is None or ours_fact is None or their_fact is None:
            return lines[:comment] + lines[comment + 1 :]  # ours is gone: theirs stays where it is
        # Their words under our id: the fact stays the same fact, now as they had it.
        ending = lines[mine][len(_bare(lines[mine])) :]
        out[mine] = render_fact_line(replace(their_fact, id=ours_fact.id)) + (ending or "")
    del out[comment : found.end]
    return out
