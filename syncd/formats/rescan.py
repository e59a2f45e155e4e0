"""Re-scanning a daily log after an edit at the cost of the edit, not of the file.

A log of 100,000 facts takes seconds to parse; an edit changes a few lines of it. The lines an
edit did not touch read the same as before as long as the scan reaches them in the same state,
and just after a section heading (``## HH:MM ...``) nothing is open: no code fence, comment or
text span, only the section itself and whether the title was seen. So :func:`rescan` keeps the
old scan up to the last section heading before the edit, scans from there until a section
heading after the edit that the old scan also read as one, in the same title state, and keeps
the old scan from there on (its line numbers and fact indexes moved by what the edit added or
removed). Where no such heading exists it scans to the end; the result is always what
:func:`~.log_scan.scan_lines` would give (a property test holds the two equal, through
``reparse_daily_log``).
"""

from __future__ import annotations

from bisect import bisect_right

from .log_scan import LocatedFact, Resume, Scan, Section, TextSpan, scan_lines
from .text import shared_ends, split_lines

__all__ = ["rescan"]


def _line(item: LocatedFact | Section | TextSpan) -> int:
    return item.line


def _count_lines(text: str, start: int, end: int) -> int:
    """Lines of ``text[start:end]`` as split_lines counts them (``start`` starts a line; ``end``
    starts one too, or is the end of the text)."""
    n = text.count("\n", start, end)
    return n + 1 if end > start and text[end - 1] != "\n" else n


def rescan(text: str, old_text: str, old: Scan) -> Scan:
    """``scan_lines(split_lines(text))``, given that ``old`` is the scan of ``old_text`` (an
    earlier version of the same file): only the lines around what changed are read again."""
    info = old
    if text == old_text:
        return info
    head, tail = shared_ends(old_text, text)
    shared_head = old_text.count("\n", 0, head)  # whole lines the two texts start with
    # A first line "---" not closed: an edit further down may close it and make all of that
    # frontmatter. Rare enough to read again whole.
    open_frontmatter = info.frontmatter == 0 and info.elements and "---" in info.elements[0].text
    at = bisect_right(info.sections, shared_head, key=_line)
    if at == 0 or open_frontmatter:
        return scan_lines(split_lines(text))
    restart = info.sections[at - 1]
    k = restart.line
    titled = info.title_line is not None and info.title_line < k
    resume = Resume(
        k,
        bisect_right(info.facts, k, key=_line),
        restart,
        info.title_line if titled else None,
        info.date if titled else None,
    )
    start = head  # the offset of line k, found walking back from the head's last line
    for _ in range(shared_head - k):
        start = old_text.rfind("\n", 0, start - 1) + 1
    old_tail_line = shared_head + _count_lines(old_text, head, len(old_text) - tail)
    new_tail_line = shared_head + _count_lines(text, head, len(text) - tail)
    shift = new_tail_line - old_tail_line
    # Headings of the old tail, in order: each is a place where the two parses may meet again.
    # Each try scans from the restart, so tries at least double in reach, and none reaches past
    # half of what is left (an edit that opens a fence to the end of the file meets nothing): all
    # tries together cost at most one scan to the end.
    end, end_line, reach = len(text) - tail, new_tail_line, 0
    for c in range(bisect_right(info.sections, old_tail_line, key=_line), len(info.sections)):
        meet = info.sections[c]
        new_line = meet.line + shift
        if new_line - k < reach:
            continue
        if 2 * (new_line - k) > len(info.elements) + shift - k:
            break
        while end_line < new_line:
            end = text.find("\n", end) + 1 or len(text)
            end_line += 1
        scan = scan_lines(split_lines(text[start:end]), resume)
        # The meeting heading read as one here too, and the title was seen before it in both.
        heading_here = bool(scan.sections) and scan.sections[-1].line == new_line
        titled_here = info.title_line is not None and info.title_line < meet.line
        if heading_here and (scan.title_line is not None) == titled_here:
            return _join(info, resume, at, scan, c, shift)
        reach = 2 * (new_line - k)
    scan = scan_lines(split_lines(text[start:]), resume)
    return Scan(
        info.elements[:k] + scan.elements,
        info.facts[: resume.facts] + scan.facts,
        info.sections[:at] + scan.sections,
        info.spans[: bisect_right(info.spans, k, key=_line)] + scan.spans,
        scan.date,
        scan.closer,
        scan.title_line,
        info.frontmatter,
    )


def _moved(item, shift: int, fact_shift: int = 0, section: Section | None = None):
    """``item`` (a Section, TextSpan or LocatedFact of the old parse) ``shift`` lines further
    down, ``fact_shift`` facts further on, in ``section`` (its own moved heading). Built by hand,
    as the scan builds them: the dataclass constructor would cost more than the parse saved."""
    new = object.__new__(type(item))
    d = new.__dict__
    d.update(item.__dict__)
    d["line"] += shift
    if "index" in d:
        d["index"] += fact_shift
    if "section" in d:
        d["section"] = section
    return new


def _join(info: Scan, resume: Resume, at: int, scan: Scan, c: int, shift: int) -> Scan:
    """The old parse up to the restart heading (``info.sections[at - 1]``), the new scan up to
    and with the meeting heading (``info.sections[c]``, ``shift`` lines further in the new text),
    then the old parse after that heading, moved by ``shift`` lines."""
    meet = info.sections[c]
    old_before = bisect_right(info.facts, meet.line, key=_line)
    fact_shift = resume.facts + len(scan.facts) - old_before
    facts = info.facts[old_before:]
    sections = info.sections[c:]
    spans = info.spans[bisect_right(info.spans, meet.line, key=_line) :]
    if shift:
        later = [_moved(s, shift) for s in info.sections[c + 1 :]]
        sections = (scan.sections[-1], *later)
        moved = {id(None): None, id(meet): scan.sections[-1]}
        moved.update(zip(map(id, info.sections[c + 1 :]), later))
        spans = tuple(_moved(s, shift, section=moved[id(s.section)]) for s in spans)
        facts = tuple(_moved(f, shift, fact_shift, moved[id(f.section)]) for f in facts)
    elif fact_shift:
        facts = tuple(_moved(f, 0, fact_shift, f.section) for f in facts)
    title_line, date = scan.title_line, scan.date
    if title_line is None and info.title_line is not None:  # the title comes after the edit
        title_line, date = info.title_line + shift, info.date
    return Scan(
        info.elements[: resume.line] + scan.elements + info.elements[meet.line :],
        info.facts[: resume.facts] + scan.facts + facts,
        info.sections[:at] + scan.sections[:-1] + sections,
        info.spans[: bisect_right(info.spans, resume.line, key=_line)] + scan.spans + spans,
        date,
        info.closer,
        title_line,
        info.frontmatter,
    )
