"""Issue 30 item 4: an interrupted sync or reindex goes on from where it stopped (real processes).

``python -m syncd sync`` (and ``reindex``) run in a subprocess and are stopped at several points:
while the first batch's texts are being embedded (kill -9, SIGINT), once the first batch of files
is written (kill -9, SIGTERM), and halfway through a rebuild (kill -9). The points are the
process's own debug lines (``-vv``), read from its stderr as it writes them; each is written only
once what it reports is durable (the vectors in the embedding cache, the files in the index).

Then ``syncd status`` tells the truth (the same model, exactly the files not indexed yet, no
sync running), the next run writes only the files the first one did not and embeds only the
texts the embedding cache does not hold (counted by the sync itself, not timed), and the index
equals a rebuild of the tree.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import lancedb
import pytest

import syncd

from .cli_helpers import run_main
from .daemon_helpers import daily_log
from .helpers import assert_matches_rebuild, write

REPO = Path(__file__).resolve().parents[1]
# More files than one batch writes (256), with two facts each: the first batch's 512 texts reach
# the model in two slices (256 each), so there is a point between them to stop at; the few files
# past the first batch are what a resumed run has left to write (each file costs its embedding).
FILES = 264
SLICE_KEPT = "embedded 256 texts and kept them in the cache"
BATCH_WRITTEN = "wrote a batch of"


def _corpus(home: Path) -> None:
    start = dt.date(2025, 1, 1)
    for i in range(FILES):
        day = (start + dt.timedelta(days=i)).isoformat()
        facts = [
            f"Ana noted item {2 * i} of her reading list, number {i}.",
            f"Ana moved box {2 * i + 1} to shelf {i % 17}.",
        ]
        write(home, f"memory/users/ana/{day}.md", daily_log(facts, day=day))


def _env() -> dict[str, str]:
    return os.environ | {"PYTHONPATH": str(REPO)}


def _syncd(home: Path, *args: str) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [sys.executable, "-m", "syncd", *args, "--home", str(home)],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def _hear_ctrl_c() -> None:
    """In the child, before Python starts: SIGINT as a terminal delivers it. A suite run in the
    background by a non-interactive shell (CI, ``nohup ... &``) inherits SIGINT ignored, and Python
    then never turns it into KeyboardInterrupt: the sync would run to its end."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _stop_at(home: Path, command: str, marker: str, signum: int) -> tuple[int, str]:
    """Run ``syncd -vv <command>``, send ``signum`` as soon as it logs ``marker``; its exit
    status and stderr."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "syncd", "-vv", command, "-q", "--home", str(home)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
        preexec_fn=_hear_ctrl_c,
    )
    seen = []
    try:
        for line in proc.stderr:
            seen.append(line)
            if marker in line:
                proc.send_signal(signum)
                break
        else:
            pytest.fail(f"`syncd {command}` ended before logging {marker!r}:\n{''.join(seen)[-3000:]}")
        rest = proc.stderr.read()
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stderr.close()
    return proc.returncode, "".join(seen) + rest


def _texts_cached(home: Path) -> int:
    with sqlite3.connect(home / ".syncd" / "embed_cache.sqlite") as conn:
        return conn.execute("SELECT count(*) FROM vectors").fetchone()[0]


def _files_written(index_dir: Path) -> int:
    return lancedb.connect(str(index_dir / "lance")).open_table("files").count_rows()


def _status_out(home: Path, *args: str) -> str:
    """``syncd status ARGS``'s output, run in this process (tests/cli_helpers.py): what it reads is
    on disk, written by the processes stopped above; a process of its own would prove nothing more."""
    done = run_main("status", *args, "--home", str(home))
    assert done.returncode == 0, done.stderr
    return done.stdout


def _status(home: Path) -> dict:
    return json.loads(_status_out(home, "--json"))


def _summary_numbers(out: str) -> tuple[int, int]:
    """(files new, texts embedded) from `syncd sync`'s summary line."""
    match = re.search(r"(\d+) new, .* (\d+) texts embedded", out)
    assert match, out
    return int(match[1]), int(match[2])


def _interrupted_status_is_truthful(home: Path, written: int) -> list[str]:
    """``syncd status`` after the interruption: the same model (never "another model"), no sync
    running, and as new exactly the files the interrupted sync did not write. Those files."""
    status = _status(home)
    assert status["compatible"] and status["incompatible"] is None, status
    assert status["index"] == "ok" and status["files"] == written
    assert status["sync"] is None or not status["sync"]["running"]
    text = _status_out(home)
    assert "another model" not in text, text
    if status["sync"] is not None:  # the sync had run long enough to leave a note
        assert "syncing  interrupted" in text, text
    return status["stale"]["new"]


