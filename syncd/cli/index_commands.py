"""Index commands: ``sync``, ``reindex``, ``search``, ``status``.

``search`` asks the running daemon over its socket when there is one (no LanceDB, no model in
this process), and loads everything itself otherwise. ``status`` reads the index's light mirror of
its files table (``index/files_mirror.py``), never LanceDB or the model, unless the mirror cannot
vouch for itself.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from ..engine.search import DEFAULT_LIMIT, KINDS
from ..errors import GitBusyError, HistoryError, LockedError, RemoteError, SyncdError
from ..home.lock import held_by_a_daemon
from .common import home_option, id_option, json_option, load_settings, print_json, resolve_home, say

__all__ = ["COMMANDS"]


@contextmanager
def _progress_bar(description: str, enabled: bool, heard: list):
    """Progress on stderr while a sync works (files, texts embedded and their rate, time left),
    left on screen at the end as its summary; no bar when stderr is not a terminal. The last
    event is kept in ``heard`` (one item) either way: what an interrupted sync had done."""

    def keep(event) -> None:
        heard[:] = [event]

    if not enabled or not sys.stderr.isatty():
        yield keep
        return
    from tqdm import tqdm

    class Bar(tqdm):
        """tqdm with our own line after the bar (tqdm's postfix would start with a comma)."""

        line = ""

        @property
        def format_dict(self):
            return {**super().format_dict, "line": self.line}

    bar = None
    shown = 0.0

    def update(event) -> None:
        nonlocal bar, shown
        keep(event)
        if bar is None:  # made at the first event: a sync with nothing to do draws nothing
            bar = Bar(
                total=max(event.bytes_total, 1),
                desc=description,
                file=sys.stderr,
                leave=True,
                bar_format="{desc}: {bar:20} {line}",
                dynamic_ncols=True,
            )
        now = time.monotonic()
        # Events come per slice of texts embedded, or faster when the cache answers: redraw a
        # few times a second, and the last one always (it stays as the summary).
        if now - shown >= 0.2 or event.finished:
            shown = now
            bar.n = min(event.bytes_done, bar.total)
            bar.line = event.describe()
            bar.refresh()

    try:
        yield update
    finally:
        if bar is not None:
            bar.close()


@contextmanager
def _resumable(command: str, after: str):
    """Ctrl-C or SIGTERM stop ``command`` cleanly (the index keeps what it wrote, the home is let
    go) and say so in one line, with no traceback; ``after`` says what the next run does. Yields
    the list the progress bar puts its events in, to say how far the command got."""
    stopped_by = []
    heard: list = []

    def terminate(signum, frame) -> None:
        stopped_by.append(signum)
        raise KeyboardInterrupt

    # A handler can only be set from the main thread (a caller may run commands on another).
    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, terminate) if main else None
    try:
        yield heard
    except KeyboardInterrupt:
        done = ""
        if heard:
            last = heard[-1]
            done = (
                f" with {last.files_done:,}/{last.files_total:,} files written and {last.texts_embedded:,} "
                "texts embedded (kept in the embedding cache)"
            )
        click.echo(f"syncd: {command} interrupted{done}; {after}", err=True)
        raise click.exceptions.Exit(128 + (stopped_by[0] if stopped_by else signal.SIGINT)) from None
    finally:
        if main:
            signal.signal(signal.SIGTERM, previous)


def _open(home: Path | None, read_only: bool, rebuild_damaged: bool = False):
    from ..engine.facade import open_engine
    from ..wiki.store import follow_index

    engine = open_engine(
        resolve_home(home), read_only=read_only, settings=load_settings(), rebuild_damaged=rebuild_damaged
    )
    follow_index(engine)  # a sync or a rebuild writes the wiki's link graph from the same parses
    return engine


quiet_option = click.option(
    "-q", "--quiet", is_flag=True, help="No progress bar (there is none either when stderr is not a terminal)."
)


