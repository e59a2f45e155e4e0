"""The home on disk: id validation, scope from paths, atomic and CAS writes, the writer lock."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import subprocess
import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st

import syncd
from syncd.errors import ConflictError, InvalidIdError, LockedError
from syncd.home import (
    Home,
    HomeLock,
    atomic_write,
    blob_sha,
    durable_append,
    file_blob_sha,
)
from syncd.home.layout import classify_path, is_indexable, validate_id
from syncd.memory import MemoryManager

from .mounts import case_insensitive_folder

HOSTILE_IDS = [
    "",
    "..",
    "../alice",
    "a/b",
    "a\\b",
    "a\x00b",
    "x" * 129,
    ".hidden",
    "-flag",
    "bob'; DROP TABLE facts; --",
    "a b",
    "ana\n",
    "user_id = 'x' OR 1=1",
    "ü",
    "a..b",
    "%2e%2e",
    "*",
]


@pytest.mark.parametrize("bad", HOSTILE_IDS)
def test_hostile_ids_are_refused_with_a_clear_error(bad):
    with pytest.raises(InvalidIdError) as info:
        validate_id("user", bad)
    assert "invalid user id" in str(info.value)


@pytest.mark.parametrize("good", ["ana", "telegram-123456", "u_1", "ana@example.com", "a.b+c", "X" * 128])
def test_ordinary_ids_pass(good):
    assert validate_id("chat", good) == good


def test_non_string_ids_are_refused():
    with pytest.raises(InvalidIdError):
        validate_id("user", 42)


@given(st.text(max_size=200))
def test_any_accepted_id_stays_inside_the_home(tmp_path_factory, value):
    root = tmp_path_factory.getbasetemp() / "home"
    home = Home(root)
    try:
        validate_id("user", value)
    except InvalidIdError:
        return
    path = home.user_dir(value)
    assert path.parent == home.root / "memory" / "users"
    assert path.name == value


def test_scope_comes_from_the_path():
    assert classify_path("memory/users/ana/2026-11-22.md").kind == "daily_log"
    assert classify_path("memory/users/ana/2026-11-22.md").user == "ana"
    assert classify_path("memory/users/ana/MEMORY.md").kind == "memory_md"
    scope = classify_path("memory/users/ana/chats/c1/core/context.md")
    assert (scope.kind, scope.user, scope.chat, scope.label) == ("block", "ana", "c1", "context")
    assert classify_path("memory/core/persona.md").label == "persona"
    assert classify_path("vault/Green tea.md").kind == "vault_page"
    assert classify_path("memory/users/..evil/MEMORY.md").kind == "note"
    assert classify_path("memory/users/ana/notes/x.md") == classify_path("memory/users/ana/notes/x.md")
    assert classify_path("memory/users/ana/notes/x.md").user == "ana"


def test_indexable_files():
    assert is_indexable("vault/a.md")
    assert is_indexable("vault/Tea.MD") and is_indexable("vault/README.Md")  # as lint and Obsidian read them
    for name in ["transcript.jsonl", "state.json", "session.json"]:
        assert is_indexable(f"memory/users/ana/sessions/s1/{name}")
    for name in [
        "sessions/transcripts/s1.jsonl",
        "memory/users/ana/sessions/s1/other.json",
        "memory/users/ana/sessions/transcript.jsonl",
        "memory/users/ana/x/s1/transcript.jsonl",
    ]:
        assert not is_indexable(name), name
    for name in [
        "vault/.a.md.swp",
        "vault/a.md~",
        ".git/x.md",
        ".syncd/x.md",
        "vault/.obsidian/x.md",
        "vault/img.png",
        "vault/.#a.md",
        "vault/a.md.tmp",
    ]:
        assert not is_indexable(name), name


def test_blob_sha_matches_git(tmp_path):
    data = "héllo\r\nwörld\n".encode()
    (tmp_path / "f").write_bytes(data)
    out = subprocess.run(["git", "hash-object", str(tmp_path / "f")], capture_output=True, text=True)
    assert blob_sha(data) == out.stdout.strip()


def test_atomic_write_replaces_and_keeps_mode(tmp_path):
    target = tmp_path / "a" / "x.md"
    atomic_write(target, b"one\n")
    os.chmod(target, 0o600)
    atomic_write(target, b"two\n")
    assert target.read_bytes() == b"two\n"
    assert target.stat().st_mode & 0o777 == 0o600
    assert [p.name for p in target.parent.iterdir()] == ["x.md"]


def test_cas_detects_a_change_between_read_and_write(tmp_path):
    target = tmp_path / "x.md"
    target.write_bytes(b"mine\n")
    seen = file_blob_sha(target)
    target.write_bytes(b"someone else's edit\n")
    with pytest.raises(ConflictError) as info:
        atomic_write(target, b"my rewrite\n", expected_sha=seen)
    assert target.read_bytes() == b"someone else's edit\n"
    assert str(target) in str(info.value)
    assert [p.name for p in tmp_path.iterdir()] == ["x.md"]


def test_cas_create_only_refuses_an_existing_file(tmp_path):
    target = tmp_path / "x.md"
    atomic_write(target, b"first\n", expected_sha=None)
    with pytest.raises(ConflictError):
        atomic_write(target, b"second\n", expected_sha=None)
    assert target.read_bytes() == b"first\n"


def test_cas_succeeds_when_nothing_changed(tmp_path):
    target = tmp_path / "x.md"
    target.write_bytes(b"v1\n")
    new_sha = atomic_write(target, b"v2\n", expected_sha=file_blob_sha(target))
    assert new_sha == file_blob_sha(target)


def test_durable_append_guards_against_interleaving(tmp_path):
    target = tmp_path / "log.jsonl"
    size = durable_append(target, b"a\n")
    size = durable_append(target, b"b\n", expected_size=size)
    with pytest.raises(ConflictError):
        durable_append(target, b"c\n", expected_size=size - 1)
    assert target.read_bytes() == b"a\nb\n"


def _try_lock(path, queue):
    try:
        HomeLock(path).acquire("second")
        queue.put("acquired")
    except LockedError as exc:
        queue.put(str(exc))


def test_second_lock_holder_gets_a_clear_error(tmp_path):
    lock = HomeLock(tmp_path / ".syncd" / "lock").acquire("first")
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=_try_lock, args=(lock.path, queue))
    proc.start()
    proc.join(30)
    message = queue.get(timeout=5)
    assert f"pid {os.getpid()}" in message and "only one writer" in message
    lock.release()
    proc = ctx.Process(target=_try_lock, args=(lock.path, queue))
    proc.start()
    proc.join(30)
    assert queue.get(timeout=5) == "acquired"


def test_lock_is_exclusive_within_one_process_too(tmp_path):
    with HomeLock(tmp_path / "lock"):
        with pytest.raises(LockedError):
            HomeLock(tmp_path / "lock").acquire()


@pytest.mark.parametrize("label", ["pid 99999999999999999999 (syncd watch)", "pid \u00b2 (syncd watch)", "pid", ""])
def test_a_held_lock_with_any_label_is_refused_with_a_lock_error(tmp_path, label):
    """The label of a held lock is read to tell a live holder from a free lock: a number too
    large for a pid (OverflowError) or a digit that is not ASCII (ValueError from int) escaped
    as a bare exception instead of LockedError."""
    path = tmp_path / "lock"
    with HomeLock(path):
        path.write_text(label)
        with pytest.raises(LockedError):
            HomeLock(path).acquire("second")


def test_relabelling_never_leaves_the_lock_saying_nothing(tmp_path):
    """A waiting writer reads an empty label as a holder letting go (no daemon): relabelling
    truncated, then wrote. It now writes over the old label, then cuts it to length, and the
    label is read by its first line, so what is read meanwhile names the old role or the new."""
    path = tmp_path / "lock"
    lock = HomeLock(path).acquire("syncd engine")
    seen = set()
    stop = threading.Event()

    def read() -> None:
        while not stop.is_set():
            seen.add(HomeLock(path).holder())

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for n in range(300):
            lock.relabel("syncd watch" if n % 2 else "syncd engine-long-role")
    finally:
        stop.set()
        reader.join()
        lock.release()
    assert None not in seen
    assert {label.rsplit("(", 1)[1] for label in seen} <= {"syncd watch)", "syncd engine)", "syncd engine-long-role)"}


# -- ids that differ only by case ----------------------------------------------------------------


def test_a_user_chat_or_session_id_differing_only_by_case_from_a_folder_there_is_refused(tmp_path, embedder):
    home = syncd.init(tmp_path / "home").home
    with syncd.open(home, embedder=embedder) as engine, MemoryManager(engine) as memory:
        asyncio.run(memory.add_memory("Likes green tea.", "Ana", dedup=False))
        asyncio.run(memory.update_memory_block("context", "On the train.", "Phone", "Ana"))
        with pytest.raises(InvalidIdError, match="differs only by case from the user folder 'Ana'"):
            asyncio.run(memory.add_memory("Likes coffee.", "ana", dedup=False))
        with pytest.raises(InvalidIdError, match="differs only by case from the chat folder 'Phone'"):
            asyncio.run(memory.update_memory_block("context", "At work.", "phone", "Ana"))
        # The id as the folder spells it goes on working.
        assert asyncio.run(memory.add_memory("Likes oolong.", "Ana", dedup=False)) is not None
    assert sorted(os.listdir(home / "memory/users")) == [".gitkeep", "Ana"]  # no folder of "ana"
    assert not subprocess.run(["git", "status", "--porcelain"], cwd=home, capture_output=True, text=True).stdout
    (home / "memory/users/Ana/sessions/S-1").mkdir(parents=True)
    with pytest.raises(InvalidIdError, match="session folder 'S-1'"):
        Home(home).session_dir("Ana", "s-1")
    assert Home(home).session_dir("Ana", "S-1") == home / "memory/users/Ana/sessions/S-1"


def test_on_a_case_insensitive_file_system_a_users_twin_never_reaches_their_folder(tmp_path):
    """Where case is ignored, ``memory/users/ana`` IS ``memory/users/Ana``: Ana's file read or
    written as ana's. A real FAT file system (mounts.py)."""
    with case_insensitive_folder(tmp_path / "fat") as fat:
        (fat / "memory/users/Ana").mkdir(parents=True)
        (fat / "memory/users/Ana/MEMORY.md").write_text("Ana's own memory.\\n")
        assert (fat / "memory/users/ana/MEMORY.md").read_text() == "Ana's own memory.\\n"  # the file system
        home = Home(fat)
        with pytest.raises(InvalidIdError, match="user folder 'Ana'"):
            home.memory_md_path("ana")
        assert home.memory_md_path("Ana").read_text() == "Ana's own memory.\\n"
