"""``syncd status`` without LanceDB or the model when it can: the same Status as
``Engine.status()``, from the index's files mirror when that is current, else by opening the index
read-only (apart from status.py, which the engine imports, so that the two never import each other)."""

from __future__ import annotations

import logging
from pathlib import Path

from ..home import Home
from ..index.files_mirror import read_meta, read_mirror
from ..index.records import meta_compatible
from .status import Status, build_status, missing_status

__all__ = ["read_status"]

log = logging.getLogger(__name__)


def read_status(root: Path, settings) -> Status:
    """``Engine(root, read_only=True).status()``, from the files mirror when it is current."""

    home = Home(root).require()
    folder = home.state_dir / "index"
    from ..index.backend import home_index

    if home_index(home.root, settings) is not None:
        # A PostgreSQL index keeps no files mirror here: the database answers.
        from ..engine.facade import open_engine

        with open_engine(home.root, read_only=True, settings=settings, looks_only=True) as engine:
            return engine.status()
    if not (folder / "lance").is_dir():
        # Never built, or deleted with .syncd/ (a running daemon is rebuilding it): no answer
        # but "missing" is exact, and opening it here would only make an empty one.
        return missing_status(home, _model_id(home, settings), settings.max_file_bytes)
    snapshot = read_mirror(folder)
    if snapshot is None:
        log.debug("the files mirror of %s is not current; opening the index", folder)
        from ..engine.facade import open_engine

        with open_engine(home.root, read_only=True, settings=settings, looks_only=True) as engine:
            return engine.status()
    model_id = _model_id(home, settings)
    counts = {"files": len(snapshot.files), "facts": snapshot.facts, "chunks": snapshot.chunks}
    meta = read_meta(folder)
    compatible = meta_compatible(meta, model_id, empty=snapshot.facts + snapshot.chunks == 0)
    return build_status(home, snapshot.files, counts, model_id, compatible, meta, settings.max_file_bytes)


def _model_id(home: Home, settings) -> str:
    from ..embedding.fastembed_backend import load_embedder

    # Building an embedder reads no model: it only names the one the settings ask for.
    return load_embedder(settings, cache_dir=home.state_dir / "models").model_id
