"""syncd.embed with the real bundled model: offline loading, integrity, model folders, batching."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import syncd.embedding.fastembed_backend as embed_mod
import syncd.embedding.model_files as model_files_mod
import syncd.index.embed_cache
from syncd.config import DEFAULT_EMBED_MODEL, Settings
from syncd.embedding.fastembed_backend import (
    BUNDLED_TOKENIZER_DIR,
    DEFAULT_MODEL_ID,
    DEFAULT_MODEL_SHA256,
    Embedder,
    FastEmbedBackend,
    assemble_model_dir,
    bundled_onnx_path,
    default_model_dir,
    load_embedder,
    verify_sha256,
)
from syncd.embedding.onnx_runner import TOKEN_BUDGET, OnnxTextModel, run_spread, token_batches
from syncd.errors import EmbeddingError
from syncd.index.embed_cache import CachedEmbedder, EmbeddingCache
from syncd.index.tokens import TokenSpanner

from .helpers import run_concurrently, wait_for
from .strategies import examples

MODEL_FILES = ("model.onnx", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "config.json")


@pytest.fixture(scope="module")
def model_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("models")


@pytest.fixture(scope="module")
def backend(model_cache: Path) -> FastEmbedBackend:
    """The default model, loaded once for the module, with the hub forced offline."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        embedder = load_embedder(Settings(), cache_dir=model_cache)
        assert isinstance(embedder, FastEmbedBackend)
        embedder.load()
    return embedder


def cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def test_public_api_is_pinned() -> None:
    assert sorted(embed_mod.__all__) == sorted(
        [
            "BUNDLED_TOKENIZER_DIR",
            "DEFAULT_MODEL_ID",
            "DEFAULT_MODEL_SHA256",
            "Embedder",
            "FastEmbedBackend",
            "OPTIONAL_MODEL_FILES",
            "REQUIRED_MODEL_FILES",
            "assemble_model_dir",
            "bundled_onnx_path",
            "check_texts",
            "default_model_dir",
            "load_embedder",
            "loading_beside",
            "release_after_query",
            "verify_sha256",
        ]
    )
    assert sorted(syncd.index.embed_cache.__all__) == ["CachedEmbedder", "EmbeddingCache", "text_key"]


# ---------------------------------------------------------------------------------------------
# The default model, offline


