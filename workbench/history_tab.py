"""History: commits with their trailers, filtered by user or path; a commit's effect as facts
added and removed; revert with a confirmation, after which the index follows; and the time
control: view the whole workbench (search, browse, core memory) as a commit or a date left the
memory, then come back to now."""

from __future__ import annotations

from collections.abc import Callable

import ipywidgets as w

import syncd

from .data import HomeData
from .ui import PagedList, button, clip, esc, note, table

__all__ = ["HistoryTab"]

ALL_USERS = "(all users)"
COMMITS_PER_PAGE = 15
# git log is asked for this many commits at a time; "more" asks for the next batch.
BATCH = 200


def _label(entry) -> str:
    return f"{entry.sha[:8]}  {entry.date[:16].replace('T', ' ')}  {entry.author}: {entry.subject}"


class HistoryTab(w.VBox):
    def __init__(
        self,
        data: HomeData,
        changed: Callable[[], None] = lambda: None,
        travel: Callable[[str | None], None] = lambda at: None,
    ):
        self.data = data
        self.changed = changed
        self.travel = travel
        self.limit = BATCH
        self.entries: list = []
        self._shown_filter: str | None = None  # the filter the list was last loaded for
        self._asked = None  # the entry "Revert this commit…" asked about: what the confirmation reverts
        self.user = w.Dropdown(description="user", options=[ALL_USERS], layout=w.Layout(width="220px"))
        self.path = w.Text(
            description="path", placeholder="a file or folder", continuous_update=False, layout=w.Layout(width="320px")
        )
        self.path.add_class("syncd-history-path")
        self.reload = button("Show", "syncd-history-show", icon="refresh")
        self.more = button("Older…", "syncd-history-more", layout=w.Layout(display="none"))
        self.commits = PagedList(
            _label,
            on_pick=lambda _: self._picked(),
            size=COMMITS_PER_PAGE,
            rows=COMMITS_PER_PAGE,
            css="syncd-commits",
            filter_placeholder="filter by text",
            width="560px",
        )
        self.detail = w.HTML(layout=w.Layout(width="100%"))
        self.detail.add_class("syncd-commit-detail")
        self.revert = button(
            "Revert this commit…",
            "syncd-revert",
            button_style="warning",
            icon="undo",
            disabled=True,
            layout=w.Layout(width="auto"),
        )
        self.confirm = button(
            "Yes, revert it", "syncd-revert-confirm", button_style="danger", layout=w.Layout(display="none")
        )
        self.cancel = button("Cancel", "syncd-revert-cancel", layout=w.Layout(display="none"))
        self.status = w.HTML()
        self.status.add_class("syncd-history-status")
        self.when = w.Text(
            description="as of",
            placeholder="the picked commit, or HEAD~N, a tag, 2026-11-20T14:00",
            layout=w.Layout(width="420px"),
        )
        self.when.add_class("syncd-when")
        self.view_then = button(
            "View the memory as of then", "syncd-view-at", icon="clock-o", layout=w.Layout(width="auto")
        )
        self.view_now = button(
            "Back to now", "syncd-view-now", icon="step-forward", disabled=True, layout=w.Layout(width="auto")
        )
        self.view_then.on_click(lambda _: self._travel())
        self.view_now.on_click(lambda _: self.travel(None))
        self.reload.on_click(lambda _: self.refresh())
        self.user.observe(lambda _: self.refresh(), "value")
        self.path.observe(lambda _: self.refresh(), "value")
        self.more.on_click(lambda _: self._older())
        self.revert.on_click(lambda _: self._ask())
        self.cancel.on_click(lambda _: self._hide_confirm())
        self.confirm.on_click(lambda _: self.do_revert())
        super().__init__(
            [
                w.HBox([self.user, self.path, self.reload]),
                w.HBox([w.VBox([self.commits, self.more], layout=w.Layout(min_width="570px")), self.detail]),
                w.HBox([self.revert, self.confirm, self.cancel]),
                w.HBox([self.when, self.view_then, self.view_now]),
                self.status,
            ]
        )

    def _travel(self) -> None:
        """The revision typed in, else the commit picked in the list."""
        typed = self.when.value.strip()
        picked = self.commits.value
        if not typed and picked is None:
            self.status.value = note("pick a commit, or type a revision or a date", "warn")
            return
        self.travel(typed or picked.sha)

    def _filter(self) -> str | None:
        path = self.path.value.strip()
        if path:
            return path
        if self.user.value not in (None, ALL_USERS):
            return f"memory/users/{self.user.value}"
        return None

    def refresh(self) -> None:
        users = [ALL_USERS, *self.data.users()]
        if list(self.user.options) != users:
            current = self.user.value
            self.user.options = users
            self.user.value = current if current in users else ALL_USERS
        # Why the list is empty goes where the list's commit would show, not on the status line:
        # there it would outlive the filter it was about (the next list loads without a word).
        error = None
        try:
            self.entries = self.data.log(self._filter(), self.limit)
        except syncd.SyncdError as exc:
            self.entries = []
            error = str(exc)
        self.more.layout.display = None if len(self.entries) >= self.limit else "none"
        self.commits.set_items(self.entries)
        # Another filter is another list: its newest commit is shown, not the one picked before
        # (which the new list may hold too, a commit touching several users' files).
        refiltered = self._shown_filter != self._filter()
        self._shown_filter = self._filter()
        if (self.commits.value is None or refiltered) and self.entries:
            self.commits.pick(self.entries[0], quiet=True)  # the list's own pick, not the person's
            self.show()
        elif self.commits.value is None:
            self.detail.value = (
                note(error, "err")
                if error
                else note("no commits" + (f" touching {self._filter()}" if self._filter() else ""))
            )
            self.revert.disabled = True

    def _older(self) -> None:
        self.limit += BATCH
        self.refresh()

    def _picked(self) -> None:
        """A commit the person picked: the one "View the memory as of then" goes to, whatever
        was typed before (it went to the typed revision, not the commit on screen)."""
        self.when.value = ""
        self.show()

    def show(self) -> None:
        entry = self.commits.value
        self._hide_confirm()
        if entry is None:
            return
        try:
            effect = self.data.effect(entry.sha)
        except syncd.SyncdError as exc:
            # A list read before the person rewrote history (a reset, then gc) names commits gone.
            self.detail.value = note(f"{exc} (Show reads the list again)", "err")
            self.revert.disabled = True
            return
        trailers = (
            table(["trailer", "value"], [(esc(k), esc(v)) for k, v in entry.trailers.items()]) if entry.trailers else ""
        )
        files = "<br>".join(esc(f) for f in entry.files[:20])
        if len(entry.files) > 20:
            files += "<br>" + note(f"… and {len(entry.files) - 20} more files")
        changes = [("+", c, "syncd-add") for c in effect.added] + [("−", c, "syncd-del") for c in effect.removed]
        facts = "".join(
            f'<div class="{css}">{sign} <span class="syncd-cat">{esc(c.fact.category)}</span> {esc(clip(c.fact.content))} '
            f'<span class="syncd-muted">{esc(c.path)}</span></div>'
            for sign, c, css in changes
        )
        shown = len(effect.added) + len(effect.removed)
        more = effect.added_total + effect.removed_total - shown
        self.detail.value = (
            f'<div class="syncd-box"><b>{esc(entry.subject)}</b><br>'
            + note(f"{entry.sha}  {entry.date}  {entry.author} <{entry.email}>")
            + trailers
            + f"<br><b>Facts</b> +{effect.added_total} −{effect.removed_total}"
            + facts
            + (note(f"… and {more} more") if more > 0 else "")
            + f"<br><b>Files</b><br>{files}</div>"
        )
        self.revert.disabled = False

    def _ask(self) -> None:
        entry = self.commits.value
        if entry is None:
            return
        self._asked = entry
        self.confirm.layout.display = None
        self.cancel.layout.display = None
        self.status.value = note(
            f"Revert {entry.sha[:10]} “{entry.subject}”? A new commit undoes it; the index follows.", "warn"
        )

    def _hide_confirm(self) -> None:
        self._asked = None
        self.confirm.layout.display = "none"
        self.cancel.layout.display = "none"

    def do_revert(self) -> None:
        # The commit asked about, once: a double click's second "Yes" came when the list had
        # moved on to the newest commit, the revert itself, and reverted that.
        entry = self._asked
        self._hide_confirm()
        if entry is None:
            return
        try:
            sha = self.data.revert(entry.sha)
        except syncd.SyncdError as exc:
            self.status.value = note(str(exc), "err")
            return
        self.status.value = note(f"Reverted {entry.sha[:10]} as {sha[:10]}; the index follows.", "ok")
        self.commits.set_items([], keep=False)
        self.refresh()
        self.changed()