@click.command("sync")
@quiet_option
@click.option("--no-commit", is_flag=True, help="Index only; leave the changes uncommitted.")
@click.option("--pull", "pull_first", is_flag=True, help="First pull from the remote (see `syncd pull`).")
@click.option("--push", "push_after", is_flag=True, help="Then push to the remote (see `syncd push`).")
@click.option("--remote", default="origin", show_default=True, metavar="NAME", help="The remote of --pull and --push.")
@home_option
def sync_command(
    quiet: bool, no_commit: bool, pull_first: bool, push_after: bool, remote: str, home: Path | None
) -> None:
    """Index whatever changed in the home since the last sync, then commit it.

    An interrupted sync (Ctrl-C, a kill) keeps what it indexed: the next one goes on from there,
    and the embedding cache gives back every text it had embedded. Beside a running daemon
    (`syncd watch`, `syncd serve`), which holds the home, the daemon syncs and commits, and this
    prints what it did."""
    if push_after and no_commit:
        raise click.UsageError("--push pushes commits: it cannot go with --no-commit")
    refused = None
    if no_commit or pull_first or push_after:
        refused = (
            "beside a running daemon, `syncd sync` takes no --no-commit, --pull or --push (the daemon "
            "commits what it indexes; `syncd watch --remote` shares it)"
        )
    deferred: Exception | None = None
    with (
        _resumable("sync", "the next `syncd sync` goes on from there") as heard,
        _here_or_by_daemon(home, quiet, _SYNC, refused) as (engine, done),
    ):
        if engine is not None:
            with engine, _progress_bar("syncing", not quiet, heard) as bar:
                done, deferred = _sync_here(engine, bar, no_commit, pull_first, push_after, remote)
    assert done is not None  # made here or answered by the daemon
    _print_sync(done, deferred)


@dataclass(frozen=True)
class _DaemonAsk:
    """A command that the daemon holding the home does for this process, and how it is told."""

    method: str  # the socket's method (protocol.py)
    command: str  # as a person types it: "sync"
    does: str  # what the daemon does: "syncs and commits"
    doing: str  # the progress bar's label: "syncing"
    goes_on: str  # after Ctrl-C: what the daemon goes on with


_SYNC = _DaemonAsk("sync", "sync", "syncs and commits", "syncing", "goes on with it and commits it")
_REINDEX = _DaemonAsk("reindex", "reindex", "rebuilds the index", "reindexing", "goes on with the rebuild")

# How long a command tries again after the daemon holding the home went away unanswering.
_DAEMON_GONE_WAIT_S = 5.0


@contextmanager
def _here_or_by_daemon(
    home: Path | None, quiet: bool, ask: _DaemonAsk, refused: str | None = None, rebuild_damaged: bool = False
):
    """``(engine, None)``, a writable engine of the home to do ``ask``'s command here, or
    ``(None, answer)`` when a daemon holds the home and did it (``refused``: why this run of the
    command cannot be handed to it, raised with the lock error; ``rebuild_damaged``: see
    :class:`~syncd.engine.facade.Engine`). A daemon that went away without
    answering (killed) lets go of the home a moment later: tried again until then, for a few
    seconds at most. Raises the lock error when another kind of process holds the home."""
    deadline = time.monotonic() + _DAEMON_GONE_WAIT_S
    while True:
        try:
            engine = _open(home, read_only=False, rebuild_damaged=rebuild_damaged)
            break
        except LockedError as locked:
            if not held_by_a_daemon(locked.holder):
                raise
            if refused is not None:
                raise SyncdError(f"{locked}: {refused}") from None
            answer = _by_daemon(resolve_home(home), locked, quiet, ask)
        if answer is not None:
            yield None, answer
            return
        if time.monotonic() >= deadline:
            raise SyncdError(
                f"the daemon holding the home went away without answering; run `syncd {ask.command}` again"
            )
        time.sleep(0.05)  # the dying daemon's lock is let go after its socket
    yield engine, None