def test_default_model_loads_with_no_network(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")

    def no_network(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"network access attempted: {args}")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    embedder = load_embedder(Settings(), cache_dir=tmp_path / "models")
    assert not list((tmp_path / "models").glob("*")), "nothing may be assembled before use"
    vectors = embedder.embed(["hello world"])
    assert vectors.shape == (1, 384)
    assert embedder.model_id == DEFAULT_MODEL_ID
    assert DEFAULT_MODEL_ID == f"all-MiniLM-L6-v2@int8-{DEFAULT_MODEL_SHA256[:12]}-t256"
    folder = tmp_path / "models" / f"all-MiniLM-L6-v2-int8-{DEFAULT_MODEL_SHA256[:12]}"
    assert sorted(p.name for p in folder.iterdir()) == sorted(MODEL_FILES)


def test_vectors_are_384d_unit_float32_and_deterministic(backend: FastEmbedBackend) -> None:
    assert isinstance(backend, Embedder)
    assert backend.dim == 384
    texts = ["The quick brown fox", "jumps over the lazy dog", "Ünïcödé and 日本語 text"]
    first = backend.embed(texts)
    assert first.dtype == np.float32 and first.shape == (3, 384)
    np.testing.assert_allclose(np.linalg.norm(first, axis=1), 1.0, atol=1e-5)
    again = backend.embed(list(reversed(texts)))[::-1]
    np.testing.assert_allclose(first, again, atol=1e-6)
    np.testing.assert_allclose(backend.embed_query(texts[0]), first[0], atol=1e-6)


def test_similar_meanings_are_closer(backend: FastEmbedBackend) -> None:
    tea, drink, crash = backend.embed(
        ["I like green tea", "Tea is my favourite drink", "The server crashed at midnight"]
    )
    assert cos(tea, drink) > cos(tea, crash) + 0.3


def test_empty_input_and_blank_texts(backend: FastEmbedBackend) -> None:
    assert backend.embed([]).shape == (0, 384)
    assert backend.embed([]).dtype == np.float32
    blank = backend.embed(["", "   ", "\n\t"])
    assert blank.shape == (3, 384)
    np.testing.assert_allclose(np.linalg.norm(blank, axis=1), 1.0, atol=1e-5)


def test_a_bare_string_is_refused(backend: FastEmbedBackend) -> None:
    with pytest.raises(TypeError):
        backend.embed("not a list")
    with pytest.raises(TypeError):
        backend.embed(["fine", 3])  # type: ignore[list-item]


def test_long_text_is_truncated_not_an_error(backend: FastEmbedBackend) -> None:
    assert backend.embed(["word " * 1000]).shape == (1, 384)


# Runs in its own process so that its peak RSS is its own: tokenising a 2 MB single line whole
# (before cutting it to 256 word pieces) took ~15 s and ~260 MB, at 19 MB 66 s and 3.8 GB.
_HUGE_TEXT_SCRIPT = """
import resource, sys
from pathlib import Path
from syncd.config import Settings
from syncd.embedding.fastembed_backend import load_embedder
embedder = load_embedder(Settings(), cache_dir=Path(sys.argv[1]))
embedder.embed(["warm up " * 300])
text = " ".join(f"fact{i}" for i in range(200_000))
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
embedder.embed([text])
print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024)
"""


def _peak_growth_mb(script: str, model_cache: Path) -> int:
    """How many MB a fresh process's peak RSS grew by over what ``script`` measures (it prints it)."""
    out = subprocess.run(
        [sys.executable, "-c", script, str(model_cache)],
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    return int(out.stdout.split()[-1])


def test_a_huge_single_line_costs_no_more_memory_than_a_short_one(model_cache: Path) -> None:
    grown_mb = _peak_growth_mb(_HUGE_TEXT_SCRIPT, model_cache)
    assert grown_mb < 64, f"embedding a 2 MB line raised the peak RSS by {grown_mb} MB"


# Long chunks (each past the model's 256 word pieces) after short texts: the peak may not grow
# with them beyond what a call of a few holds (16,000 characters a call raised it by 270 MB).
_LONG_CHUNKS_SCRIPT = """
import resource, sys
from pathlib import Path
from syncd.config import Settings
from syncd.embedding.fastembed_backend import load_embedder
embedder = load_embedder(Settings(), cache_dir=Path(sys.argv[1]))
embedder.embed([f"Likes green tea, fact {i}." for i in range(64)])
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
words = "the river garden meeting notes about budgets planning roadmap review".split()
embedder.embed([" ".join(words[(i + j) % len(words)] for j in range(300)) for i in range(20)])
print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024)
"""


def test_long_chunks_cost_no_more_peak_memory_than_short_facts(model_cache: Path) -> None:
    grown_mb = _peak_growth_mb(_LONG_CHUNKS_SCRIPT, model_cache)
    assert grown_mb < 64, f"embedding 20 long chunks raised the peak RSS by {grown_mb} MB"


@given(st.lists(st.text(max_size=3000), max_size=40), st.integers(1, 64))
def test_law_batches_keep_order_and_their_size(texts: list[str], max_texts: int) -> None:
    """_batches cuts texts into consecutive calls of at most ``max_texts`` texts whose longest
    times their count stays within the character budget (a text longer than it goes alone)."""
    batches = list(embed_mod._batches(texts, max_texts))  # white-box: the module's own batcher, by its law
    assert [t for batch in batches for t in batch] == texts
    for batch in batches:
        assert 0 < len(batch) <= max_texts
        assert len(batch) == 1 or max(map(len, batch)) * len(batch) <= embed_mod._BATCH_CHAR_BUDGET


def test_the_cut_before_tokenising_changes_no_vector_of_ordinary_text(backend: FastEmbedBackend) -> None:
    """Only the model's first 256 word pieces count, and ordinary text reaches them long before
    the cut: the vector of a long text is the one fastembed gives for the whole of it."""
    prose = " ".join(f"Ana mentioned on day {i} that she prefers green tea to coffee." for i in range(600))
    code = "def f(x):\n    return [y ** 2 for y in range(x) if y % 3 == 0]  # squares\n" * 400
    table = "| id | name | value |\n|----|------|-------|\n" + "| 17 | tea | 0.82 |\n" * 2000
    texts = [prose, code, table]
    assert all(len(t) > 20_000 for t in texts)
    # White-box: the loaded model's own embed, uncut, is what the backend's cut is compared with.
    whole = np.array(list(backend._get_model().embed(texts)), dtype=np.float32)
    whole /= np.linalg.norm(whole, axis=1, keepdims=True)
    np.testing.assert_allclose(backend.embed(texts), whole, atol=1e-6)
    huge = prose * 20
    np.testing.assert_allclose(backend.embed([huge]), backend.embed([huge[:8192]]), atol=1e-6)
    np.testing.assert_allclose(backend.embed_query(huge), backend.embed_query(huge[:8192]), atol=1e-6)


# A real failure to import what runs the model that is not a missing package: its shared
# libraries cannot be mapped once the address space is full (as when a process has run out of
# memory mappings). The bundled model runs on onnxruntime alone; a model folder runs on fastembed.
# numpy is loaded before the room runs out: texts reach a model through the embedding cache, which
# has loaded it by then (index/embed_cache.py), and numpy's BLAS aborts the process when it cannot
# allocate, which no code could tell as an error.
_NO_ROOM_SCRIPT = """
import resource, sys
from pathlib import Path
import numpy
from syncd.config import Settings
from syncd.errors import EmbeddingError
from syncd.embedding.fastembed_backend import load_embedder
folder = {"bundled": None, "folder": sys.argv[3] if len(sys.argv) > 3 else None}[sys.argv[2]]
embedder = load_embedder(Settings(embed_model_path=folder), cache_dir=Path(sys.argv[1]))
used = int(open("/proc/self/statm").read().split()[0]) * resource.getpagesize()
# Room for less than the runtime's shared libraries (onnxruntime's alone is smaller than fastembed's
# imports: with more room it maps, and the tokenizer's allocations abort the process instead).
room = {"bundled": 16, "folder": 64}[sys.argv[2]] * 2**20
resource.setrlimit(resource.RLIMIT_AS, (used + room, resource.RLIM_INFINITY))
try:
    embedder.embed(["x"])
except EmbeddingError as exc:
    print(exc)
"""


@pytest.mark.parametrize(("model", "runtime"), [("bundled", "onnxruntime"), ("folder", "fastembed")])
def test_a_runtime_that_cannot_be_mapped_is_not_called_missing(model_cache: Path, model: str, runtime: str) -> None:
    folder = [str(default_model_dir(model_cache))] if model == "folder" else []
    out = subprocess.run(
        [sys.executable, "-c", _NO_ROOM_SCRIPT, str(model_cache), model, *folder],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    message = out.stdout.strip()
    assert "not installed" not in message
    assert f"{runtime} is installed but failed to load" in message
    assert "memory mappings" in message


def test_a_missing_fastembed_is_called_missing_and_the_bundled_model_needs_none(
    monkeypatch: pytest.MonkeyPatch, model_cache: Path, backend: FastEmbedBackend
) -> None:
    # None in sys.modules makes the import raise ModuleNotFoundError, exactly as an uninstalled
    # package does.
    monkeypatch.setitem(sys.modules, "fastembed", None)
    folder = default_model_dir(model_cache)
    with pytest.raises(EmbeddingError, match="fastembed is not installed"):
        FastEmbedBackend(DEFAULT_EMBED_MODEL, folder).embed(["x"])
    bundled = FastEmbedBackend.bundled(model_cache)
    np.testing.assert_array_equal(bundled.embed(["Likes green tea."]), backend.embed(["Likes green tea."]))


def test_a_model_released_after_its_query_loads_again_with_the_same_vectors(
    model_cache: Path, backend: FastEmbedBackend, tmp_path: Path
) -> None:
    """What a one-shot `syncd search` does: the query's vector lets the model go (found through
    the cache's wrapper), and an embed after it loads the model again, giving the same vectors.
    Its session is the lean one (no arena, weights dequantised at run time rather than folded at
    load), whose vectors differ from a sync's by float rounding only."""
    fresh = FastEmbedBackend.bundled(model_cache)
    embed_mod.release_after_query(CachedEmbedder(fresh, EmbeddingCache(tmp_path / "cache.sqlite")))
    query = fresh.embed_query("what does she drink in the morning")
    assert not fresh.loaded
    np.testing.assert_allclose(query, backend.embed_query("what does she drink in the morning"), atol=1e-6)
    np.testing.assert_allclose(fresh.embed(["Likes green tea."]), backend.embed(["Likes green tea."]), atol=1e-6)
    assert fresh.loaded
    lean = fresh._get_model()  # white-box: the session's options are the claim, no public surface shows them
    assert isinstance(lean, OnnxTextModel)
    assert not lean.session.get_session_options().enable_cpu_mem_arena
    full = backend._get_model()
    assert isinstance(full, OnnxTextModel)
    assert full.session.get_session_options().enable_cpu_mem_arena


def test_a_model_loaded_beside_a_block_is_loaded_by_its_end_and_embeds_the_same(
    model_cache: Path, backend: FastEmbedBackend, tmp_path: Path
) -> None:
    """What a sync with new text does: the model loads on another thread while the block runs
    (found through the cache's wrapper); an embed in the block waits for it and gives the vectors
    of a model loaded in the open; by the block's end the model is loaded. Not wanted, or already
    loaded, nothing is started."""
    fresh = FastEmbedBackend.bundled(model_cache)
    wrapped = CachedEmbedder(fresh, EmbeddingCache(tmp_path / "cache.sqlite"))
    with embed_mod.loading_beside(wrapped, wanted=False):
        pass
    assert not fresh.loaded
    before = threading.active_count()
    with embed_mod.loading_beside(wrapped):
        assert threading.active_count() == before + 1
        vectors = wrapped.embed(["Likes green tea.", "Took up falconry lessons."])
    assert fresh.loaded
    assert threading.active_count() == before
    np.testing.assert_allclose(vectors, backend.embed(["Likes green tea.", "Took up falconry lessons."]), atol=1e-6)
    with embed_mod.loading_beside(wrapped):
        assert threading.active_count() == before  # loaded: nothing to start


def test_a_model_that_fails_to_load_beside_a_block_fails_where_it_is_used(
    model_cache: Path, tmp_path: Path, backend: FastEmbedBackend
) -> None:
    """A load that fails on its own thread is said by the embed that needs the model, as without
    the thread: an EmbeddingError saying it cannot load the model, not a thread's traceback."""
    folder = shutil.copytree(default_model_dir(model_cache), tmp_path / "model", symlinks=False)
    (folder / "model.onnx").unlink()
    (folder / "model.onnx").write_bytes(b"not an onnx model")
    broken = FastEmbedBackend(DEFAULT_EMBED_MODEL, folder)
    with embed_mod.loading_beside(broken), pytest.raises(EmbeddingError, match="cannot load"):
        broken.embed(["x"])
    assert not broken.loaded


def test_a_query_does_not_wait_behind_a_bulk_embed(backend: FastEmbedBackend) -> None:
    """A search's query runs beside a sync's embedding of many texts on the bundled model: it is
    answered, with its usual vector, while the bulk call still holds the backend's run lock."""
    texts = [f"Fact {i}: the garden by the river needs {i % 17} hours of work each week." for i in range(1500)]
    alone = backend.embed_query("when is the budget meeting")
    bulk = threading.Thread(target=backend.embed, args=(texts,))
    bulk.start()
    try:
        # White-box: the lock is how "the bulk call is running" shows; no public surface tells it.
        wait_for(backend._run_lock.locked, timeout=30, what="the bulk embed to start")
        vector = backend.embed_query("when is the budget meeting")
        assert bulk.is_alive() and backend._run_lock.locked()  # answered while the bulk call runs
    finally:
        bulk.join()
    np.testing.assert_allclose(vector, alone, atol=1e-6)


def test_concurrent_first_use_loads_once_and_agrees(tmp_path: Path, backend: FastEmbedBackend) -> None:
    fresh = FastEmbedBackend.bundled(tmp_path / "models")
    loads = []
    real_load = fresh._load  # white-box: the loads are counted where they happen

    def counting_load():  # type: ignore[no-untyped-def]
        loads.append(1)
        return real_load()

    fresh._load = counting_load  # type: ignore[method-assign]
    texts = [f"sentence {i} about tea" for i in range(20)]
    results: list[np.ndarray] = []
    run_concurrently(lambda _: results.append(fresh.embed(texts)), 4)
    assert len(loads) == 1
    expected = backend.embed(texts)
    for result in results:
        np.testing.assert_allclose(result, expected, atol=1e-6)


# ---------------------------------------------------------------------------------------------
# Integrity of the model file


def test_verify_sha256_accepts_the_real_file() -> None:
    verify_sha256(bundled_onnx_path(), DEFAULT_MODEL_SHA256)


def test_tampered_model_is_refused_by_name(tmp_path: Path) -> None:
    tampered = tmp_path / "model.onnx"
    shutil.copyfile(bundled_onnx_path(), tampered)
    with open(tampered, "r+b") as fh:
        fh.seek(1000)
        byte = fh.read(1)
        fh.seek(1000)
        fh.write(bytes([byte[0] ^ 0xFF]))

    with pytest.raises(EmbeddingError, match="sha256") as err:
        verify_sha256(tampered, DEFAULT_MODEL_SHA256)
    assert str(tampered) in str(err.value)

    with pytest.raises(EmbeddingError, match=str(tampered)):
        default_model_dir(tmp_path / "models", onnx_path=tampered)
    assert not (tmp_path / "models").exists(), "a refused model must not be assembled"

    embedder = FastEmbedBackend.bundled(tmp_path / "models", onnx_path=tampered)
    with pytest.raises(EmbeddingError, match=str(tampered)):
        embedder.embed(["x"])


def test_the_model_is_hashed_once_and_again_once_it_is_written_to(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A load after the first does not hash the 23 MB again; a file written to since (even one
    whose size and mtime are put back) is hashed again and refused."""
    copy = tmp_path / "model.onnx"
    shutil.copy2(bundled_onnx_path(), copy)
    hashed: list[Path] = []
    real = model_files_mod.verify_sha256

    def counting(path: Path, expected: str) -> None:
        hashed.append(path)
        real(path, expected)

    monkeypatch.setattr(model_files_mod, "verify_sha256", counting)
    folder = default_model_dir(tmp_path / "models", onnx_path=copy)
    assert hashed == [copy]
    assert default_model_dir(tmp_path / "models", onnx_path=copy) == folder
    assert hashed == [copy]
    stat = copy.stat()
    with open(copy, "r+b") as fh:
        fh.seek(1000)
        byte = fh.read(1)
        fh.seek(1000)
        fh.write(bytes([byte[0] ^ 0xFF]))
    os.utime(copy, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    with pytest.raises(EmbeddingError, match="sha256"):
        default_model_dir(tmp_path / "models", onnx_path=copy)
    assert hashed == [copy, copy]


def test_missing_model_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(EmbeddingError, match="cannot read model file"):
        verify_sha256(tmp_path / "nope.onnx", DEFAULT_MODEL_SHA256)


# ---------------------------------------------------------------------------------------------
# Assembling model folders


def test_assemble_is_idempotent_and_repairs(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.txt").write_text("A")
    (src / "b.txt").write_text("B")
    target = tmp_path / "target"
    sources = {"a.txt": src / "a.txt", "b.txt": src / "b.txt"}
    assemble_model_dir(target, sources)
    first = {p.name: os.readlink(p) if p.is_symlink() else None for p in target.iterdir()}
    assemble_model_dir(target, sources)
    assert {p.name: os.readlink(p) if p.is_symlink() else None for p in target.iterdir()} == first

    (target / "a.txt").unlink()
    (target / "b.txt").unlink()
    (target / "b.txt").symlink_to(tmp_path / "elsewhere")
    assemble_model_dir(target, sources)
    assert (target / "a.txt").read_text() == "A"
    assert (target / "b.txt").read_text() == "B"
    assert sorted(p.name for p in target.iterdir()) == ["a.txt", "b.txt"]


def test_assemble_copies_where_symlinks_fail(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_symlinks(*args: object, **kwargs: object) -> None:
        raise OSError("symlinks are not permitted here")

    monkeypatch.setattr(os, "symlink", no_symlinks)
    folder = default_model_dir(tmp_path / "models")
    assert not any(p.is_symlink() for p in folder.iterdir())
    assert sorted(p.name for p in folder.iterdir()) == sorted(MODEL_FILES)
    before = {p.name: p.stat().st_ino for p in folder.iterdir()}
    default_model_dir(tmp_path / "models")
    assert {p.name: p.stat().st_ino for p in folder.iterdir()} == before, "copies are reused"

    copy = folder / "model.onnx"
    stat = copy.stat()
    with open(copy, "r+b") as fh:
        fh.seek(500)
        fh.write(b"\x00\x01\x02")
    default_model_dir(tmp_path / "models")
    verify_sha256(copy, DEFAULT_MODEL_SHA256)  # a changed mtime: the copy is made again

    with open(copy, "r+b") as fh:
        fh.seek(500)
        fh.write(b"\x00\x01\x02")
    os.utime(copy, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    with pytest.raises(EmbeddingError, match="sha256"):
        default_model_dir(tmp_path / "models")


def test_assemble_concurrently(tmp_path: Path) -> None:
    sources = {name: BUNDLED_TOKENIZER_DIR / name for name in MODEL_FILES if name != "model.onnx"}
    sources["model.onnx"] = bundled_onnx_path()
    target = tmp_path / "model"

    def work(_: int) -> None:
        for _ in range(5):
            assemble_model_dir(target, sources)

    run_concurrently(work, 8)
    assert sorted(p.name for p in target.iterdir()) == sorted(MODEL_FILES)
    for name, src in sources.items():
        assert (target / name).resolve() == Path(src).resolve()


def test_assemble_names_missing_sources(tmp_path: Path) -> None:
    with pytest.raises(EmbeddingError, match=r"tokenizer\.json"):
        assemble_model_dir(tmp_path / "t", {"tokenizer.json": tmp_path / "absent.json"})


# ---------------------------------------------------------------------------------------------
# Resolution: embed_model_path, embed_model, default


def test_model_path_missing_files_are_listed(tmp_path: Path) -> None:
    folder = tmp_path / "my-model"
    folder.mkdir()
    (folder / "tokenizer.json").write_text("{}")
    with pytest.raises(EmbeddingError) as err:
        load_embedder(Settings(embed_model_path=folder), cache_dir=tmp_path / "models")
    message = str(err.value)
    assert "model.onnx" in message and "tokenizer_config.json" in message
    assert str(folder) in message
    assert "missing model.onnx, tokenizer_config.json" in message


def test_model_path_that_does_not_exist(tmp_path: Path) -> None:
    with pytest.raises(EmbeddingError, match="does not exist"):
        load_embedder(Settings(embed_model_path=tmp_path / "absent"))
    (tmp_path / "model.onnx").write_bytes(b"")
    with pytest.raises(EmbeddingError, match="not a folder"):
        load_embedder(Settings(embed_model_path=tmp_path / "model.onnx"))


def test_model_path_runs_the_folder(tmp_path: Path, backend: FastEmbedBackend) -> None:
    folder = tmp_path / "minilm-copy"
    folder.mkdir()
    shutil.copy2(bundled_onnx_path(), folder / "model.onnx")
    for name in MODEL_FILES[1:]:
        shutil.copy2(BUNDLED_TOKENIZER_DIR / name, folder / name)
    settings = Settings(embed_model_path=folder, embed_batch_size=8, embed_threads=1)
    embedder = load_embedder(settings, cache_dir=tmp_path / "models")
    assert isinstance(embedder, FastEmbedBackend)
    assert embedder.batch_size == 8 and embedder.threads == 1
    assert embedder.model_id.startswith("path:minilm-copy@")
    assert embedder.model_id != backend.model_id
    texts = ["same weights", "same vectors"]
    np.testing.assert_allclose(embedder.embed(texts), backend.embed(texts), atol=1e-6)

    # New weights in the same folder must get a new id, so the cache cannot serve old vectors.
    stat = (folder / "model.onnx").stat()
    os.utime(folder / "model.onnx", ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    assert load_embedder(settings).model_id != embedder.model_id


def test_the_session_sleeps_between_runs_and_embeds_exactly_like_fastembeds_own(
    backend: FastEmbedBackend, model_cache: Path
) -> None:
    """Our replacement onnxruntime session changes thread behaviour only, never a vector."""
    from fastembed import TextEmbedding

    model = backend._get_model()  # white-box: the session under test is the backend's own
    assert isinstance(model, OnnxTextModel)  # the bundled model runs without fastembed
    session = model.session
    options = session.get_session_options()
    assert options.get_session_config_entry("session.intra_op.allow_spinning") == "0"
    folder = default_model_dir(model_cache)
    plain = TextEmbedding(backend.model_name, specific_model_path=str(folder), cache_dir=str(folder))
    texts = ["Likes green tea in the morning.", "a longer text " * 40, "", "past the 256 pieces " * 80]
    np.testing.assert_allclose(backend.embed(texts), np.array(list(plain.embed(texts))), atol=1e-6)
    np.testing.assert_allclose(backend.embed_query("green tea"), next(iter(plain.query_embed("green tea"))), atol=1e-6)


@pytest.fixture(scope="module")
def fastembeds_own(backend: FastEmbedBackend, model_cache: Path):
    """The bundled model's folder run by fastembed itself, as syncd ran it before onnx_runner.py."""
    from fastembed import TextEmbedding

    folder = default_model_dir(model_cache)
    return TextEmbedding(backend.model_name, specific_model_path=str(folder), cache_dir=str(folder))


# Texts of any script, of lengths that make the batch pad (a text past the tokenizer's 256 word
# pieces costs most of a second to run, so truncation is the example test's above).
@given(st.lists(st.text(max_size=120), min_size=1, max_size=6))
@settings(max_examples=examples(30), deadline=None)
def test_law_the_bundled_model_embeds_as_fastembed_does(backend: FastEmbedBackend, fastembeds_own, texts) -> None:
    """Run on onnxruntime directly (onnx_runner.py), the bundled model gives fastembed's own
    vectors: the same word pieces, truncation, padding to the batch's longest, pooling and
    normalisation; a query is its text's vector."""
    model = backend._get_model()  # white-box: the runner itself, batch for batch against fastembed's
    got = np.array(list(model.embed(texts, batch_size=len(texts))))
    want = np.array(list(fastembeds_own.embed(texts, batch_size=len(texts))))
    np.testing.assert_allclose(got, want, atol=1e-6)
    np.testing.assert_allclose(
        next(iter(model.query_embed(texts[-1]))), next(iter(fastembeds_own.query_embed(texts[-1]))), atol=1e-6
    )


@given(st.lists(st.integers(1, 600), max_size=60).map(sorted), st.integers(1, 64), st.integers(1, 1024))
def test_law_token_batches_cover_the_texts_in_order_within_the_budget(
    lengths: list[int], max_texts: int, budget: int
) -> None:
    """Batches by word pieces are consecutive runs of the sorted texts, of at most ``max_texts``,
    whose count times their longest stays within the budget (a longer text goes alone)."""
    batches = list(token_batches(lengths, max_texts, budget))
    assert [i for batch in batches for i in batch] == list(range(len(lengths)))
    for batch in batches:
        assert 0 < len(batch) <= max_texts
        assert len(batch) == 1 or len(batch) * max(lengths[i] for i in batch) <= budget


def test_texts_batched_by_word_pieces_get_fastembeds_own_vectors(backend: FastEmbedBackend, fastembeds_own) -> None:
    """The vectors of a mixed call (one-line facts, paragraphs, page chunks past the 256 pieces,
    blank and non-Latin texts, in no order) are those fastembed gives each text on its own, as
    syncd's bundled model gave them before its texts were batched by word pieces (37186b8)."""
    words = "the river garden meeting notes about budgets planning roadmap review tea Kyoto".split()
    texts = [" ".join(words[(i * 5 + j) % len(words)] for j in range(1 + (i * 37) % 90)) for i in range(40)]
    texts += ["", "   ", "Ana likes green tea.", "東京で会議があった。", "past the 256 pieces " * 80]
    texts = texts[1::2] + texts[::2]
    # White-box: the model's own tokenizer counts the word pieces the batches are cut by.
    lengths = sorted(len(e.ids) for e in backend._get_model().tokenizer.encode_batch(texts))
    assert len(list(token_batches(lengths, backend.batch_size, TOKEN_BUDGET))) > 5  # many batches, many widths
    got = backend.embed(texts)
    want = np.array([next(iter(fastembeds_own.embed([text]))) for text in texts])
    assert float(np.min(np.sum(got * want, axis=1))) >= 0.999
    np.testing.assert_allclose(got, want, atol=1e-6)


def test_batches_run_side_by_side_give_the_vectors_of_one_at_a_time(model_cache: Path) -> None:
    """The bundled model's batches run on two threads at once (one onnxruntime thread each) give
    each text the vector one call at a time gives it, in the texts' order."""
    folder = default_model_dir(model_cache)
    words = "tea river garden budget meeting Kyoto roadmap notes".split()
    texts = [" ".join(words[(i * 3 + j) % len(words)] for j in range(1 + (i * 29) % 70)) for i in range(120)]
    side_by_side, one_at_a_time = OnnxTextModel(folder, 2), OnnxTextModel(folder, 1)
    assert (side_by_side.runs_at_once, one_at_a_time.runs_at_once) == (2, 1)
    got = side_by_side.embed_texts(texts, 64)
    want = one_at_a_time.embed_texts(texts, 64)
    assert got.shape == (len(texts), 384)
    np.testing.assert_allclose(got, want, atol=1e-6)
    np.testing.assert_allclose(got[7], one_at_a_time.embed_texts([texts[7]], 64)[0], atol=1e-6)


@given(st.integers(0, 40), st.integers(1, 5), st.sets(st.integers(0, 39), max_size=3))
@settings(max_examples=examples(60), deadline=None)
def test_law_run_spread_runs_each_index_once_or_raises_a_failure(count: int, threads: int, failing: set[int]) -> None:
    """Every index below the count is worked on exactly once when nothing fails; when a call
    fails, one of the failures is raised, no index is worked on twice and the failing ones were
    among those started."""
    started: list[int] = []

    def work(index: int) -> None:
        started.append(index)
        if index in failing:
            raise ValueError(index)

    failures = failing & set(range(count))
    if not failures:
        run_spread(work, count, threads)
        assert sorted(started) == list(range(count))
        return
    with pytest.raises(ValueError) as raised:
        run_spread(work, count, threads)
    assert raised.value.args[0] in failures
    assert len(started) == len(set(started))
    assert raised.value.args[0] in started


def test_transcript_chunks_count_the_word_pieces_of_the_model_that_embeds(
    backend: FastEmbedBackend, tmp_path: Path
) -> None:
    """TokenSpanner takes the tokenizer of the loaded model (the bundled model's runner holds it
    itself): "tokenization" is two word pieces, not one word, and nothing is cut at 256 pieces."""
    spans = TokenSpanner(CachedEmbedder(backend, EmbeddingCache(tmp_path / "cache.sqlite")))
    assert list(spans("tokenization")) == [(0, 5), (5, 12)]
    assert len(spans("tea " * 600)) == 600


def test_unknown_model_name_explains_the_offline_way(tmp_path: Path) -> None:
    with pytest.raises(EmbeddingError) as err:
        load_embedder(Settings(embed_model="no-such-org/no-such-model"), cache_dir=tmp_path)
    assert "unknown embedding model" in str(err.value)
    assert "SYNCD_EMBED_MODEL_PATH" in str(err.value)


def test_named_fastembed_model_is_lazy_and_named(tmp_path: Path) -> None:
    embedder = load_embedder(Settings(embed_model="BAAI/bge-small-en-v1.5"), cache_dir=tmp_path)
    assert embedder.model_id == "BAAI/bge-small-en-v1.5"
    assert embedder.dim == 384
    assert isinstance(embedder, FastEmbedBackend) and not embedder.loaded


def test_default_name_means_the_bundled_copy(tmp_path: Path) -> None:
    embedder = load_embedder(Settings(embed_model=DEFAULT_EMBED_MODEL), cache_dir=tmp_path)
    assert embedder.model_id == DEFAULT_MODEL_ID


def test_cache_dir_follows_the_home(tmp_path: Path) -> None:
    embedder = load_embedder(Settings(home=tmp_path))
    assert isinstance(embedder, FastEmbedBackend)
    # White-box: where models would be fetched to; checking it by a download would need the network.
    assert embedder._cache_dir == tmp_path / ".syncd" / "models"
