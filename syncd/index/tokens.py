"""The embedding model's own tokenizer, for cutting text into chunks of a number of model tokens.

Chunk sizes are counted in the tokens of the model that embeds them (the seed's 400 tokens with
80 of overlap mean the model's word pieces, not words). The tokenizer is taken from the loaded
model and copied without its truncation and padding: the model cuts at 256 pieces, and
a chunker that saw only the first 256 would never find the rest.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Sequence

from ..embedding.fastembed_backend import Embedder

__all__ = ["TokenSpanner"]

log = logging.getLogger(__name__)

_WORD_RE = re.compile(r"\w+|[^\w\s]", re.UNICODE)


def _word_spans(text: str) -> list[tuple[int, int]]:
    return [m.span() for m in _WORD_RE.finditer(text)]


class TokenSpanner:
    """``spanner(text)`` -> the character spans of the model's tokens in ``text`` (special tokens
    left out). The tokenizer is found on first use, so an engine that never chunks a transcript
    never loads the model for it. Thread-safe."""

    def __init__(self, embedder: Embedder):
        self._embedder = embedder
        self._lock = threading.Lock()
        self._spans: Callable[[str], Sequence[tuple[int, int]]] | None = None

    def __call__(self, text: str) -> Sequence[tuple[int, int]]:
        if self._spans is None:
            with self._lock:
                if self._spans is None:
                    self._spans = self._load()
        return self._spans(text)

    def _load(self) -> Callable[[str], Sequence[tuple[int, int]]]:
        inner = self._embedder
        while hasattr(inner, "embedder"):  # CachedEmbedder and other wrappers
            inner = inner.embedder
        get_model = getattr(inner, "_get_model", None)
        tokenizer = None
        if get_model is not None:
            # The bundled model's runner holds it (embedding/onnx_runner.py), fastembed's model its inner model.
            model = get_model()
            tokenizer = getattr(model, "tokenizer", None) or getattr(getattr(model, "model", None), "tokenizer", None)
        if tokenizer is None:
            log.warning("%r exposes no tokenizer; transcript chunks are counted in words", inner)
            return _word_spans
        from tokenizers import Tokenizer

        own = Tokenizer.from_str(tokenizer.to_str())
        own.no_truncation()
        own.no_padding()
        lock = threading.Lock()  # a tokenizer is not documented as safe for concurrent use

        def spans(text: str) -> list[tuple[int, int]]:
            with lock:
                encoding = own.encode(text, add_special_tokens=False)
            return [(a, b) for a, b in encoding.offsets if b > a]

        return spans
