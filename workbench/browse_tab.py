"""Browse: users → daily logs by date → facts; core blocks per scope with the one in effect
(chat > user > global); vault pages with their links and backlinks."""

from __future__ import annotations

from collections.abc import Callable

import ipywidgets as w

from .data import SCOPES, HomeData
from .ui import PagedList, Pager, button, clip, esc, note, table

__all__ = ["BrowseTab"]

NO_CHAT = "(no chat)"
FACTS_PER_PAGE = 20


class FactsView(w.VBox):
    """Pick a user, then a day; the day's facts a page at a time, each with an edit button."""

    def __init__(self, data: HomeData, on_edit: Callable[[str, str], None] | None):
        self.data = data
        self.on_edit = on_edit
        self.facts: list = []
        self.facts_user: str | None = None  # whose facts are shown (the pick may have moved on)
        self.users = PagedList(on_pick=lambda _: self._user_picked(), css="syncd-users", width="180px")
        self.dates = PagedList(on_pick=lambda _: self._date_picked(), css="syncd-dates", width="150px")
        self.title = w.HTML()
        self.rows = w.VBox()
        self.rows.add_class("syncd-facts")
        self.pager = Pager(self._show, FACTS_PER_PAGE, css="syncd-facts-pager")
        right = w.VBox([self.title, self.rows, self.pager], layout=w.Layout(width="100%"))
        super().__init__(
            [
                w.HBox(
                    [
                        w.VBox([w.HTML("<b>Users</b>"), self.users]),
                        w.VBox([w.HTML("<b>Daily logs</b>"), self.dates]),
                        right,
                    ]
                )
            ]
        )

    def refresh(self) -> None:
        self.users.set_items(self.data.users())
        if self.users.value is None and self.users.items:
            self.users.pick(self.users.items[0])
        elif self.users.value is not None:
            self._user_picked(keep=True)

    def _user_picked(self, keep: bool = False) -> None:
        user = self.users.value
        self.dates.set_items(self.data.dates(user) if user else [], keep=keep)
        if self.dates.value is None and self.dates.items:
            self.dates.pick(self.dates.items[0])
        elif self.dates.value is not None:
            self._date_picked(keep=True)
        else:
            self.facts = []
            self.title.value = note("no daily logs yet")
            self.pager.reset(0)

    def _date_picked(self, keep: bool = False) -> None:
        user, date = self.users.value, self.dates.value
        self.facts = self.data.day_facts(user, date) if user and date else []
        self.facts_user = user
        path = self.facts[0].path if self.facts else ""
        self.title.value = f"<b>{esc(user)} · {esc(date)}</b> " + note(f"{len(self.facts)} facts  {path}")
        self.pager.reset(len(self.facts), self.pager.page if keep else 0)

    def _row(self, stored) -> w.HBox:
        f = stored.fact
        edit = button("edit", "syncd-fact-edit", layout=w.Layout(width="48px"))
        edit.on_click(lambda _, s=stored, user=self.facts_user: self.on_edit and self.on_edit(user, s.id))
        imp = "—" if f.importance is None else f"{f.importance:.1f}"
        tags = " ".join(f"`{t}`" for t in f.tags)
        where = f"line {stored.line}" + (f" · chat {stored.chat_id}" if stored.chat_id else "")
        where += f" · session {stored.session_id}" if stored.session_id else ""
        text = (
            f'<span class="syncd-cat">{esc(f.category)}</span> {esc(clip(f.content))} '
            f'<span class="syncd-muted">imp {imp} {esc(tags)} · {esc(where)} · {esc(stored.id)}</span>'
        )
        label = w.HTML(text, layout=w.Layout(width="100%"))
        label.add_class("syncd-fact")
        return w.HBox([edit, label])

    def _show(self, start: int, stop: int) -> None:
        self.rows.children = [self._row(s) for s in self.facts[start:stop]]


