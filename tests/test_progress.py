"""Issue 30 item 3: long work shows progress, counted in texts embedded.

The laws of the events (monotone, reaching the total, however a sync's batches and slices fall),
the embedding cache reporting and keeping each slice, a long vault page whose events come while
it is embedded (not once per file), ``syncd status`` showing the sync that runs and the one that
was cut short, a line in a log every so often, and the bar on a terminal left as the summary.
"""

from __future__ import annotations

import fcntl
import itertools
import logging
import os
import pty
import re
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

import syncd
from syncd.cli import main
from syncd.config import Settings
from syncd.engine.status_read import read_status
from syncd.home import Home

# White-box: the slicer's own law (test_slices_...) against its own bounds.
from syncd.index.embed_cache import _SLICE_CHARS, _SLICE_TEXTS, CachedEmbedder, EmbeddingCache, _slices
from syncd.sync.progress import ProgressTracker, SyncProgress, format_duration, log_every
from syncd.sync.progress_file import PROGRESS_NAME, ProgressFile, read_progress

from .helpers import write
from .strategies import sync_runs

REPO = Path(__file__).resolve().parents[1]
_COUNTS = ("files_done", "bytes_done", "texts_embedded", "texts_cached")


class FakeClock:
    def __init__(self, steps: list[float]):
        self.now = 1000.0
        self.steps = steps or [0.0]
        self.calls = 0

    def __call__(self) -> float:
        self.now += self.steps[self.calls % len(self.steps)]
        self.calls += 1
        return self.now


def _drive(batches, clock) -> list[SyncProgress]:
    """Report ``batches`` (tests/strategies.sync_runs) to a tracker exactly as apply.py does."""
    events: list[SyncProgress] = []
    files_total = sum(files for files, _, _ in batches)
    tracker = ProgressTracker(events.append, "sync", files_total, sum(b for _, b, _ in batches), clock=clock)
    tracker.start()
    for files, nbytes, calls in batches:
        for texts, cached, cuts in calls:
            tracker.start_batch(files, nbytes, texts)
            if texts:  # apply.py embeds nothing, and hears nothing, for a batch without texts
                tracker.embedding(cached, 0)
                for embedded in cuts:
                    tracker.embedding(cached, embedded)
            tracker.end_embedding()
        tracker.batch_written()
    return events


@given(sync_runs(), st.lists(st.floats(0, 40, allow_nan=False), max_size=5))
def test_progress_events_only_grow_and_end_at_the_total(batches, steps):
    events = _drive(batches, FakeClock(steps))
    for before, after in itertools.pairwise(events):
        for name in _COUNTS:
            assert getattr(after, name) >= getattr(before, name), name
    for event in events:
        assert 0 <= event.bytes_done <= event.bytes_total and 0 <= event.files_done <= event.files_total
        assert 0.0 <= event.fraction <= 1.0
        assert event.eta_s is None or event.eta_s >= 0
        assert isinstance(event.describe(), str)
        assert SyncProgress.from_dict(event.to_dict()) == event
    last = events[-1]
    assert last.finished and last.bytes_done == last.bytes_total and last.fraction == 1.0
    # Every text is counted once, by who gave its vector: a redone batch counts its model calls again.
    assert last.texts_embedded == sum(texts - cached for _, _, calls in batches for texts, cached, _ in calls if texts)
    assert last.texts_cached == sum(cached for _, _, calls in batches for texts, cached, _ in calls if texts)


@given(st.lists(st.integers(0, 70_000), max_size=700))
def test_slices_cover_every_text_once_shortest_first_within_bounds(lengths):
    keys = [i.to_bytes(4, "big") for i in range(len(lengths))]
    parts = list(_slices(keys, lengths))
    order = [int.from_bytes(k, "big") for part in parts for k in part]
    assert sorted(order) == list(range(len(lengths)))
    assert [lengths[i] for i in order] == sorted(lengths)
    for part in parts:
        chars = sum(lengths[int.from_bytes(k, "big")] for k in part)
        assert 0 < len(part) <= _SLICE_TEXTS and (chars <= _SLICE_CHARS or len(part) == 1)


