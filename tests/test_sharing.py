"""Machines sharing one home through a bare git remote (real git, real homes, real index): facts
added on both sides all arrive on both, each once; a page both edited keeps both versions in a
callout; an edit outweighs a deletion; three clones writing anything in any interleaving
converge; no conflict marker anywhere; each index equals a rebuild; a push never forces."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import syncd
from syncd.engine.sharing import pull, push, share
from syncd.errors import InvalidInputError
from syncd.formats.merging import CONFLICT_CALLOUT
from syncd.formats.transcripts import make_entry
from syncd.memory import MemoryManager
from syncd.session import SessionRunner, TranscriptManager, read_transcript_file

from .helpers import assert_matches_rebuild
from .sharing_helpers import bare_remote, shared_homes
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
    _remote, (a_root, b_root) = shared_homes(tmp_path, embedder)
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
    for url in ("--mirror=fetch", "-h"):
        with pytest.raises(InvalidInputError, match="bad remote URL"):
            share(a, "mirror", url)
    assert "mirror" not in git(a.home.root, "remote").split()


def _turn(engine, session: str, when: dt.datetime, words: str):
    """One agent turn (no extraction: this is about the session's files), at ``when``."""
    runner = SessionRunner(MemoryManager(engine, default_user_id="ana"), extract=False, clock=lambda: when)
    state = {"version": 2, "steps": [], "tools": [words], "serialized_at": when.isoformat(timespec="seconds")}
    return asyncio.run(runner.process_turn(session, words, "Noted.", user_id="ana", state=state))


def _session(engine, session: str) -> tuple[dict, dict, list[str]]:
    base = engine.home.root / "memory/users/ana/sessions" / session
    said = [e["content"] for e in read_transcript_file(engine.home, "ana", session) if e["role"] == "user"]
    return json.loads((base / "session.json").read_text()), json.loads((base / "state.json").read_text()), said


def test_a_session_run_on_two_machines_keeps_the_later_state_and_counts_every_turn(machines):
    """Turns of one session on both machines: the merged transcript holds every turn once, the
    turn count is what it holds, and the later side's state (and last_active_at) wins."""
    a, b = machines
    at = dt.datetime(2026, 11, 20, 10, 0, tzinfo=dt.UTC)
    _turn(a, "s-1", at, "first, on the laptop")
    push(a, "origin")
    pull(b, "origin")
    _turn(a, "s-1", at + dt.timedelta(minutes=5), "second, on the laptop")
    _turn(a, "s-1", at + dt.timedelta(minutes=10), "third, on the laptop")
    _turn(b, "s-1", at + dt.timedelta(minutes=20), "fourth, on the server")  # the later side
    push(a, "origin")
    push(b, "origin")  # b merges
    meta, state, said = _session(b, "s-1")
    assert sorted(said) == sorted(
        ["first, on the laptop", "second, on the laptop", "third, on the laptop", "fourth, on the server"]
    )
    assert meta["turn_count"] == len(said) == 4
    assert meta["last_active_at"].startswith("2026-11-20T10:20") and state["tools"] == ["fourth, on the server"]
    pull(a, "origin")
    assert tree(a.home.root) == tree(b.home.root)
    # Now the laptop is the later one: its state wins wherever the merge happens.
    _turn(b, "s-1", at + dt.timedelta(minutes=25), "fifth, on the server")
    _turn(a, "s-1", at + dt.timedelta(minutes=30), "sixth, on the laptop")
    push(b, "origin")
    push(a, "origin")  # a merges
    pull(b, "origin")
    for engine in (a, b):
        meta, state, said = _session(engine, "s-1")
        assert meta["turn_count"] == len(said) == len(set(said)) == 6
        assert meta["last_active_at"].startswith("2026-11-20T10:30") and state["tools"] == ["sixth, on the laptop"]
        assert_matches_rebuild(engine)


CLONES = 3
STEP = st.one_of(
    st.tuples(st.just("fact"), st.integers(0, CLONES - 1), st.sampled_from(["ana", "bob"])),
    st.tuples(st.just("page"), st.integers(0, CLONES - 1), st.sampled_from(["Plans", "Trips"])),
    st.tuples(st.just("block"), st.integers(0, CLONES - 1), st.sampled_from(["context", "user"])),
    st.tuples(st.just("turn"), st.integers(0, CLONES - 1), st.sampled_from(["s-1", "s-2"])),
    st.tuples(st.just("push"), st.integers(0, CLONES - 1), st.just("")),
    st.tuples(st.just("pull"), st.integers(0, CLONES - 1), st.just("")),
)


def _write_step(engine, which: int, what: str, name: str, n: int) -> str:
    """One write of a clone's (through the APIs agents use, or as a person edits a page); the
    text it wrote, to look for once every clone has synced."""
    text = f"Clone {which} step {n}: {name} remembers a detail."
    if what == "fact":
        add(engine, name, text)
    elif what == "block":
        asyncio.run(MemoryManager(engine).update_memory_block(name, text, user_id="ana"))
    elif what == "turn":
        entry = make_entry("user", text, ts=dt.datetime.now(dt.UTC))
        TranscriptManager(engine, "ana").append_entries(name, [entry])
    else:
        page = engine.home.root / "vault" / f"{name}.md"
        old = page.read_text() if page.exists() else f"# {name}\n"
        page.write_text(old + f"\n{text}\n")
        engine.sync()
        engine.commit()
    return text


@settings(
    max_examples=examples(2),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(steps=st.lists(STEP, min_size=2, max_size=10))
def test_any_interleaving_over_three_clones_converges_losing_nothing(tmp_path_factory, embedder, steps):
    """Three clones writing facts, core blocks, transcript lines and pages, pulling and pushing
    in any order: after a last round (each pushes in turn, then the first two pull) all hold the
    same tree, every fact and transcript line exactly once, every page line and the last text
    of each block still there, no conflict marker, and each index equals a rebuild."""
    _remote, roots = shared_homes(tmp_path_factory.mktemp("share"), embedder, CLONES)
    written: dict[str, list[str]] = {"fact": [], "turn": [], "page": []}
    last_block: dict[str, str] = {}
    with contextlib.ExitStack() as stack:
        clones = [stack.enter_context(syncd.open(root, embedder=embedder)) for root in roots]
        for n, (what, which, name) in enumerate(steps):
            engine = clones[which]
            if what == "push":
                push(engine, "origin")
            elif what == "pull":
                pull(engine, "origin")
            elif what == "block":
                last_block[name] = _write_step(engine, which, what, name, n)
            else:
                written[what].append(_write_step(engine, which, what, name, n))
        for engine in clones:
            push(engine, "origin")
        for engine in clones[:-1]:
            pull(engine, "origin")
        trees = [tree(engine.home.root) for engine in clones]
        assert trees[1] == trees[0] and trees[2] == trees[0]
        text = "".join(trees[0].values())
        for line in written["fact"] + written["turn"]:
            assert text.count(line) == 1, line
        for line in written["page"]:
            assert line in text, line
        for label, line in last_block.items():
            assert line in trees[0][f"memory/users/ana/core/{label}.md"], label
        assert "<<<<<<<" not in text and ">>>>>>>" not in text and "=======" not in text
        for engine in clones:
            assert git(engine.home.root, "status", "--porcelain").strip() == ""
            assert_matches_rebuild(engine)


def _daemon_log(root: Path) -> str:
    try:
        return (root / ".syncd/daemon.log").read_text(errors="replace")
    except FileNotFoundError:
        return ""


def _holds(git_dir: Path, rev: str, text: str) -> bool:
    """Some file of ``rev``'s tree holds ``text``: one git process (a poll of :func:`tree` runs
    one per file)."""
    found = subprocess.run(["git", "--git-dir", str(git_dir), "grep", "-q", "-F", text, rev], check=False)
    assert found.returncode in (0, 1), found
    return found.returncode == 0


def _rest_search(url: str, token: str, query: str) -> list[str]:
    import httpx

    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=60) as client:
        answer = client.get("/memory/archival", params={"query": query, "user_id": "ana"})
    return [hit["content"] for hit in answer.json()["hits"]] if answer.status_code == 200 else []


def test_a_daemon_and_a_server_share_a_home_through_a_remote(tmp_path, embedder, capsys):
    """`syncd watch --remote origin` on one machine's home, `syncd serve --remote origin` on the
    other's: a fact added on the first becomes searchable through the second's REST API; kill -9
    of the server mid-way, then a restart, loses nothing and leaves no merge half-done. A remote
    the home lacks, or --remote on a read-only server, is a one-line error, nothing served."""
    import signal
    import sys

    from syncd.cli import main
    from syncd.home import Home
    from syncd.server.tokens import TokenStore

    from .daemon_helpers import start_cli_daemon, wait_for
    from .server_helpers import server_url, start_serve_process

    remote, (a_root, b_root) = shared_homes(tmp_path, embedder)
    for command, bad, message in (
        ("watch", ["--remote", "nowhere"], "no remote 'nowhere'"),
        ("serve", ["--remote", "nowhere", "--port", "0"], "no remote 'nowhere'"),
        ("serve", ["--remote", "origin", "--read-only"], "a --read-only server holds none"),
    ):
        assert main([command, "--home", str(b_root), *bad]) != 0  # in this process: the CLI's own error path
        refused = capsys.readouterr().err
        assert message in refused and "Traceback" not in refused and len(refused.strip().splitlines()) == 1
    daemon = start_cli_daemon(a_root, "--remote", "origin", "--pull-every", "1")
    server = start_serve_process(b_root, "--remote", "origin", "--pull-every", "1")
    try:
        wait_for(lambda: "watching" in _daemon_log(a_root), 120, "the daemon to start")
        url, admin = server_url(b_root, server), TokenStore.of(Home(b_root)).admin_token()
        asyncio.run(
            MemoryManager(a_root).add_memory("Ana keeps her passport in the blue drawer.", "ana", dedup=False)
        )  # handed to a's daemon
        wait_for(
            lambda: any("blue drawer" in h for h in _rest_search(url, admin, "Where is the passport?")),
            120,
            "a's fact to be searchable on b's server through the remote",
        )
        shown = subprocess.run(
            [sys.executable, "-m", "syncd", "status", "--home", str(a_root)],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout
        assert "remote   origin: last pull" in shown and "last push never" not in shown, shown
        server.send_signal(signal.SIGKILL)
        server.wait(30)
        asyncio.run(MemoryManager(a_root).add_memory("Ana's train leaves at nine.", "ana", dedup=False))
        # The fact reaches the remote while b's server is down; the restarted server pulls it.
        wait_for(lambda: _holds(remote, "main", "train leaves at nine"), 120, "a's daemon to push the fact")
        server = start_serve_process(b_root, "--remote", "origin", "--pull-every", "1")
        wait_for(lambda: _holds(b_root / ".git", "HEAD", "train leaves at nine"), 120, "b to catch up")
    finally:
        for process in (daemon, server):
            process.send_signal(signal.SIGTERM)
        for process in (daemon, server):
            process.wait(60)
    for root in (a_root, b_root):
        assert not (root / ".git" / "MERGE_HEAD").exists()
        assert git(root, "status", "--porcelain", "--", "memory").strip() == ""
    with syncd.open(b_root, embedder=embedder) as b:
        assert_matches_rebuild(b)


def test_the_command_line_shares_a_home(tmp_path):
    """Through a remote whose path holds spaces, as a synced drive's folder does."""
    from click.testing import CliRunner

    from syncd.cli import cli

    (tmp_path / "My Drive" / "shared  memory").mkdir(parents=True)
    remote = bare_remote(tmp_path / "My Drive" / "shared  memory")
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


def test_a_remote_s_gitattributes_cannot_turn_the_merge_driver_off(machines):
    """A line a remote's commit adds to the shared .gitattributes (``merge=binary``: keep ours,
    leave theirs out) does not route memory past syncd's driver here: the routes are in the
    repository's own info/attributes too, which git reads first."""
    a, b = machines
    b_root = b.home.root
    with (b_root / ".gitattributes").open("a", encoding="utf-8") as attributes:
        attributes.write("memory/** merge=binary\n")
    git(b_root, "add", ".gitattributes")
    git(b_root, "-c", "user.name=Bo", "-c", "user.email=bo@example.org", "commit", "-qm", "attributes")
    push(b, "origin")
    assert pull(a, "origin").fast_forward  # the line is in a's tree now
    add(a, "ana", "On the laptop, ana learns to juggle.")
    add(b, "ana", "On the server, ana learns to knit.")
    push(b, "origin")
    report = pull(a, "origin")
    assert report.head is not None and not report.fast_forward
    text = "".join(tree(a.home.root).values())
    assert text.count("On the laptop, ana learns to juggle.") == 1
    assert text.count("On the server, ana learns to knit.") == 1
    assert report.kept_both == ()
    assert_matches_rebuild(a)
