"""The daemon and history commands (watch, log, blame, revert), registered by ``cli.build_parser``."""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

from ..config import Settings
from ..errors import LockedError, NotFoundError

__all__ = ["register"]

log = logging.getLogger(__name__)


def _json(value: object) -> None:
    print(json.dumps(value, indent=2, ensure_ascii=False, default=str))


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError("the reconcile interval must be at least 1 second")
    return value


def cmd_watch(args: argparse.Namespace, settings: Settings) -> int:
    from ..engine import open_engine
    from ..sync.daemon import Daemon

    if args.reconcile_interval is not None:
        settings = settings.model_copy(update={"reconcile_interval_s": args.reconcile_interval})
    # The lock comes first: a second daemon fails here, naming the pid that holds it.
    with open_engine(args.resolve_home(), settings=settings) as engine:
        package_logger = logging.getLogger("syncd")
        if package_logger.getEffectiveLevel() > logging.INFO:
            package_logger.setLevel(logging.INFO)
        file_log = logging.FileHandler(engine.home.state_dir / "daemon.log", encoding="utf-8")
        file_log.setFormatter(logging.Formatter("%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s"))
        package_logger.addHandler(file_log)
        try:
            Daemon(engine, settings).run(install_signals=True)
        finally:
            package_logger.removeHandler(file_log)
            file_log.close()
    return 0


def _print_entry(entry, indent: str = "") -> None:
    print(f"{indent}{entry.sha[:10]}  {entry.date}  {entry.author} <{entry.email}>")
    print(f"{indent}    {entry.subject}")
    for key, value in entry.trailers.items():
        print(f"{indent}    {key}: {value}")


def cmd_log(args: argparse.Namespace, settings: Settings) -> int:
    from ..history.log import read_log

    root = Path(args.resolve_home()).resolve()
    path = None
    if args.path:
        target = Path(args.path)
        path = (target.resolve().relative_to(root) if target.is_absolute() else target).as_posix()
    entries = read_log(root, path, args.limit)
    if args.json:
        _json([e.to_dict() for e in entries])
        return 0
    if not entries:
        print("no commits" + (f" touching {path}" if path else ""))
    for entry in entries:
        _print_entry(entry)
        for name in entry.files[:10]:
            print(f"      {name}")
        if len(entry.files) > 10:
            print(f"      ... and {len(entry.files) - 10} more files")
    return 0


def _current_line(root: Path, row: dict) -> int:
    """The indexed line, or where the fact's text sits now if the file moved lines around since."""
    try:
        lines = (root / row["path"]).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return row["line"]
    if 0 < row["line"] <= len(lines) and row["text"] in lines[row["line"] - 1]:
        return row["line"]
    for number, line in enumerate(lines, 1):
        if row["text"] in line:
            return number
    return row["line"]


def cmd_blame(args: argparse.Namespace, settings: Settings) -> int:
    from ..engine import open_engine
    from ..history.blame import fact_history

    with open_engine(args.resolve_home(), read_only=True, settings=settings) as engine:
        rows = engine.index.find_fact(args.fact_id)
        root = engine.home.root
    if not rows:
        raise NotFoundError(f"no fact {args.fact_id!r} in the index (try `syncd search` to find its id)")
    histories = [fact_history(root, r["path"], _current_line(root, r), r["text"]) for r in rows]
    if args.json:
        _json([h.to_dict() for h in histories])
        return 0
    for history in histories:
        print(f"{args.fact_id}  {history.path}:{history.line}")
        print(f"    {history.text}")
        if history.uncommitted:
            print("    not committed yet (the daemon commits it shortly)")
            continue
        if history.introduced:
            print("introduced by")
            _print_entry(history.introduced, "  ")
        if history.edits:
            print("later edits (newest first)")
            for entry in history.edits:
                _print_entry(entry, "  ")
    return 0


def cmd_revert(args: argparse.Namespace, settings: Settings) -> int:
    from ..engine import open_engine
    from ..history.git import head_sha
    from ..history.revert import revert_commit

    root = Path(args.resolve_home())
    try:
        engine = open_engine(root, settings=settings)
    except LockedError as exc:
        # A daemon holds the home: it sees the reverted files like any edit and indexes them.
        sha = revert_commit(root.resolve(), args.commit, settings.human_name, settings.human_email)
        print(f"reverted as {sha[:10]}; the running daemon ({exc.holder}) is indexing the change")
        return 0
    with engine:
        sha = revert_commit(engine.home.root, args.commit, settings.human_name, settings.human_email)
        report = engine.sync()
        engine.index.write_meta(aligned_commit=head_sha(engine.home.root))
    print(f"reverted as {sha[:10]}; index updated ({report.plan.summary()})")
    return 0


def register(command) -> None:
    """Add this module's commands through ``command(name, func, help)`` from cli.build_parser."""
    p = command("watch", cmd_watch, "Run the daemon: keep the index and git history in step with the tree "
                "until interrupted (SIGINT/SIGTERM finish the batch in hand, commit, and exit 0).")
    p.add_argument("--reconcile-interval", type=_seconds, default=None, metavar="SECONDS",
                   help="full reconcile every SECONDS, catching events the OS dropped "
                   "(default: $SYNCD_RECONCILE_INTERVAL_S, else 300)")

    p = command("log", cmd_log, "Recent commits of the memory, with who made them and their provenance trailers.")
    p.add_argument("path", nargs="?", default=None, help="only commits touching this file or folder")
    p.add_argument("-n", "--limit", type=int, default=20, help="how many commits (default 20)")
    p.add_argument("--json", action="store_true", help="machine-readable output")

    p = command("blame", cmd_blame, "The commit and provenance that introduced a fact, and later edits of it.")
    p.add_argument("fact_id", help="the fact's id, as `syncd search --json` shows it")
    p.add_argument("--json", action="store_true", help="machine-readable output")

    p = command("revert", cmd_revert, "Undo one commit (an agent turn, say) with `git revert`, and index the result.")
    p.add_argument("commit", help="the commit to undo (a sha or any git revision)")
