"""Edit: change or delete a fact, add one, edit a core block, all through the memory API.

Every write is a compare-and-swap against what the form loaded: if someone (an agent, an editor)
changed that fact or block since, nothing is written and both versions are shown. Edits elsewhere
in the same file are kept. Commits carry the workbench as their author.
"""

from __future__ import annotations

from collections.abc import Callable

import ipywidgets as w

import syncd
from syncd.memory import CORE_LABELS

from .data import HomeData
from .ui import button, esc, note
from .unsaved import UnsavedPrompt

__all__ = ["EditTab"]

NO_CHAT = ""


def _tags(text: str) -> list[str]:
    return [t for t in text.replace(",", " ").split() if t]


class FactEditor(w.VBox):
    """Load a fact by user and id, change it, save or delete it."""

    def __init__(self, data: HomeData, changed: Callable[[], None]):
        self.data = data
        self.changed = changed
        self.loaded = None  # the StoredFact the form shows: the "expected" of every write
        self.loaded_key: tuple[str, str] | None = None  # (user, id) it was loaded as
        self.user = w.Dropdown(description="user", options=[], layout=w.Layout(width="220px"))
        self.fact_id = w.Text(description="fact id", layout=w.Layout(width="300px"))
        self.fact_id.add_class("syncd-edit-id")
        self.load = button("Load", "syncd-edit-load")
        self.content = w.Textarea(description="content", layout=w.Layout(width="640px", height="70px"))
        self.content.add_class("syncd-edit-content")
        self.category = w.Text(description="category", layout=w.Layout(width="260px"))
        self.importance = w.FloatSlider(description="importance", min=0, max=1, step=0.05, value=0.5)
        self.has_importance = w.Checkbox(description="set importance (unticked: keep as is)", value=True, indent=False)
        self.tags = w.Text(description="tags", placeholder="space separated", layout=w.Layout(width="400px"))
        self.save = button("Save", "syncd-edit-save", button_style="primary", icon="save", disabled=True)
        self.delete = button("Delete…", "syncd-edit-delete", button_style="danger", icon="trash", disabled=True)
        self.confirm = button(
            "Yes, delete it", "syncd-edit-confirm", button_style="danger", layout=w.Layout(display="none")
        )
        self.status = w.HTML()
        self.status.add_class("syncd-edit-status")
        # Asked when another fact is opened over unsaved typing (Load, or an Edit button of
        # Search or Browse): the typing is never replaced without the person saying so.
        self.unsaved = UnsavedPrompt("syncd-edit", self.status, lambda: self.write(reload=False), self._back)
        self.load.on_click(lambda _: self.load_fact(self.user.value, self.fact_id.value.strip()))
        # Whoever moves the slider means to set the importance: saved unticked, the move was lost.
        self.importance.observe(lambda _: setattr(self.has_importance, "value", True), "value")
        self.save.on_click(lambda _: self.write())
        self.delete.on_click(lambda _: self._ask_delete())
        self.confirm.on_click(lambda _: self.remove())
        super().__init__(
            [
                w.HTML("<b>Edit a fact</b>"),
                w.HBox([self.user, self.fact_id, self.load]),
                self.content,
                w.HBox([self.category, self.tags]),
                w.HBox([self.importance, self.has_importance]),
                w.HBox([self.save, self.delete, self.confirm]),
                self.unsaved.box,
                self.status,
            ]
        )

    def refresh(self) -> None:
        current = self.user.value
        self.user.options = self.data.users()
        if current in self.user.options:
            self.user.value = current

    def has_unsaved(self) -> bool:
        """Whether the form differs from the fact it loaded: what Save would write."""
        if self.loaded is None:
            return False
        f = self.loaded.fact
        importance = self.importance.value if self.has_importance.value else None
        return (
            self.content.value != f.content
            or self.category.value.strip() != f.category
            or _tags(self.tags.value) != list(f.tags)
            or (importance is None) != (f.importance is None)
            or (importance is not None and f.importance is not None and abs(importance - f.importance) > 1e-9)
        )

    def load_fact(self, user: str | None, fact_id: str) -> None:
        """Load a fact into the form (what the Edit buttons of Search and Browse call). Over
        unsaved changes it first asks whether to save them, discard them or keep editing."""
        if self.has_unsaved():
            self.confirm.layout.display = "none"
            was_user, was_id = self.loaded_key or ("", "")
            asked = fact_id or "the fact asked for"
            self.unsaved.ask(f"fact {was_id} of {was_user}", asked, lambda: self._load(user, fact_id))
            return
        self._load(user, fact_id)

    def _back(self) -> None:
        if self.loaded_key is not None:
            self.user.value, self.fact_id.value = self.loaded_key

    def _load(self, user: str | None, fact_id: str) -> None:
        self.confirm.layout.display = "none"
        self.unsaved.hide()
        if not user or not fact_id:
            self.status.value = note("Pick a user and give a fact id (Browse and Search have edit buttons).", "warn")
            return
        if user not in self.user.options:
            self.refresh()
        self.user.value = user
        self.fact_id.value = fact_id
        try:
            stored = self.data.find_fact(user, fact_id)
        except syncd.SyncdError as exc:
            self.loaded = self.loaded_key = None
            self.save.disabled = self.delete.disabled = True
            self.status.value = note(str(exc), "err")
            return
        self._fill(stored)
        self.loaded_key = (user, fact_id.strip())
        self.status.value = note(f"Loaded from {stored.path}:{stored.line}.")

    def _fill(self, stored) -> None:
        self.loaded = stored
        f = stored.fact
        self.content.value = f.content
        self.category.value = f.category
        self.importance.value = 0.5 if f.importance is None else f.importance
        # After the slider: moving it ticks the box (below), and a loaded fact says for itself.
        self.has_importance.value = f.importance is not None
        self.tags.value = " ".join(f.tags)
        self.save.disabled = self.delete.disabled = False

    def _conflict(self, exc: syncd.ConflictError) -> None:
        """Show theirs next to ours; reload only when the person asks (their typing is kept)."""
        theirs = exc.found if exc.found is not None else "(the fact is gone)"
        self.status.value = (
            note("Someone changed this fact since you loaded it; nothing was written.", "err")
            + f'<div class="syncd-box syncd-conflict"><b>now in {esc(exc.path)}:</b><br><code>{esc(theirs)}</code>'
            + f"<br><b>you loaded:</b><br><code>{esc(exc.expected)}</code><br>"
            + note("Load again, and discard your changes, to start from their version.")
            + "</div>"
        )

    def _elsewhere(self) -> bool:
        """Whether the user or id above no longer name the fact the form holds (changed, not
        loaded): a write would go to a fact the person is not looking at. Says so."""
        if self.loaded_key == (self.user.value, self.fact_id.value.strip()):
            return False
        user, fact_id = self.loaded_key or ("", "")
        self.status.value = note(
            f"The form holds fact {fact_id} of {user}: Load the fact named above first. Nothing was written.", "warn"
        )
        return True

    def write(self, reload: bool = True) -> bool:
        """Save the form over the fact it loaded (compare-and-swap against it); True when the
        file now says what the form does. ``reload``: open the fact again after (its id follows
        its content); the unsaved-changes prompt opens another one instead."""
        if self.loaded is None or self._elsewhere():
            return False
        stored = self.loaded
        importance = self.importance.value if self.has_importance.value else None
        try:
            stored_now = self.data.run(
                self.data.memory.change_memory(
                    stored.id,
                    self.user.value,
                    content=self.content.value,
                    category=self.category.value.strip(),
                    importance=importance,
                    tags=_tags(self.tags.value),
                    expected=stored.fact,
                )
            )
        except syncd.ConflictError as exc:
            self._conflict(exc)
            return False
        except (syncd.SyncdError, ValueError) as exc:
            self.status.value = note(str(exc), "err")
            return False
        if stored_now.fact == stored.fact:
            self.status.value = note("Nothing to save: the fact is as it was loaded.")
            return True
        self.status.value = note(f"Saved and committed as {self.data.memory.author}.", "ok")
        if reload:
            # A hand-written fact's id follows its content: the write says which it is now.
            self.open_quietly(self.user.value, stored_now.id)
        self.changed()
        return True

    def open_quietly(self, user: str, fact_id: str) -> None:
        status = self.status.value
        self._load(user, fact_id)
        self.status.value = status

    def _ask_delete(self) -> None:
        self.confirm.layout.display = None
        self.status.value = note("Delete this fact? Its line is removed and the change committed.", "warn")

    def remove(self) -> None:
        self.confirm.layout.display = "none"
        if self.loaded is None or self._elsewhere():
            return
        stored = self.loaded
        try:
            done = self.data.run(self.data.memory.delete_memory(stored.id, self.user.value, expected=stored.fact))
        except syncd.ConflictError as exc:
            self._conflict(exc)
            return
        except syncd.SyncdError as exc:
            self.status.value = note(str(exc), "err")
            return
        self.loaded = self.loaded_key = None
        self.save.disabled = self.delete.disabled = True
        self.status.value = note("Deleted and committed." if done else "The fact was already gone.", "ok")
        self.changed()


