"""``Workbench(home)``: one widget with tabs to search, browse, edit, audit and check a memory home.

It opens the home read-only (no lock: it runs beside ``syncd watch`` and agents) and keeps up with
it: a cheap change token (a few stats: the index's meta file, git's HEAD and refs) is polled on the
kernel's own event loop, and when it moves, the tab on screen reloads (the others reload when they
are next shown). Polling the files rather than asking the daemon works with and without a daemon,
costs microseconds, and an asyncio task rather than a thread keeps every widget change on the
kernel's thread.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from pathlib import Path
from typing import Any

import ipywidgets as w

import syncd

from .browse_tab import BrowseTab
from .data import HomeData
from .edit_tab import EditTab
from .health_tab import HealthTab
from .history_tab import HistoryTab
from .search_tab import SearchTab
from .ui import STYLE, button, esc, note

__all__ = ["Workbench"]

log = logging.getLogger(__name__)

TITLES = ("Search", "Browse", "Edit", "History", "Health")

# The workbench open on each home in this kernel. Running the notebook's cell again makes a new
# one; the one before is no longer shown, but its polling task and ipywidgets' own registry hold
# it, with its model and its index in memory (~100 MB each) and its polling, for as long as the
# kernel lives. So a new workbench on a home closes the one before.
_OPEN: dict[Path, Workbench] = {}


class _NotNow(w.VBox):
    """The Edit tab's place while the view is of the past."""

    def __init__(self) -> None:
        super().__init__(
            [
                w.HTML(
                    note(
                        "Editing changes the memory as it is now: go back to now (History tab, Back to now) to edit.",
                        "warn",
                    )
                )
            ]
        )
        self.add_class("syncd-not-now")

    def refresh(self) -> None:
        """Nothing to reload."""


class Workbench(w.VBox):
    """The workbench on one home. ``poll`` seconds between change checks (0: only the button)."""

    def __init__(self, home: Path | str, *, poll: float = 2.0, settings: Any = None, embedder: Any = None):
        self.data = HomeData(home, settings=settings, embedder=embedder)
        try:
            self._build(poll)
        except BaseException:
            # What was opened goes now: a kernel keeps the traceback (sys.last_traceback), and
            # with it this half-made workbench, its engine (index, model, cache) and its place
            # in _OPEN, for as long as it lives.
            self.close()
            raise

    def _build(self, poll: float) -> None:
        before = _OPEN.get(self.data.root)
        if before is not None:
            before.close()
        _OPEN[self.data.root] = self
        self.search = SearchTab(self.data, on_edit=self.edit_fact)
        self.browse = BrowseTab(self.data, on_edit=self.edit_fact)
        self.edit = EditTab(self.data, changed=self.refresh)
        self.history = HistoryTab(self.data, changed=self.refresh, travel=self.travel)
        self.health = HealthTab(self.data, changed=self.refresh)
        self.tabs = w.Tab(children=[self.search, self.browse, self.edit, self.history, self.health], titles=TITLES)
        # In place of the Edit tab while the view is of the past: an edit is always of now.
        self.edit_elsewhere = _NotNow()
        self.tabs.add_class("syncd-tabs")
        self._fresh = {0}  # tabs whose content is current; the others reload when shown
        self.tabs.observe(lambda _: self._shown(), "selected_index")
        self.header = w.HTML()
        self.header.add_class("syncd-header")
        self.reload = button("Refresh", "syncd-refresh", icon="refresh", layout=w.Layout(width="100px"))
        self.reload.on_click(lambda _: self.refresh())
        self.live = w.Checkbox(
            value=poll > 0, description="follow changes", indent=False, layout=w.Layout(width="150px")
        )
        self.poll_s = poll or 2.0
        self._token = self.data.change_token()
        self._task: asyncio.Task | None = None
        super().__init__([w.HTML(STYLE), w.HBox([self.header, self.reload, self.live]), self.tabs])
        self.add_class("syncd-workbench")
        self._say("opened")
        if poll > 0:
            self._start_polling()

    # -- refreshing ------------------------------------------------------------------------------

    def _say(self, what: str) -> None:
        when = dt.datetime.now().strftime("%H:%M:%S")
        past = self.data.at_label()
        self.header.value = (
            f"<b>syncd workbench</b> · {esc(self.data.root)} "
            + (f'<span class="syncd-past">{note(f"· NOT NOW: the memory as of {past}", "err")}</span> ' if past else "")
            + note(f"· {what} at {when}")
        )

    def travel(self, at: str | None) -> None:
        """Show Search, Browse and core memory as commit ``at`` left the memory (anything git
        names, or a date/time), or as it is now (None). The header says which past is shown;
        the Edit tab waits until the view is back to now. A bad revision is said on the
        History tab and changes nothing."""
        try:
            sha = self.data.set_at(at)
        except syncd.SyncdError as exc:
            self.history.status.value = note(str(exc), "err")
            return
        children = list(self.tabs.children)
        children[TITLES.index("Edit")] = self.edit if sha is None else self.edit_elsewhere
        if list(self.tabs.children) != children:
            self.tabs.children = children
            self.tabs.titles = TITLES
        self.history.view_now.disabled = sha is None
        self.history.status.value = note("now" if sha is None else f"viewing {self.data.at_label()}", "ok")
        index = self.tabs.selected_index or 0
        self._fresh = {index}
        self._tab(index).refresh()
        self._say("back to now" if sha is None else "travelled")

    def _tab(self, index: int):
        return self.tabs.children[index]

    def _shown(self) -> None:
        index = self.tabs.selected_index
        if index is not None and index not in self._fresh:
            self._tab(index).refresh()
            self._fresh.add(index)

    def refresh(self) -> None:
        """Reload the tab on screen now, the others when next shown."""
        self._token = self.data.change_token()
        index = self.tabs.selected_index or 0
        self._fresh = {index}
        self._tab(index).refresh()
        self._say("refreshed")

    def poll_once(self) -> bool:
        """Refresh if the home changed since the last look; True when it did."""
        token = self.data.change_token()
        if token == self._token:
            return False
        self.refresh()
        self._say("the memory changed; refreshed")
        return True

    def _start_polling(self) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            # Not in a kernel (a script, a test): no loop to run on; the button still works.
            return
        self._task = loop.create_task(self._poll())

    async def _poll(self) -> None:
        while True:
            await asyncio.sleep(self.poll_s)
            if self.live.value:
                try:
                    self.poll_once()
                except Exception:  # one bad refresh must not stop the polling
                    log.exception("workbench refresh failed")

    # -- cross-tab -------------------------------------------------------------------------------

    def edit_fact(self, user: str, fact_id: str) -> None:
        """Open a fact in the Edit tab (the edit buttons of Search and Browse)."""
        self.tabs.selected_index = TITLES.index("Edit")
        self.edit.fact.load_fact(user, fact_id)

    def close(self) -> None:
        # Either may be missing: close() also runs for a workbench whose __init__ failed midway.
        task = getattr(self, "_task", None)
        if task is not None:
            task.cancel()
        data = getattr(self, "data", None)
        if data is not None:
            if _OPEN.get(data.root) is self:
                del _OPEN[data.root]
            data.close()
            del self.data
        super().close()
