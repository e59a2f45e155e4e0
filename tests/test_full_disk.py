"""A full disk: every write either saves or says it did not (``StorageError.saved``), nothing
half-written stays behind, and the index heals on the next pass once there is room again.

Each test runs twice. Once on a real size-limited tmpfs filled to the last byte (mounting needs
root; where the mount is refused that run says why and skips). Once on an injected full disk that
runs on every machine: ``ENOSPC`` raised at the one place each writer's bytes reach the disk --
``syncd.home.write_some`` for the markdown, LanceDB's table writes (with the error LanceDB itself
raises on a full disk) and the embedding cache's SQLite statements ("database or disk is full").
"""

from __future__ import annotations

import errno
import logging
import os
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from lancedb.table import LanceTable

import syncd
from syncd.daemon.logfile import daemon_log
from syncd.errors import StorageError
from syncd.home import Home, atomic_write, blob_sha, durable_append
from syncd.home import disk as home_module  # where write_some is called from
from syncd.index.embed_cache import CachedEmbedder, EmbeddingCache

from .cli_helpers import run_main
from .daemon_helpers import warm_embed_cache
from .helpers import assert_matches_rebuild, write

LOG = "memory/users/ana/2026-03-01.md"
OTHER = "memory/users/ana/2026-03-02.md"


class SmallDisk:
    """A tmpfs of ``size`` mounted at ``root``; ``fill()`` takes every free byte, ``free()`` gives
    them back."""

    def __init__(self, root: Path):
        self.root = root
        self._filler = root / "filler"

    def fill(self) -> None:
        fd = os.open(self._filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        try:
            block = b"\0" * 4096
            while True:
                try:
                    os.write(fd, block)
                except OSError as exc:
                    if exc.errno != errno.ENOSPC:
                        raise
                    break
            # Then the last partial block, so not even a page's slack is left.
            for size in (2048, 1024, 512, 256, 64, 16, 1):
                try:
                    while True:
                        os.write(fd, b"\0" * size)
                except OSError as exc:
                    if exc.errno != errno.ENOSPC:
                        raise
        finally:
            os.close(fd)

    def free(self) -> None:
        self._filler.unlink(missing_ok=True)


def _mount(where: Path, size: str) -> Iterator[SmallDisk]:
    where.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        pytest.skip("a real full disk needs a tmpfs mount, which needs root (CI runs as root)")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], capture_output=True, text=True
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs at {where}: {done.stderr.strip() or done.returncode}")
    try:
        yield SmallDisk(where)
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


# What LanceDB 13 raised on the real tmpfs when a table write ran out of room (captured there).
_LANCE_FULL = (
    "lance error: LanceError(IO): No space left on device (os error 28), /root/.cargo/registry/src/"
    "index.crates.io-1949cf8c6b5b557f/lance-file-13.0.0/src/writer/structural.rs:258:9"
)
_LANCE_WRITES = ("add", "delete", "update", "merge_insert", "optimize", "create_index", "drop_index")


class _FullConnection:
    """An SQLite connection whose writes fail as SQLite's do on a full disk; reads go through."""

    def __init__(self, conn: sqlite3.Connection, disk: InjectedDisk):
        self._conn, self._disk = conn, disk

    def _check(self, sql: str) -> None:
        if self._disk.full and sql.lstrip().upper().startswith(("INSERT", "UPDATE", "DELETE", "REPLACE")):
            raise sqlite3.OperationalError("database or disk is full")

    def execute(self, sql: str, *args):
        self._check(sql)
        return self._conn.execute(sql, *args)

    def executemany(self, sql: str, *args):
        self._check(sql)
        return self._conn.executemany(sql, *args)

    def __getattr__(self, name: str):
        return getattr(self._conn, name)


