"""Daily logs (``memory/users/<user>/YYYY-MM-DD.md``): the model, its reads and its edits.

A daily log is a person-editable file, so the model is the file itself: an ordered tuple of lines,
each a :class:`FactLine` or a verbatim :class:`TextLine` with its own line ending (``'\n'``,
``'\r\n'``, or ``''`` for a missing final newline). Rendering an unchanged parse reproduces the
input byte for byte; rewriting one fact rewrites only that line. What a line is, is decided by
log_scan.py (where in a file a fact may be) and fact_grammar.py (what one fact line says).

Ids: an explicit ``id:`` wins; a hand-written fact gets :func:`derive_fact_id` of the file's
relative path, its normalised content (NFC, casefolded, whitespace collapsed) and its occurrence
number (0 for the first id-less fact with that content in the file, 1 for the next...). Edits
elsewhere never change it; editing the fact does, rightly: it is then another fact. A repeated
explicit id (a copy-pasted line) counts once; later copies get derived ids, so ids stay unique.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import cast

from ..errors import NotFoundError
from .fact_grammar import Fact, render_fact_line
from .fact_ids import FactIdMemo, derive_id, normalise_content
from .log_scan import Element, FactLine, LocatedFact, Scan, Section, TextLine, TextSpan, render_elements, scan_lines
from .rescan import rescan
from .text import BOM, opens_frontmatter, split_lines

__all__ = ["DailyLog", "parse_daily_log", "render_daily_log", "reparse_daily_log"]

_object_new = object.__new__


@dataclass(frozen=True)
class DailyLog:
    """A daily log file as an ordered tuple of lines.

    Built by :func:`parse_daily_log` or by hand; a hand-built log is checked on construction (its
    rendering must read back as the same elements, so a TextLine that is really a fact, a fact
    inside a code fence or a misplaced empty ending raise ValueError).
    """

    elements: tuple[Element, ...] = ()
    # What the parser learned about the lines (facts, sections, spans, date); derived, not compared.
    _info: Scan = field(init=False, repr=False, compare=False, default=None)  # type: ignore[assignment]

    def __post_init__(self) -> None:
        elements = tuple(self.elements)
        for e in elements:
            if not isinstance(e, (FactLine, TextLine)):
                raise ValueError(f"daily log elements are FactLine or TextLine, not {e!r}")
        self._read_back(elements, scan_lines(split_lines(render_elements(elements))))

    def _read_back(self, elements: tuple[Element, ...], scan: Scan) -> None:
        """Become ``elements`` if ``scan`` (the parse of their rendering) reads them back."""
        if scan.elements != elements:
            pairs = zip(elements, scan.elements, strict=False)
            i = next((i for i, (a, b) in enumerate(pairs) if a != b), len(scan.elements))
            raise ValueError(
                f"line {i + 1} would not read back as given (a fact written as a TextLine, a fact "
                "inside a code fence, or a line ending missing before the last line?)"
            )
        object.__setattr__(self, "elements", elements)
        object.__setattr__(self, "_info", scan)

    def _edited(self, elements: tuple[Element, ...]) -> DailyLog:
        """A log of ``elements``, an edit of this one, checked as the constructor checks but read
        again only around what changed (rescan.py): a one-fact edit of a big log costs the fact."""
        log = _object_new(DailyLog)
        log._read_back(elements, rescan(render_elements(elements), render_elements(self.elements), self._info))
        return log

    @property
    def date(self) -> str | None:
        """``YYYY-MM-DD`` from the title (the first H1), or None."""
        return self._info.date

    @property
    def sections(self) -> tuple[Section, ...]:
        """Every ``## HH:MM ...`` section heading, in file order."""
        return self._info.sections

    @property
    def newline(self) -> str:
        """The line ending new lines should use: the file's first one, else ``'\\n'``."""
        return next((e.ending for e in self.elements if e.ending), "\n")

    @property
    def closer(self) -> str | None:
        """The line that closes a code fence or HTML comment left open at the end, or None: what
        must be written before anything appended to the log can read as facts."""
        return self._info.closer

    def facts(self) -> tuple[LocatedFact, ...]:
        """Every fact with its line, section and index, in file order."""
        return self._info.facts

    def text_spans(self) -> tuple[TextSpan, ...]:
        """Free text for full-text search: runs of non-blank non-fact lines.

        Frontmatter, the dated title and section headings are structure, not text, and are left
        out; code fence contents are included (and kept in one span across blank lines).
        """
        return self._info.spans

    def fact_ids(self, rel_path: str, memo: FactIdMemo | None = None) -> tuple[str, ...]:
        """The effective id of each fact (aligned with :meth:`facts`); see the module docstring.
        With ``memo`` (of this ``rel_path``) what an earlier read derived is looked up, not
        derived again; the memo then holds what this read used."""
        ids = []
        claimed: set[str] = set()
        seen: dict[str, int] = {}
        known = memo if memo is not None and memo.rel_path == rel_path else FactIdMemo(rel_path)
        norms: dict[str, str] = {}
        derived: dict[tuple[str, int], str] = {}
        for located in self._info.facts:
            fact = located.fact
            if fact.id is not None and fact.id not in claimed:
                claimed.add(fact.id)
                ids.append(fact.id)
            else:
                content = fact.content
                norm = norms.get(content) or known.norms.get(content) or normalise_content(content)
                norms[content] = norm
                seen[norm] = n = seen.get(norm, -1) + 1
                key = (norm, n)
                derived[key] = fact_id = known.ids.get(key) or derive_id(rel_path, norm, n)
                ids.append(fact_id)
        if memo is not None:
            memo.rel_path, memo.norms, memo.ids = rel_path, norms, derived
        return tuple(ids)

    def _find(self, key: int | str, rel_path: str | None) -> LocatedFact:
        facts = self._info.facts
        if isinstance(key, int) and not isinstance(key, bool):
            if 0 <= key < len(facts):
                return facts[key]
        elif isinstance(key, str):
            ids = self.fact_ids(rel_path) if rel_path is not None else [f.fact.id for f in facts]
            if key in ids:
                return facts[ids.index(key)]
        raise NotFoundError(f"no fact {key!r} in this daily log")

    def replace_fact(self, key: int | str, new_fact: Fact, *, rel_path: str | None = None) -> DailyLog:
        """A log with one fact replaced; only its line changes (and keeps its line ending).

        ``key`` is a fact index (from :meth:`facts`) or an id: an explicit id, or with
        ``rel_path`` any effective id from :meth:`fact_ids`. Raises NotFoundError.
        """
        if not isinstance(new_fact, Fact):
            raise ValueError(f"replace_fact needs a Fact, not {type(new_fact).__name__}")
        i = self._find(key, rel_path).line - 1
        old = cast(FactLine, self.elements[i])  # the line a located fact is on is its FactLine
        if old.fact == new_fact:
            return self
        # A byte order mark on the first line belongs to the file, not to the fact: keep it.
        raw = BOM + render_fact_line(new_fact) if old.text.startswith(BOM) else None
        return self._edited((*self.elements[:i], FactLine(new_fact, old.ending, raw), *self.elements[i + 1 :]))

    def remove_fact(self, key: int | str, *, rel_path: str | None = None) -> DailyLog:
        """A log without one fact's line (same ``key`` rules as :meth:`replace_fact`).

        The first line of a file is left empty rather than removed when removing it would change
        what the rest of the file means or drop a byte that is not the fact's: when the line after
        it is ``---`` (as the first line that would open YAML frontmatter, and every fact down to
        the next ``---`` would become YAML), and when it starts with a byte order mark (the file's,
        kept on the empty line).
        """
        i = self._find(key, rel_path).line - 1
        if i == 0:
            first = self.elements[0]
            bom = BOM if first.text.startswith(BOM) else ""
            if bom or (len(self.elements) > 1 and opens_frontmatter(self.elements[1].text)):
                return self._edited((TextLine(bom, first.ending), *self.elements[1:]))
        return self._edited(self.elements[:i] + self.elements[i + 1 :])


def _from_scan(scan: Scan) -> DailyLog:
    """The log ``scan`` read (a scan reads back its own elements by construction: not checked)."""
    log = _object_new(DailyLog)
    object.__setattr__(log, "elements", scan.elements)
    object.__setattr__(log, "_info", scan)
    return log


def parse_daily_log(text: str) -> DailyLog:
    """Parse a daily log. Never raises: anything the grammar does not claim is a TextLine."""
    return _from_scan(scan_lines(split_lines(text)))


def reparse_daily_log(text: str, old_text: str, old: DailyLog) -> DailyLog:
    """``parse_daily_log(text)``, given that ``old`` is the parse of ``old_text`` (an earlier
    version of the same file): only the lines around what changed are read again (rescan.py)."""
    if text == old_text:
        return old
    return _from_scan(rescan(text, old_text, old._info))


def render_daily_log(log: DailyLog) -> str:
    """The file text; byte-identical to the parsed input for every line not replaced."""
    return render_elements(log.elements)
