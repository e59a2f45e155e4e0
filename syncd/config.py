"""Settings: one object, built only at entry points (CLI, ``syncd.open``) and passed down.

Every knob is read from the keywords given, then the environment (``SYNCD_<NAME>``, any case),
then its default, and checked against its bounds. pydantic-settings defines what a value means
and what a bad one is told, but importing it (pydantic's core, asyncio, importlib.metadata)
was the largest import of a one-shot command (``syncd search``, ``syncd sync``) after numpy and
the model's runtime; so the values it would take as they are (a plain ``42``, ``0.3``,
``true``, any text or path, each within its bounds) are read here without it, and anything else
(``1_000``, `` 5 ``, ``nan``, a value out of bounds, a keyword of another type) is handed to the
pydantic model built from the same table (:func:`validated`), whose answer, value or
ValidationError, is the answer. tests/test_config.py holds the law that the two never differ.
"""

import copy
import dataclasses
import functools
import math
import os
import re
import types
from collections.abc import Callable, Mapping
from dataclasses import field
from pathlib import Path
from typing import Any, Self

__all__ = ["DEFAULT_EMBED_MODEL", "Settings", "validated"]

DEFAULT_EMBED_MODEL = "sentence-transformers/all-MiniLM-L6-v2"

_ENV_PREFIX = "syncd_"
_BOUNDS = ("ge", "gt", "le", "lt")


def knob(description: str | None = None, **bounds: float) -> dict[str, Any]:
    """What a field of :class:`Settings` is for, and its bounds (ge, gt, le, lt)."""
    assert set(bounds) <= set(_BOUNDS), bounds
    return {"description": description, "bounds": bounds}


