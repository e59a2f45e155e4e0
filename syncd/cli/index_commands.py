"""Engine-backed CLI commands (sync, reindex, search, status), registered by ``cli.build_parser``."""

from __future__ import annotations

import argparse
import json
import sys
from contextlib import contextmanager

from ..config import Settings
from ..errors import GitBusyError, HistoryError

__all__ = ["register"]


def _json(value: object) -> None:
    print(json.dumps(value, indent=2, ensure_ascii=False, default=str))


@contextmanager
def _progress_bar(description: str, enabled: bool):
    """A tqdm bar on stderr for long work; silent when stderr is not a terminal and not forced."""
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


def _open(args: argparse.Namespace, settings: Settings, read_only: bool):
    from ..engine import open_engine

    return open_engine(args.resolve_home(), read_only=read_only, settings=settings)


def _print_errors(report) -> None:
    for path, error in sorted(report.errors.items()):
        print(f"  error {path}: {error}", file=sys.stderr)


def cmd_sync(args: argparse.Namespace, settings: Settings) -> int:
    with _open(args, settings, read_only=False) as engine, _progress_bar("syncing", not args.quiet) as bar:
        report = engine.sync(progress=bar)
        commits, deferred = [], None
        if not args.no_commit:
            try:
                commits = engine.commit()
            except (GitBusyError, HistoryError) as exc:
                deferred = exc  # the sync itself succeeded: exit 0, and say what to do about git
    print(f"{report.plan.summary()}; {report.facts} facts and {report.chunks} chunks written, "
          f"{report.embedded_texts} texts embedded" + (f"; {len(commits)} commit(s)" if commits else ""))
    _print_errors(report)
    if deferred is not None:
        print(f"syncd: warning: indexed, but not committed: {deferred}", file=sys.stderr)
    return 0


def cmd_reindex(args: argparse.Namespace, settings: Settings) -> int:
    with _open(args, settings, read_only=False) as engine, _progress_bar("reindexing", not args.quiet) as bar:
        report = engine.reindex(progress=bar)
        counts = engine.index.counts()
    print(f"rebuilt: {counts['files']} files, {counts['facts']} facts, {counts['chunks']} chunks "
          f"({report.embedded_texts} texts embedded, the rest from the cache)")
    _print_errors(report)
    return 0


def cmd_search(args: argparse.Namespace, settings: Settings) -> int:
    with _open(args, settings, read_only=True) as engine:
        hits = engine.search(args.query, user_id=args.user, chat_id=args.chat, limit=args.limit, kind=args.kind)
        stale = sum(len(paths) for paths in engine.status().stale.values())
    if stale:
        # Never stale without saying so: the answer may miss what changed since the last sync.
        print(f"syncd: note: {stale} file(s) changed since the index was updated; run `syncd sync` "
              "(or keep `syncd watch` running)", file=sys.stderr)
    if args.json:
        _json([h.to_dict() for h in hits])
        return 0
    if not hits:
        print("no results")
    for rank, hit in enumerate(hits, 1):
        label = f"[{hit.category}] " if hit.category else ""
        where = f"{hit.path}:{hit.line}"
        parts = " ".join(f"{k}={v:.2f}" for k, v in hit.parts.items())
        print(f"{rank:2}. {hit.score:.3f}  {label}{hit.snippet()}")
        print(f"      {where}  ({parts})")
    return 0


def cmd_status(args: argparse.Namespace, settings: Settings) -> int:
    with _open(args, settings, read_only=True) as engine:
        status = engine.status()
    if args.json:
        _json(status.to_dict())
        return 0
    print(f"home     {status.home}")
    print(f"model    {status.model_id}" + ("" if status.compatible else "  (index built with another model: run `syncd reindex`)"))
    print(f"indexed  {status.files} files, {status.facts} facts, {status.chunks} chunks")
    if status.aligned_commit:
        print(f"commit   {status.aligned_commit}")
    stale = {k: v for k, v in status.stale.items() if v}
    if not stale and status.compatible:
        print("fresh    the index reflects every file on disk")
    for kind, paths in stale.items():
        print(f"stale    {len(paths)} {kind}:")
        for path in paths[:50]:
            print(f"           {path}")
        if len(paths) > 50:
            print(f"           ... and {len(paths) - 50} more")
    if status.uncommitted:
        print(f"git      {len(status.uncommitted)} indexed change(s) not yet committed:")
        for path in status.uncommitted[:50]:
            print(f"           {path}")
    for path, error in sorted(status.errors.items()):
        print(f"error    {path}: {error}")
    return 0


def cmd_demo(args: argparse.Namespace, settings: Settings) -> int:
    from pathlib import Path

    from .demo import run_demo

    run_demo(Path(args.path or args.home or "syncd-demo"), settings, limit=args.limit)
    return 0


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def register(command) -> None:
    """Add this module's commands through ``command(name, func, help)`` from cli.build_parser."""
    p = command("demo", cmd_demo, "Create a demo home with two users' memory, index it and search it (offline).")
    p.add_argument("path", nargs="?", help="where to create it (default: ./syncd-demo)")
    p.add_argument("--limit", type=_positive_int, default=3, help="results per query (default 3)")
    p = command("sync", cmd_sync, "Index whatever changed in the home since the last sync, then commit it.")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    p.add_argument("--no-commit", action="store_true", help="index only; leave the changes uncommitted")

    p = command("reindex", cmd_reindex, "Drop the index and rebuild it from the markdown files.")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")

    p = command("search", cmd_search, "Hybrid (semantic + full-text) search of the memory.")
    p.add_argument("query", help="what to look for, in plain words")
    p.add_argument("--user", default=None, help="only this user's memory (plus shared pages)")
    p.add_argument("--chat", default=None, help="only this chat's and the user's memory (needs --user)")
    p.add_argument("--limit", type=_positive_int, default=10, help="how many results (default 10)")
    p.add_argument("--kind", choices=["fact", "chunk"], default=None, help="only facts or only chunks")
    p.add_argument("--json", action="store_true", help="machine-readable output")

    p = command("status", cmd_status, "What the index holds and exactly which files are stale.")
    p.add_argument("--json", action="store_true", help="machine-readable output")
