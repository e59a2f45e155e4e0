"""Symbolic links are never followed, at any depth, on any path: the full scan, the paths a batch
of events names, the daemon's folder expansion, and the reads of core blocks and daily logs. A link
is recorded once as a per-file error (``syncd status`` shows it), is not indexed, and stops nothing.
"""

from __future__ import annotations

import asyncio
import errno
import os
import shutil
import time
from pathlib import Path

import pytest

from syncd.config import Settings
from syncd.errors import HomeError, ParseError
from syncd.history.git import head_sha
from syncd.home import Home
from syncd.memory import MemoryManager

from .daemon_helpers import git, running_daemon, wait_for
from .helpers import write

SECRET = "The launch code is swordfish."


@pytest.fixture
def outside(tmp_path):
    """A folder outside the home holding a secret page."""
    folder = tmp_path / "outside"
    write(folder, "secret.md", f"# Secret\n\n{SECRET}\n")
    write(folder, "2026-11-22.md", f"# 2026-11-22\n\n- [secret] {SECRET}\n")
    return folder


def _leaked(engine, user: str | None = None) -> list:
    rows = engine.index.all_rows().to_pylist()
    hits = engine.search("launch code swordfish", user_id=user, limit=50)
    return [r["path"] for r in rows if "swordfish" in (r["text"] or "")] + [
        h.path for h in hits if "swordfish" in h.content
    ]


def test_links_in_the_tree_are_reported_once_and_never_indexed(engine, home, outside):
    os.symlink(outside, home / "vault/people")
    os.symlink(outside / "secret.md", home / "vault/link.md")
    os.symlink(outside, home / "memory/users/ana")
    report = engine.sync()
    linked = {"vault/people", "vault/link.md", "memory/users/ana"}
    assert linked <= report.errors.keys(), report.errors
    assert all("symbolic link" in report.errors[p] for p in linked)
    assert _leaked(engine) == [] and _leaked(engine, "ana") == []
    # Once: the next sync has nothing new to say, status keeps showing them.
    assert not engine.sync().errors
    status = engine.status()
    assert linked <= status.errors.keys() and status.fresh and not status.healthy
    # Replaced by a real folder: the error goes, the folder's files come.
    (home / "vault/people").unlink()
    write(home, "vault/people/bob.md", "# Bob\n\nBob is a friend.\n")
    engine.sync()
    assert "vault/people" not in engine.status().errors
    assert "vault/people/bob.md" in engine.index.files()


def test_paths_named_below_a_linked_folder_are_not_read(engine, home, outside):
    """What a batch of events names: the lstat of vault/people/secret.md says "regular file"
    even though vault/people is a link out of the home."""
    os.symlink(outside, home / "vault/people")
    os.symlink(outside, home / "memory/users/ana")
    report = engine.sync(["vault/people/secret.md", "memory/users/ana/2026-11-22.md"])
    assert {"vault/people", "memory/users/ana"} <= report.errors.keys()
    assert _leaked(engine) == [] and _leaked(engine, "ana") == []
    assert "vault/people/secret.md" not in engine.index.files()


def test_a_folder_swapped_for_a_link_under_the_daemon_leaks_nothing(home, embedder, outside):
    write(home, "vault/people/bob.md", "# Bob\n\nBob likes chess.\n")
    with running_daemon(home, embedder, reconcile_interval_s=3600) as run:
        run.settle()
        shutil.rmtree(home / "vault/people")
        os.symlink(outside, home / "vault/people")
        wait_for(lambda: "vault/people/bob.md" not in run.reader.index.files(), 30, "bob.md to leave the index")
        wait_for(lambda: "vault/people" in run.reader.status().errors, 30, "the link to be reported")
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:
            assert _leaked(run.reader) == []
            time.sleep(0.1)  # a quiet period is the point: nothing leaks in the while after the swap
        # Still following the tree.
        write(home, "vault/After.md", "# After\n\nWritten after the swap.\n")
        wait_for(lambda: "vault/After.md" in run.reader.index.files(), 30, "the next edit to be indexed")
        assert _leaked(run.reader) == []
        assert run.thread.is_alive()


def test_a_linked_global_block_is_refused_and_everyone_keeps_their_core_memory(engine, home, outside):
    os.symlink(outside / "secret.md", home / "memory/core/persona.md")
    write(home, "memory/users/ana/core/user.md", "Ana is a nurse.\n")
    manager = MemoryManager(engine, settings=Settings(llm_model="gpt-4o-mini"))
    for user in ("ana", "bob"):
        blocks = asyncio.run(manager.get_core_memory(user_id=user))
        assert "swordfish" not in "".join(blocks.values())
        assert blocks["persona"]  # the default persona answers instead
    assert asyncio.run(manager.get_core_memory(user_id="ana"))["user"] == "Ana is a nurse."