@dataclasses.dataclass(init=False)
class Settings:
    """Every knob syncd has. Environment variables use the prefix ``SYNCD_`` (``SYNCD_HOME``...).
    A bad value raises pydantic's ValidationError, naming each field and what is wrong with it."""

    home: Path | None = field(
        default=None, metadata=knob(description="The memory home; else the nearest enclosing home.")
    )

    # Embeddings: a local model folder wins, then a fastembed model name, then the bundled default.
    embed_model_path: Path | None = field(
        default=None, metadata=knob(description="Folder holding model.onnx + tokenizer.")
    )
    embed_model: str | None = field(default=None, metadata=knob(description="A fastembed model name (may download)."))
    embed_batch_size: int = field(default=64, metadata=knob(ge=1, le=4096))
    embed_threads: int | None = field(
        default=None,
        metadata=knob(
            ge=1,
            description=(
                "CPU threads the model runs on (the bundled model: model calls at once, each on one thread); "
                "None = every core this process may use, at most 8."
            ),
        ),
    )

    # Index: embedded LanceDB under .syncd/ unless a PostgreSQL URL names a database with pgvector
    # (syncd/index/backend.py; `syncd init --index URL` records it in the home, without password).
    index_url: str | None = field(default=None, metadata=knob(description="postgresql://... for a PostgreSQL index."))
    index_schema: str | None = field(
        default=None, metadata=knob(description="The home's schema in that database (readers).")
    )
    vector_index_min_rows: int = field(
        default=50_000, metadata=knob(ge=256, description="Build an ANN vector index once a table has this many rows.")
    )

    # Search: the weights of a hit's score parts (see syncd.index.search; the seed's four, and
    # context, the share of relevance a fact's conversation neighbours pass on to it, question,
    # the share of its own relevance a fact that asks a question gives up to its reply, and time,
    # what a row's date says to the days a query names or to a query asking "when", and speaker,
    # for a fact said by someone the query names).
    search_weight_semantic: float = field(default=0.7, metadata=knob(ge=0))
    search_weight_fulltext: float = field(default=0.3, metadata=knob(ge=0))
    search_weight_context: float = field(default=0.5, metadata=knob(ge=0))
    search_weight_importance: float = field(default=0.2, metadata=knob(ge=0))
    search_weight_recency: float = field(default=0.1, metadata=knob(ge=0))
    search_weight_question: float = field(default=0.2, metadata=knob(ge=0))
    search_weight_time: float = field(default=0.15, metadata=knob(ge=0))
    search_weight_speaker: float = field(default=0.1, metadata=knob(ge=0))
    # Recall (MemoryManager search, retrieve_relevant_memories, the agent tools) leaves out a row
    # holding no word of the query whose cosine is below this. Calibrated for the bundled
    # all-MiniLM-L6-v2 with `benchmarks/bench_recall.py --calibrate` on LoCoMo dev conversations:
    # the best-hit cosine of nonsense queries (made-up and letter-shuffled words) is 0.21 at the
    # median, 0.30 at p95 and 0.35 at p99; of real questions 0.38 at p1. At 0.30, 3.9% of
    # word-less nonsense queries still get a hit and no answer is lost; 0.35 would cut that to
    # 0.2% but drop true paraphrases near 0.32 ("Which foods must she avoid?" / "Is allergic to
    # peanuts."). Another embedding model has other cosines: recalibrate with it.
    recall_min_cosine: float = field(default=0.3, metadata=knob(ge=-1, le=1))
    # The relevance floor of search (Engine.search(floor=...), syncd.index.search.answered): a
    # query the memory in scope does not answer at all gets no hits. Answered means its best row
    # is closer in meaning than the best of that many unrelated rows comes 19 times in 20 by
    # chance (for the bundled all-MiniLM-L6-v2: 0.18 for one row, 0.39 for 550, 0.51 for
    # 100,000), holding the query's rare words counting for up to 0.10 more.
    # retrieve_relevant_memories applies it; measured by `benchmarks/bench_no_answer.py`.
    # False: every query gets its nearest rows.
    search_floor: bool = True

    # Watcher
    debounce_ms: int = field(
        default=40, metadata=knob(ge=0, le=60_000, description="Quiet time before a batch is handled.")
    )
    burst_threshold: int = field(
        default=500, metadata=knob(ge=1, description="Events in one batch that mean: reconcile all.")
    )
    reconcile_interval_s: float = field(default=300.0, metadata=knob(ge=1.0, description="Periodic full reconcile."))
    watcher_check_s: float = field(
        default=10.0, metadata=knob(gt=0, description="How often the daemon checks its watcher is alive.")
    )
    commit_quiet_ms: int = field(
        default=300, metadata=knob(ge=0, description="Quiet time after indexing before a commit.")
    )

    # Other processes: how long a write waits for the home lock held by another non-daemon process,
    # or for the daemon to index and commit a write handed to it.
    lock_wait_s: float = field(default=30.0, metadata=knob(ge=0, description="Wait for another writer or the daemon."))

    # `syncd serve`: what a client owes each request, before its token is even checked (see
    # syncd/server/http.py): its line and headers within this long, its body within that.
    server_header_timeout_s: float = field(
        default=10.0, metadata=knob(gt=0, le=3600, description="Time to send a request's headers.")
    )
    server_body_timeout_s: float = field(
        default=30.0, metadata=knob(gt=0, le=3600, description="Time to send a request's body.")
    )

    # Git identity for changes nobody claimed through the API (a person in an editor).
    human_name: str = "syncd user"
    human_email: str = "user@syncd.local"
    agent_email_domain: str = "agents.syncd.local"

    # Memory
    llm_model: str | None = field(default=None, metadata=knob(description="litellm model for fact extraction."))
    llm_timeout_s: float = field(default=60.0, metadata=knob(gt=0))
    block_char_limit: int = field(default=5000, metadata=knob(ge=100, description="Max characters of one core block."))
    # Deduplication of new facts (syncd.memory.dedup): remembered facts at least this close in
    # meaning are compared with a new one word by word, and only one it restates makes it a
    # duplicate; closeness alone never does (MiniLM puts "Is not allergic to peanuts." at 0.95 from
    # "Is allergic to peanuts.", "She is allergic to peanuts." at 0.82).
    dedup_cosine: float = field(default=0.7, metadata=knob(gt=0, le=1))
    core_refresh_importance: float = field(default=0.8, metadata=knob(ge=0, le=1))

    # Sessions: transcripts become searchable rows (kind "transcript") only when asked, as in the
    # seed; they are always kept and committed. Chunks are counted in the embedding model's tokens.
    transcript_indexing_enabled: bool = False
    transcript_chunk_tokens: int = field(default=400, metadata=knob(ge=16, le=8192))
    transcript_chunk_overlap: int = field(default=80, metadata=knob(ge=0, le=4096))
    # The reset policy `syncd sessions` reports against (SessionPolicy.from_settings); 0 disables.
    session_daily_reset_hour: int = field(
        default=0, metadata=knob(ge=0, le=23, description="UTC hour of the daily reset.")
    )
    session_idle_timeout_minutes: int = field(default=0, metadata=knob(ge=0))
    session_max_turns: int = field(default=0, metadata=knob(ge=0))

    # Files larger than this are recorded as errors rather than parsed (a stray export, a dump).
    max_file_bytes: int = field(default=20 * 1024 * 1024, metadata=knob(ge=1024))

    def __init__(self, **values: Any) -> None:
        read = _read(values, os.environ)
        if read is None:
            model = validated(values)
            read = {name: getattr(model, name) for name in _FIELDS}
        self.__dict__.update(read)

    def model_copy(self, *, update: dict[str, Any] | None = None) -> Self:
        """A copy with ``update`` applied, unchecked (pydantic's ``model_copy``, which the callers
        of an earlier Settings use)."""
        clone = copy.copy(self)
        clone.__dict__.update(update or {})
        return clone


# The values read here as pydantic would take them, and only those: an integer's digits with at
# most a sign; a decimal number (an exponent allowed, no inf or nan); a boolean word, any case.
_INT = re.compile(r"[+-]?[0-9]{1,18}")
_FLOAT = re.compile(r"[+-]?(?:[0-9]{1,18}(?:\.[0-9]{0,18})?|\.[0-9]{1,18})(?:[eE][+-]?[0-9]{1,3})?")
_BOOLS = {"1": True, "on": True, "t": True, "true": True, "y": True, "yes": True}
_BOOLS |= {"0": False, "off": False, "f": False, "false": False, "n": False, "no": False}


