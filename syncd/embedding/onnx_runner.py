"""The bundled model run on onnxruntime and tokenizers directly, without importing fastembed.

Importing fastembed costs CPU and memory for what a text model never uses (its image models, the
Hugging Face hub client, its pydantic model descriptions), which every one-shot ``syncd search`` and
every ``syncd sync`` that embeds a new text paid before its first vector. The bundled
all-MiniLM-L6-v2 is a folder syncd assembles itself (model_files.py), so it is run here the way
fastembed runs that model: the tokenizer configured as fastembed's ``load_tokenizer`` configures
it (truncation at the tokenizer config's limit, padding to the batch's longest text, the special
tokens of special_tokens_map.json), the token ids, the attention mask and zero token types as its
inputs, the first output mean-pooled over the attention mask in float64, L2-normalised, cast back
to the output's type. A test holds every vector equal to fastembed's own; models named in the
settings still run through fastembed.

Many texts at once (``embed_texts``) are tokenised once, ordered by their number of word pieces and
run in batches of about ``TOKEN_BUDGET`` padded pieces. Sorted by characters (as fastembed's
callers must sort), a mix of facts and page chunks was padded with many pieces of nothing, sorted
by pieces with almost none; and on two cores a call of 256 padded pieces cost less CPU per piece
than one of 1,000 or 4,000 (a guess at why: a small call's activations stay in the CPU's caches).
``benchmarks/bench_embed.py`` measures it against an older revision.

Those batches run side by side, one model call per core at once (``runs_at_once``), each call on
one onnxruntime thread, rather than one call at a time spread over every core: a call of 256
pieces is too small for onnxruntime to split well across threads, which wait on each other at
every operator, while calls on threads of their own never wait (``session.run`` lets go of the
GIL). On 2 cores that embeds more texts per wall second and per CPU second (``bench_embed.py``
measures both); a single query, which has nobody to run beside, takes a little longer on one
thread. The vectors differ from one call at a time only in the order of the sums.

A process that embeds one query and nothing after it asks for a ``lean`` session: onnxruntime's
constant folding is what turns the int8 weights into float32 copies at load (the word-embedding
table alone is 47 MB of them), which makes every later run cheaper but costs a one-shot search more
CPU and memory than its one run saves. The lean session folds nothing and keeps no memory arena;
it computes the same vectors (the same dequantisation, done at run time).
"""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
from tokenizers import AddedToken, Encoding, Tokenizer

from ..compat.patches import quiet_session_options

__all__ = ["TOKEN_BUDGET", "OnnxTextModel", "run_spread", "token_batches"]

# fastembed's floor under a vector's norm (its normalize's eps).
_EPS = 1e-12

#: Padded word pieces per model call in ``embed_texts`` (texts times the batch's longest): a text
#: at the model's limit of 256 goes alone, one-line facts go a dozen at a time.
TOKEN_BUDGET = 256


class OnnxTextModel:
    """A mean-pooled, normalised sentence embedding model in ``folder`` (model.onnx, tokenizer.json,
    tokenizer_config.json and optionally config.json and special_tokens_map.json): what
    FastEmbedBackend needs of a loaded model (``embed``, ``query_embed``, ``embed_texts``,
    ``truncation``). ``threads``: model calls run at once by ``embed_texts``, each on one thread
    (None: one per core this process may use). ``lean``: a session for one query (see the module
    docstring)."""

    def __init__(self, folder: Path, threads: int | None, *, lean: bool = False):
        self.tokenizer, self._padding = _load_tokenizer(folder)
        self.runs_at_once = threads or _usable_cores()
        options = quiet_session_options(1)
        extra: dict[str, Any] = {}
        if lean:
            options.enable_cpu_mem_arena = False
            extra["disabled_optimizers"] = ["ConstantFolding"]
        self.session = ort.InferenceSession(
            str(folder / "model.onnx"), sess_options=options, providers=["CPUExecutionProvider"], **extra
        )
        self._inputs = {node.name for node in self.session.get_inputs()}

    @property
    def truncation(self) -> dict:
        """How the tokenizer truncates (``max_length``, ``direction``)."""
        return self.tokenizer.truncation or {}

    def embed(self, texts: Sequence[str], batch_size: int = 256) -> Iterator[np.ndarray]:
        """One unit vector per text, in order, the model run on ``batch_size`` texts at a time."""
        items = list(texts)
        for start in range(0, len(items), batch_size):
            yield from self._run(self.tokenizer.encode_batch(items[start : start + batch_size]))

    def query_embed(self, text: str) -> Iterator[np.ndarray]:
        """A query's vector: this model gives queries no prefix, so it is the text's vector."""
        yield from self._run([self.tokenizer.encode(text)])

    def embed_texts(self, texts: Sequence[str], max_texts: int) -> np.ndarray:
        """One unit vector per text (rows in the order of ``texts``), the texts run shortest first in
        batches of at most ``max_texts`` texts and about ``TOKEN_BUDGET`` padded word pieces,
        ``runs_at_once`` batches at a time."""
        encoded = self.tokenizer.encode_batch(list(texts))
        lengths = [len(e.ids) for e in encoded]
        order = sorted(range(len(encoded)), key=lengths.__getitem__)
        batches = [
            [order[k] for k in batch] for batch in token_batches([lengths[i] for i in order], max_texts, TOKEN_BUDGET)
        ]
        vectors: list[np.ndarray | None] = [None] * len(batches)

        def run(index: int) -> None:
            vectors[index] = self._run([encoded[i] for i in batches[index]])

        run_spread(run, len(batches), self.runs_at_once)
        if not batches:
            return np.zeros((0, 0), dtype=np.float32)
        first = vectors[0]
        assert first is not None  # run_spread ran every index or raised
        out = np.empty((len(encoded), first.shape[1]), dtype=first.dtype)
        for rows, batch_vectors in zip(batches, vectors, strict=True):
            out[rows] = batch_vectors
        return out

    def _run(self, encoded: list[Encoding]) -> np.ndarray:
        ids, mask = self._pad(encoded)
        feed = {"input_ids": ids}
        if "attention_mask" in self._inputs:
            feed["attention_mask"] = mask
        if "token_type_ids" in self._inputs:
            feed["token_type_ids"] = np.zeros_like(ids)
        output = self.session.run(None, feed)[0]
        pooled = np.sum(output, axis=1, where=mask[:, :, np.newaxis].astype(bool), dtype=np.float64)
        pooled /= np.maximum(np.sum(mask, axis=1, keepdims=True), 1e-9)
        norms = np.maximum(np.linalg.norm(pooled, ord=2, axis=1, keepdims=True), _EPS)
        return (pooled / norms).astype(output.dtype, copy=False)

    def _pad(self, encoded: list[Encoding]) -> tuple[np.ndarray, np.ndarray]:
        """Token ids and attention mask, padded to the longest encoding as the tokenizer config
        says (side, pad id, a multiple of); what the tokenizer's own padding would give."""
        pad_id, left, multiple = self._padding
        width = max((len(e.ids) for e in encoded), default=0)
        if multiple and width % multiple:
            width += multiple - width % multiple
        ids = np.full((len(encoded), width), pad_id, dtype=np.int64)
        mask = np.zeros((len(encoded), width), dtype=np.int64)
        for row, e in enumerate(encoded):
            n = len(e.ids)
            cols = slice(width - n, width) if left else slice(0, n)
            ids[row, cols] = e.ids
            mask[row, cols] = e.attention_mask
        return ids, mask


