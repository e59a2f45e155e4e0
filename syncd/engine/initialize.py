"""``syncd init``: create a memory home, or adopt an existing folder (an Obsidian vault, a repo).

Adoption is additive only: we create what is missing and never modify or delete a file that is
already there. That is why ``.syncd/`` is ignored by a ``.gitignore`` *inside* ``.syncd/`` rather
than by editing the user's own ``.gitignore``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

from ..config import Settings
from ..errors import HomeError
from ..history.git import git_folder_kind, open_or_init_repo
from ..history.staging import commit_paths
from ..home import Home, atomic_write, find_home
from ..home.seed import vault_seed

__all__ = ["init", "InitReport"]

log = logging.getLogger(__name__)

_ROOT_GITIGNORE = "# syncd: the index and its state are derived from the markdown; never commit them.\n.syncd/\n"
# Daily logs and transcripts only grow at their end: when both sides of a merge (a `git stash
# pop`, a pull, a merge of a branch) added lines, both sets are kept, never conflict markers in a
# memory file nobody can then write to. Facts carry their ids, so the lines stay traceable.
_ROOT_GITATTRIBUTES = (
    "# syncd: append-mostly memory files keep the lines both sides of a merge added.\n"
    "memory/users/*/[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9].md merge=union\n"
    "memory/users/*/sessions/*/transcript.jsonl merge=union\n"
)
# Sessions live under their user (memory/users/<user>/sessions/), made on a session's first turn.
# A home made by an older init keeps its empty top-level sessions/ folders: init never deletes.
_FOLDERS = ("memory/core", "memory/users", "vault")


@dataclass
class InitReport:
    home: Path
    created: list[str] = field(default_factory=list)
    git_initialised: bool = False
    commit: str | None = None

    @property
    def changed(self) -> bool:
        return bool(self.created) or self.git_initialised


def _create_if_missing(path: Path, data: bytes, home: Home, report: InitReport) -> None:
    if path.exists() or path.is_symlink():
        return
    try:
        atomic_write(path, data, expected_sha=None)
    except FileExistsError:
        return
    report.created.append(home.rel(path))


def _check_place(root: Path) -> None:
    """Refuse, before anything is made, a place no home can live in: git's own folder (a bare
    repository, a repository's .git) has no working tree to hold the files, and a folder inside
    another home would be that home's files and a second repository in its tree."""
    kind = git_folder_kind(root)
    if kind == "bare":
        raise HomeError(
            f"{root} is in a bare git repository, which has no working tree for the files; "
            "`git clone` it and run `syncd init` on the clone"
        )
    if kind == "git-dir":
        raise HomeError(
            f"{root} is inside a git repository's .git folder; run `syncd init` on the repository's "
            "own folder (the one holding .git)"
        )
    where = root.resolve()
    try:
        enclosing = find_home(where.parent)
    except HomeError:
        return
    raise HomeError(
        f"{root} is inside the syncd home {enclosing}; a home cannot hold another: choose a folder outside it"
    )


def init(path: Path | str, settings: Settings | None = None) -> InitReport:
    """Create or adopt a memory home at ``path``; running it again changes nothing."""
    settings = settings or Settings()
    root = Path(path).expanduser()
    if root.exists() and not root.is_dir():
        raise HomeError(f"{root} exists and is not a folder")
    _check_place(root)
    root.mkdir(parents=True, exist_ok=True)
    home = Home(root)
    report = InitReport(home=home.root)

    for folder in _FOLDERS:
        target = home.root / folder
        for step in (*reversed(target.relative_to(home.root).parents[:-1]), target.relative_to(home.root)):
            if (home.root / step).exists() and not (home.root / step).is_dir():
                raise HomeError(f"{home.root / step} exists and is not a folder; move it away and run init again")
        target.mkdir(parents=True, exist_ok=True)
    home.ensure_state_dir()  # derived state: not reported, never committed

    _create_if_missing(home.root / ".gitignore", _ROOT_GITIGNORE.encode(), home, report)
    _create_if_missing(home.root / ".gitattributes", _ROOT_GITATTRIBUTES.encode(), home, report)
    for name, data in sorted(vault_seed().items()):
        _create_if_missing(home.vault_dir / name, data, home, report)
    # Empty folders are invisible to git; a keep file makes the layout survive a clone.
    for folder in _FOLDERS:
        target = home.root / folder
        if not any(target.iterdir()):
            _create_if_missing(target / ".gitkeep", b"", home, report)

    repo, report.git_initialised = open_or_init_repo(home.root)
    if report.created:
        report.commit = commit_paths(
            repo,
            report.created,
            "syncd: initialise memory home",
            settings.human_name,
            settings.human_email,
        )
    elif report.git_initialised:
        log.info("initialised an empty git repository at %s", home.root)
    return report
