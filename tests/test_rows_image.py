"""The rows image (syncd/index/rows_image.py): a reader answers from it exactly as from the rows
loaded from the table, and never believes one that does not hold the table on disk."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import syncd
from syncd.index import rows_image
from syncd.index.rowcache import RowCache, ScopeMask
from syncd.index.rows_image import IMAGE_NAME, ImageRows, _strings  # white-box: see _same_arrays
from syncd.index.search import hybrid_search
from syncd.index.store import Index

from .daemon_helpers import new_home
from .strategies import examples

WORDS = [
    "tea",
    "coffee",
    "Lyon",
    "cello",
    "sourdough",
    "café",
    "nurse",
    "docker",
    "runs",
    "sundays",
    "green",
    "morning",
    "cat",
    "miso",
    "peanuts",
    "Straße",
    "learns",
    "japanese",
]
USERS = ["ana", "bob"]
NOW = dt.datetime(2026, 11, 27, tzinfo=dt.UTC)
QUERIES = [
    "what does she drink in the morning",
    "tea",
    "café Lyon",
    "docker nurse cello",
    "nothing matches xq",
    "runs on sundays",
    "strasse",
]


def _fact(draw_words: list[str], category: str, importance: float | None) -> str:
    comment = f" <!-- imp:{importance} -->" if importance is not None else ""
    return f"- [{category}] {' '.join(draw_words).capitalize()}.{comment}\n"


facts = st.builds(
    _fact,
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=5),
    st.sampled_from(["preference", "note", "work"]),
    st.one_of(st.none(), st.sampled_from([0.2, 0.9])),
)
# One file's new text: a daily log of a user (turns of facts) or a wiki page, or None to delete it.
logs = st.lists(st.lists(facts, min_size=1, max_size=4), min_size=1, max_size=3).map(
    lambda turns: (
        "# 2026-11-20\n\n" + "".join(f"## 10:{n:02d} chat:c{n % 2}\n" + "".join(t) for n, t in enumerate(turns))
    )
)
pages = st.lists(st.sampled_from(WORDS), min_size=1, max_size=8).map(lambda w: f"# Page\n\n## Part\n\n{' '.join(w)}\n")
steps = st.lists(
    st.one_of(
        st.tuples(
            st.sampled_from([f"memory/users/{u}/2026-11-2{d}.md" for u in USERS for d in (0, 1)]),
            st.one_of(st.none(), logs),
        ),
        st.tuples(st.just("vault/page.md"), st.one_of(st.none(), pages)),
    ),
    min_size=1,
    max_size=5,
)


def _both(folder: Path, dim: int, model_id: str) -> tuple[RowCache, ImageRows]:
    """The rows loaded from the table by a reader (which writes the image as it loads them), and
    the image a second reader opens instead."""
    truth = Index(folder, dim, model_id, shared=True)
    truth._ensure_matrix()  # white-box: a reader's load, which writes the image, without a query
    with truth.reading() as loaded:
        assert isinstance(loaded, RowCache)
    imaged = Index(folder, dim, model_id, shared=True)
    with imaged.reading() as image:
        assert isinstance(image, ImageRows)
    return loaded, image


def _same(loaded: RowCache, image: ImageRows, vectors: dict[str, np.ndarray]) -> None:
    for user in (None, *USERS):
        for kind in (None, "fact", "chunk"):
            scope = ScopeMask(user=user, kind=kind, memory_only=kind == "fact", content_only=True)
            assert image.count(scope) == loaded.count(scope)
            for query in QUERIES:
                for got, want in zip(image.text_signals(query, scope), loaded.text_signals(query, scope)):
                    assert np.array_equal(got, want)  # bit for bit
                vector = vectors[query]
                assert np.array_equal(image.search_rows(vector, scope, 7), loaded.search_rows(vector, scope, 7))
                assert image.search(vector, scope, 5) == loaded.search(vector, scope, 5)
                assert image.text_search(query, scope, 5) == loaded.text_search(query, scope, 5)


def _same_arrays(kept: ImageRows, written: ImageRows) -> None:
    """An image kept in step by writes holds what one written from the table's rows does: the
    same rows in the same order (the table's), the same postings; codes may be numbered apart.
    White-box: the image's arrays (and _strings, their decoder) are the file format under test."""
    for name, array in written._a.items():
        if name in (
            "user_codes",
            "chat_codes",
            "path_codes",
            "path_bytes",
            "path_starts",
            "payload_bytes",
            "payload_starts",
            "heading_codes",
            "heading_bytes",
            "heading_starts",
        ):
            continue
        assert np.array_equal(kept._a[name], array, equal_nan=array.dtype.kind == "f"), name
    assert kept.row_payloads(range(len(kept))) == written.row_payloads(range(len(written)))
    for field in ("path", "heading"):
        values = [_strings(image._a[f"{field}_bytes"], image._a[f"{field}_starts"]) for image in (kept, written)]
        assert [values[0][c] for c in kept._a[f"{field}_codes"].tolist()] == [
            values[1][c] for c in written._a[f"{field}_codes"].tolist()
        ], field
    for name in ("user_codes", "chat_codes"):
        values = [{code: value for value, code in image._codes.items()} for image in (kept, written)]
        assert [values[0][c] for c in kept._a[name].tolist()] == [values[1][c] for c in written._a[name].tolist()]


class _Held:
    """An IndexBackend whose reading() yields given rows: hybrid search over either side."""

    def __init__(self, rows):
        self.rows = rows

    def reading(self, same_model: bool = False):  # rows of one model: nothing to check
        from contextlib import nullcontext

        return nullcontext(self.rows)


@given(steps)
# One fact of a log edited (its row deleted by id, the others kept), a page added, the log deleted.
@example(
    [
        ("memory/users/ana/2026-11-20.md", "# 2026-11-20\n\n## 10:00 chat:c0\n- [note] Tea.\n- [note] Cat miso.\n"),
        ("memory/users/ana/2026-11-20.md", "# 2026-11-20\n\n## 10:00 chat:c0\n- [note] Tea.\n- [note] Cat runs.\n"),
        ("vault/page.md", "# Page\n\n## Part\n\ncafé Lyon\n"),
        ("memory/users/ana/2026-11-20.md", None),
    ]
)
@settings(max_examples=examples(12), deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_law_search_over_the_image_equals_search_over_the_rows(tmp_path_factory, embedder, changes):
    """After any sequence of writes, edits and deletes synced into the index, a reader's image
    answers every query, scope and part as the rows loaded from the table do (hits, scores, the
    full-text signals bit for bit, the rows found by meaning)."""
    home = new_home(tmp_path_factory.mktemp("image"), embedder)
    vectors = {q: embedder.embed_query(q) for q in QUERIES}
    folder = home / ".syncd/index"
    with syncd.open(home, embedder=embedder) as engine:
        for step, (rel, text) in enumerate(changes):
            path = home / rel
            if text is None:
                path.unlink(missing_ok=True)
            else:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text, encoding="utf-8")
            engine.sync()
            assert not engine.index.rows_loaded  # a sync that loads no rows, as `syncd sync`
            # The image the sync kept in step (from the second step: the first reader writes one).
            with Index(folder, embedder.dim, embedder.model_id, shared=True).reading() as kept:
                assert isinstance(kept, ImageRows) or not step
            loaded, image = _both(folder, embedder.dim, embedder.model_id)
            for rows in {id(image): image, id(kept): kept}.values():
                _same(loaded, rows, vectors)
                for user in (None, "ana"):
                    for query in QUERIES:
                        got = hybrid_search(_Held(rows), vectors[query], query, user, limit=6, now=NOW)
                        assert got == hybrid_search(_Held(loaded), vectors[query], query, user, limit=6, now=NOW)
            if isinstance(kept, ImageRows):
                _same_arrays(kept, image)


def _synced_log(home: Path, embedder) -> Path:
    """A daily log of ana's holding one fact, synced into the index."""
    log = home / "memory/users/ana/2026-11-20.md"
    log.parent.mkdir(parents=True)
    log.write_text("# 2026-11-20\n\n## 10:00\n- [preference] Likes green tea.\n")
    with syncd.open(home, embedder=embedder) as engine:
        engine.sync()
    return log


@pytest.mark.parametrize("rows_loaded", [False, True])
def test_a_write_after_the_image_is_kept_in_it_or_makes_readers_load_the_table(home, embedder, rows_loaded):
    """A sync that loads no rows (`syncd sync`) writes the image of the table it made; a writer
    holding the rows (a daemon) does not, and its write leaves the image unbelieved."""
    log = _synced_log(home, embedder)
    with syncd.open(home, embedder=embedder) as engine:
        with syncd.open(home, read_only=True, embedder=embedder) as reader:
            assert reader.search("green tea", user_id="ana")  # loads the table, writes the image
        if rows_loaded:
            engine.load_rows()
        with syncd.open(home, read_only=True, embedder=embedder) as reader:
            with reader.index.reading() as rows:
                assert isinstance(rows, ImageRows)
            log.write_text(log.read_text() + "- [preference] Plays the cello on sundays.\n")
            engine.sync()
            with reader.index.reading() as rows:
                assert isinstance(rows, RowCache if rows_loaded else ImageRows)
            assert "cello" in reader.search("cello", user_id="ana")[0].content


@pytest.mark.parametrize("damage", ["torn", "garbage", "other code", "other dim", "unsynced, machine restarted"])
def test_an_image_that_cannot_vouch_is_never_believed(home, embedder, monkeypatch, damage):
    _synced_log(home, embedder)
    folder = home / ".syncd/index"
    _both(folder, embedder.dim, embedder.model_id)
    image = folder / IMAGE_NAME
    dim = embedder.dim
    if damage == "torn":
        image.write_bytes(image.read_bytes()[: image.stat().st_size // 2])
    elif damage == "garbage":
        image.write_bytes(os.urandom(4096))
    elif damage == "other code":
        monkeypatch.setattr(rows_image, "_code_digest", "made by another syncd")
    elif damage == "unsynced, machine restarted":
        assert rows_image.boot_id() is not None  # Linux: the image was written unsynced
        monkeypatch.setattr(rows_image, "boot_id", lambda: "a later boot")
    else:
        dim += 1
    # White-box: that the image is refused, not only that answers are right (a reload gives them too).
    assert Index(folder, dim, embedder.model_id, shared=True)._images.current() is None


@pytest.mark.parametrize("unsynced", [True, False])
def test_an_image_is_synced_unless_it_names_its_boot(home, embedder, monkeypatch, unsynced):
    """Where it may not name its boot (no boot id, a filesystem not known to be local) the image
    is fsynced and believed in any boot; where it may, it is not fsynced (and is believed in
    its own boot only: the test above)."""
    _synced_log(home, embedder)
    folder = home / ".syncd/index"
    if not unsynced:
        monkeypatch.setattr(rows_image, "unsynced_boot", lambda folder: None)
    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: synced.append(fd) or real_fsync(fd))
    _both(folder, embedder.dim, embedder.model_id)  # writes the image
    assert bool(synced) != unsynced
    if unsynced:
        return
    monkeypatch.setattr(rows_image, "boot_id", lambda: "a later boot")
    # White-box, as above: the image itself is believed.
    assert Index(folder, embedder.dim, embedder.model_id, shared=True)._images.current() is not None


def test_a_one_shot_search_with_a_current_image_imports_no_lancedb(home, embedder):
    _synced_log(home, embedder)
    script = (
        "import sys, syncd\n"
        "from syncd.engine.search import search_answer\n"
        f"with syncd.open({str(home)!r}, read_only=True) as engine:\n"
        "    answer = search_answer(engine, 'green tea', user_id='ana')\n"
        "print(answer['hits'][0]['content'], answer['stale'], 'lancedb' in sys.modules)\n"
    )
    runs = [
        subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout.split()
        for _ in range(2)
    ]
    # The first loads the table (and writes the image); the second reads the image alone.
    assert runs[0] == ["Likes", "green", "tea.", "0", "True"]
    assert runs[1] == ["Likes", "green", "tea.", "0", "False"]


def test_an_index_without_rows_has_an_image_that_answers_nothing(tmp_path, embedder):
    # The writer of an image once failed on zero-length arrays (test_engine_writers' empty home).
    folder = tmp_path / "index"
    Index(folder, embedder.dim, embedder.model_id).close()
    loaded, image = _both(folder, embedder.dim, embedder.model_id)
    assert len(image) == len(loaded) == 0
    assert image.search(embedder.embed(["tea"])[0], ScopeMask(), 5) == []
    assert image.text_search("tea", ScopeMask(), 5) == []