def _sync_here(engine, bar, no_commit: bool, pull_first: bool, push_after: bool, remote: str):
    """`syncd sync` in this process: (what it prints, the commit's GitBusyError or HistoryError
    if git was busy: the sync itself succeeded, so the command exits 0 and says what to do)."""
    deferred = None
    if pull_first:
        from ..engine.sharing import pull

        click.echo(pull(engine, remote).summary())
    report = engine.sync(progress=bar)
    commits = []
    if not no_commit:
        try:
            commits = engine.commit()
        except (GitBusyError, HistoryError) as exc:
            deferred = exc
        else:
            engine.align_to_head()  # every change indexed is committed (`syncd status` names HEAD)
    if push_after and deferred is None:
        from ..engine.sharing import push

        click.echo(push(engine, remote).summary())
    done = {
        "summary": report.plan.summary(),
        "facts": report.facts,
        "chunks": report.chunks,
        "embedded_texts": report.embedded_texts,
        "errors": report.errors,
        "commits": commits,
    }
    return done, deferred


def _print_sync(done: dict, deferred: Exception | None) -> None:
    """What a sync did, here or by the daemon (its answer: protocol.py's ``sync``)."""
    commits = done["commits"]
    by = ""
    if "pid" in done:
        before = done.get("indexed_before") or 0
        by = f" by the running daemon (pid {done['pid']}" + (
            f"; {before} file(s) it had indexed just before this sync)" if before else ")"
        )
        if done.get("head") and not done.get("uncommitted") and not done.get("in_changes"):
            by += f"; everything indexed is committed (HEAD {done['head'][:10]})"
    click.echo(
        f"{done['summary']}; {done['facts']} facts and {done['chunks']} chunks in the files indexed, "
        f"{done['embedded_texts']} texts embedded" + (f"; {len(commits)} commit(s)" if commits else "") + by
    )
    for path, error in sorted(done["errors"].items()):
        say(f"  error {path}: {error}", err=True)
    if done.get("in_changes"):
        click.echo(
            f"syncd: note: {done['in_changes']} file(s) belong to a change still under way, which commits them "
            "when it ends",
            err=True,
        )
    if done.get("uncommitted"):
        deferred = GitBusyError(done["uncommitted"])
    if deferred is not None:
        say(f"syncd: warning: indexed, but not committed: {deferred}", err=True)


def _by_daemon(root: Path, locked: LockedError, quiet: bool, ask: _DaemonAsk) -> dict | None:
    """``ask``'s command done by the daemon that holds the home (Daemon.sync_now reconciles the
    tree and commits; Daemon.reindex_now rebuilds the index): its answer, or None when it went
    away without answering. Raises ``locked`` when the daemon is of a syncd that does this for
    nobody else."""
    from ..control.client import ask_daemon

    daemon = f"the daemon ({locked.holder.split(' (')[0]})"
    if not quiet and sys.stderr.isatty():
        click.echo(f"syncd: {daemon} holds this home: it {ask.does}", err=True)
    stop = threading.Event()
    # However long the daemon's pass takes (a first index): Ctrl-C stops the wait, not the pass.
    with (
        _resumable(ask.command, f"{daemon} {ask.goes_on}") as heard,
        _progress_bar(ask.doing, not quiet, heard) as bar,
    ):
        follower = threading.Thread(
            target=follow_daemon_progress, args=(root, bar, stop, 0.5, _holder_pid(locked.holder)), daemon=True
        )
        follower.start()
        try:
            answer = ask_daemon(root, ask.method, timeout=None)
        except RemoteError as exc:
            if exc.kind == "ProtocolError":
                raise locked from None
            raise SyncdError(f"{daemon} did not {ask.command}: {exc}") from None
        finally:
            stop.set()
            follower.join()
    return answer


def _holder_pid(holder: str) -> int | None:
    """The pid a lock's text names (``pid N (role)``), or None."""
    words = holder.split()
    return int(words[1]) if len(words) > 1 and words[0] == "pid" and words[1].isdigit() else None


