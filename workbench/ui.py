"""Widget pieces every tab uses: a pager (no widget ever holds more than one page of rows), a
paged pick list, small HTML helpers and the workbench's stylesheet."""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Sequence
from typing import Any

import ipywidgets as w

__all__ = ["Pager", "PagedList", "esc", "visible", "note", "table", "clip", "STYLE", "button"]

PAGE = 20
# Characters of one fact or line shown in a list: a blob pasted into a log as one line made a
# page of Browse a megabyte and one commit's History several (the whole text is in the file and
# in the Edit tab).
CLIP = 500

STYLE = """
<style>
.syncd-workbench { font-family: var(--jp-ui-font-family, sans-serif); }
.syncd-workbench table.syncd { border-collapse: collapse; width: 100%; font-size: 12px; }
.syncd-workbench table.syncd th { text-align: left; border-bottom: 1px solid #ccc; padding: 2px 6px; color: #555; }
.syncd-workbench table.syncd td { border-bottom: 1px solid #eee; padding: 2px 6px; vertical-align: top; }
.syncd-workbench .syncd-cat { background: #eef3fb; color: #234; border-radius: 3px; padding: 0 4px; font-size: 11px; }
.syncd-workbench .syncd-muted { color: #777; font-size: 11px; }
.syncd-workbench .syncd-ok { color: #176f2c; }
.syncd-workbench .syncd-warn { color: #9a6700; }
.syncd-workbench .syncd-err { color: #b42318; }
.syncd-workbench .syncd-bar { display: inline-flex; width: 150px; height: 10px; background: #f1f1f1; vertical-align: middle; }
.syncd-workbench .syncd-bar span { display: inline-block; height: 10px; }
.syncd-workbench pre.syncd-file { font-size: 12px; background: #fafafa; border: 1px solid #eee; padding: 4px; margin: 2px 0;
  white-space: pre-wrap; }
.syncd-workbench pre.syncd-file b { background: #fff3bf; font-weight: normal; display: inline-block; width: 100%; }
.syncd-workbench .syncd-add { color: #176f2c; } .syncd-workbench .syncd-del { color: #b42318; }
.syncd-workbench .syncd-box { border: 1px solid #ddd; border-radius: 4px; padding: 6px 8px; margin: 4px 0; }
.syncd-workbench .syncd-winner { background: #e6f4ea; }
</style>
"""


# Characters a hand-edited or merged file may hold that would not show as themselves: control
# characters (a terminal escape, a NUL), which a browser drops unseen, and the bidirectional
# overrides, which reorder what follows ("Trojan Source") so an audit reads other words than the
# file holds. They are shown by their code point instead. Tab and newline stay (pre blocks).
_UNSEEN = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def visible(text: str) -> str:
    """``text`` with each character that would not show as itself named by its code point."""
    return _UNSEEN.sub(lambda m: f"⟨U+{ord(m.group()):04X}⟩", text)


def esc(value: Any) -> str:
    """``value`` as HTML text: escaped, and any character that would not show as itself named."""
    return visible(html.escape("" if value is None else str(value)))


def clip(text: str, width: int = CLIP) -> str:
    """``text`` cut to ``width`` characters, an ellipsis saying so."""
    return text if len(text) <= width else text[: width - 1] + "…"


def note(text: str, kind: str = "muted") -> str:
    """One line of status, coloured by kind (ok, warn, err, muted); ``text`` is escaped."""
    return f'<span class="syncd-{kind}">{esc(text)}</span>'


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """An HTML table; cells are HTML already (escape what comes from files with ``esc``)."""
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows)
    return f'<table class="syncd"><tr>{head}</tr>{body}</table>'


def button(description: str, css: str, **kwargs: Any) -> w.Button:
    b = w.Button(description=description, **kwargs)
    b.add_class(css)
    return b


