""".syncd/ is derived and may be deleted at any moment, even under a running server: what is not
derived (the lock, the tokens, where the server listens, its socket) lives in the home's private
folder in the git directory, the daemon rebuilds the index it lost, status never says fresh
while the index on disk is gone, and `syncd serve` starts on a fresh clone (no .syncd at all)."""

from __future__ import annotations

import contextlib
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading

import httpx
import numpy as np
import pytest

import syncd
from syncd.config import Settings
from syncd.control.client import ask_daemon
from syncd.control.protocol import socket_path
from syncd.daemon.control import ControlServer
from syncd.engine.status import INDEX_MISSING
from syncd.engine.status_read import read_status
from syncd.errors import HomeError
from syncd.home import Home
from syncd.index.embed_cache import EmbeddingCache
from syncd.server.tokens import TokenStore

from .daemon_helpers import daily_log, git, isolate_git_identity, running_daemon, wait_for, warm_embed_cache
from .helpers import assert_matches_rebuild, poll, snapshot, write
from .server_helpers import server_url, start_serve_process

FACTS = ["Likes green tea.", "Runs the Lyon marathon.", "Plays the cello.", "Is allergic to peanuts."]


@pytest.fixture(autouse=True)
def _git_identity(tmp_path, monkeypatch):
    isolate_git_identity(tmp_path, monkeypatch)


def test_the_private_folder_is_in_the_git_directory_of_the_home_and_of_each_worktree(tmp_path):
    home = syncd.init(tmp_path / "home").home
    assert Home(home).private_dir == home / ".git" / "syncd"
    assert Home(home).lock_path.parent == Home(home).private_dir
    git(home, "worktree", "add", "-q", "-b", "other", str(tmp_path / "tree"))
    worktree = Home(tmp_path / "tree")
    assert worktree.private_dir.resolve() == (home / ".git" / "worktrees" / "tree" / "syncd").resolve()
    folder = worktree.ensure_private_dir()
    assert folder.is_dir() and folder.stat().st_mode & 0o777 == 0o700
    # A lock of one worktree leaves the other free: each is a home of its own.
    with Home(home).lock(), worktree.lock():
        pass
    (tmp_path / "plain" / "memory").mkdir(parents=True)
    with pytest.raises(HomeError, match="syncd init"):
        _ = Home(tmp_path / "plain").private_dir