def _stopped(pid: int) -> bool:
    """Whether process ``pid`` is stopped (Ctrl-Z in its terminal, SIGSTOP): it answers nothing
    until it is continued."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    # The state follows the command name, which is in parentheses and may hold any character.
    return stat.rpartition(")")[2].split()[:1] in (["T"], ["t"])


def _daemon_stopped(root: Path) -> bool:
    """Whether the daemon holding the home is stopped (Ctrl-Z): asked, it would keep a search
    waiting for the whole of the socket's timeout (30 s) before this process searched itself."""
    from ..errors import HomeError
    from ..home import Home, HomeLock

    try:
        holder = HomeLock(Home(root).lock_path).holder() or ""
    except (HomeError, OSError):
        return False
    pid = _holder_pid(holder)
    return pid is not None and held_by_a_daemon(holder) and _stopped(pid)


def follow_daemon_progress(
    root: Path, update, stop: threading.Event, every_s: float = 0.5, pid: int | None = None
) -> None:
    """Tell ``update`` where the daemon's sync stands, from the progress file it keeps for a long
    sync (syncd/sync/progress_file.py), every ``every_s`` until ``stop``: a first index beside a
    running daemon shows its progress as one done here would. A daemon (``pid``) that is
    stopped is said once: the wait would otherwise look like a hang of this command."""
    from ..home import Home
    from ..sync.progress_file import read_progress

    home = Home(root)
    last = None
    said = False
    while not stop.wait(every_s):
        if pid is not None and not said and _stopped(pid):
            said = True
            click.echo(
                f"syncd: the daemon (pid {pid}) is stopped (Ctrl-Z in its terminal?) and answers once it "
                f"goes on: `fg` there, or `kill -CONT {pid}`; Ctrl-C stops waiting",
                err=True,
            )
        note = read_progress(home)
        if note is not None and note.running and note.progress != last:
            last = note.progress
            update(note.progress)


@click.command("reindex")
@quiet_option
@home_option
def reindex_command(quiet: bool, home: Path | None) -> None:
    """Rebuild the index from the markdown files (built aside, then swapped in).

    The old index serves until the new one is whole. An interrupted rebuild (Ctrl-C, a kill)
    keeps what it built aside: the next `syncd reindex` goes on from there. An index whose
    files are damaged (a disk error, a bad copy) is removed and built anew. Beside a running
    daemon (`syncd watch`, `syncd serve`), which holds the home, the daemon rebuilds it."""
    after = "the index is as it was, and the next `syncd reindex` goes on from where this one stopped"
    with (
        _resumable("reindex", after) as heard,
        _here_or_by_daemon(home, quiet, _REINDEX, rebuild_damaged=True) as (engine, done),
    ):
        if engine is not None:
            with engine, _progress_bar("reindexing", not quiet, heard) as bar:
                report = engine.reindex(progress=bar)
                done = {
                    **{key: engine.counts()[key] for key in ("files", "facts", "chunks")},
                    "embedded_texts": report.embedded_texts,
                    # A rebuild that goes on from an interrupted one finds the files it had
                    # written unchanged (or only touched: same bytes, a new stat).
                    "kept": report.plan.unchanged + len(report.plan.touched),
                    "errors": dict(report.errors),
                }
    assert done is not None  # made here or answered by the daemon
    kept = done["kept"]
    resumed = f"; went on from an interrupted rebuild that had written {kept} of them" if kept else ""
    click.echo(
        f"rebuilt: {done['files']} files, {done['facts']} facts, {done['chunks']} chunks "
        f"({done['embedded_texts']} texts embedded, the rest from the cache){resumed}"
    )
    for path, error in sorted(done["errors"].items()):
        say(f"  error {path}: {error}", err=True)