class InjectedDisk:
    """A disk under ``root`` that fills up without a mount: ``fill()`` leaves ``slack`` bytes (a
    partly used last page, as on tmpfs) for the markdown writes, then ``ENOSPC``; LanceDB's and the
    embedding cache's writes under ``root`` fail at once; ``free()`` gives the room back."""

    def __init__(self, root: Path, monkeypatch: pytest.MonkeyPatch, slack: int = 100):
        self.root = root
        self.full = False
        self._room = 0
        self._slack = slack
        real_write = home_module.write_some

        def write_some(fd: int, data) -> int:
            if not self.full or not self.holds(os.readlink(f"/proc/self/fd/{fd}")):
                return real_write(fd, data)
            if self._room == 0:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            taken = real_write(fd, data[: self._room])
            self._room -= taken
            return taken

        monkeypatch.setattr(home_module, "write_some", write_some)
        for name in _LANCE_WRITES:
            monkeypatch.setattr(LanceTable, name, self._refusing(getattr(LanceTable, name)))
        # White-box (fault injection): the cache's SQLite connection is where its writes can fail.
        real_connection = EmbeddingCache._connection
        monkeypatch.setattr(EmbeddingCache, "_connection", lambda cache: self._connection(cache, real_connection))

    def holds(self, path: str | Path) -> bool:
        """Whether ``path`` is on this disk."""
        return Path(path).is_relative_to(self.root)

    def _refusing(self, method):
        disk = self

        def refusing(table, *args, **kwargs):
            if disk.full and disk.holds(table.uri):
                raise RuntimeError(_LANCE_FULL)
            return method(table, *args, **kwargs)

        return refusing

    def _connection(self, cache: EmbeddingCache, real):
        conn = real(cache)
        return _FullConnection(conn, self) if self.holds(cache.path) else conn

    def fill(self) -> None:
        self.full, self._room = True, self._slack

    def free(self) -> None:
        self.full = False


@pytest.fixture(params=["tmpfs", "injected"])
def disk(request, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[SmallDisk | InjectedDisk]:
    if request.param == "tmpfs":
        yield from _mount(tmp_path / "disk", "1m")
    else:
        (tmp_path / "disk").mkdir()
        yield InjectedDisk(tmp_path / "disk", monkeypatch)


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".syncd-tmp"))


# ---------------------------------------------------------------------------------------------
# The two writes of markdown


def test_atomic_write_on_a_full_disk_writes_nothing_and_says_so(disk: SmallDisk | InjectedDisk) -> None:
    old = disk.root / "old.md"
    old.write_bytes(b"- [fact] Likes tea.\n")
    disk.fill()
    for path in (old, disk.root / "new.md"):
        with pytest.raises(StorageError) as err:
            atomic_write(path, b"- [fact] Likes coffee.\n" * 2000)
        assert err.value.saved is False
        assert err.value.path == str(path)
        assert "no space left" in str(err.value)
    assert old.read_bytes() == b"- [fact] Likes tea.\n"
    assert not (disk.root / "new.md").exists()
    assert _leftovers(disk.root) == []


def test_an_append_that_fills_the_disk_part_way_leaves_no_half_line(disk: SmallDisk | InjectedDisk) -> None:
    log = disk.root / "log.md"
    log.write_bytes(b"# 2026-03-01\n")
    disk.fill()  # the file's own last page still has room: the append is taken in part
    with pytest.raises(StorageError) as err:
        durable_append(log, b"- [fact] " + b"x" * 9000 + b"\n", expected_size=13)
    assert err.value.saved is False
    assert log.read_bytes() == b"# 2026-03-01\n"


# ---------------------------------------------------------------------------------------------
# The index and the embedding cache under a full .syncd/


@pytest.fixture(params=["tmpfs", "injected"])
def full_index_home(request, tmp_path: Path, embedder, monkeypatch) -> Iterator[tuple[Path, SmallDisk | InjectedDisk]]:
    """A home on the ordinary disk whose ``.syncd/`` (index, cache, lock) is a small disk that
    fills up: the markdown can be saved while the index cannot."""
    home = syncd.init(tmp_path / "home").home
    state = home / ".syncd"
    if request.param == "injected":
        yield home, InjectedDisk(state, monkeypatch)
        return
    keep = {p.name: p.read_bytes() for p in state.iterdir() if p.is_file()}
    for small in _mount(state, "8m"):
        for name, data in keep.items():
            (state / name).write_bytes(data)
        yield home, small