def token_batches(lengths: Sequence[int], max_texts: int, budget: int) -> Iterator[range]:
    """Consecutive runs of positions into ``lengths`` (sorted ascending): at most ``max_texts``
    each, whose count times their longest stays within ``budget`` (a text longer than it goes
    alone)."""
    start = 0
    for i, length in enumerate(lengths):
        if i > start and (i - start >= max_texts or (i - start + 1) * length > budget):
            yield range(start, i)
            start = i
    if start < len(lengths):
        yield range(start, len(lengths))


def run_spread(work: Callable[[int], None], count: int, threads: int) -> None:
    """``work(i)`` for every i below ``count``, on up to ``threads`` threads (this one among them),
    each taking the next i when it is done with its last. The first exception any call raises is
    raised here once every thread has stopped; after it no thread starts another call."""
    if threads <= 1 or count <= 1:
        for index in range(count):
            work(index)
        return
    next_index = iter(range(count)).__next__  # a range iterator's next is atomic under the GIL
    failures: list[BaseException] = []

    def take_turns() -> None:
        while not failures:
            try:
                index = next_index()
            except StopIteration:
                return
            try:
                work(index)
            except BaseException as exc:  # noqa: BLE001 - raised again in the calling thread
                failures.append(exc)

    helpers = [threading.Thread(target=take_turns, daemon=True) for _ in range(min(threads, count) - 1)]
    for helper in helpers:
        helper.start()
    take_turns()
    for helper in helpers:
        helper.join()
    if failures:
        raise failures[0]


# Model calls at once when the settings name no number: each call holds its own activations, so
# a container that sees a big host's cores does not run dozens of calls at once.
_MAX_RUNS_AT_ONCE = 8


def _usable_cores() -> int:
    """The CPUs this process may run on (its affinity, where the system tells it), at least 1 and
    at most ``_MAX_RUNS_AT_ONCE``."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return max(1, min(cores, _MAX_RUNS_AT_ONCE))


def _read_json(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def _load_tokenizer(folder: Path) -> tuple[Tokenizer, tuple[int, bool, int | None]]:
    """The tokenizer of ``folder`` set up as fastembed's load_tokenizer sets it up, and how it pads
    (pad id, on the left, to a multiple of): the padding is done in numpy (``_pad``), so that texts
    can be tokenised once and batched by their length in word pieces."""
    config = _read_json(folder / "config.json")
    tokenizer_config = _read_json(folder / "tokenizer_config.json")
    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    limits = [
        value
        for value in (tokenizer_config.get("model_max_length"), tokenizer_config.get("max_length"))
        if isinstance(value, int) and not isinstance(value, bool) and 0 < value <= sys.maxsize
    ]
    if not limits:
        raise ValueError(f"{folder / 'tokenizer_config.json'} names no model_max_length or max_length")
    truncation = tokenizer.truncation or {}
    tokenizer.enable_truncation(
        max_length=min(limits),
        direction=tokenizer_config.get("truncation_side") or truncation.get("direction", "right"),
    )
    for value in _read_json(folder / "special_tokens_map.json").values():
        for token in value if isinstance(value, list) else [value]:
            if isinstance(token, str):
                tokenizer.add_special_tokens([token])
            elif isinstance(token, dict):
                tokenizer.add_special_tokens([AddedToken(**token)])
    padding = tokenizer.padding or {}
    pad_token = padding.get("pad_token") or tokenizer_config.get("pad_token")
    if pad_token is None:
        raise ValueError(f"no pad token in {folder}")
    pad_id = padding.get("pad_id", config.get("pad_token_id"))
    if pad_id is None:
        pad_id = tokenizer.token_to_id(pad_token)
    if pad_id is None:
        raise ValueError(f"no id for the pad token {pad_token!r} in {folder}")
    tokenizer.no_padding()
    side = tokenizer_config.get("padding_side") or padding.get("direction", "right")
    return tokenizer, (int(pad_id), side == "left", padding.get("pad_to_multiple_of"))