@given(st.floats(0, 10 * 86400, allow_nan=False))
def test_durations_read_as_a_person_writes_them(seconds):
    text = format_duration(seconds)
    assert re.fullmatch(r"\d+s|\d+m\d\ds|\d+h\d\dm", text)
    h, m, s = (int(x) if x else 0 for x in re.fullmatch(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?", text).groups())
    assert abs(h * 3600 + m * 60 + s - seconds) <= (60 if "h" in text else 1)


def test_the_cache_keeps_and_reports_each_slice_and_gives_the_same_vectors(tmp_path, embedder):
    texts = [f"Note {i}: the {i}th jar of honey sits on shelf {i % 9}." for i in range(300)]
    with EmbeddingCache(tmp_path / "cache.sqlite") as cache:
        cached = CachedEmbedder(embedder, cache)
        cached.embed(texts[:40])
        cached.reset_counters()
        told: list[tuple[int, int]] = []
        vectors = cached.embed(texts, progress=lambda c, e: told.append((c, e)))
        assert told[0] == (40, 0) and told[-1] == (40, 260)
        assert [e for _, e in told] == sorted(e for _, e in told) and len(told) == 3  # lookup + two slices
        assert (cached.calls, cached.embedded_texts) == (2, 260) and cache.count() == 300
    whole = embedder.embed(texts)  # one call, as before slices
    cosine = np.sum(vectors * whole, axis=1)
    assert cosine.min() >= 0.999


def _big_page(sections: int) -> str:
    body = "".join(
        f"## Section {i}\n\nJar {i} of the cellar holds plum jam from {1900 + i}.\n\n" for i in range(sections)
    )
    return "# The cellar\n\n" + body


def test_a_long_page_reports_progress_while_it_is_embedded_and_status_shows_it(home, engine):
    engine.sync()  # the vault's seed pages: the page below is then the sync's only file
    write(home, "vault/Cellar.md", _big_page(300))
    events: list[SyncProgress] = []
    seen_by_status = []

    def listen(event: SyncProgress) -> None:
        if not events:
            time.sleep(1.1)  # from now on the sync has run long enough to leave a note for status
        elif not seen_by_status and not event.finished:
            seen_by_status.append(read_status(home, Settings()))
        events.append(event)

    report = engine.sync(progress=listen)
    assert report.embedded_texts > 256  # more than one slice
    for before, after in itertools.pairwise(events):
        assert all(getattr(after, name) >= getattr(before, name) for name in _COUNTS)
    last = events[-1]
    assert (last.files_done, last.files_total) == (1, 1) and last.bytes_done == last.bytes_total > 0
    assert last.texts_embedded == report.embedded_texts
    during = [e for e in events if e.files_done == 0 and 0 < e.bytes_done < e.bytes_total]
    assert during, "no event while the page was being embedded: progress came once per file"
    assert during[0].texts_embedded == 256  # a slice
    # Meanwhile `syncd status` (another process would read the same file) saw it running.
    running = seen_by_status[0].sync
    assert running["running"] and running["pid"] == os.getpid() and running["files_total"] == 1
    after = engine.status()
    assert after.sync is None and after.healthy  # the note goes with the sync


def test_status_tells_a_running_sync_from_one_that_was_cut_short(home, engine, capsys):
    # A short sync writes no note at all.
    write(home, "vault/Tea.md", "# Tea\n\nGreen tea is grassy.\n")
    engine.sync()
    note = Home(home).private_dir / PROGRESS_NAME
    assert not note.exists()
    event = SyncProgress("sync", 3, 10, 300, 1000, 40, 2, 12.0, 3.5, 30.0)
    clock = FakeClock([2.0])
    notes = ProgressFile(Home(home), clock=clock)
    notes.note(event)
    found = read_progress(Home(home))
    assert found.running and found.pid == os.getpid() and found.progress == event  # we hold the home
    notes.stopped()  # an error or an interrupt in a process that lives on
    assert not read_progress(Home(home)).running
    # A process killed halfway: its pid is gone.
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    notes.note(event)
    data = note.read_text().replace(f'"pid": {os.getpid()}', f'"pid": {gone.pid}')
    note.write_text(data)
    assert not read_progress(Home(home)).running
    engine.close()
    assert main(["status", "--home", str(home)]) == 0
    assert "syncing  interrupted at 3/10 files" in capsys.readouterr().out
    with syncd.open(home, embedder=engine.embedder.embedder) as again:
        again.sync()  # nothing to do, and the stale note goes
        assert again.status().sync is None and not note.exists()
    note.write_text("{not json")
    assert read_progress(Home(home)) is None


def test_a_long_sync_logs_a_line_every_so_often_and_a_short_one_none(caplog):
    logger = logging.getLogger("syncd.test_progress")
    clock = FakeClock([4.0])  # every event 4 s after the last
    events = _drive([(1, 100, [(8, 0, [2, 4, 6])]), (1, 100, [(8, 0, [8])])], clock)
    listen = log_every(logger, every_s=10.0, clock=clock)
    with caplog.at_level(logging.INFO, logger="syncd.test_progress"):
        for event in events:
            listen(event)
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) >= 2 and all(line.startswith("indexing: ") for line in lines)
    assert "2/2 files" in lines[-1] and " in " in lines[-1]  # the end, with its duration
    caplog.clear()
    quick = log_every(logger, every_s=10.0, clock=FakeClock([0.1]))
    with caplog.at_level(logging.INFO, logger="syncd.test_progress"):
        for event in events:
            quick(event)
    assert not caplog.records


def test_the_bar_on_a_terminal_is_left_as_the_summary(home):
    write(home, "vault/Cellar.md", _big_page(20))
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 160, 0, 0))
    with subprocess.Popen(
        [sys.executable, "-m", "syncd", "sync", "--home", str(home)],
        stdout=subprocess.PIPE,
        stderr=slave,
        env=os.environ | {"PYTHONPATH": str(REPO)},
    ) as proc:
        os.close(slave)
        shown = b""
        while True:
            try:
                data = os.read(master, 4096)
            except OSError:  # the child closed the terminal
                break
            if not data:
                break
            shown += data
        os.close(master)
        out = proc.stdout.read().decode()
        assert proc.wait(timeout=60) == 0
    screen = shown.decode(errors="replace").replace("\r\n", "\n")
    # What stays on screen: the last redraw of the bar's line, then the summary on stdout.
    final = screen.rstrip("\n").split("\n")[-1].split("\r")[-1]
    assert re.search(r"syncing: .*100%, 4/4 files, \d+ texts embedded.* in \d+s", final), screen
    assert "4 new" in out and "texts embedded" in out
