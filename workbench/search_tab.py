"""Search: a query scoped by user, chat and kind; hits with their score parts drawn as bars; a
picked hit shows the file around its line and where it came from (commit, author, session)."""

from __future__ import annotations

from collections.abc import Callable

import ipywidgets as w

import syncd
from syncd.engine.search import DEFAULT_LIMIT

from .data import HomeData
from .ui import Pager, button, clip, esc, note, table

__all__ = ["SearchTab", "PARTS"]

ALL_USERS = "(all users)"
ANY_CHAT = "(any chat)"
KINDS = {"facts and text": None, "facts": "fact", "text chunks": "chunk", "transcripts": "transcript"}
# Colours of the score parts, in the order hybrid search adds them up.
PARTS = {
    "semantic": "#4263eb",
    "fulltext": "#f08c00",
    "context": "#9c36b5",
    "importance": "#2f9e44",
    "recency": "#868e96",
}
HITS_PER_PAGE = 10


def score_bar(parts: dict[str, float], weights: dict[str, float]) -> str:
    """The weighted parts of a score as one stacked bar (widths out of the best possible score)."""
    best = sum(weights.values()) or 1.0
    spans = []
    for name, colour in PARTS.items():
        share = weights.get(name, 0.0) * parts.get(name, 0.0)
        if share > 0:
            spans.append(
                f'<span style="width:{100 * share / best:.1f}%;background:{colour}" '
                f'title="{name} {parts[name]:.2f} x {weights[name]:g} = {share:.3f}"></span>'
            )
    return f'<span class="syncd-bar">{"".join(spans)}</span>'


def legend() -> str:
    items = "".join(
        f'<span style="display:inline-block;width:10px;height:10px;background:{c}"></span> {n} &nbsp;'
        for n, c in PARTS.items()
    )
    return f'<span class="syncd-muted">score parts: {items}</span>'


