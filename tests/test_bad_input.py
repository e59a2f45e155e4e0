"""Bad input on disk costs one file, never the index, a user's memory or the daemon: bytes that are
not UTF-8, file names that are not UTF-8, folders nested deeper than Python's recursion limit, a
rebuild interrupted halfway."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from syncd.cli import main
from syncd.config import Settings
from syncd.errors import ParseError
from syncd.formats import decode_markdown_lossy
from syncd.memory import MemoryManager
from syncd.sync.walk import walk

from .daemon_helpers import running_daemon, wait_for
from .helpers import assert_same_index, snapshot, write

LOG = "memory/users/ana/2026-11-22.md"
DAMAGED = (
    b"# 2026-11-22\n\n## 09:30 chat:c1 session:s1\n- [preference] Likes green tea.\n"
    b"- [health] Allergic to pe\xffanuts.\n- [work] Works as a nurse in Lyon.\n"
)


def _manager(engine) -> MemoryManager:
    return MemoryManager(
        engine,
        settings=Settings(llm_model="gpt-4o-mini", core_refresh_importance=0.95),
        job_llm_options={"summarise": {"mock_response": "- Likes tea; a nurse."}},
    )


# ------------------------------------------------------------------------------ bytes that are not UTF-8


@settings(max_examples=300)
@given(lines=st.lists(st.binary(max_size=12).map(lambda b: b.replace(b"\n", b"")), min_size=1, max_size=8))
def test_lossy_decoding_names_exactly_the_lines_with_bad_bytes(lines):
    data = b"\n".join(lines)
    text, warning = decode_markdown_lossy(data)
    assert text == data.decode("utf-8", "replace")
    bad = [n for n, line in enumerate(lines, 1) if _invalid(line)]
    if not bad:
        assert warning is None
    else:
        assert warning is not None
        named = warning.split(" on line")[1].split(";")[0].lstrip("s ").replace(" and more", "")
        assert [int(n) for n in named.split(", ")] == bad[:5]


def _invalid(line: bytes) -> bool:
    try:
        line.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False


def test_one_bad_byte_costs_one_line_not_the_daily_log(engine, home, capsys):
    write(home, LOG, DAMAGED)
    report = engine.sync()
    assert "line 5" in report.errors[LOG]
    contents = {h.content for h in engine.search("nurse tea", user_id="ana", kind="fact", limit=10)}
    assert {"Likes green tea.", "Works as a nurse in Lyon.", "Allergic to pe\ufffdanuts."} <= contents
    assert (home / LOG).read_bytes() == DAMAGED  # never "repaired" on disk
    status = engine.status()
    assert status.fresh and not status.healthy and "line 5" in status.errors[LOG]
    assert not engine.sync().errors  # said once, not on every sync


def test_cli_sync_prints_the_problem_once_and_status_is_not_healthy(home, capsys):
    write(home, LOG, DAMAGED)
    env = os.environ | {"PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    done = subprocess.run(
        [sys.executable, "-m", "syncd", "sync", "--home", str(home), "-q"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("2026-11-22.md") == 1, done.stderr
    assert main(["status", "--home", str(home), "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert status["healthy"] is False and "line 5" in status["errors"][LOG]


def test_a_damaged_daily_log_does_not_stop_the_users_memory(engine, home):
    write(home, "memory/users/ana/2026-11-21.md", "# 2026-11-21\n\n- [preference] Reads science fiction.\n")
    write(home, LOG, DAMAGED)
    engine.sync()
    manager = _manager(engine)
    store = manager.store(user_id="ana")
    assert [f.content for f in store.iter_facts()][-2:] == ["Allergic to pe\ufffdanuts.", "Works as a nurse in Lyon."]
    assert asyncio.run(manager.refresh_core_memory_facts("ana")).strip() == "- Likes tea; a nurse."
    assert asyncio.run(manager.retrieve_relevant_memories("nurse", user_id="ana"))


def test_a_rewrite_of_a_damaged_log_is_refused_and_writes_nothing(engine, home):
    write(home, LOG, DAMAGED)
    engine.sync()
    store = _manager(engine).store(user_id="ana")
    fact = next(f for f in store.iter_facts() if f.content == "Works as a nurse in Lyon.")
    with pytest.raises(ParseError) as info:
        store.delete_fact(fact.id)
    assert info.value.path == LOG and info.value.line == 5
    assert (home / LOG).read_bytes() == DAMAGED


# ------------------------------------------------------------------------------ names that are not UTF-8


def _bad_name(home: Path) -> Path:
    path = Path(os.fsdecode(bytes(home) + b"/vault/bad\xffname.md"))
    path.write_bytes(b"# Bad\n\nA page whose name is not UTF-8.\n")
    return path


def test_a_file_name_that_is_not_utf8_is_a_per_file_error(engine, home):
    write(home, "vault/Tea.md", "# Tea\n\nGreen tea is grassy.\n")
    _bad_name(home)
    report = engine.sync()
    assert report.errors.keys() == {"vault/bad\\xffname.md"}
    assert "not valid UTF-8" in report.errors["vault/bad\\xffname.md"]
    assert engine.search("grassy tea")[0].path == "vault/Tea.md"
    assert not engine.sync().errors
    before = snapshot(engine)
    engine.reindex()
    assert_same_index(snapshot(engine), before)
    assert "vault/bad\\xffname.md" in engine.status().errors


def test_cli_sync_reindex_and_status_survive_a_bad_name(home, capsys):
    _bad_name(home)
    # --no-commit: committing such a name is the history layer's part (see the report).
    for command in (
        ["sync", "-q", "--no-commit"],
        ["reindex", "-q"],
        ["sync", "-q", "--no-commit"],
        ["status", "--json"],
    ):
        assert main([*command, "--home", str(home)]) == 0, command
    out = capsys.readouterr().out
    assert "vault/bad\\\\xffname.md" in out  # in status' JSON, escaped once more


def test_an_interrupted_reindex_leaves_the_old_index_whole(engine, home):
    for i in range(300):  # more than one apply batch (256 files)
        write(home, f"vault/notes/n{i:03}.md", f"# Note {i}\n\nNote number {i} about tea.\n")
    engine.sync()
    before = snapshot(engine)

    def interrupt(event) -> None:
        if event.files_done:  # once the first batch is written aside
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        engine.reindex(progress=interrupt)
    assert_same_index(snapshot(engine), before)
    # What it built aside is kept for the next rebuild to go on from (tests/test_resume.py).
    assert (engine.index.folder / "rebuild").exists()
    engine.reindex()
    assert_same_index(snapshot(engine), before)
    assert not (engine.index.folder / "rebuild").exists()


# ------------------------------------------------------------------------------ deep folders

DEPTH = 1100


def _deep(root: Path, depth: int = DEPTH) -> Path:
    """``root/d/d/.../d`` (``depth`` folders), made one level at a time (Path.mkdir(parents=True)
    recurses too)."""
    root.mkdir(exist_ok=True)
    path = root
    for _ in range(depth):
        path = path / "d"
        if not path.is_dir():
            os.mkdir(path)
    return path


@pytest.fixture
def flattened(home):
    """Deep trees are removed here, bottom up: pytest's own clean-up of tmp_path recurses."""
    yield
    folders = []
    for folder, _dirs, files in walk(home):
        folders.append(folder)
        for name in files:
            os.unlink(os.path.join(folder, name))
    for folder in reversed(folders):
        os.rmdir(folder)


def test_sync_and_status_reach_any_depth(engine, home, capsys, flattened):
    deep = _deep(home / "vault")
    write(deep, "Deep.md", "# Deep\n\nA note at the bottom of the well.\n")
    rel = "vault/" + "d/" * DEPTH + "Deep.md"
    engine.sync()
    assert rel in engine.index.files()
    assert engine.status().fresh
    assert main(["status", "--home", str(home), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["fresh"]


def test_the_daemon_watches_a_deep_tree(home, embedder, caplog, flattened):
    _deep(home / "vault")
    with (
        caplog.at_level(logging.WARNING, logger="syncd"),
        running_daemon(home, embedder, reconcile_interval_s=3600) as run,
    ):
        run.settle()
        assert run.daemon.watcher.failure is None
        deep = _deep(home / "vault", DEPTH - 10)
        write(deep, "New.md", "# New\n\nWritten while watching.\n")
        rel = "vault/" + "d/" * (DEPTH - 10) + "New.md"
        wait_for(lambda: rel in run.reader.index.files(), 30, "the deep edit to be indexed from its event")
        assert run.daemon.reconciles == 1
        assert run.thread.is_alive()
