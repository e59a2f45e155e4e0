"""Shared by the sharing tests: one home pushed to a bare remote and clones of it, each a home."""

from __future__ import annotations

import subprocess
from pathlib import Path

import syncd
from syncd.engine.sharing import push, share

from .daemon_helpers import warm_embed_cache
from .helpers import write


def bare_remote(folder: Path) -> Path:
    remote = folder / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(remote)], check=True)
    return remote


def shared_homes(
    folder: Path, embedder, count: int = 2, files: dict[str, str] | None = None
) -> tuple[Path, list[Path]]:
    """A bare remote and ``count`` homes sharing it: the first (named ``a``) with ``files``
    committed, set up for sharing and pushed, the others (``b``, ``c``, ...) cloned from the remote
    and adopted. Each home's embedding cache already holds the vault seed's vectors."""
    remote = bare_remote(folder)
    first = syncd.init(folder / "a").home
    warm_embed_cache(first, embedder)
    for rel, text in (files or {}).items():
        write(first, rel, text)
    with syncd.open(first, embedder=embedder) as engine:
        engine.sync()
        engine.commit()
        share(engine, "origin", str(remote))
        push(engine, "origin")
    roots = [first]
    for n in range(1, count):
        subprocess.run(["git", "clone", "-q", str(remote), str(folder / "abcdefgh"[n])], check=True)
        roots.append(syncd.init(folder / "abcdefgh"[n]).home)
        warm_embed_cache(roots[-1], embedder)
    return remote, roots