class FactAdder(w.VBox):
    """Add one fact to today's log of a user (a new section, one commit)."""

    def __init__(self, data: HomeData, changed: Callable[[], None]):
        self.data = data
        self.changed = changed
        self.user = w.Combobox(description="user", placeholder="a user id", layout=w.Layout(width="220px"))
        self.user.add_class("syncd-add-user")
        self.chat = w.Text(description="chat", placeholder="optional", layout=w.Layout(width="200px"))
        self.content = w.Textarea(description="content", layout=w.Layout(width="640px", height="50px"))
        self.content.add_class("syncd-add-content")
        self.category = w.Text(description="category", value="context", layout=w.Layout(width="260px"))
        self.importance = w.FloatSlider(description="importance", min=0, max=1, step=0.05, value=0.5)
        self.tags = w.Text(description="tags", placeholder="space separated", layout=w.Layout(width="400px"))
        self.add = button("Add fact", "syncd-add-save", button_style="success", icon="plus")
        self.status = w.HTML()
        self.status.add_class("syncd-add-status")
        self.add.on_click(lambda _: self.write())
        super().__init__(
            [
                w.HTML("<b>Add a fact</b>"),
                w.HBox([self.user, self.chat]),
                self.content,
                w.HBox([self.category, self.tags]),
                self.importance,
                self.add,
                self.status,
            ]
        )

    def refresh(self) -> None:
        self.user.options = self.data.users()

    def write(self) -> None:
        content = " ".join(self.content.value.split())
        if not self.user.value.strip() or not content:
            self.status.value = note("A user and some content, please.", "warn")
            return
        try:
            fact = self.data.run(
                self.data.memory.add_memory(
                    content,
                    self.user.value.strip(),
                    self.chat.value.strip() or None,
                    category=self.category.value.strip(),
                    importance=self.importance.value,
                    tags=_tags(self.tags.value),
                    dedup=False,
                )
            )
        except (syncd.SyncdError, ValueError) as exc:
            self.status.value = note(str(exc), "err")
            return
        assert fact is not None  # without dedup a fact is always added
        self.status.value = note(f"Added {fact.id} to today's log of {self.user.value.strip()}.", "ok")
        self.content.value = ""
        self.changed()


