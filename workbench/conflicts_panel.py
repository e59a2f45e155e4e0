"""Conflicts: what merges with another machine kept both versions of, each with "keep mine",
"keep theirs" and "keep both".

A home shared through a git remote never holds a conflict marker: where both machines changed one
thing differently the merge keeps both (a callout in a page or block, a restated fact in a daily
log). This panel lists them and resolves one per click through the engine's write path (a
compare-and-swap write, committed with the workbench as its author): if the file changed since
the list was read, nothing is written and the list is read again.
"""

from __future__ import annotations

from collections.abc import Callable

import ipywidgets as w

import syncd

from .data import HomeData
from .ui import Pager, button, clip, esc, note

__all__ = ["ConflictsPanel"]

PER_PAGE = 10
# Lines of each version shown in a row; the file holds them all.
SHOWN_LINES = 6


def _version(lines: tuple[str, ...] | None, css: str) -> str:
    if lines is None:
        return note("(the lines above the callout: which are ours is no longer known)")
    if not lines:
        return note("(nothing)")
    body = "\n".join(clip(line) for line in lines[:SHOWN_LINES]) + ("\n…" if len(lines) > SHOWN_LINES else "")
    return f'<pre class="syncd-file {css}">{esc(body)}</pre>'


class ConflictsPanel(w.VBox):
    """The home's conflicts, a page at a time; ``changed()`` runs after a resolution."""

    def __init__(self, data: HomeData, changed: Callable[[], None] = lambda: None):
        self.data = data
        self.changed = changed
        self.conflicts: list = []
        self.summary = w.HTML()
        self.summary.add_class("syncd-conflicts-summary")
        self.rows = w.VBox()
        self.rows.add_class("syncd-conflicts")
        self.pager = Pager(self._show, PER_PAGE, css="syncd-conflicts-pager")
        self.status = w.HTML()
        self.status.add_class("syncd-conflicts-status")
        super().__init__(
            [w.HTML("<b>Conflicts from shared homes</b>"), self.summary, self.rows, self.pager, self.status]
        )

    def refresh(self) -> None:
        try:
            self.conflicts = self.data.conflicts()
        except syncd.SyncdError as exc:
            self.conflicts = []
            self.summary.value = note(str(exc), "err")
        else:
            n = len(self.conflicts)
            self.summary.value = note(
                f"{n} place{'s' if n != 1 else ''} where both machines changed the same thing: keep one version"
                if n
                else "none: every merge with another machine went through",
                "warn" if n else "ok",
            )
        self.pager.reset(len(self.conflicts), self.pager.page)

    def _row(self, conflict) -> w.VBox:
        where = w.HTML(f"<b>{esc(conflict.path)}:{conflict.line}</b> " + note(conflict.describe()))
        versions = w.HTML(
            '<table class="syncd"><tr><th>mine (this machine)</th><th>theirs (' + esc(conflict.label) + ")</th></tr>"
            f"<tr><td>{_version(conflict.ours, 'syncd-del')}</td><td>{_version(conflict.theirs, 'syncd-add')}</td></tr>"
            "</table>"
        )
        buttons = []
        for keep, label in (("mine", "Keep mine"), ("theirs", "Keep theirs"), ("both", "Keep both")):
            b = button(label, f"syncd-keep-{keep}", disabled=keep == "theirs" and conflict.ours is None)
            b.on_click(lambda _, keep=keep: self.resolve(conflict, keep))
            buttons.append(b)
        box = w.VBox([where, versions, w.HBox(buttons)])
        box.add_class("syncd-box")
        return box

    def _show(self, start: int, stop: int) -> None:
        self.rows.children = [self._row(c) for c in self.conflicts[start:stop]]

    def resolve(self, conflict, keep: str) -> None:
        """Keep ``mine``, ``theirs`` or ``both`` of one conflict (what its buttons do)."""
        try:
            self.data.resolve_conflict(conflict, keep)
        except syncd.ConflictError:
            self.status.value = note(
                f"{conflict.path} changed meanwhile: nothing written; the list is read again.", "warn"
            )
        except syncd.SyncdError as exc:
            self.status.value = note(str(exc), "err")
        else:
            self.status.value = note(f"{conflict.path}:{conflict.line}: kept {keep}; committed.", "ok")
            self.changed()
        self.refresh()
