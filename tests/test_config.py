"""Settings read without pydantic mean what pydantic-settings makes of the same keywords and
environment: the same values, and where pydantic refuses, its ValidationError."""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from syncd.config import Settings, validated

FIELDS = {f.name: f for f in dataclasses.fields(Settings)}

# Texts near every edge of the readers: digits with signs, spaces and underscores, decimals and
# exponents, inf and nan, boolean words in any case, other scripts' digits, nothing at all.
EDGES = [
    "", " ", "0", "1", "-0", "+5", "007", "64", "4096", "4097", "1_000", " 5 ", "5\n", "5.0", "5.5", ".5", "5.",
     "1e3", "1E-2", "1e999", "inf", "-inf", "nan", "NaN", "Infinity", "0x10", "٣", "1,5", "true", "TRUE", "tRuE",
     "yes", " yes", "on", "off", "f", "N", "2", "None", "null", "0.3", "-1", "-1.5", "1.0000001", "3600", "99999999999999999999",
]  # fmt: skip
EDGY_TEXTS = st.sampled_from(EDGES)
# What an environment variable can hold: no NUL, no lone surrogate.
ENV_TEXT = st.characters(exclude_categories=("Cs",), exclude_characters="\x00")
TEXTS = st.one_of(
    EDGY_TEXTS, st.integers(-(10**6), 10**6).map(str), st.floats().map(str), st.text(ENV_TEXT, max_size=8)
)
GIVEN = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**6), 10**6),
    st.floats(),
    TEXTS,
    TEXTS.map(Path),
)


def spelled(name: str) -> st.SearchStrategy[str]:
    """``SYNCD_<NAME>`` in any case: pydantic-settings reads the environment case-blind."""
    key = f"SYNCD_{name.upper()}"
    return st.lists(st.booleans(), min_size=len(key), max_size=len(key)).map(
        lambda upper: "".join(c if u else c.lower() for c, u in zip(key, upper))
    )


environments = st.lists(
    st.sampled_from(sorted(FIELDS)).flatmap(lambda name: st.tuples(spelled(name), TEXTS)), max_size=2
).map(dict)
keywords = st.dictionaries(st.sampled_from([*FIELDS, "not_a_setting"]), GIVEN, max_size=3)


def outcome(make):
    try:
        made = make()
    except ValidationError as exc:
        return "refused", exc.errors(include_url=False)
    return "made", {name: (type(getattr(made, name)), getattr(made, name)) for name in FIELDS}


def same(a, b) -> bool:
    if a[0] != b[0] or a[0] == "refused":
        return a == b
    return all(
        ta is tb and (va == vb or (isinstance(va, float) and math.isnan(va) and math.isnan(vb)))
        for (ta, va), (tb, vb) in zip(a[1].values(), b[1].values())
    )


@contextlib.contextmanager
def environment(env: dict[str, str]):
    """The process's environment with no SYNCD_* variable but ``env``'s, restored after even
    when setting it failed halfway."""
    saved = {k: v for k, v in os.environ.items() if k.lower().startswith("syncd_")}
    try:
        for key in saved:
            del os.environ[key]
        os.environ.update(env)
        yield
    finally:
        for key in [k for k in os.environ if k.lower().startswith("syncd_")]:
            del os.environ[key]
        os.environ.update(saved)


@given(env=environments, kwargs=keywords)
def test_settings_are_what_pydantic_settings_makes_of_them(env, kwargs):
    with environment(env):
        ours = outcome(lambda: Settings(**kwargs))
        theirs = outcome(lambda: validated(kwargs))
    assert same(ours, theirs), (ours, theirs)


def test_every_edge_of_every_kind_of_field():
    """One field of each type and bounds alone, its SYNCD_* variable at each edge: a reader that
    takes one text pydantic would refuse or read otherwise fails here by name (fields alike but
    for their names are read alike; the law above spells the names in any case, and gives the
    edges as keywords too)."""
    kinds = {(str(f.type), tuple(sorted(f.metadata.get("bounds", {}).items()))): name for name, f in FIELDS.items()}
    for name in kinds.values():
        for text in EDGES:
            with environment({f"SYNCD_{name.upper()}": text}):
                ours, theirs = outcome(Settings), outcome(lambda: validated({}))
            assert same(ours, theirs), (name, text, ours, theirs)


@pytest.mark.parametrize(
    "env, kwargs",
    [
        ({"SYNCD_EMBED_BATCH_SIZE": "5.0"}, {}),  # pydantic takes it; we hand it over
        ({"SYNCD_EMBED_BATCH_SIZE": "0"}, {}),  # out of bounds: pydantic's words
        ({"SYNCD_DEBOUNCE_MS": "soon"}, {"debounce_ms": 5}),  # a keyword wins over a bad variable
        ({"SYNCD_HOME": "a", "syncd_home": "b"}, {}),
        ({"SYNCD_SEARCH_FLOOR": "Yes"}, {"embed_batch_size": True}),
        ({"SYNCD_RECALL_MIN_COSINE": "-1"}, {"home": "x"}),
    ],
)
def test_examples(env, kwargs):
    with environment(env):
        assert same(outcome(lambda kw=kwargs: Settings(**kw)), outcome(lambda kw=kwargs: validated(kw)))


def test_defaults_and_precedence():
    with environment({"SYNCD_EMBED_THREADS": "2", "syncd_llm_model": "m", "SYNCD_HOME": ""}):
        settings = Settings(llm_model="given")
    assert (settings.embed_threads, settings.llm_model, settings.home) == (2, "given", Path("."))
    assert settings.embed_batch_size == 64 and settings.search_floor is True
    copied = settings.model_copy(update={"index_url": "postgresql://x"})
    assert copied.index_url == "postgresql://x" and settings.index_url is None and copied.llm_model == "given"


def test_a_bad_value_is_pydantics_error():
    with (
        environment({"SYNCD_DEBOUNCE_MS": "soon", "SYNCD_MAX_FILE_BYTES": "-1"}),
        pytest.raises(ValidationError) as err,
    ):
        Settings()
    assert [(e["loc"], e["msg"]) for e in err.value.errors()] == [
        (("debounce_ms",), "Input should be a valid integer, unable to parse string as an integer"),
        (("max_file_bytes",), "Input should be greater than or equal to 1024"),
    ]


def test_plain_settings_import_no_pydantic(tmp_path):
    """What a one-shot command pays for: ordinary values are read without pydantic."""
    code = (
        "import sys; from syncd.config import Settings; s = Settings(lock_wait_s=2);"
        "assert (s.embed_threads, s.search_floor, s.search_weight_time) == (2, False, 0.25);"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pydantic', 'pydantic_settings', 'pydantic_core')))"
    )
    env = os.environ | {
        "SYNCD_EMBED_THREADS": "2",
        "SYNCD_SEARCH_FLOOR": "false",
        "SYNCD_SEARCH_WEIGHT_TIME": "0.25",
        "SYNCD_HOME": str(tmp_path),
    }
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