class SearchTab(w.VBox):
    def __init__(self, data: HomeData, on_edit: Callable[[str, str], None] | None = None):
        self.data = data
        self.on_edit = on_edit
        self.hits: list = []
        self.selected = None
        s = data.settings
        self.weights = {name: getattr(s, f"search_weight_{name}") for name in PARTS}
        # Enter (or leaving the box) searches; no search per keystroke.
        self.query = w.Text(
            placeholder="what are you looking for?", continuous_update=False, layout=w.Layout(width="340px")
        )
        self.query.add_class("syncd-query")
        self.user = w.Dropdown(description="user", options=[ALL_USERS], layout=w.Layout(width="200px"))
        self.user.style.description_width = "34px"
        self.chat = w.Dropdown(description="chat", options=[ANY_CHAT], layout=w.Layout(width="200px"))
        self.chat.style.description_width = "34px"
        self.kind = w.Dropdown(description="kind", options=list(KINDS), layout=w.Layout(width="190px"))
        self.kind.style.description_width = "34px"
        # The defaults of every front end (syncd.engine.search): five hits, the memory without the wiki.
        self.limit = w.BoundedIntText(
            value=DEFAULT_LIMIT, min=1, max=200, description="limit", layout=w.Layout(width="120px")
        )
        self.limit.style.description_width = "34px"
        self.wiki = w.Checkbox(value=False, description="wiki too", indent=False, layout=w.Layout(width="90px"))
        self.go = button("Search", "syncd-search-button", button_style="primary", icon="search")
        self.status = w.HTML()
        self.status.add_class("syncd-search-status")
        self.rows = w.VBox()
        self.rows.add_class("syncd-hits")
        self.pager = Pager(self._show, HITS_PER_PAGE, css="syncd-hits-pager")
        self.detail = w.HTML()
        self.detail.add_class("syncd-hit-detail")
        self.edit = button("Edit this fact", "syncd-hit-edit", icon="pencil", layout=w.Layout(display="none"))
        self.edit.on_click(lambda _: self._edit())
        self.go.on_click(lambda _: self.search())
        self.query.observe(lambda _: self.search() if self.query.value.strip() else None, "value")
        self.user.observe(lambda _: self._fill_chats(), "value")
        super().__init__(
            [
                w.HBox([self.query, self.go]),
                w.HBox([self.user, self.chat, self.kind, self.limit, self.wiki]),
                self.status,
                w.HTML(legend()),
                self.rows,
                self.pager,
                w.HBox([self.detail], layout=w.Layout(width="100%")),
                self.edit,
            ]
        )
        self.refresh()

    def refresh(self) -> None:
        """New users may have appeared; the current search stays as it is."""
        current = self.user.value
        self.user.options = [ALL_USERS, *self.data.users()]
        self.user.value = current if current in self.user.options else ALL_USERS
        stale = note("  (the memory changed since: search again to see it)", "warn")
        if self.hits and stale not in self.status.value:  # once, however many changes came since
            self.status.value += stale

    def _fill_chats(self) -> None:
        user = self.user.value
        chats = self.data.chats(user) if user != ALL_USERS else []
        self.chat.options = [ANY_CHAT, *chats]
        self.chat.disabled = user == ALL_USERS

    def search(self) -> None:
        query = self.query.value.strip()
        if not query:
            self.status.value = note("Type what to look for.", "warn")
            return
        user = None if self.user.value == ALL_USERS else self.user.value
        chat = None if self.chat.value == ANY_CHAT or user is None else self.chat.value
        try:
            self.hits = self.data.search(query, user, chat, KINDS[self.kind.value], self.limit.value, self.wiki.value)
        except syncd.SyncdError as exc:
            self.hits = []
            self.status.value = note(str(exc), "err")
        else:
            scope = f" for {user}" + (f" in chat {chat}" if chat else "") if user else ""
            when = f", as of {self.data.at[:10]}" if self.data.at else ""
            self.status.value = note(f"{len(self.hits)} hit(s) for “{query}”{scope}{when}")
        self.selected = None
        self.detail.value = ""
        self.edit.layout.display = "none"
        self.pager.reset(len(self.hits))

    def _row(self, n: int, hit) -> w.HBox:
        open_ = button(str(n + 1), "syncd-hit-open", layout=w.Layout(width="38px"), tooltip="show where it came from")
        open_.on_click(lambda _, hit=hit: self.select(hit))
        cat = f'<span class="syncd-cat">{esc(hit.category)}</span> ' if hit.category else ""
        where = (
            f"{hit.path}:{hit.line}"
            + (f" · {hit.user_id}" if hit.user_id else "")
            + (f" · chat {hit.chat_id}" if hit.chat_id else "")
        )
        body = hit.heading + " — " + hit.snippet() if hit.kind == "chunk" and hit.heading else hit.snippet()
        text = (
            f"<b>{hit.score:.3f}</b> {score_bar(hit.parts, self.weights)} {cat}{esc(body)}"
            f'<br><span class="syncd-muted">{esc(where)} · {esc(hit.source)}</span>'
        )
        label = w.HTML(text, layout=w.Layout(width="100%"))
        label.add_class("syncd-hit")
        return w.HBox([open_, label])

    def _show(self, start: int, stop: int) -> None:
        self.rows.children = [self._row(n, self.hits[n]) for n in range(start, stop)]

    def select(self, hit) -> None:
        """Show the file around the hit's line, its score parts and its provenance."""
        self.selected = hit
        lines = self.data.around(hit.path, hit.line)
        shown = "\n".join(
            f"<b>{n:>5}  {esc(clip(text))}</b>" if n == hit.line else f"{n:>5}  {esc(clip(text))}" for n, text in lines
        )
        prov = self.data.provenance(hit.path, hit.line, hit.content, hit.provenance)
        rows = [
            ("file", esc(f"{hit.path}:{hit.line}")),
            ("user / chat", esc(f"{hit.user_id or '—'} / {hit.chat_id or '—'}")),
            (
                "session",
                esc(prov.session or hit.session_id or "—")
                + (f" · transcript line {prov.transcript_line}" if prov.transcript_line else ""),
            ),
        ]
        rows += commit_rows(prov)
        parts = " · ".join(f"{name} {hit.parts.get(name, 0):.2f}" for name in PARTS)
        rows.append(("score", esc(f"{hit.score:.3f} = {parts} (weighted)")))
        if hit.id:
            rows.append(("id", esc(hit.id)))
        self.detail.value = (
            f'<div class="syncd-box"><pre class="syncd-file">{shown}</pre>'
            + table(["", ""], [(f"<b>{k}</b>", v) for k, v in rows])
            + "</div>"
        )
        is_fact = hit.kind == "fact" and hit.user_id is not None and self.on_edit is not None
        self.edit.layout.display = None if is_fact else "none"

    def _edit(self) -> None:
        if self.selected is not None and self.on_edit is not None:
            self.on_edit(self.selected.user_id, self.selected.id)


def commit_rows(prov) -> list[tuple[str, str]]:
    """The commit part of a provenance, as label/value rows (values are HTML)."""
    if prov.error:
        return [("commit", note(prov.error, "warn"))]
    history = prov.history
    if history is None or history.uncommitted:
        return [("commit", note("not committed yet (the daemon or the next sync commits it)", "warn"))]
    if history.introduced is None:
        return [("commit", note("no history found for this line", "warn"))]
    entry = history.introduced
    rows = [
        ("commit", esc(f"{entry.sha[:10]}  {entry.date}  {entry.subject}")),
        ("author", esc(f"{entry.author} <{entry.email}>")),
    ]
    rows += [(esc(k), esc(v)) for k, v in entry.trailers.items()]
    if history.edits:
        rows.append(("later edits", esc(", ".join(f"{e.sha[:10]} by {e.author}" for e in history.edits))))
    return rows