def test_a_write_whose_index_is_full_is_saved_says_so_and_heals(full_index_home, embedder) -> None:
    home, small = full_index_home
    write(home, OTHER, "# 2026-03-02\n\n## 08:00\n- [fact] Runs on Sundays.\n")
    with syncd.open(home, embedder=embedder) as engine:
        engine.sync()
        small.fill()
        with pytest.raises(StorageError) as err:
            engine.write_file(LOG, b"# 2026-03-01\n\n## 09:00\n- [preference] Likes green tea.\n")
        assert err.value.saved is True
        assert "no space left" in str(err.value) and ".cargo" not in str(err.value)
        assert (home / LOG).read_bytes().endswith(b"Likes green tea.\n")
        assert LOG in engine.status().stale["new"]
        small.free()
        # The next pass over any path redoes the one that failed.
        engine.write_file(OTHER, b"# 2026-03-02\n\n## 08:00\n- [fact] Runs on Saturdays.\n")
        assert engine.index.files()[LOG].sha == blob_sha((home / LOG).read_bytes())
        hits = engine.search("green tea", user_id="ana", limit=3)
        assert hits and hits[0].path == LOG
        assert engine.status().fresh
        assert_matches_rebuild(engine)


def test_a_full_sync_on_a_full_index_disk_raises_a_storage_error_and_heals(full_index_home, embedder) -> None:
    home, small = full_index_home
    with syncd.open(home, embedder=embedder) as engine:
        engine.sync()
        small.fill()
        for i in range(3):
            write(home, f"vault/notes/n{i}.md", f"# Note {i}\n\nAbout kites and wind {i}.\n")
        with pytest.raises(StorageError) as err:
            engine.sync()
        assert "no space left" in str(err.value)
        assert sorted(engine.status().stale["new"]) == [f"vault/notes/n{i}.md" for i in range(3)]
        small.free()
        engine.sync()
        assert engine.status().fresh
        assert_matches_rebuild(engine)


def test_a_full_embedding_cache_warns_once_naming_the_disk_and_never_fails(
    disk: SmallDisk | InjectedDisk, embedder, caplog: pytest.LogCaptureFixture
) -> None:
    cached = CachedEmbedder(embedder, EmbeddingCache(disk.root / "cache.sqlite"))
    disk.fill()
    caplog.set_level(logging.WARNING, logger="syncd")
    vectors = [cached.embed([f"fact number {i} about {w}" for w in ("tea", "kites", "rain")]) for i in range(5)]
    assert all(v.shape == (3, 384) for v in vectors)
    expected = embedder.embed([f"fact number 0 about {w}" for w in ("tea", "kites", "rain")])
    np.testing.assert_allclose(vectors[0], expected, atol=1e-6)
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1, warnings
    assert "no space left" in warnings[0] and str(disk.root) in warnings[0]


# ---------------------------------------------------------------------------------------------
# The daemon's log


def test_a_full_disk_under_the_daemon_log_is_said_once_never_as_a_traceback(tmp_path: Path, capsys, caplog) -> None:
    """logging's own handler printed '--- Logging error ---' and a traceback on stderr for every
    line the daemon logged while the disk was full."""
    caplog.set_level(logging.INFO, logger="syncd")  # what daemon_log sets, put back after the test
    home = syncd.init(tmp_path / "home").home
    log = logging.getLogger("syncd.test")
    for small in _mount(home / ".syncd", "1m"):
        handler = daemon_log(Home(home))
        try:
            log.info("before the disk fills")
            small.fill()
            for i in range(3):
                log.info("line %d: %s", i, "x" * 5000)
            small.free()
            log.info("once there is room again")
        finally:
            logging.getLogger("syncd").removeHandler(handler)
            handler.close()
        kept = (home / ".syncd" / "daemon.log").read_text()
    told = capsys.readouterr().err
    assert "Traceback" not in told and "Logging error" not in told, told
    assert told == (
        f"syncd: warning: cannot write the daemon's log {home}/.syncd/daemon.log: no space left on the device; "
        "syncd goes on without it until it can be written\n"
    )
    assert "before the disk fills" in kept
    assert kept.endswith("once there is room again\n(3 log line(s) before the one above could not be written here)\n")