def _resume_and_check(home: Path, embedder, pending: list[str], cached_before: int) -> None:
    """The next sync writes just ``pending`` and embeds just what the cache lacks; the index then
    equals a rebuild, which embeds nothing at all."""
    new, embedded = _summary_numbers(_syncd(home, "sync", "-q").stdout)
    cached_after = _texts_cached(home)
    assert new == len(pending), "files the interrupted sync wrote were written again"
    assert embedded == cached_after - cached_before, "a text the cache held was embedded again"
    assert embedded < cached_after, "the interrupted sync's work was not kept"
    with syncd.open(home, embedder=embedder) as engine:
        status = engine.status()
        assert status.healthy and status.sync is None and status.files == FILES + 3  # + the vault's seed pages
        assert_matches_rebuild(engine)
        assert engine.embedder.embedded_texts == 0, "the rebuild found a text missing from the cache"


@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGINT], ids=["kill-9", "sigint"])
def test_a_sync_stopped_while_embedding_its_first_batch_goes_on(home, embedder, signum):
    _corpus(home)
    code, err = _stop_at(home, "sync", SLICE_KEPT, signum)
    if signum == signal.SIGINT:
        assert code == 130 and "Traceback" not in err, err[-3000:]
        assert "syncd: sync interrupted" in err and "the next `syncd sync` goes on from there" in err
    else:
        assert code == -signal.SIGKILL
    cached = _texts_cached(home)
    assert cached >= 256, "a slice reported kept was not in the cache"
    written = _files_written(home / ".syncd" / "index")
    assert written == 0  # stopped before its first batch was written
    pending = _interrupted_status_is_truthful(home, written)
    assert len(pending) == FILES + 3
    _resume_and_check(home, embedder, pending, cached)


@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGTERM], ids=["kill-9", "sigterm"])
def test_a_sync_stopped_after_its_first_batch_goes_on(home, embedder, signum):
    _corpus(home)
    code, err = _stop_at(home, "sync", BATCH_WRITTEN, signum)
    if signum == signal.SIGTERM:
        assert code == 143 and "Traceback" not in err, err[-3000:]
        said = re.search(r"syncd: sync interrupted with (\d+)/(\d+) files written and (\d+) texts embedded", err)
        assert said, err[-3000:]
        assert int(said[1]) == 256 and int(said[2]) == FILES + 3
    else:
        assert code == -signal.SIGKILL
    cached = _texts_cached(home)
    if signum == signal.SIGTERM:
        assert cached >= int(said[3]) > 0, "texts reported embedded were not kept"
    written = _files_written(home / ".syncd" / "index")
    assert written == 256
    pending = _interrupted_status_is_truthful(home, written)
    assert len(pending) == FILES + 3 - written
    _resume_and_check(home, embedder, pending, cached)


def test_an_interrupted_reindex_goes_on_from_what_it_built_aside(home, embedder):
    _corpus(home)
    _syncd(home, "sync", "-q")
    before = _status(home)
    # Without its cache the rebuild embeds everything again: what the resumed one embeds shows.
    (home / ".syncd" / "embed_cache.sqlite").unlink()
    code, _ = _stop_at(home, "reindex", BATCH_WRITTEN, signal.SIGKILL)
    assert code == -signal.SIGKILL
    aside = home / ".syncd" / "index" / "rebuild"
    written, cached = _files_written(aside), _texts_cached(home)
    assert written == 256 and cached >= 512
    status = _status(home)
    # The old index serves meanwhile, whole and fresh; status says a rebuild is waiting.
    assert status["fresh"] and status["files"] == before["files"] and status["facts"] == before["facts"]
    assert status["reindex_interrupted"] and status["incompatible"] is None
    assert "reindex  interrupted" in _status_out(home)
    out = _syncd(home, "reindex", "-q").stdout
    match = re.search(
        r"\((\d+) texts embedded, the rest from the cache\); went on from an interrupted "
        r"rebuild that had written (\d+) of them",
        out,
    )
    assert match, out
    assert int(match[2]) == written, "files the interrupted rebuild wrote were written again"
    assert int(match[1]) == _texts_cached(home) - cached, "a text the cache held was embedded again"
    assert not aside.exists() and not _status(home)["reindex_interrupted"]
    with syncd.open(home, embedder=embedder) as engine:
        assert engine.status().healthy
        assert_matches_rebuild(engine)
        assert engine.embedder.embedded_texts == 0


def test_an_index_left_without_meta_by_an_older_syncd_is_not_called_another_models(home, embedder):
    """A first sync of a syncd older than this one, killed halfway, left rows and no meta.json:
    status says exactly that (not "another model"), and the next sync rebuilds it."""
    write(home, "vault/Tea.md", "# Tea\n\nGreen tea is grassy.\n")
    with syncd.open(home, embedder=embedder) as engine:
        engine.sync()
    (home / ".syncd" / "index" / "meta.json").unlink()
    text = _status_out(home)
    assert "another model" not in text and "does not say which model built its rows" in text
    with syncd.open(home, embedder=embedder) as engine:
        assert not engine.status().compatible
        engine.sync()
        assert engine.status().healthy and engine.status().incompatible is None