def test_tokens_of_the_old_layout_are_moved_not_lost(tmp_path):
    home = syncd.init(tmp_path / "home").home
    old = TokenStore(home / ".syncd")  # where tokens were kept before
    admin = old.admin_token(create=True)
    _, ana = old.add("ana")
    listed = subprocess.run(
        [sys.executable, "-m", "syncd", "token", "list", "--json", "--home", str(home)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert listed.returncode == 0, listed.stderr
    assert "ana" in listed.stdout
    assert not (home / ".syncd/tokens.json").exists() and not (home / ".syncd/admin.token").exists()
    store = TokenStore.of(Home(home))
    assert store.check(admin).admin and store.check(ana).user == "ana"
    # A copy left behind (a backup put back) is merged, never in place of newer tokens.
    _, bob = store.add("bob")
    TokenStore(home / ".syncd").add("cy")
    merged = TokenStore.of(Home(home))
    assert [t.user for t in merged.list()] == ["ana", "bob", "cy"] and merged.check(bob).user == "bob"


def test_status_says_missing_never_fresh_while_the_index_is_gone(home, engine, embedder):
    write(home, "memory/users/ana/2026-11-22.md", daily_log(FACTS))
    engine.sync()
    assert engine.status().fresh and read_status(home, Settings()).fresh
    with syncd.open(home, read_only=True, embedder=embedder) as reader:
        assert reader.status().fresh
        _rm_rf(home / ".syncd")
        for status in (engine.status(), reader.status(), read_status(home, Settings())):
            assert status.index == INDEX_MISSING and not status.fresh
            assert status.facts == 0 and "memory/users/ana/2026-11-22.md" in status.stale["new"]
        assert not (home / ".syncd").exists()  # asking made nothing
        engine.reindex()
        assert engine.status().fresh and reader.status().fresh and read_status(home, Settings()).fresh
        assert reader.status().facts == len(FACTS)


def test_an_embedding_cache_deleted_under_it_is_opened_anew(tmp_path):
    cache = EmbeddingCache(tmp_path / "state" / "cache.sqlite")
    vector = np.ones((1, 4), dtype=np.float32)
    cache.put_many("m", ["a"], vector)
    assert not cache.reopen_if_gone()
    shutil.rmtree(tmp_path / "state")
    assert cache.reopen_if_gone()
    cache.put_many("m", ["b"], vector)
    with sqlite3.connect(tmp_path / "state" / "cache.sqlite") as conn:
        assert conn.execute("SELECT count(*) FROM vectors").fetchone()[0] == 1
    cache.close()


def test_a_cache_file_deleted_alone_while_open_leaves_nothing_that_breaks_the_next_open(tmp_path):
    """The file deleted by hand while a process holds it (its -wal and -shm stay, held): another
    process's next open starts a new cache rather than failing on the old file's journal (SQLite:
    "disk I/O error", which syncd then took for a full disk)."""
    path = tmp_path / "state" / "cache.sqlite"
    holder = EmbeddingCache(path)
    holder.put_many("m", ["a"], np.ones((1, 4), dtype=np.float32))
    assert path.with_name("cache.sqlite-wal").exists()
    path.unlink()
    child = (
        "import sys, numpy as np\n"
        "from syncd.index.embed_cache import EmbeddingCache\n"
        f"with EmbeddingCache({str(path)!r}) as cache:\n"
        "    cache.put_many('m', ['b'], np.ones((1, 4), dtype=np.float32))\n"
        "    print(sorted(cache.get_many('m', ['a', 'b'])))\n"
    )
    done = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=120)
    holder.close()
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["[1]"]  # a new cache: what the deleted file held is gone with it


def test_an_engine_closed_leaves_the_cache_checkpointed(home, embedder):
    """Closing an engine closes its embedding cache: no -wal or -shm outlives it in a process that
    goes on (a long-lived notebook, a test), so deleting .syncd's files afterwards is safe."""
    write(home, "vault/Tea.md", "# Tea\n\nGreen tea.\n")
    with syncd.open(home, embedder=embedder) as engine:
        engine.sync()
    assert sorted(p.name for p in (home / ".syncd").glob("embed_cache.sqlite*")) == ["embed_cache.sqlite"]


def test_the_daemon_heals_an_index_deleted_under_it(home, embedder):
    write(home, "memory/users/ana/2026-11-22.md", daily_log(FACTS))
    with running_daemon(home, embedder, watcher_check_s=0.2) as run:
        run.settle()
        _rm_rf(home / ".syncd")
        wait_for(lambda: run.engine.status().fresh, 60, "the daemon to rebuild the index")
        assert run.engine.status().facts == len(FACTS)
        assert (home / ".syncd/.gitignore").read_text() == "*\n"
        assert not git(home, "status", "--porcelain")
        # The cache is a new file, holding what the rebuild embedded: not a deleted one.
        with sqlite3.connect(home / ".syncd/embed_cache.sqlite") as conn:
            assert conn.execute("SELECT count(*) FROM vectors").fetchone()[0] > 0
        run.stop()
        assert_matches_rebuild(run.engine)


def test_the_socket_is_reached_at_a_path_longer_than_unix_sockets_allow(tmp_path, embedder):
    deep = tmp_path.joinpath(*["a-rather-long-folder-name"] * 4)
    home = syncd.init(deep / "home").home
    assert len(str(socket_path(home))) > 108
    with syncd.open(home, embedder=embedder) as engine, ControlServer(engine):
        assert ask_daemon(home, "ping")["home"] == str(home)


def _watch_is_refused(home) -> None:
    """A `syncd watch` beside the server must fail at once on the lock, naming it."""
    second = subprocess.Popen(
        [sys.executable, "-m", "syncd", "watch", "--home", str(home)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _, err = second.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        second.kill()
        second.communicate()
        pytest.fail("a second writer (`syncd watch`) started beside `syncd serve`")
    assert second.returncode == 1 and "only one writer" in err, err
    assert "(syncd serve)" in err, err  # the command holding the home, as the person started it


def test_rm_rf_syncd_under_a_running_server(tmp_path, monkeypatch, embedder):
    home = syncd.init(tmp_path / "home").home
    write(home, "memory/users/ana/2026-11-22.md", daily_log(FACTS))
    git(home, "add", "-A")
    git(home, "commit", "-q", "-m", "facts")
    warm_embed_cache(home, embedder)
    # A token issued by an earlier version (kept under .syncd/): moved at start, so it outlives it.
    _, ana = TokenStore(home / ".syncd").add("ana")
    monkeypatch.setenv("SYNCD_WATCHER_CHECK_S", "0.3")
    proc = start_serve_process(home)
    clients = contextlib.ExitStack()  # the test's HTTP clients, closed with the server (else their sockets leak)
    try:
        url = server_url(home, proc)
        admin = TokenStore.of(Home(home)).admin_token()
        as_admin = clients.enter_context(
            httpx.Client(base_url=url, headers={"Authorization": f"Bearer {admin}"}, timeout=60)
        )
        as_ana = clients.enter_context(
            httpx.Client(base_url=url, headers={"Authorization": f"Bearer {ana}"}, timeout=60)
        )
        wait_for(lambda: as_admin.get("/status").json()["fresh"], 60, "the server to index the home")
        before = as_admin.get("/status").json()
        assert before["facts"] == len(FACTS)

        answers: list[tuple[str, dict]] = []
        stop = threading.Event()

        def watch_status() -> None:
            while not stop.is_set():
                answer = as_admin.get("/status")
                answers.append(("rest", answer.json() if answer.status_code == 200 else {"fresh": False}))
                try:
                    answers.append(("cli", read_status(home, Settings()).to_dict()))
                except Exception as exc:  # noqa: BLE001 - an error is an answer that is not "fresh"
                    answers.append(("cli", {"fresh": False, "error": repr(exc)}))

        _rm_rf(home / ".syncd")
        poller = threading.Thread(target=watch_status)
        poller.start()
        try:
            assert as_admin.get("/status").status_code == 200
            hits = as_ana.get("/memory/archival", params={"query": "tea"})
            assert hits.status_code == 200, hits.text
            _watch_is_refused(home)
            wait_for(
                lambda: as_admin.get("/status").json()["fresh"] and read_status(home, Settings()).fresh,
                120,
                "the server to rebuild the index",
            )
        finally:
            stop.set()
            poller.join(60)
        assert any(not a["fresh"] for _, a in answers), "the deletion was never noticed"
        for source, answer in answers:
            if answer["fresh"]:
                assert (answer["files"], answer["facts"]) == (before["files"], before["facts"]), (source, answer)
        assert ask_daemon(home, "ping")["pid"] == proc.pid  # the socket outlived .syncd/

        added = as_ana.post("/memory/archival", json={"content": "Swims in the lake."})
        assert added.status_code == 200, added.text
        wait_for(lambda: as_admin.get("/status").json()["fresh"], 60, "the new fact to be indexed")
        assert as_admin.get("/status").json()["facts"] == len(FACTS) + 1
        with syncd.open(home, read_only=True, embedder=embedder) as reader:
            healed = snapshot(reader)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
    finally:
        clients.close()
        if proc.poll() is None:
            proc.kill()
    with syncd.open(home, embedder=embedder) as engine:
        engine.reindex()
        rebuilt = snapshot(engine)
    assert healed[0] == rebuilt[0] and [r["id"] for r in healed[1]] == [r["id"] for r in rebuilt[1]]
    assert healed[1] == rebuilt[1]


def test_serve_starts_on_a_fresh_clone(tmp_path, embedder):
    home = syncd.init(tmp_path / "home").home
    write(home, "memory/users/ana/2026-11-22.md", daily_log(FACTS))
    git(home, "add", "-A")
    git(home, "commit", "-q", "-m", "facts")
    git(tmp_path, "clone", "-q", str(home), "clone")
    clone = tmp_path / "clone"
    assert not (clone / ".syncd").exists()
    proc = start_serve_process(clone)
    try:
        url = server_url(clone, proc)
        admin = TokenStore.of(Home(clone)).admin_token()
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {admin}"}, timeout=60) as client:
            wait_for(lambda: client.get("/status").json()["fresh"], 120, "the clone to be indexed")
            assert client.get("/status").json()["facts"] == len(FACTS)
        assert (clone / ".syncd/.gitignore").exists() and (clone / ".syncd/daemon.log").exists()
        assert not git(clone, "status", "--porcelain")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()


def _rm_rf(folder) -> None:
    """``rm -rf``, run again when a writer of the running server adds a file to a folder while
    it is being emptied ("Directory not empty"), as a person would run it again."""

    def removed() -> bool:
        try:
            shutil.rmtree(folder)
        except FileNotFoundError:
            pass
        except OSError:
            return False
        return True

    if not poll(removed, 1):
        shutil.rmtree(folder)  # a last try, failing with the OS's own words


def test_a_users_view_of_the_status_is_never_fresh_while_the_index_is_gone(home, embedder):
    """A user's token sees the status of the files it may read; an index that is missing is
    missing for every user, whatever their files: one with none stale among those it may read
    (no files of theirs, no shared ones) was told fresh while the admin was told missing."""
    import asyncio

    from syncd.api.schemas import StatusInput
    from syncd.home.tokens import Principal
    from syncd.server.service import MemoryService

    write(home, "memory/users/ana/2026-11-22.md", daily_log(FACTS))
    _rm_rf(home / "vault")  # no shared files: bob may read nothing of the home
    with syncd.open(home, embedder=embedder) as writer:
        writer.sync()
    with syncd.open(home, read_only=True, embedder=embedder) as reader:
        service = MemoryService(reader, read_only=True)
        for user in ("ana", "bob"):
            assert asyncio.run(service.status(Principal(user=user, token_id=f"t-{user}"), StatusInput())).fresh
        _rm_rf(home / ".syncd")
        for user in ("ana", "bob"):
            seen = asyncio.run(service.status(Principal(user=user, token_id=f"t-{user}"), StatusInput()))
            assert seen.index == INDEX_MISSING and not seen.fresh and not seen.healthy, user