# ---------------------------------------------------------------------------------------------
# The command line on a full disk


def test_a_home_on_a_full_disk_is_searched_and_a_sync_names_the_disk(tmp_path: Path, embedder) -> None:
    """Reading needs no room: `syncd search` and `syncd status` failed with 'cannot open the
    embedding cache ...: no space left on the device' (SQLite makes a file to open it); and
    `syncd sync` said only 'No space left on device', from writing its name into the lock."""
    for small in _mount(tmp_path / "disk", "32m"):
        home = syncd.init(small.root / "home").home
        warm_embed_cache(home, embedder)
        write(home, LOG, "# 2026-03-01\n\n## 09:00\n- [preference] Likes green tea.\n")
        with syncd.open(home, embedder=embedder) as engine:
            engine.sync()
            engine.commit()
        write(home, OTHER, "# 2026-03-02\n\n## 08:00\n- [fact] Runs on Sundays.\n")
        small.fill()
        searched = run_main("search", "green tea", "--home", str(home))
        assert searched.returncode == 0 and "Likes green tea." in searched.stdout, searched.stderr
        status = run_main("status", "--home", str(home))
        assert status.returncode == 0 and OTHER in status.stdout, status.stderr
        synced = run_main("sync", "-q", "--home", str(home))
        assert synced.returncode == 1
        assert synced.stderr == (
            f"syncd: error: cannot take the home's lock {home}/.git/syncd/lock: no space left on the device; "
            "free space on the disk holding it\n"
        )
        small.free()
        assert run_main("sync", "-q", "--home", str(home)).returncode == 0


def test_root_takes_the_lock_on_a_disk_full_but_for_its_reserved_blocks(tmp_path):
    """ext4 keeps blocks back that only root may write into (5% by default). Full for everyone
    else, the lock's check for a full disk refused root too, though root could still write: a
    root-run daemon, sync or agent (a container's usual user) was refused on a disk past 95%.
    A real ext4 image, half of it reserved, filled by an unprivileged user."""
    if os.geteuid() != 0:
        pytest.skip("a loop-mounted ext4 and an unprivileged filler need root (CI runs as root)")
    image, where = tmp_path / "disk.img", tmp_path / "disk"
    where.mkdir()
    with open(image, "wb") as handle:
        handle.truncate(16 << 20)
    made = subprocess.run(["mkfs.ext4", "-q", "-m", "50", str(image)], capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip(f"cannot make an ext4 image: {made.stderr.strip() or made.returncode}")
    mounted = subprocess.run(["mount", "-o", "loop", str(image), str(where)], capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot loop-mount an ext4 image here: {mounted.stderr.strip() or mounted.returncode}")
    try:
        subprocess.run(["git", "init", "-q", str(where / "home")], check=True)
        home = Home(where / "home")
        home.ensure_private_dir()  # made while there is room: the lock's folder
        where.chmod(0o777)
        filler = "dd if=/dev/zero of=fill bs=1M; dd if=/dev/zero of=fill2 bs=1k; for i in $(seq 200); do echo x > f$i || break; done"
        subprocess.run(
            ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "sh", "-c", filler],
            cwd=where,
            capture_output=True,
            check=False,
        )
        st = os.statvfs(where)
        assert st.f_bavail == 0 < st.f_bfree, (st.f_bavail, st.f_bfree)  # full, but for root's reserve
        lock = home.lock().acquire("syncd sync")
        assert lock.holder() == f"pid {os.getpid()} (syncd sync)"
        lock.release()
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)
