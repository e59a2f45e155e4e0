"""The question a form asks before it opens something else over unsaved typing: Save, Discard or
Cancel. The fact editor and the block editor both ask it, with their own words for what they hold."""

from __future__ import annotations

from collections.abc import Callable

import ipywidgets as w

from .ui import button, note

__all__ = ["UnsavedPrompt"]


class UnsavedPrompt:
    """Three buttons (shown only while asking) and what each answer does.

    ``save`` writes the form over what it loaded and says whether the file now says what the form
    does; ``back`` puts the form's name fields back on what it holds (the person may have typed
    another name above before asking to open it). Their typing is never replaced without an answer.
    """

    def __init__(self, css: str, status: w.HTML, save: Callable[[], bool], back: Callable[[], None]):
        self.status = status
        self.save = save
        self.back = back
        self.pending: Callable[[], None] | None = None  # what to open once they have answered
        self.keep = button("Save", f"{css}-unsaved-save", button_style="primary", icon="save")
        self.discard = button("Discard", f"{css}-unsaved-discard", button_style="warning")
        self.stay = button("Cancel", f"{css}-unsaved-cancel")
        self.box = w.HBox([self.keep, self.discard, self.stay], layout=w.Layout(display="none"))
        self.keep.on_click(lambda _: self.answer("save"))
        self.discard.on_click(lambda _: self.answer("discard"))
        self.stay.on_click(lambda _: self.answer("cancel"))

    def ask(self, held: str, asked: str, then: Callable[[], None]) -> None:
        """Ask about the unsaved changes to ``held`` before ``then`` opens ``asked``."""
        self.pending = then
        self.box.layout.display = None
        self.status.value = note(
            f"You have unsaved changes to {held}: Save them, Discard them, "
            f"or Cancel to keep editing (then {asked} is not opened).",
            "warn",
        )

    def hide(self) -> None:
        self.pending = None
        self.box.layout.display = "none"

    def answer(self, choice: str) -> None:
        """The person's answer: save (then open what was asked for, unless the save failed: its
        message stays, with the typing), discard (open it), or cancel (keep editing, the form
        names what it holds again)."""
        pending = self.pending
        self.hide()
        if pending is None:
            return
        self.back()
        if choice == "cancel":
            self.status.value = note("Kept your changes; nothing was opened or written.")
            return
        if choice == "save":
            if not self.save():
                return
            saved = self.status.value
            pending()
            self.status.value = saved + self.status.value
            return
        pending()
