"""The bundled model run on onnxruntime and tokenizers directly, without importing fastembed.

Importing fastembed costs most of a second of CPU and some 40 MB (its image models, the Hugging
Face hub client, its pydantic model descriptions), which every one-shot ``syncd search`` and
every ``syncd sync`` that embeds a new text paid before its first vector. The bundled
all-MiniLM-L6-v2 is a folder syncd assembles itself (model_files.py), so it is run here the way
fastembed runs that model: the tokenizer configured as fastembed's ``load_tokenizer`` configures
it (truncation at the tokenizer config's limit, padding to the batch's longest text, the special
tokens of special_tokens_map.json), the token ids, the attention mask and zero token types as its
inputs, the first output mean-pooled over the attention mask in float64, L2-normalised, cast back
to the output's type. A test holds every vector equal to fastembed's own; models named in the
settings still run through fastembed.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
from tokenizers import AddedToken, Tokenizer

from ..compat.patches import quiet_session_options

__all__ = ["OnnxTextModel"]

# fastembed's floor under a vector's norm (its normalize's eps).
_EPS = 1e-12


class OnnxTextModel:
    """A mean-pooled, normalised sentence embedding model in ``folder`` (model.onnx, tokenizer.json,
    tokenizer_config.json and optionally config.json and special_tokens_map.json): what
    FastEmbedBackend needs of a loaded model (``embed``, ``query_embed``, ``truncation``)."""

    def __init__(self, folder: Path, threads: int | None):
        self.tokenizer = _load_tokenizer(folder)
        self.session = ort.InferenceSession(
            str(folder / "model.onnx"), sess_options=quiet_session_options(threads), providers=["CPUExecutionProvider"]
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
            yield from self._run(items[start : start + batch_size])

    def query_embed(self, text: str) -> Iterator[np.ndarray]:
        """A query's vector: this model gives queries no prefix, so it is the text's vector."""
        yield from self._run([text])

    def _run(self, texts: list[str]) -> np.ndarray:
        encoded = self.tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encoded], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encoded], dtype=np.int64)
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


def _read_json(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def _load_tokenizer(folder: Path) -> Tokenizer:
    """The tokenizer of ``folder`` set up as fastembed's load_tokenizer sets it up."""
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
    tokenizer.enable_padding(
        direction=tokenizer_config.get("padding_side") or padding.get("direction", "right"),
        pad_id=pad_id,
        pad_type_id=padding.get("pad_type_id", 0),
        pad_token=pad_token,
        pad_to_multiple_of=padding.get("pad_to_multiple_of"),
        length=None,
    )
    return tokenizer
