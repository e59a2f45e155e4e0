"""Index commands: ``sync``, ``reindex``, ``search``, ``status``.

``search`` asks the running daemon over its socket when there is one (no LanceDB, no model in
this process), and loads everything itself otherwise. ``status`` reads the index's light mirror of
its files table (``index/files_mirror.py``), never LanceDB or the model, unless the mirror cannot
vouch for itself.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager
from pathlib import Path

import click

from ..errors import GitBusyError, HistoryError

from .common import home_option, id_option, json_option, load_settings, print_json, resolve_home

__all__ = ["COMMANDS"]


@contextmanager
def _progress_bar(description: str, enabled: bool):
    """A tqdm bar on stderr for long work; silent when stderr is not a terminal."""
    if not enabled:
        yield None
        return
    from tqdm import tqdm

    bar = tqdm(total=0, desc=description, unit="file", file=sys.stderr, disable=None)

    def update(done: int, total: int) -> None:
        bar.total = total
        bar.n = done
        bar.refresh()

    try:
        yield update
    finally:
        bar.close()


def _open(home: Path | None, read_only: bool):
    from ..engine import open_engine

    return open_engine(resolve_home(home), read_only=read_only, settings=load_settings())


def _print_errors(report) -> None:
    for path, error in sorted(report.errors.items()):
        click.echo(f"  error {path}: {error}", err=True)


quiet_option = click.option("-q", "--quiet", is_flag=True, help="No progress bar.")


@click.command("sync")
@quiet_option
@click.option("--no-commit", is_flag=True, help="Index only; leave the changes uncommitted.")
@home_option
def sync_command(quiet: bool, no_commit: bool, home: Path | None) -> None:
    """Index whatever changed in the home since the last sync, then commit it."""
    with _open(home, read_only=False) as engine, _progress_bar("syncing", not quiet) as bar:
        report = engine.sync(progress=bar)
        commits, deferred = [], None
        if not no_commit:
            try:
                commits = engine.commit()
            except (GitBusyError, HistoryError) as exc:
                deferred = exc  # the sync itself succeeded: exit 0, and say what to do about git
    click.echo(f"{report.plan.summary()}; {report.facts} facts and {report.chunks} chunks written, "
               f"{report.embedded_texts} texts embedded" + (f"; {len(commits)} commit(s)" if commits else ""))
    _print_errors(report)
    if deferred is not None:
        click.echo(f"syncd: warning: indexed, but not committed: {deferred}", err=True)


@click.command("reindex")
@quiet_option
@home_option
def reindex_command(quiet: bool, home: Path | None) -> None:
    """Drop the index and rebuild it from the markdown files."""
    with _open(home, read_only=False) as engine, _progress_bar("reindexing", not quiet) as bar:
        report = engine.reindex(progress=bar)
        counts = engine.index.counts()
    click.echo(f"rebuilt: {counts['files']} files, {counts['facts']} facts, {counts['chunks']} chunks "
               f"({report.embedded_texts} texts embedded, the rest from the cache)")
    _print_errors(report)


def _search_locally(root: Path, params: dict) -> tuple[list[dict], int]:
    from ..control.protocol import hit_to_wire
    from ..engine import open_engine
    from ..status import count_stale

    with open_engine(root, read_only=True, settings=load_settings()) as engine:
        hits = engine.search(**params)
        stale = count_stale(engine.home, engine.index.files(), engine.settings.max_file_bytes)
    return [hit_to_wire(h) for h in hits], stale


@click.command("search")
@click.argument("query")
@id_option("--user", "user", "Only this user's memory (plus shared pages).")
@id_option("--chat", "chat", "Only this chat's and the user's memory (needs --user).")
@click.option("--limit", type=click.IntRange(min=1), default=10, show_default=True, help="How many results.")
@click.option("--kind", type=click.Choice(["fact", "chunk"]), default=None, help="Only facts or only chunks.")
@json_option
@home_option
def search_command(query: str, user: str | None, chat: str | None, limit: int, kind: str | None,
                   as_json: bool, home: Path | None) -> None:
    """Hybrid (semantic + full-text) search of the memory.

    QUERY is what to look for, in plain words. When `syncd watch` runs, the daemon answers.
    """
    if chat is not None and user is None:
        raise click.UsageError("--chat needs --user (a chat belongs to a user)")
    from ..control.client import ask_daemon

    root = resolve_home(home)
    params = {"query": query, "user_id": user, "chat_id": chat, "limit": limit, "kind": kind}
    answer = ask_daemon(root, "search", params)
    if answer is None:
        hits, stale = _search_locally(root, params)
        advice = "run `syncd sync` (or keep `syncd watch` running)"
    else:
        hits, stale = answer["hits"], answer["stale"]
        advice = "the running daemon is indexing them"
    if stale:
        # Never stale without saying so: the answer may miss what changed since the last sync.
        click.echo(f"syncd: note: {stale} file(s) changed since the index was updated; {advice}", err=True)
    if as_json:
        print_json([{k: v for k, v in h.items() if k != "snippet"} for h in hits])
        return
    if not hits:
        click.echo("no results")
    for rank, hit in enumerate(hits, 1):
        label = f"[{hit['category']}] " if hit["category"] else ""
        parts = " ".join(f"{k}={v:.2f}" for k, v in hit["parts"].items())
        click.echo(f"{rank:2}. {hit['score']:.3f}  {label}{hit['snippet']}")
        # A wiki hit says which page and section it came from (a daemon of an older syncd may not).
        where = f"  {hit['breadcrumb']}" if hit.get("title") and hit.get("breadcrumb") else ""
        click.echo(f"      {hit['path']}:{hit['line']}{where}  ({parts})")


@click.command("status")
@json_option
@home_option
def status_command(as_json: bool, home: Path | None) -> None:
    """What the index holds and exactly which files are stale (reads no model, no LanceDB)."""
    from ..status import INDEX_OK
    from .status_source import read_status

    status = read_status(resolve_home(home), load_settings())
    if as_json:
        print_json(status.to_dict())
        return
    click.echo(f"home     {status.home}")
    click.echo(f"model    {status.model_id}"
               + ("" if status.compatible else "  (index built with another model: run `syncd reindex`)"))
    click.echo(f"indexed  {status.files} files, {status.facts} facts, {status.chunks} chunks")
    if status.index != INDEX_OK:
        click.echo("index    missing: not built yet, or deleted with .syncd/ (a running `syncd watch` or "
                   "`syncd serve` is rebuilding it; else run `syncd reindex`)")
    if status.aligned_commit:
        click.echo(f"commit   {status.aligned_commit}")
    stale = {k: v for k, v in status.stale.items() if v}
    if status.healthy:
        click.echo("fresh    the index reflects every file on disk")
    elif status.fresh:
        click.echo(f"fresh    the index reflects every file on disk, but {len(status.errors)} file(s) "
                   "could not be indexed whole (below)")
    for kind, paths in stale.items():
        click.echo(f"stale    {len(paths)} {kind}:")
        for path in paths[:50]:
            click.echo(f"           {path}")
        if len(paths) > 50:
            click.echo(f"           ... and {len(paths) - 50} more")
    if status.uncommitted:
        click.echo(f"git      {len(status.uncommitted)} indexed change(s) not yet committed:")
        for path in status.uncommitted[:50]:
            click.echo(f"           {path}")
    for path, error in sorted(status.errors.items()):
        click.echo(f"error    {path}: {error}")


COMMANDS = [sync_command, reindex_command, search_command, status_command]
