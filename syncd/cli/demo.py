"""``syncd demo``: a small memory home with two users, synced and searched, all offline.

It is the README's first command: it shows what the files look like, that search finds facts by
meaning and by words, and that one user's memory never shows up in another's results.
"""

from __future__ import annotations

from pathlib import Path

from ..config import Settings
from ..engine.facade import open_engine
from ..engine.initialize import init
from ..errors import HomeError
from ..home import Home, atomic_write, git_dir
from ..wiki.store import follow_index

__all__ = ["DEMO_FILES", "DEMO_QUERIES", "build_demo_home", "run_demo"]

DEMO_FILES: dict[str, str] = {
    "memory/core/persona.md": "You are a calm, precise assistant. You keep answers short and cite "
    "where a remembered fact came from.\n",
    "memory/users/ana/core/user.md": "Ana, a nurse in Lyon. Speaks French and English.\n",
    "memory/users/ana/MEMORY.md": "# Ana\n\n## Health\nAllergic to peanuts; carries an epinephrine pen.\n\n"
    "## Running\nTraining for the Lyon half marathon in April; runs before work.\n",
    "memory/users/ana/2026-11-20.md": "# 2026-11-20\n\n## 08:10 chat:phone session:s-101\n"
    "- [preference] Likes green tea in the morning, never coffee. `drinks morning` <!-- imp:0.6 -->\n"
    "- [goal] Wants to run the Lyon half marathon in under two hours. `running` <!-- imp:0.9 -->\n"
    "\nShe asked for a training plan with three runs a week.\n",
    "memory/users/ana/2026-11-22.md": "# 2026-11-22\n\n## 19:42 chat:phone session:s-117\n"
    "- [personal] Has a cat called Miso who hates the vacuum cleaner. `pets` <!-- imp:0.5 -->\n"
    "- [context] Works night shifts at the hospital this week. `work schedule` <!-- imp:0.7 -->\n"
    "- [ ] buy new running shoes\n",
    "memory/users/bob/2026-11-21.md": "# 2026-11-21\n\n## 14:03 chat:laptop session:s-204\n"
    "- [technical] Deploys his side project with Docker on a small VPS. `devops` <!-- imp:0.6 -->\n"
    "- [preference] Drinks three espressos a day and likes dark roast coffee. `drinks` <!-- imp:0.4 -->\n",
    "vault/Green tea.md": "---\ntitle: Green tea\ntags: [drinks]\n---\n# Green tea\n\n"
    "Unfermented tea; steep at 75-80 °C for two minutes. See [[Morning routine]].\n\n"
    "## Caffeine\nAbout a third of a coffee's caffeine per cup. #health\n",
    "vault/Lyon half marathon.md": "---\ntitle: Lyon half marathon\n---\n# Lyon half marathon\n\n"
    "Held every April along the Rhône and the Saône. 21.1 km, mostly flat.\n",
}

DEMO_QUERIES: list[tuple[str, str | None]] = [
    ("what does she drink in the morning?", "ana"),
    ("food allergies", "ana"),
    ("coffee", "ana"),
    ("coffee", "bob"),
    ("how is the project deployed", None),
]


# In the private folder of a home the demo made: a later demo may top that home up, and no other.
_DEMO_MARK = "demo"


def build_demo_home(path: Path | str, settings: Settings | None = None) -> Home:
    """Create a demo home at ``path``, or top up one an earlier demo made (files that already
    exist are left alone). Any other folder that is not empty is refused, a home of the person's
    above all: the demo's people and their commit would land in their memory."""
    root = Path(path).expanduser()
    folder = git_dir(root)
    made_by_demo = folder is not None and (folder / "syncd" / _DEMO_MARK).is_file()
    if root.is_dir() and any(root.iterdir()) and not made_by_demo:
        what = "a syncd home" if (root / "memory").is_dir() else "a folder that is not empty"
        raise HomeError(
            f"{root} is {what}; the demo writes its own people there, so it makes a new home instead: "
            "give it a new folder, e.g. `syncd demo /tmp/syncd-demo`"
        )
    report = init(root, settings)
    home = Home(report.home)
    (home.ensure_private_dir() / _DEMO_MARK).touch()
    for rel, text in DEMO_FILES.items():
        target = home.root / rel
        if not target.exists():
            atomic_write(target, text.encode("utf-8"), expected_sha=None)
    return home


def run_demo(path: Path | str, settings: Settings | None = None, limit: int = 3, echo=print) -> None:
    settings = settings or Settings()
    home = build_demo_home(path, settings)
    echo(f"demo home: {home.root}")
    with open_engine(home.root, settings=settings) as engine:
        follow_index(engine)
        report = engine.sync()
        engine.commit()
        counts = engine.counts()
        echo(
            f"indexed {counts['files']} files: {counts['facts']} facts, {counts['chunks']} chunks "
            f"({report.embedded_texts} texts embedded)"
        )
        for query, user in DEMO_QUERIES:
            scope = f"user {user}" if user else "everyone"
            echo(f"\nsearch {query!r} ({scope}):")
            for hit in engine.search(query, user_id=user, limit=limit):
                label = f"[{hit.category}] " if hit.category else ""
                echo(f"  {hit.score:.2f}  {label}{hit.snippet(90)}  ({hit.path}:{hit.line})")
    echo(f"\nopen {home.root} in Obsidian or any editor; run `syncd status --home {home.root}`")