class _Unsure(Exception):
    """A value this module does not read the way pydantic would for certain: pydantic decides."""


def _env_int(text: str) -> int:
    if not _INT.fullmatch(text):
        raise _Unsure
    return int(text)


def _env_float(text: str) -> float:
    if not _FLOAT.fullmatch(text):
        raise _Unsure
    value = float(text)
    if not math.isfinite(value):
        raise _Unsure
    return value


def _env_bool(text: str) -> bool:
    if not text.isascii() or text.lower() not in _BOOLS:
        raise _Unsure
    return _BOOLS[text.lower()]


def _given_int(value: Any) -> int:
    if type(value) is not int:
        raise _Unsure
    return value


def _given_float(value: Any) -> float:
    if type(value) not in (int, float) or not math.isfinite(value):
        raise _Unsure
    return float(value)


def _given_bool(value: Any) -> bool:
    if type(value) is not bool:
        raise _Unsure
    return value


def _given_str(value: Any) -> str:
    if type(value) is not str:
        raise _Unsure
    return value


def _given_path(value: Any) -> Path:
    if isinstance(value, Path):
        return value
    return Path(_given_str(value))


# For each type a field may have: how a value given as a keyword is taken, and how an
# environment variable's text is read.
_READERS: dict[type, tuple[Callable[[Any], Any], Callable[[str], Any]]] = {
    int: (_given_int, _env_int),
    float: (_given_float, _env_float),
    bool: (_given_bool, _env_bool),
    str: (_given_str, str),
    Path: (_given_path, Path),
}


@dataclasses.dataclass(frozen=True)
class _Field:
    name: str
    kind: type
    optional: bool
    default: Any
    bounds: Mapping[str, float]

    @classmethod
    def of(cls, f: dataclasses.Field) -> "_Field":
        kind, optional = f.type, False
        if isinstance(kind, types.UnionType):
            rest = [t for t in kind.__args__ if t is not type(None)]
            kind, optional = rest[0], len(rest) < len(kind.__args__)
            if len(rest) != 1:
                raise TypeError(f"Settings.{f.name}: one type, or one type or None")
        if kind not in _READERS:
            raise TypeError(f"Settings.{f.name}: a {kind} is not read by syncd.config (teach _READERS)")
        return cls(f.name, kind, optional, f.default, f.metadata.get("bounds", {}))

    def given(self, value: Any) -> Any:
        if value is None and self.optional:
            return None
        return self.bounded(_READERS[self.kind][0](value))

    def from_env(self, text: str) -> Any:
        # An optional field's text is still read as its type: "" or "None" is no None.
        return self.bounded(_READERS[self.kind][1](text))

    def bounded(self, value: Any) -> Any:
        for bound, limit in self.bounds.items():
            within = {"ge": value >= limit, "gt": value > limit, "le": value <= limit, "lt": value < limit}[bound]
            if not within:
                raise _Unsure  # pydantic words the error
        return value


_FIELDS = {f.name: _Field.of(f) for f in dataclasses.fields(Settings)}


def _read(values: Mapping[str, Any], environ: Mapping[str, str]) -> dict[str, Any] | None:
    """Every field's value, from ``values``, then ``environ``, then its default; None when one of
    them is not for certain what pydantic would make of it."""
    env: dict[str, str] = {}
    for key, text in environ.items():
        name = key.lower()
        if name.startswith(_ENV_PREFIX):
            if name[len(_ENV_PREFIX) :] in env:
                return None  # two spellings of one variable: which one pydantic takes is its to say
            env[name[len(_ENV_PREFIX) :]] = text
    read: dict[str, Any] = {}
    try:
        for name, spec in _FIELDS.items():
            if name in values:
                read[name] = spec.given(values[name])
            elif name in env:
                read[name] = spec.from_env(env[name])
            else:
                read[name] = spec.default
    except _Unsure:
        return None
    return read


def validated(values: Mapping[str, Any]) -> Any:
    """``values`` and the environment as pydantic-settings validates them for Settings' fields (the
    same names, types, defaults and bounds): the model instance, or pydantic's ValidationError."""
    return _model()(**values)


@functools.cache
def _model() -> type:
    from pydantic import Field, create_model
    from pydantic_settings import BaseSettings, SettingsConfigDict

    class Base(BaseSettings):
        model_config = SettingsConfigDict(env_prefix=_ENV_PREFIX.upper(), extra="ignore")

    fields: dict[str, Any] = {
        f.name: (f.type, Field(f.default, description=f.metadata.get("description"), **f.metadata.get("bounds", {})))
        for f in dataclasses.fields(Settings)
    }
    return create_model("Settings", __base__=Base, **fields)