@click.command("search")
@click.argument("query")
@id_option("--user", "user", "Only this user's memory (and the shared core blocks); default: every user's.")
@id_option("--chat", "chat", "Only this chat's and the user's memory (needs --user).")
@click.option(
    "--limit", type=click.IntRange(min=1), default=DEFAULT_LIMIT, show_default=True, help="How many results, at most."
)
@click.option(
    "--kind",
    type=click.Choice(KINDS),
    default=None,
    help="Only facts, only text chunks or only transcript chunks (default: facts and text chunks).",
)
@click.option("--wiki", "include_wiki", is_flag=True, help="Search the wiki vault too.")
@click.option(
    "--at",
    "at",
    default=None,
    metavar="REV",
    help="Search the memory as a past commit left it: a commit, HEAD~N, a branch, a tag, or a "
    "date/time (2026-11-20T14:00, yesterday, '2 days ago': the last commit at or before it).",
)
@json_option
@home_option
def search_command(
    query: str,
    user: str | None,
    chat: str | None,
    limit: int,
    kind: str | None,
    include_wiki: bool,
    at: str | None,
    as_json: bool,
    home: Path | None,
) -> None:
    """Hybrid (semantic + full-text) search of the memory: the same search, defaults and hits as
    the REST API, MCP and the agent tools.

    QUERY is what to look for, in plain words. When `syncd watch` runs, the daemon answers.
    """
    if chat is not None and user is None:
        raise click.UsageError("--chat needs --user (a chat belongs to a user)")
    from ..control.client import ask_daemon

    root = resolve_home(home)
    # The socket's JSON parameters (the same keywords search_answer takes).
    params: dict[str, Any] = {
        "query": query,
        "user_id": user,
        "chat_id": chat,
        "limit": limit,
        "kind": kind,
        "include_wiki": include_wiki,
        **({"at": at} if at is not None else {}),
    }
    # A past commit is searched here, not by the daemon: its index is built aside from git's objects.
    answer = ask_daemon(root, "search", params) if at is None and not _daemon_stopped(root) else None
    advice = "the running daemon is indexing them"
    if answer is None:
        from ..embedding.fastembed_backend import release_after_query
        from ..engine.facade import open_engine
        from ..engine.search import search_answer

        with open_engine(root, read_only=True, settings=load_settings(), looks_only=True) as engine:
            if at is None:  # one query is all this process embeds (a past commit's index embeds its files)
                release_after_query(engine.embedder)
            answer = search_answer(engine, **params)
        advice = "run `syncd sync` (or keep `syncd watch` running)"
    hits, stale = answer["hits"], answer["stale"]
    if stale:
        # Never stale without saying so: the answer may miss what changed since the last sync.
        click.echo(f"syncd: note: {stale} file(s) changed since the index was updated; {advice}", err=True)
    if as_json:
        print_json(hits)
        return
    if not hits:
        click.echo("no results" + ("" if include_wiki else " (add --wiki to search the wiki vault too)"))
    for rank, hit in enumerate(hits, 1):
        label = f"[{hit['category']}] " if hit["category"] else ""
        parts = " ".join(f"{k}={v:.2f}" for k, v in hit["parts"].items())
        say(f"{rank:2}. {hit['score']:.3f}  {label}{hit['snippet']}")
        # A wiki hit says which page and section it came from (a daemon of an older syncd may not).
        where = f"  {hit['breadcrumb']}" if hit.get("title") and hit.get("breadcrumb") else ""
        say(f"      {hit['path']}:{hit['line']}{where}  ({parts})")


@click.command("status")
@json_option
@home_option
def status_command(as_json: bool, home: Path | None) -> None:
    """What the index holds and exactly which files are stale (reads no model, no LanceDB), and
    where a merge with another machine kept both versions (a conflict to resolve)."""
    from ..engine.status import INDEX_OK
    from ..engine.status_read import read_status
    from ..index.backend import INDEX_UNREACHABLE

    root = resolve_home(home)
    status = read_status(root, load_settings())
    remote = _remote_state(root)
    conflicts = _conflicts(root)
    if as_json:
        print_json(status.to_dict() | {"remote": remote, "conflicts": [c.to_dict() for c in conflicts]})
        return
    say(f"home     {status.home}")
    click.echo(f"model    {status.model_id}")
    if status.incompatible:
        click.echo(f"index    {status.incompatible}")  # with what rebuilds it (status.incompatibility)
    click.echo(f"indexed  {status.files} files, {status.facts} facts, {status.chunks} chunks")
    if status.index == INDEX_UNREACHABLE:
        click.echo(
            "index    unreachable: its database cannot be reached; writes are saved and committed, "
            "and the index catches up once it is back (`syncd sync`, or a running `syncd watch`)"
        )
    elif status.index != INDEX_OK:
        click.echo(
            "index    missing: not built yet, or deleted with .syncd/ (a running `syncd watch` or "
            "`syncd serve` is rebuilding it; else run `syncd reindex`)"
        )
    if status.aligned_commit:
        click.echo(f"commit   {status.aligned_commit}")
    if status.git_busy:
        say(f"git      {status.git_busy}; until then syncd indexes the files as they are and commits nothing")
    if remote is not None:
        _echo_remote(remote)
    _echo_conflicts(conflicts)
    _echo_sync_state(status)
    _echo_freshness(status)