class Pager(w.HBox):
    """‹ page n of m › for a list of ``total`` rows, calling ``on_page(start, stop)`` on a move."""

    def __init__(self, on_page: Callable[[int, int], None], size: int = PAGE, css: str = "syncd-pager"):
        self.size = size
        self.page = 0
        self.total = 0
        self._on_page = on_page
        self.prev = button("‹", f"{css}-prev", layout=w.Layout(width="32px"))
        self.next = button("›", f"{css}-next", layout=w.Layout(width="32px"))
        self.label = w.HTML()
        self.prev.on_click(lambda _: self.go(self.page - 1))
        self.next.on_click(lambda _: self.go(self.page + 1))
        super().__init__([self.prev, self.label, self.next])
        self.add_class(css)

    @property
    def pages(self) -> int:
        return max((self.total + self.size - 1) // self.size, 1)

    def reset(self, total: int, page: int = 0) -> None:
        self.total = total
        self.go(page)

    def go(self, page: int) -> None:
        self.page = min(max(page, 0), self.pages - 1)
        start = self.page * self.size
        stop = min(start + self.size, self.total)
        self.layout.visibility = "visible" if self.total > self.size else "hidden"
        self.prev.disabled = self.page == 0
        self.next.disabled = self.page >= self.pages - 1
        shown = f"{start + 1}-{stop} of {self.total}" if self.total else "none"
        self.label.value = note(f" {shown} ")
        self._on_page(start, stop)


class PagedList(w.VBox):
    """A pick list over any number of items, one page of options at a time, with a filter box.
    ``value`` is the picked item (None when nothing is); ``on_pick(item)`` is called on a pick."""

    def __init__(
        self,
        label: Callable[[Any], str] = str,
        on_pick: Callable[[Any], None] | None = None,
        size: int = PAGE,
        rows: int = 10,
        css: str = "syncd-list",
        filter_placeholder: str | None = "filter",
        width: str = "220px",
    ):
        self.items: list[Any] = []
        self.shown: list[Any] = []
        self._page: list[Any] = []
        self._label = label
        self._on_pick = on_pick
        self.select = w.Select(options=[], rows=rows, layout=w.Layout(width=width))
        self.select.add_class(f"{css}-select")
        self.filter = w.Text(placeholder=filter_placeholder or "", layout=w.Layout(width=width))
        self.filter.add_class(f"{css}-filter")
        self.pager = Pager(self._show, size, css=f"{css}-pager")
        self._quiet = False
        self.select.observe(self._picked, "value")
        self.filter.observe(lambda _: self._refilter(self.value), "value")
        parts = [self.filter] if filter_placeholder is not None else []
        super().__init__([*parts, self.select, self.pager])
        self.add_class(css)

    @property
    def value(self) -> Any:
        index = self.select.index
        return None if index is None or index >= len(self._page) else self._page[index]

    def set_items(self, items: Sequence[Any], keep: bool = True) -> None:
        """Replace the items; the current pick stays picked when it is still there (``keep``)."""
        current = self.value if keep else None
        self.items = list(items)
        self._refilter(current)

    def _refilter(self, current: Any = None) -> None:
        needle = self.filter.value.strip().lower()
        self.shown = [i for i in self.items if needle in self._label(i).lower()] if needle else self.items
        page = self.shown.index(current) // self.pager.size if current in self.shown else 0
        self.pager.reset(len(self.shown), page)
        if current in self._page:
            # Still the pick, not a new one: no pick event, or whatever hangs off it (the day
            # shown under a user, its page of facts) starts over at every refresh.
            self.pick(current, quiet=True)

    def _show(self, start: int, stop: int) -> None:
        self._page = self.shown[start:stop]
        quiet, self._quiet = self._quiet, True  # restored, not cleared: pick() turns pages quietly too
        try:
            # Option labels are text, not HTML, but a commit subject or a file name can still hold
            # a control character or a bidirectional override.
            self.select.options = [(visible(self._label(item)), i) for i, item in enumerate(self._page)]
            self.select.value = None
        finally:
            self._quiet = quiet

    def pick(self, item: Any, quiet: bool = False) -> None:
        """Pick ``item`` (turning to its page), as a click would; ``quiet``: without calling
        ``on_pick`` (the caller does what follows itself)."""
        if item not in self.shown:
            return
        before, self._quiet = self._quiet, self._quiet or quiet
        try:
            self.pager.go(self.shown.index(item) // self.pager.size)
            self.select.value = self._page.index(item)
        finally:
            self._quiet = before

    def _picked(self, change: dict) -> None:
        if not self._quiet and self._on_pick is not None and change["new"] is not None:
            self._on_pick(self.value)