def test_a_linked_daily_log_is_not_read_into_memory(engine, home, outside):
    write(home, "memory/users/ana/2026-11-21.md", "# 2026-11-21\n\n- [preference] Ana likes tea.\n")
    os.symlink(outside / "2026-11-22.md", home / "memory/users/ana/2026-11-22.md")
    store = MemoryManager(engine, settings=Settings(llm_model="gpt-4o-mini")).store(user_id="ana")
    contents = [f.content for f in store.iter_facts()]
    assert contents == ["Ana likes tea."]


@pytest.mark.parametrize(
    "rel",
    ["vault/people/secret.md", "vault/link.md", "link/secret.md"],
)
def test_read_regular_refuses_a_link_at_any_depth(home, outside, rel):
    os.symlink(outside, home / "vault/people")
    os.symlink(outside / "secret.md", home / "vault/link.md")
    os.symlink(home / "vault/people", home / "link")
    from syncd.home import read_regular

    with pytest.raises(OSError) as info:
        read_regular(home, rel)
    assert info.value.errno == errno.ELOOP


def test_read_regular_reads_files_and_says_none_for_absent_ones(home):
    from syncd.home import read_regular

    write(home, "vault/a/b.md", "hello")
    assert read_regular(home, "vault/a/b.md") == b"hello"
    assert read_regular(home, "vault/a/missing.md") is None
    assert read_regular(home, "vault/a/b.md/x.md") is None


def test_reindex_and_status_with_links_do_not_fail(engine, home, outside):
    os.symlink(outside, home / "vault/people")
    os.symlink(home / "nowhere", home / "vault/dangling.md")
    report = engine.reindex()
    assert {"vault/people", "vault/dangling.md"} <= report.errors.keys()
    assert _leaked(engine) == []
    assert engine.status().fresh


def test_writes_through_a_linked_block_or_user_folder_are_refused_and_the_links_kept(engine, home, outside):
    """A link in place of a block, or of a user's folder, is neither replaced by a file nor written
    through (inside the home or out of it): the write is refused, naming the link, before anything
    is written, and the link, its target and git stay as they were."""
    write(home, "shared/persona.md", "I am the shared persona.\n")
    write(home, "people/bob/2026-11-22.md", "# 2026-11-22\n\n- [preference] Bob likes chess.\n")
    os.symlink("../../shared/persona.md", home / "memory/core/persona.md")
    os.symlink("../../people/bob", home / "memory/users/bob")
    os.symlink(outside, home / "memory/users/ana")
    engine.sync()
    head = head_sha(home)
    manager = MemoryManager(engine, settings=Settings(llm_model="gpt-4o-mini"))
    writes = {
        "memory/core/persona.md": manager.update_memory_block("persona", "I am a pirate."),
        "memory/users/bob": manager.add_memory("Bob owns a boat.", user_id="bob"),
        "memory/users/ana": manager.update_memory_block("user", "Ana is a nurse.", user_id="ana", scope="user"),
    }
    for link, write_it in writes.items():
        with pytest.raises(ParseError, match=f"{link} is a symbolic link"):
            asyncio.run(write_it)
        assert os.path.islink(home / link)
    assert (home / "shared/persona.md").read_text() == "I am the shared persona.\n"
    assert sorted(os.listdir(home / "people/bob")) == ["2026-11-22.md"]
    assert sorted(os.listdir(outside)) == ["2026-11-22.md", "secret.md"]
    assert head_sha(home) == head


@pytest.mark.parametrize("how", ["write", "append"])
def test_the_write_path_refuses_a_linked_file_for_every_writer(engine, home, outside, how):
    """The write path itself reads what it changes as read_memory_file does, so writers that do
    not look first (transcripts, MEMORY.md, the workbench) cannot replace a link by a file."""
    rel = "memory/users/ana/MEMORY.md"
    os.makedirs(home / "memory/users/ana", exist_ok=True)
    os.symlink(outside / "secret.md", home / rel)
    secret = (outside / "secret.md").read_bytes()
    with pytest.raises(ParseError, match=f"{rel} is a symbolic link"):
        if how == "write":
            engine.writes.write_file(rel, b"# Memory\n")
        else:
            engine.writes.append_file(rel, b"- more\n", expected_size=len(secret))
    assert os.path.islink(home / rel) and (outside / "secret.md").read_bytes() == secret
    # git may hold the person's link (committed as theirs), never a file written in its place.
    assert git(home, "ls-tree", "HEAD", "--", rel).split()[:1] in ([], ["120000"])


def test_home_rel_names_a_link_not_its_target(home, outside):
    os.symlink(outside, home / "memory/users/ana")
    os.symlink(home / "vault", home / "memory/users/bob")
    h = Home(home)
    assert h.rel(home / "memory/users/ana/MEMORY.md") == "memory/users/ana/MEMORY.md"
    assert h.rel(Path("memory/users/bob/x.md")) == "memory/users/bob/x.md"
    with pytest.raises(HomeError):
        h.rel(Path("memory/../../elsewhere.md"))