class BlocksView(w.VBox):
    """Every block label as one user in one chat sees it: the text at each scope, the winner marked."""

    def __init__(self, data: HomeData):
        self.data = data
        self.user = w.Dropdown(description="user", options=[], layout=w.Layout(width="220px"))
        self.chat = w.Dropdown(description="chat", options=[NO_CHAT], layout=w.Layout(width="220px"))
        self.view = w.HTML()
        self.view.add_class("syncd-blocks")
        self.user.observe(lambda _: self._user_changed(), "value")
        self.chat.observe(lambda _: self.show(), "value")
        super().__init__([w.HBox([self.user, self.chat]), self.view])

    def refresh(self) -> None:
        current = self.user.value
        users = self.data.users()
        self.user.options = users
        if current in users:
            self.user.value = current
        self._user_changed()

    def _user_changed(self) -> None:
        user = self.user.value
        current = self.chat.value
        self.chat.options = [NO_CHAT, *(self.data.chats(user) if user else [])]
        self.chat.value = current if current in self.chat.options else NO_CHAT
        self.show()

    def show(self) -> None:
        user = self.user.value or None
        chat = None if self.chat.value in (None, NO_CHAT) else self.chat.value
        rows = []
        for row in self.data.blocks(user, chat):
            cells = [f"<b>{esc(row.label)}</b>"]
            for scope in SCOPES:
                text = row.texts.get(scope)
                problem = row.problems.get(scope)
                cell = note(problem, "err") if problem else note("—") if text is None else esc(_short(text))
                mark = ' class="syncd-winner"' if row.resolved == scope else ""
                cells.append(f"<div{mark}>{cell}</div>")
            resolved = f"{row.resolved}" + (" (built-in)" if row.resolved == "default" else "")
            cells.append(f"{esc(resolved)}<br>" + note(f"{len(row.content)}/{row.limit} chars"))
            rows.append(cells)
        who = f"{user or 'no user'}" + (f" in chat {chat}" if chat else "")
        self.view.value = note(f"What {who} sees: chat > user > global, per label.") + table(
            ["label", "chat", "user", "global", "in effect"], rows
        )


def _short(text: str, width: int = 160) -> str:
    return clip(" ".join(text.split()), width)


def _link(edge) -> str:
    """A link as it is written in the page."""
    return ("!" if edge.link.embed else "") + f"[[{edge.link.raw}]]"


class VaultView(w.VBox):
    """Vault pages (filtered, paged); a picked page shows its links, each resolved, and backlinks."""

    def __init__(self, data: HomeData):
        self.data = data
        self.pages = PagedList(on_pick=lambda _: self.show(), css="syncd-pages", width="260px", rows=14)
        self.view = w.HTML(layout=w.Layout(width="100%"))
        self.view.add_class("syncd-page-links")
        super().__init__([w.HBox([self.pages, self.view])])

    def refresh(self) -> None:
        self.pages.set_items(self.data.pages())
        if self.pages.value is not None:
            self.show()

    def show(self) -> None:
        page = self.pages.value
        if page is None:
            self.view.value = ""
            return
        links, backlinks = self.data.page_links(page)
        link_rows = [
            (
                esc(_link(e)),
                esc(e.resolution.target) if e.resolution.target else note("unresolved", "err"),
                str(e.link.line),
            )
            for e in links[:100]
        ]
        back_rows = [(esc(e.source), esc(_link(e)), str(e.link.line)) for e in backlinks[:100]]
        more = note(f" (first 100 of {len(links)})") if len(links) > 100 else ""
        self.view.value = (
            f"<b>{esc(page)}</b><br><b>Links</b> {len(links)}{more}"
            + table(["link", "leads to", "line"], link_rows)
            + f"<b>Backlinks</b> {len(backlinks)}"
            + table(["from", "link", "line"], back_rows)
        )


class BrowseTab(w.VBox):
    VIEWS = ("Facts", "Core blocks", "Vault")

    def __init__(self, data: HomeData, on_edit: Callable[[str, str], None] | None = None):
        self.facts = FactsView(data, on_edit)
        self.blocks = BlocksView(data)
        self.vault = VaultView(data)
        self.which = w.ToggleButtons(options=self.VIEWS)
        self.which.add_class("syncd-browse-which")
        self.body = w.VBox([self.facts])
        self.which.observe(lambda _: self._switch(), "value")
        self._loaded: set[str] = set()
        super().__init__([self.which, self.body])

    def _view(self):
        return {"Facts": self.facts, "Core blocks": self.blocks, "Vault": self.vault}[self.which.value]

    def _switch(self) -> None:
        self.body.children = [self._view()]
        if self.which.value not in self._loaded:
            self.refresh()

    def refresh(self) -> None:
        """Reload the view on screen (the others reload when they are next shown)."""
        self._loaded = {self.which.value}
        self._view().refresh()