def _echo_freshness(status) -> None:
    """Whether the index reflects the files on disk, and if not which files it does not."""
    stale = {k: v for k, v in status.stale.items() if v}
    if status.healthy:
        click.echo("fresh    the index reflects every file on disk")
    elif status.fresh:
        click.echo(
            f"fresh    the index reflects every file on disk, but {len(status.errors)} file(s) "
            "could not be indexed whole (below)"
        )
    for kind, paths in stale.items():
        click.echo(f"stale    {len(paths)} {kind}:")
        for path in paths[:50]:
            say(f"           {path}")
        if len(paths) > 50:
            click.echo(f"           ... and {len(paths) - 50} more")
    if status.uncommitted:
        click.echo(f"git      {len(status.uncommitted)} indexed change(s) not yet committed:")
        for path in status.uncommitted[:50]:
            say(f"           {path}")
    for path, error in sorted(status.errors.items()):
        say(f"error    {path}: {error}")


def _remote_state(root: Path) -> dict | None:
    """What a daemon sharing the home through a git remote last did (`syncd watch --remote`)."""
    from ..daemon.sharing import read_remote_state
    from ..home import Home

    return read_remote_state(Home(root).private_dir)


def _conflicts(root: Path) -> list:
    """What merges with another machine kept both versions of (`syncd pull`), until a person
    keeps one (the workbench's Health tab). Status never fails for want of them."""
    from ..engine.conflicts import find_conflicts
    from ..errors import SyncdError

    try:
        return find_conflicts(root)
    except SyncdError:
        return []


def _echo_conflicts(conflicts: list) -> None:
    for conflict in conflicts:
        say(f"conflict {conflict.path}:{conflict.line}: {conflict.describe()}")


def _echo_remote(state: dict) -> None:
    def ago(stamp: float | None) -> str:
        return "never" if stamp is None else f"{max(0.0, time.time() - stamp):.0f} s ago"

    say(f"remote   {state['remote']}: last pull {ago(state['last_pull'])}, last push {ago(state['last_push'])}")
    if state.get("stopped"):
        name = state["remote"]
        say(
            f"remote   stopped, not retried: {state['error']}; waiting cannot fix this: once it is fixed (the "
            f"remote's URL, its hook, your credentials), run `syncd remote retry {name}` (local writes go on)"
        )
    elif state.get("error"):
        retry = state.get("retry_at")
        when = f"; retrying in {max(0.0, retry - time.time()):.0f} s" if retry else ""
        # Not refused for good (that is "stopped" above): unreachable now, a drive not mounted, an
        # ssh agent locked, git busy; retried until it passes.
        say(f"remote   failing for now, retried: {state['error']}{when} (local writes go on)")


def _echo_sync_state(status) -> None:
    """The sync running now, or what an interrupted sync or rebuild left to finish."""
    from ..sync.progress import SyncProgress

    running = status.sync is not None and status.sync["running"]
    if status.sync is not None:
        event = SyncProgress.from_dict(status.sync)
        verb = "rebuilding" if event.what == "reindex" else "syncing"
        if running:
            click.echo(f"{verb:<8} {event.describe()} (pid {status.sync['pid']})")
        elif event.what == "sync":
            click.echo(
                f"syncing  interrupted at {event.files_done:,}/{event.files_total:,} files: the next "
                "`syncd sync` (or a running `syncd watch`) goes on from there"
            )
    if status.reindex_interrupted and not running:
        click.echo(
            "reindex  interrupted: the index is the one from before it; `syncd reindex` goes on from where it stopped"
        )


COMMANDS = [sync_command, reindex_command, search_command, status_command]