def _block_name(scope: str, user: str | None, chat: str | None, label: str) -> str:
    whose = (f" of {user}" if user else "") + (f" in chat {chat}" if chat else "")
    return f"the {scope} block {label}{whose}"


class BlockEditor(w.VBox):
    """Edit one core block at one scope; its size limit is shown as you type."""

    def __init__(self, data: HomeData, changed: Callable[[], None]):
        self.data = data
        self.changed = changed
        self.loaded_text: str | None = None
        self.loaded_where: tuple[str, str | None, str | None, str] | None = None  # scope, user, chat, label
        self.scope = w.Dropdown(description="scope", options=["global", "user", "chat"], layout=w.Layout(width="180px"))
        self.user = w.Combobox(description="user", layout=w.Layout(width="200px"))
        self.chat = w.Text(description="chat", layout=w.Layout(width="200px"))
        self.label = w.Combobox(
            description="label", options=list(CORE_LABELS), value="persona", layout=w.Layout(width="200px")
        )
        self.load = button("Load", "syncd-block-load")
        self.text = w.Textarea(layout=w.Layout(width="640px", height="110px"), continuous_update=True)
        self.text.add_class("syncd-block-text")
        self.count = w.HTML()
        self.count.add_class("syncd-block-count")
        self.save = button("Save block", "syncd-block-save", button_style="primary", icon="save", disabled=True)
        self.status = w.HTML()
        self.status.add_class("syncd-block-status")
        # Asked when another block is loaded over unsaved typing, as the fact editor asks.
        self.unsaved = UnsavedPrompt("syncd-block", self.status, self.write, self._back)
        self.limit = data.settings.block_char_limit
        self.load.on_click(lambda _: self.load_block())
        self.save.on_click(lambda _: self.write())
        self.text.observe(lambda _: self._count(), "value")
        super().__init__(
            [
                w.HTML("<b>Edit a core block</b>"),
                w.HBox([self.scope, self.user, self.chat, self.label, self.load]),
                self.text,
                self.count,
                self.save,
                self.unsaved.box,
                self.status,
            ]
        )

    def refresh(self) -> None:
        self.user.options = self.data.users()

    def _where(self) -> tuple[str, str | None, str | None]:
        scope = self.scope.value
        user = self.user.value.strip() or None if scope != "global" else None
        chat = self.chat.value.strip() or None if scope == "chat" else None
        return scope, user, chat

    def has_unsaved(self) -> bool:
        """Whether the text differs from the block it loaded: what Save would write."""
        return self.loaded_text is not None and self.text.value.strip() != self.loaded_text

    def load_block(self) -> None:
        """Load the block named above. Over unsaved changes it first asks whether to save them,
        discard them or keep editing."""
        scope, user, chat = self._where()
        label = self.label.value.strip()
        if self.has_unsaved() and self.loaded_where is not None:
            self.unsaved.ask(
                _block_name(*self.loaded_where),
                _block_name(scope, user, chat, label),
                lambda: self._load(scope, user, chat, label),
            )
            return
        self._load(scope, user, chat, label)

    def _name(self, scope: str, user: str | None, chat: str | None, label: str) -> None:
        """Put a block's name in the fields above (what the form holds, or is about to)."""
        self.scope.value, self.label.value = scope, label
        # The user or chat of a wider scope is not part of the name: left as typed.
        if user is not None:
            self.user.value = user
        if chat is not None:
            self.chat.value = chat

    def _back(self) -> None:
        if self.loaded_where is not None:
            self._name(*self.loaded_where)

    def _load(self, scope: str, user: str | None, chat: str | None, label: str) -> None:
        self.unsaved.hide()
        self._name(scope, user, chat, label)
        if (scope != "global" and not user) or (scope == "chat" and not chat) or not label:
            self.status.value = note("Name the label, and the user (and chat) of that scope.", "warn")
            return
        try:
            self.loaded_text = self.data.block_text(label, scope, user, chat) or ""
            self.limit = self.data.block_limit(label, scope, user, chat)
        except (syncd.SyncdError, ValueError) as exc:
            self.loaded_text = self.loaded_where = None  # what the form held before is not this block's
            self.save.disabled = True
            self.status.value = note(str(exc), "err")
            return
        self.loaded_where = (scope, user, chat, label)
        self.text.value = self.loaded_text
        self._count()
        self.status.value = note(f"Loaded the {scope} block {label}" + ("" if self.loaded_text else " (empty: new)"))

    def _count(self) -> None:
        n = len(self.text.value.strip())
        over = n > self.limit
        self.count.value = note(
            f"{n} / {self.limit} characters" + (" — over the limit" if over else ""), "err" if over else "muted"
        )
        self.save.disabled = over or self.loaded_text is None

    def write(self) -> bool:
        """Save the text over the block it loaded (compare-and-swap against it); True when the
        file now says what the form does."""
        scope, user, chat = self._where()
        label = self.label.value.strip()
        if self.loaded_text is None or self.loaded_where is None:
            return False
        if (scope, user, chat, label) != self.loaded_where:
            # Written there, the CAS would compare with the block loaded and say "someone changed
            # this block", which nobody did.
            self.status.value = note(
                f"The text below is {_block_name(*self.loaded_where)}: Load the block named above first. "
                "Nothing was written.",
                "warn",
            )
            return False
        if self.text.value.strip() == self.loaded_text:
            self.status.value = note("Nothing to save: the block is as it was loaded.")
            return True
        try:
            self.data.run(
                self.data.memory.update_memory_block(
                    label,
                    self.text.value,
                    chat,
                    user,
                    scope=scope,
                    expected=self.loaded_text,
                )
            )
        except syncd.ConflictError as exc:
            self.status.value = (
                note("Someone changed this block since you loaded it; nothing was written.", "err")
                + f'<div class="syncd-box syncd-conflict"><b>now:</b><pre>{esc(exc.found)}</pre>'
                + note("Load again to start from their version (copy your text first).")
                + "</div>"
            )
            return False
        except (syncd.SyncdError, ValueError) as exc:
            self.status.value = note(str(exc), "err")
            return False
        self.loaded_text = self.text.value.strip()
        self.status.value = note(f"Saved the {scope} block {label} and committed it.", "ok")
        self.changed()
        return True


class EditTab(w.VBox):
    def __init__(self, data: HomeData, changed: Callable[[], None] = lambda: None):
        self.fact = FactEditor(data, changed)
        self.adder = FactAdder(data, changed)
        self.block = BlockEditor(data, changed)
        super().__init__([self.fact, w.HTML("<hr>"), self.adder, w.HTML("<hr>"), self.block])

    def refresh(self) -> None:
        for part in (self.fact, self.adder, self.block):
            part.refresh()
