"""What a shared home says when the remote or the person gets in the way (real git, real homes):
a remote that declines a push says why at once instead of being pulled from in a loop; a secret
in a remote's URL is never printed; a remote of another history is refused in one line; a merge
the home's own hook declines is not committed anyway."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

import syncd
from syncd.daemon.sharing import RemoteSharing, read_remote_state
from syncd.engine.sharing import pull, push
from syncd.errors import GitBusyError, HistoryError, RemoteRefused
from syncd.home import Home

from .cli_helpers import run_main
from .daemon_helpers import start_cli_daemon
from .helpers import assert_matches_rebuild, wait_for, write
from .sharing_helpers import bare_remote, shared_homes


def git(root: Path, *args: str, check: bool = True) -> str:
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=check).stdout


def test_a_push_the_remote_declines_says_why_without_pulling(tmp_path, embedder):
    remote, (a_root, _b) = shared_homes(tmp_path, embedder)
    hook = remote / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'no pushes on Sunday' >&2\nexit 1\n")
    hook.chmod(0o755)
    before = git(remote, "rev-parse", "main")
    (a_root / "vault" / "Sunday.md").write_text("# Sunday\n\nWritten on a Sunday.\n")
    with syncd.open(a_root, embedder=embedder) as a:
        with pytest.raises(HistoryError, match=r"refused the push: \[remote rejected\] \(pre-receive hook declined\)"):
            push(a, "origin")
    assert git(remote, "rev-parse", "main") == before
    assert "Syncd-Source: merge" not in git(a_root, "log", "--format=%B")


def syncd_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "syncd", *args], capture_output=True, text=True, check=False)


def test_a_secret_in_a_remote_s_url_is_never_printed(tmp_path):
    root = str(syncd.init(tmp_path / "a").home)
    urls = {
        "lab": "https://ana:hunter2@git.example.org/mem.git",
        "hub": "https://ghp_SECRETTOKEN@github.com/ana/mem.git",
    }
    for name, url in urls.items():
        assert syncd_cli("remote", "add", name, url, "--home", root).returncode == 0
    again = syncd_cli("remote", "add", "lab", "https://ana:other@git.example.org/x.git", "--home", root)
    listed = syncd_cli("remote", "list", "--home", root)
    assert again.returncode == 1 and "already points at https://ana:***@git.example.org/mem.git" in again.stderr
    assert listed.stdout.splitlines() == [
        "hub https://***@github.com/ana/mem.git",
        "lab https://ana:***@git.example.org/mem.git",
    ]
    for shown in (again.stdout + again.stderr, listed.stdout + listed.stderr):
        assert "hunter2" not in shown and "SECRETTOKEN" not in shown
    assert "hunter2" in git(Path(root), "config", "remote.lab.url")  # git keeps it to authenticate with


def _home_of_another_history(tmp_path, embedder):
    """A home sharing origin with the homes of shared_homes, but with a history of its own: a
    folder adopted by `syncd init` (two homes it made in the same second would share their first
    commit)."""
    remote, _homes = shared_homes(tmp_path, embedder)
    (tmp_path / "other" / "vault").mkdir(parents=True)
    (tmp_path / "other" / "vault" / "Mine.md").write_text("# Mine\n\nOnly here.\n")
    git(tmp_path, "init", "-q", "-b", "main", "other")
    git(tmp_path / "other", "add", "-A")
    git(tmp_path / "other", "-c", "user.name=Ana", "-c", "user.email=ana@example.org", "commit", "-qm", "mine")
    other = syncd.init(tmp_path / "other").home
    assert syncd_cli("remote", "add", "origin", str(remote), "--home", str(other)).returncode == 0
    return other


def test_a_remote_of_another_history_is_refused_in_one_line(tmp_path, embedder):
    other = _home_of_another_history(tmp_path, embedder)
    for command in ("pull", "push"):
        done = syncd_cli(command, "--home", str(other))
        assert done.returncode == 1 and done.stdout == "", done.stderr
        assert done.stderr.startswith("syncd: error: git pull failed: origin/main shares no history with this home")
        assert len(done.stderr.strip().splitlines()) == 1
    assert not (other / ".git" / "MERGE_HEAD").exists() and not (other / ".git" / "syncd" / "pull.json").exists()
    assert git(other, "log", "--merges", "--oneline") == "" and git(other, "ls-files", "vault/Mine.md")
    assert git(other, "status", "--porcelain") == ""


def test_a_merge_the_home_s_own_hook_declines_is_not_committed_anyway(tmp_path, embedder):
    log = "memory/users/ana/2026-11-20.md"
    _remote, (a_root, b_root) = shared_homes(tmp_path, embedder, files={log: "# 2026-11-20\n\n## 10:00\n"})
    with syncd.open(a_root, embedder=embedder) as a, syncd.open(b_root, embedder=embedder) as b:
        for engine, side in ((a, "laptop"), (b, "server")):
            with open(engine.home.root / log, "a", encoding="utf-8") as handle:
                handle.write(f"- [context] Learned on the {side}.\n")
        push(a, "origin")
        hook = b_root / ".git" / "hooks" / "pre-merge-commit"
        hook.write_text("#!/bin/sh\necho 'no merges on Friday' >&2\nexit 1\n")
        hook.chmod(0o755)
        with pytest.raises(GitBusyError, match="pre-merge-commit hook declined it"):
            pull(b, "origin")
        assert not (b_root / ".git" / "MERGE_HEAD").exists() and git(b_root, "log", "--merges") == ""
        assert "laptop" not in (b_root / log).read_text() and "Learned on the server." in (b_root / log).read_text()
        assert git(b_root, "status", "--porcelain") == ""
        hook.unlink()
        assert pull(b, "origin").head is not None
        assert "Learned on the laptop." in (b_root / log).read_text()
        assert_matches_rebuild(b)


# -- a daemon sharing through a remote that refuses it for good ---------------------------------


def _state(root: Path) -> dict:
    return read_remote_state(Home(root).private_dir) or {}


def _stopped_on(root: Path, words: str) -> dict:
    state = wait_for(
        lambda: _state(root).get("stopped") and _state(root),
        120,
        lambda: f"the daemon to stop sharing on {words!r} (remote.json: {_state(root)})",
    )
    assert words in state["error"] and state["retry_at"] is None, state
    return state


def _daemon_log(root: Path) -> str:
    return (root / ".syncd" / "daemon.log").read_text(errors="replace")


def test_a_daemon_stops_retrying_a_push_the_remote_declines_until_asked(tmp_path, embedder):
    """`syncd watch --remote` retried a push the remote's hook declines forever, its pauses
    growing to five minutes, the reason buried in a warning a minute: now it says once what is
    wrong and what to do, status says it stopped, and `syncd remote retry` tries again."""
    remote, (a_root, _b) = shared_homes(tmp_path, embedder)
    runs = tmp_path / "hook-runs"
    hook = remote / "hooks" / "pre-receive"
    hook.write_text(f"#!/bin/sh\necho run >> '{runs}'\necho 'no pushes on Sunday' >&2\nexit 1\n")
    hook.chmod(0o755)
    daemon = start_cli_daemon(a_root, "--remote", "origin", "--pull-every", "1")
    try:
        write(a_root, "vault/Sunday.md", "# Sunday\n\nWritten on a Sunday.\n")
        _stopped_on(a_root, "refused the push: [remote rejected] (pre-receive hook declined)")
        said = [line for line in _daemon_log(a_root).splitlines() if "sharing with origin" in line]
        assert len(said) == 1 and "retrying in" not in said[0], said
        assert "waiting and retrying cannot help" in said[0] and "`syncd remote retry origin`" in said[0], said
        shown = run_main("status", "--home", str(a_root)).stdout
        assert "remote   stopped, not retried: git push failed: remote 'origin' refused the push" in shown, shown
        assert "run `syncd remote retry origin`" in shown, shown
        # Held: the remote was asked once, and is not asked again until someone says so.
        assert runs.read_text().splitlines() == ["run"]
        wrong = run_main("remote", "retry", "elsewhere", "--home", str(a_root))
        assert wrong.returncode == 1 and "shares the home through remote 'origin', not 'elsewhere'" in wrong.stderr
        hook.unlink()
        asked = run_main("remote", "retry", "--home", str(a_root))
        assert asked.returncode == 0, asked.stderr
        assert "try remote origin again (it was stopped on a refusal)" in asked.stdout
        wait_for(lambda: git(remote, "rev-parse", "main") == git(a_root, "rev-parse", "HEAD"), 120, "the push")
        wait_for(lambda: _state(a_root).get("error") is None, 120, "the daemon to say sharing works again")
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(60)
    # Without a daemon, the command says what does the work instead.
    alone = run_main("remote", "retry", "--home", str(a_root))
    assert alone.returncode == 1 and "no daemon shares this home through a remote" in alone.stderr


def test_a_daemon_stops_retrying_a_remote_of_another_history_until_its_url_changes(tmp_path, embedder):
    other = _home_of_another_history(tmp_path, embedder)
    daemon = start_cli_daemon(other, "--remote", "origin", "--pull-every", "1")
    try:
        _stopped_on(other, "origin/main shares no history with this home")
        assert git(other, "log", "--merges", "--oneline") == ""
        # Pointed at the right remote (here a new, empty one), it shares again by itself.
        fresh = bare_remote(tmp_path / "fresh")
        git(other, "remote", "set-url", "origin", str(fresh))
        wait_for(
            lambda: git(fresh, "rev-parse", "--verify", "-q", "main", check=False) != "",
            120,
            lambda: f"the push; the daemon's log:\n{_daemon_log(other)}",
        )
        wait_for(lambda: _state(other).get("error") is None, 120, "the daemon to say sharing works again")
        assert "sharing with origin: trying again (its settings changed)" in _daemon_log(other)
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(60)


def test_an_unreachable_remote_is_retried_and_a_folder_that_is_no_repository_is_refused_for_good(tmp_path, embedder):
    """A folder that is there and holds no repository is refused for good; one that is not there
    at all (a drive not mounted) was too, and is now retried (tests/test_sharing_transient.py)."""
    root = syncd.init(tmp_path / "home").home
    git(root, "remote", "add", "down", "http://127.0.0.1:9/mem.git")  # nothing listens: refused now
    (tmp_path / "not-a-repository").mkdir()
    git(root, "remote", "add", "other", str(tmp_path / "not-a-repository"))
    with syncd.open(root, embedder=embedder) as engine:
        with pytest.raises(HistoryError, match="cannot reach remote 'down'") as down:
            pull(engine, "down")
        assert not isinstance(down.value, RemoteRefused)
        with pytest.raises(RemoteRefused, match="does not appear to be a git repository"):
            pull(engine, "other")
        # The daemon's side: the unreachable one is retried after a pause, not stopped.
        shared = RemoteSharing(engine, "down", 1.0).start()
        try:
            state = wait_for(lambda: _state(root).get("error") and _state(root), 120, "a failed pull")
            assert state["stopped"] is False and state["retry_at"] is not None, state
        finally:
            shared.stop()


def test_a_push_that_meets_another_push_holding_the_remote_s_branch_is_not_refused_for_good(tmp_path, embedder):
    """Two homes pushing to one remote at the same moment: the one that finds the remote's branch
    locked by the other's push is told '[remote rejected] (failed to update ref)', which passes
    once that push is done. Taken for a refusal for good, its daemon would stop sharing until
    someone asked it to retry."""
    remote, (a_root, _b) = shared_homes(tmp_path, embedder)
    (a_root / "vault" / "Race.md").write_text("# Race\n\nPushed while another push held the branch.\n")
    lock = remote / "refs" / "heads" / "main.lock"  # what the other push in flight holds
    lock.write_text("")
    with syncd.open(a_root, embedder=embedder) as a:
        with pytest.raises(HistoryError, match="failed to update ref") as raised:
            push(a, "origin")
        assert not isinstance(raised.value, RemoteRefused)
        lock.unlink()  # the other push is done
        push(a, "origin")
    assert git(remote, "rev-parse", "main") == git(a_root, "rev-parse", "HEAD")


def test_a_file_in_the_way_of_a_pull_is_named_with_what_to_do(tmp_path, embedder):
    # A file syncd does not commit (not markdown), edited here and changed on the remote: git
    # refuses the merge, and the line must say which file and that waiting will not clear it.
    _remote, (a_root, b_root) = shared_homes(tmp_path, embedder, files={"notes.txt": "v1\n"})
    git(a_root, "add", "notes.txt")
    git(a_root, "-c", "user.name=Ana", "-c", "user.email=ana@example.org", "commit", "-qm", "notes")
    git(a_root, "push", "-q", "origin", "main")
    git(b_root, "pull", "-q", "--no-rebase")
    (b_root / "notes.txt").write_text("v2 from the server\n")
    git(b_root, "-c", "user.name=Bo", "-c", "user.email=bo@example.org", "commit", "-qam", "notes v2")
    git(b_root, "push", "-q", "origin", "main")
    (a_root / "notes.txt").write_text("unsaved on the laptop\n")
    done = syncd_cli("pull", "--home", str(a_root))
    assert done.returncode == 1 and done.stdout == "", done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "would be overwritten by merge: notes.txt;" in done.stderr
    assert "commit them with git or move them away" in done.stderr
    assert (a_root / "notes.txt").read_text() == "unsaved on the laptop\n"


def test_a_remote_that_tracks_syncd_s_own_folder_is_pulled_and_the_folder_untracked(tmp_path, embedder):
    # A clumsy `git add -A -f` on the server commits its .syncd/ (index, caches): every later
    # pull here met this home's own derived state in the way ("local changes would be
    # overwritten"), which no commit of the person could clear.
    log = "memory/users/bo/2026-11-20.md"
    _remote, (a_root, b_root) = shared_homes(tmp_path, embedder)
    with syncd.open(b_root, embedder=embedder) as b:
        write(b_root, log, "# 2026-11-20\n\n## 10:00\n\n- [fact] Bo rides a bike.\n")
        b.sync()
        (b_root / ".syncd/planted.txt").write_text("the server's own\n")
        git(b_root, "add", "-A", "-f")
        git(b_root, "-c", "user.name=Bo", "-c", "user.email=bo@example.org", "commit", "-qm", "everything")
        git(b_root, "push", "-q", "origin", "main")
        assert git(b_root, "ls-files", ".syncd/index/meta.json")
        with syncd.open(a_root, embedder=embedder) as a:
            own = {rel: (a_root / rel).stat().st_ino for rel in (".syncd/embed_cache.sqlite",)}
            assert pull(a, "origin").head is not None
            # Not one byte of the server's .syncd/ is written here: its embedding cache (trusted by
            # text) and index files would be another machine's, or anyone's who can push there.
            assert not (a_root / ".syncd/planted.txt").exists()
            assert {rel: (a_root / rel).stat().st_ino for rel in own} == own
            # The server goes on, its tracked .syncd/ changing with each sync it commits by hand.
            write(b_root, log, "# 2026-11-20\n\n## 10:00\n\n- [fact] Bo rides a bike.\n- [fact] Bo's bike is red.\n")
            b.sync()
            git(b_root, "-c", "user.name=Bo", "-c", "user.email=bo@example.org", "commit", "-qam", "more")
            git(b_root, "push", "-q", "origin", "main")
            report = pull(a, "origin")
            assert report.head is not None and report.kept_both == ()
            assert git(a_root, "ls-files", ".syncd") == "" and git(a_root, "status", "--porcelain") == ""
            assert (a_root / log).read_text().endswith("- [fact] Bo's bike is red.\n")
            assert {h.content for h in a.search("bike", user_id="bo", kind="fact")} == {
                "Bo rides a bike.",
                "Bo's bike is red.",
            }
            assert_matches_rebuild(a)


def test_a_pull_of_a_remote_tracking_syncd_s_folder_leaves_this_home_s_own_files_there(tmp_path, embedder):
    # git checks a tracked file out over an ignored one without a word: the remote's .syncd/
    # (a `git add -A -f` on the server) was written over this home's own derived state (its
    # index, embedding cache, models, log), on the first pull and again on each that changed it.
    _remote, (a_root, b_root) = shared_homes(tmp_path, embedder)
    (b_root / ".syncd" / "daemon.log").write_text("the server's log\n")
    (b_root / ".syncd" / "only-on-the-server").write_text("the server's\n")
    git(b_root, "add", "-A", "-f")
    git(b_root, "-c", "user.name=Bo", "-c", "user.email=bo@example.org", "commit", "-qm", "everything")
    git(b_root, "push", "-q", "origin", "main")
    (a_root / ".syncd" / "daemon.log").write_text("the laptop's log\n")
    with syncd.open(a_root, embedder=embedder) as a:
        assert pull(a, "origin").head is not None
        assert (a_root / ".syncd" / "daemon.log").read_text() == "the laptop's log\n"
        assert not (a_root / ".syncd" / "only-on-the-server").exists()
        # The server's tracked log changes again: a merge where this side untracked it.
        (b_root / ".syncd" / "daemon.log").write_text("the server's log, longer\n")
        git(b_root, "-c", "user.name=Bo", "-c", "user.email=bo@example.org", "commit", "-qam", "more")
        git(b_root, "push", "-q", "origin", "main")
        assert pull(a, "origin").head is not None
        assert (a_root / ".syncd" / "daemon.log").read_text() == "the laptop's log\n"
        assert not (a_root / ".syncd" / "only-on-the-server").exists()
        assert git(a_root, "ls-files", ".syncd") == "" and git(a_root, "status", "--porcelain") == ""
        assert_matches_rebuild(a)
