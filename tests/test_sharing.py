"""Two machines sharing one home through a bare git remote (real git, real homes, real index):
facts added on both sides all arrive on both, each once; a page both edited keeps both versions
in a callout; an edit outweighs a deletion; no conflict marker anywhere; each index equals a
rebuild; a push never forces."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import syncd
from syncd.engine.sharing import pull, push, share
from syncd.errors import InvalidInputError
from syncd.formats.merging import CONFLICT_CALLOUT
from syncd.memory import MemoryManager

from .helpers import assert_matches_rebuild
from .strategies import examples


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True).stdout


def tree(root: Path) -> dict[str, str]:
    """Every tracked file of HEAD with its content."""
    names = git(root, "ls-tree", "-r", "--name-only", "HEAD").split("\n")
    return {n: git(root, "show", f"HEAD:{n}") for n in names if n}


@pytest.fixture
def machines(tmp_path, embedder):
    """Home A pushed to a bare remote, home B cloned from it; both open as writers."""
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(remote)], check=True)
    a_root = syncd.init(tmp_path / "a").home
    with syncd.open(a_root, embedder=embedder) as a:
        share(a, "origin", str(remote))
        assert push(a, "origin").head is not None
    subprocess.run(["git", "clone", "-q", str(remote), str(tmp_path / "b")], check=True)
    b_root = syncd.init(tmp_path / "b").home
    with syncd.open(a_root, embedder=embedder) as a, syncd.open(b_root, embedder=embedder) as b:
        yield a, b


def add(engine, user: str, text: str) -> None:
    asyncio.run(MemoryManager(engine).add_memory(text, user, dedup=False))


def test_facts_added_on_both_machines_arrive_on_both_once(machines):
    a, b = machines
    for n in range(3):
        add(a, "ana", f"On the laptop, ana learns thing {n}.")
        add(b, "ana", f"On the server, ana learns thing {n}.")
    add(b, "bob", "Bob only ever talks to the server.")
    push(a, "origin")
    pushed = push(b, "origin")  # the remote moved on: b pulls (merges) first, never forces
    assert pushed.pulls and pushed.pulls[0].head is not None and not pushed.pulls[0].fast_forward
    assert pull(a, "origin").fast_forward
    assert tree(a.home.root) == tree(b.home.root)
    text = "".join(tree(a.home.root).values())
    for n in range(3):
        assert text.count(f"On the laptop, ana learns thing {n}.") == 1
        assert text.count(f"On the server, ana learns thing {n}.") == 1
    assert "<<<<<<<" not in text and ">>>>>>>" not in text
    hits = a.search("Which machine does Bob talk to?", user_id="bob", limit=3)
    assert hits and "Bob only ever talks to the server." in hits[0].content
    assert_matches_rebuild(a)
    assert_matches_rebuild(b)


def test_a_page_both_machines_changed_keeps_both_versions_in_a_callout(machines):
    a, b = machines
    for engine, words in ((a, "The laptop's plan: sail north."), (b, "The server's plan: stay home.")):
        page = engine.home.root / "vault" / "Plans.md"
        page.write_text(f"# Plans\n\n{words}\n")
        engine.sync()
        engine.commit()
    push(a, "origin")
    report = push(b, "origin").pulls[0]
    assert report.kept_both == ("vault/Plans.md",)
    page = (b.home.root / "vault" / "Plans.md").read_text()
    assert "The server's plan: stay home." in page and "> The laptop's plan: sail north." in page
    assert CONFLICT_CALLOUT in page and "<<<<<<<" not in page
    assert git(b.home.root, "status", "--porcelain").strip() == ""
    assert_matches_rebuild(b)


def test_an_edit_outweighs_a_deletion_on_the_other_machine(machines):
    a, b = machines
    page = "vault/Keep.md"
    (a.home.root / page).write_text("# Keep\n\nFirst words.\n")
    a.sync()
    a.commit()
    push(a, "origin")
    pull(b, "origin")
    (a.home.root / page).unlink()
    a.sync()
    a.commit()
    (b.home.root / page).write_text("# Keep\n\nFirst words, and the server's edit.\n")
    b.sync()
    b.commit()
    push(a, "origin")
    push(b, "origin")
    assert "the server's edit" in (b.home.root / page).read_text()
    pull(a, "origin")
    assert "the server's edit" in (a.home.root / page).read_text()
    assert tree(a.home.root) == tree(b.home.root)


def test_bad_remotes_are_clear_errors(machines, tmp_path):
    a, _ = machines
    with pytest.raises(InvalidInputError, match="no remote 'nowhere'"):
        pull(a, "nowhere")
    with pytest.raises(InvalidInputError, match="already points at"):
        share(a, "origin", str(tmp_path / "elsewhere.git"))
    with pytest.raises(InvalidInputError, match="bad remote name"):
        share(a, "-x", str(tmp_path / "x.git"))


STEP = st.one_of(
    st.tuples(st.just("fact"), st.integers(0, 1), st.sampled_from(["ana", "bob"])),
    st.tuples(st.just("page"), st.integers(0, 1), st.sampled_from(["Plans", "Trips"])),
    st.tuples(st.just("push"), st.integers(0, 1), st.just("")),
    st.tuples(st.just("pull"), st.integers(0, 1), st.just("")),
)


@settings(max_examples=examples(2), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(steps=st.lists(STEP, min_size=2, max_size=8))
def test_any_interleaving_of_writes_pulls_and_pushes_converges_losing_nothing(tmp_path_factory, embedder, steps):
    """Two clones writing facts and pages, pulling and pushing in any order: after a last round
    of push and pull on each, both hold the same tree, every fact once, no conflict marker, and
    each index equals a rebuild."""
    folder = tmp_path_factory.mktemp("share")
    remote = folder / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(remote)], check=True)
    a_root = syncd.init(folder / "a").home
    with syncd.open(a_root, embedder=embedder) as a:
        share(a, "origin", str(remote))
        push(a, "origin")
    subprocess.run(["git", "clone", "-q", str(remote), str(folder / "b")], check=True)
    b_root = syncd.init(folder / "b").home
    facts: list[str] = []
    with syncd.open(a_root, embedder=embedder) as a, syncd.open(b_root, embedder=embedder) as b:
        clones = (a, b)
        for n, (what, which, name) in enumerate(steps):
            engine = clones[which]
            if what == "fact":
                facts.append(f"Machine {which} step {n}: {name} remembers a detail.")
                add(engine, name, facts[-1])
            elif what == "page":
                page = engine.home.root / "vault" / f"{name}.md"
                old = page.read_text() if page.exists() else f"# {name}\n"
                page.write_text(old + f"\nLine of machine {which} at step {n}.\n")
                engine.sync()
                engine.commit()
            elif what == "push":
                push(engine, "origin")
            else:
                pull(engine, "origin")
        for engine in (a, b, a):
            push(engine, "origin")
        pull(b, "origin")
        assert tree(a.home.root) == tree(b.home.root)
        text = "".join(tree(a.home.root).values())
        for fact in facts:
            assert text.count(fact) == 1, fact
        assert "<<<<<<<" not in text and ">>>>>>>" not in text and "=======" not in text
        for engine in clones:
            assert_matches_rebuild(engine)


def _daemon_log(root: Path) -> str:
    try:
        return (root / ".syncd/daemon.log").read_text(errors="replace")
    except FileNotFoundError:
        return ""


def test_two_daemons_share_a_home_through_a_remote(tmp_path, embedder):
    """`syncd watch --remote origin` on two machines' homes: a fact added on one becomes
    searchable on the other through the bare remote; kill -9 of one mid-way loses nothing and
    leaves no merge half-done."""
    import signal
    import sys
    import time

    from .daemon_helpers import start_cli_daemon, wait_for, warm_embed_cache

    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(remote)], check=True)
    a_root = syncd.init(tmp_path / "a").home
    with syncd.open(a_root, embedder=embedder) as a:
        share(a, "origin", str(remote))
        push(a, "origin")
    subprocess.run(["git", "clone", "-q", str(remote), str(tmp_path / "b")], check=True)
    b_root = syncd.init(tmp_path / "b").home
    unknown = subprocess.run([sys.executable, "-m", "syncd", "watch", "--home", str(b_root), "--remote", "nowhere"],
                             capture_output=True, text=True, timeout=120, check=False)
    assert unknown.returncode == 1 and "no remote 'nowhere'" in unknown.stderr and "Traceback" not in unknown.stderr
    for root in (a_root, b_root):
        warm_embed_cache(root, embedder)
    daemons = [start_cli_daemon(root, "--remote", "origin", "--pull-every", "1") for root in (a_root, b_root)]
    try:
        for root in (a_root, b_root):
            wait_for(lambda root=root: "watching" in _daemon_log(root), 120, "the daemons to start")
        asyncio.run(MemoryManager(a_root).add_memory("Ana keeps her passport in the blue drawer.", "ana",
                                                     dedup=False))  # handed to a's daemon
        with syncd.open(b_root, read_only=True, embedder=embedder) as reader:
            def arrived():
                hits = reader.search("Where is the passport?", user_id="ana", limit=3)
                return hits and "blue drawer" in hits[0].content

            wait_for(arrived, 120, "a's fact to reach b's index through the remote")
        shown = subprocess.run([sys.executable, "-m", "syncd", "status", "--home", str(a_root)], capture_output=True,
                               text=True, timeout=60, check=True).stdout
        assert "remote   origin: last pull" in shown and "last push never" not in shown, shown
        daemons[1].send_signal(signal.SIGKILL)
        daemons[1].wait(30)
        asyncio.run(MemoryManager(a_root).add_memory("Ana's train leaves at nine.", "ana", dedup=False))
        time.sleep(3)
        daemons[1] = start_cli_daemon(b_root, "--remote", "origin", "--pull-every", "1")
        wait_for(lambda: "train leaves at nine" in "".join(tree(b_root).values()), 120, "b to catch up")
    finally:
        for daemon in daemons:
            daemon.send_signal(signal.SIGTERM)
        for daemon in daemons:
            daemon.wait(60)
    for root in (a_root, b_root):
        assert not (root / ".git" / "MERGE_HEAD").exists()
        assert git(root, "status", "--porcelain", "--", "memory").strip() == ""
    with syncd.open(b_root, embedder=embedder) as b:
        assert_matches_rebuild(b)


def test_the_command_line_shares_a_home(tmp_path):
    from click.testing import CliRunner

    from syncd.cli import cli

    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(remote)], check=True)
    a_root = syncd.init(tmp_path / "a").home
    runner = CliRunner()

    def run(*args: str):
        done = runner.invoke(cli, list(args))
        assert done.exit_code == 0, done.output
        return done.output

    assert "remote origin added" in run("remote", "add", "origin", str(remote), "--home", str(a_root))
    assert run("remote", "list", "--home", str(a_root)).strip() == f"origin {remote}"
    assert "pushed" in run("push", "--home", str(a_root))
    subprocess.run(["git", "clone", "-q", str(remote), str(tmp_path / "b")], check=True)
    b_root = syncd.init(tmp_path / "b").home
    (a_root / "vault" / "Note.md").write_text("# Note\n\nWritten on the laptop.\n")
    assert "pushed" in run("sync", "-q", "--push", "--home", str(a_root))
    assert "fast-forward" in run("sync", "-q", "--pull", "--home", str(b_root))
    assert (b_root / "vault" / "Note.md").read_text() == "# Note\n\nWritten on the laptop.\n"
    refused = runner.invoke(cli, ["pull", "nowhere", "--home", str(b_root)])
    assert refused.exit_code == 1
