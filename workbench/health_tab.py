"""Health: freshness (stale files, errors, uncommitted changes), reindex with a progress bar, the
conflicts merges with other machines kept (resolvable here), the wiki's lint findings, and plots
of the memory over time."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

import ipywidgets as w
from IPython.core.interactiveshell import InteractiveShell
from IPython.display import display

import syncd
from syncd.engine.status import INDEX_MISSING, INDEX_OK

from . import plots
from .conflicts_panel import ConflictsPanel
from .data import HomeData
from .ui import Pager, button, esc, note, table

__all__ = ["HealthTab"]

ALL_USERS = "(all users)"
LISTED = 20
FINDINGS_PER_PAGE = 15


def _paths(title: str, paths, kind: str) -> str:
    paths = list(paths)
    if not paths:
        return ""
    shown = "<br>".join(esc(p) for p in paths[:LISTED])
    more = "<br>" + note(f"… and {len(paths) - LISTED} more") if len(paths) > LISTED else ""
    return f'<div class="syncd-{kind}"><b>{esc(title)}</b> ({len(paths)})<br>{shown}{more}</div>'


def _states(st) -> list[tuple[str, str]]:
    """The lines of a syncd.engine.status.Status about the index and git, as (text, kind)."""
    lines = []
    if st.index == INDEX_MISSING:
        missing = (
            "No index on disk: not built yet, or deleted with .syncd/. A running `syncd watch` or "
            "`syncd serve` is rebuilding it; else Reindex. Searches find nothing meanwhile."
        )
        lines.append((missing, "err"))
    elif st.index != INDEX_OK:
        unreachable = (
            "The index's database cannot be reached: writes are saved and committed, and the index "
            "catches up once it is back."
        )
        lines.append((unreachable, "err"))
    if st.git_busy:
        lines.append((f"git: {st.git_busy}. Until then syncd commits nothing, and edits wait.", "warn"))
    return lines


class HealthTab(w.VBox):
    def __init__(self, data: HomeData, changed: Callable[[], None] = lambda: None):
        self.data = data
        self.changed = changed
        self.findings: list = []
        self.figures: dict = {}
        self.job: threading.Thread | None = None
        self.summary = w.HTML()
        self.summary.add_class("syncd-health-status")
        self.conflicts = ConflictsPanel(data, changed=self._resolved)
        self.check = button("Check now", "syncd-health-check", icon="refresh")
        self.reindex_button = button("Reindex", "syncd-reindex", icon="cogs")
        self.progress = w.IntProgress(min=0, max=1, value=0, layout=w.Layout(width="300px", visibility="hidden"))
        self.progress.add_class("syncd-reindex-progress")
        self.progress_text = w.HTML()
        self.lint_summary = w.HTML()
        self.lint_rows = w.HTML()
        self.lint_rows.add_class("syncd-lint")
        self.lint_pager = Pager(self._show_findings, FINDINGS_PER_PAGE, css="syncd-lint-pager")
        self.plot_user = w.Dropdown(description="user", options=[ALL_USERS], layout=w.Layout(width="220px"))
        self.plot_user.observe(lambda _: self.draw(), "value")
        self.plot_days = w.Output(layout=w.Layout(width="100%"))
        self.plot_days.add_class("syncd-plot-days")
        self.plot_size = w.Output(layout=w.Layout(width="100%"))
        self.plot_size.add_class("syncd-plot-size")
        self.check.on_click(lambda _: self.refresh())
        self.reindex_button.on_click(lambda _: self.start_reindex())
        super().__init__(
            [
                w.HBox([self.check, self.reindex_button, self.progress, self.progress_text]),
                self.summary,
                self.conflicts,
                w.HTML("<b>Wiki lint</b>"),
                self.lint_summary,
                self.lint_rows,
                self.lint_pager,
                w.HTML("<b>Memory over time</b>"),
                self.plot_user,
                self.plot_days,
                self.plot_size,
            ]
        )

    def refresh(self) -> None:
        self.show_status()
        self.conflicts.refresh()
        self.show_lint()
        users = [ALL_USERS, *self.data.users()]
        if list(self.plot_user.options) != users:
            current = self.plot_user.value
            self.plot_user.options = users
            self.plot_user.value = current if current in users else ALL_USERS
        self.draw()

    def _resolved(self) -> None:
        self.show_status()  # the resolution is committed and indexed: the counts moved
        self.changed()

    def show_status(self) -> None:
        try:
            st = self.data.status()
        except syncd.SyncdError as exc:
            self.summary.value = note(str(exc), "err")
            return
        state = (
            ("healthy", "ok")
            if st.healthy
            else ("fresh, with files in error", "warn")
            if st.fresh
            else ("missing", "err")
            if st.index == INDEX_MISSING
            else ("unreachable", "err")
            if st.index != INDEX_OK
            else ("stale: the index is behind the files", "warn")
        )
        stale = sum(len(v) for v in st.stale.values())
        head = f'<div class="syncd-box"><b>Index {note(state[0], state[1])}</b><br>' + table(
            ["files", "facts", "chunks", "stale", "errors", "uncommitted", "model", "aligned commit"],
            [
                (
                    str(st.files),
                    str(st.facts),
                    str(st.chunks),
                    str(stale),
                    str(len(st.errors)),
                    str(len(st.uncommitted)),
                    esc(st.model_id),
                    esc((st.aligned_commit or "—")[:10]),
                )
            ],
        )
        # What `syncd status` says beside the counts, and the counts alone cannot: why nothing is
        # indexed, and the person's own git work that holds every commit (and every edit) back.
        lists = "".join(f"<div>{note(line, kind)}</div>" for line, kind in _states(st))
        lists += "".join(_paths(f"{kind} (not indexed yet)", paths, "warn") for kind, paths in st.stale.items())
        errors = [f"{p}: {msg}" for p, msg in sorted(st.errors.items())]
        lists += _paths("files in error", errors, "err")
        lists += _paths("indexed, not committed yet", st.uncommitted, "muted")
        if not st.compatible:
            lists += note(f"The index cannot serve this model ({st.incompatible or 'another model'}): reindex.", "err")
        self.summary.value = head + lists + "</div>"

    def show_lint(self) -> None:
        try:
            self.findings = self.data.lint()
        except syncd.SyncdError as exc:
            self.findings = []
            self.lint_summary.value = note(str(exc), "err")
            return
        by: dict[str, int] = {}
        for f in self.findings:
            by[f.severity] = by.get(f.severity, 0) + 1
        counts = ", ".join(f"{n} {sev}" for sev, n in sorted(by.items())) or "no findings"
        self.lint_summary.value = note(counts, "err" if by.get("error") else "warn" if self.findings else "ok")
        self.lint_pager.reset(len(self.findings))

    def _show_findings(self, start: int, stop: int) -> None:
        rows = [
            (
                note(f.severity, "err" if f.severity == "error" else "warn"),
                esc(f.code),
                esc(f"{f.path}:{f.line}"),
                esc(f.message),
            )
            for f in self.findings[start:stop]
        ]
        self.lint_rows.value = table(["severity", "code", "where", "message"], rows) if rows else ""

    def draw(self) -> None:
        days = self.data.day_counts()
        user = None if self.plot_user.value == ALL_USERS else self.plot_user.value
        self.figures = {
            "facts_per_day": plots.facts_per_day(days, user),
            "memory_over_time": plots.memory_over_time(days),
        }
        for out, name in ((self.plot_days, "facts_per_day"), (self.plot_size, "memory_over_time")):
            out.clear_output(wait=True)
            if InteractiveShell.initialized():  # in a kernel (a script or a test has no display)
                with out:
                    # JupyterLab's plotly extension renders this mime type: no script, no network.
                    display({"application/vnd.plotly.v1+json": self.figures[name].to_plotly_json()}, raw=True)

    # -- reindex ---------------------------------------------------------------------------------

    def _progress(self, event) -> None:
        """A syncd.sync.progress.SyncProgress: the bar moves as texts are embedded, not per file."""
        self.progress.max = max(event.bytes_total, 1)
        self.progress.value = min(event.bytes_done, self.progress.max)
        self.progress_text.value = note(event.describe())

    def start_reindex(self, wait: bool = False) -> None:
        """Rebuild the index on a worker thread (the widgets stay live; the bar moves)."""
        if self.job is not None and self.job.is_alive():
            return
        try:
            loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            loop = None  # not in a kernel (a script, a test): the worker finishes up itself
        self.reindex_button.disabled = True
        self.progress.layout.visibility = "visible"
        self.progress.value = 0
        self.progress_text.value = note("reindexing…")
        self.job = threading.Thread(target=self._reindex, args=(loop,), name="workbench-reindex", daemon=True)
        self.job.start()
        if wait:
            self.job.join()

    def _reindex(self, loop: asyncio.AbstractEventLoop | None) -> None:
        outcome = ("the reindex stopped on an error (the kernel's log has it)", "err")
        try:
            report = self.data.reindex(self._progress)
        except syncd.LockedError as exc:
            outcome = (f"The home is held ({exc.holder}); a running daemon keeps the index in step itself.", "warn")
        except syncd.SyncdError as exc:
            outcome = (str(exc), "err")
        else:
            outcome = (f"reindexed: {report.plan.summary()}", "ok")
        finally:
            # The refresh that follows reads and redraws every tab on screen: on the kernel's
            # thread, where the person's clicks are handled, never beside them from this one.
            if loop is None:
                self._reindexed(*outcome)
            else:
                loop.call_soon_threadsafe(self._reindexed, *outcome)

    def _reindexed(self, text: str, kind: str) -> None:
        self.progress_text.value = note(text, kind)
        if kind == "ok":
            self.progress.value = self.progress.max
            self.show_status()
            self.changed()
        self.reindex_button.disabled = False
