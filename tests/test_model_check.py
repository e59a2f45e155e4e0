"""The index's embedding model is checked wherever vectors meet it: a query's (search), a fact's
to deduplicate (``nearest_facts``), and rows a change would write beside the index's. A process
configured with another model than the one the index was built with is refused in one line that
names both models and the remedy; it never mixes two models' vectors in one index, nor rebuilds a
home's index for a model only it is configured with. Both backends: LanceDB and PostgreSQL.

The "other model" is the bundled model's files copied to a folder (``SYNCD_EMBED_MODEL_PATH``):
another model id, as any configured model has, with the same weights, so that nothing but the
check can tell its vectors apart (a search would answer, silently, without it)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import syncd
from syncd.config import Settings
from syncd.embedding.fastembed_backend import BUNDLED_TOKENIZER_DIR, bundled_onnx_path, load_embedder
from syncd.errors import IndexError_
from syncd.index.store import Index

from .cli_helpers import run_main
from .helpers import write

LOG = "memory/users/ana/2026-11-28.md"
NEW_LOG = "memory/users/ana/2026-11-29.md"
_MODEL_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "config.json")


def other_model_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "minilm-copy"
    if not folder.exists():
        folder.mkdir()
        shutil.copy2(bundled_onnx_path(), folder / "model.onnx")
        for name in _MODEL_FILES:
            shutil.copy2(BUNDLED_TOKENIZER_DIR / name, folder / name)
    return folder


@pytest.fixture
def other(tmp_path):
    """An embedder of another model id than the home's (the bundled model run from a folder)."""
    return load_embedder(Settings(embed_model_path=other_model_folder(tmp_path)), cache_dir=tmp_path / "models")


@pytest.fixture(params=["lancedb", "postgresql"])
def indexed(request, embedder) -> Path:
    """A home of either backend, indexed with the bundled model: one fact of ana's."""
    root = request.getfixturevalue("home" if request.param == "lancedb" else "pg_home")
    write(root, LOG, "# 2026-11-28\n\n## 10:00\n\n- [fact] Green tea in the morning.\n")
    with syncd.open(root, embedder=embedder) as engine:
        engine.sync()
    return root


def _facts(engine) -> list[str]:
    return [h.content for h in engine.search("green tea", user_id="ana", kind="fact")]


def _both_models(message: str, embedder, other) -> None:
    assert embedder.model_id in message and other.model_id in message, message
    assert "`syncd reindex`" in message and "SYNCD_EMBED_MODEL" in message, message
    assert "syncd sync" not in message and "\n" not in message, message


def test_an_agent_of_another_model_neither_rebuilds_nor_mixes_the_home_s_index(indexed, embedder, other):
    """An agent's process (a read-only engine borrowing the home for its change, no daemon)
    configured with another model: its change rebuilt the whole index with its model (the
    home's writer then rebuilt it back on its next sync), and its dedup compared its facts'
    vectors with the other model's. Now its change is refused before anything is written, and
    so is its dedup; the index stays the writer's."""
    with syncd.open(indexed, embedder=embedder, read_only=True) as before:
        built = before.index.meta()
    with syncd.open(indexed, read_only=True, embedder=other) as agent:
        with pytest.raises(IndexError_) as refused:
            agent.write_file(NEW_LOG, b"# 2026-11-29\n\n## 10:00\n\n- [fact] Coffee at noon.\n")
        _both_models(str(refused.value), embedder, other)
        with pytest.raises(IndexError_) as dedup:
            agent.nearest_facts(agent.embed(["green tea"])[0], user_id="ana", limit=3)
        _both_models(str(dedup.value), embedder, other)
        with pytest.raises(IndexError_) as search:
            agent.search("green tea", user_id="ana")
        _both_models(str(search.value), embedder, other)
    assert not (indexed / NEW_LOG).exists()
    with syncd.open(indexed, embedder=embedder, read_only=True) as reader:
        assert reader.index.meta() == built
        assert _facts(reader) == ["Green tea in the morning."]
        assert [row["text"] for _, row in reader.nearest_facts(reader.embed(["tea"])[0], user_id="ana", limit=3)] == [
            "Green tea in the morning."
        ]


def test_a_reader_notices_a_reindex_with_another_model_by_another_process(indexed, embedder, tmp_path):
    """A long-lived reader (a read-only server's engine) searches; another process runs `syncd
    reindex` configured with another model; the reader's next search is refused (its cached
    view of the index's model, if any, must not outlive the rebuild), and a process of the new
    model searches the new index."""
    with syncd.open(indexed, embedder=embedder, read_only=True) as reader:
        assert reader.search("green tea", user_id="ana")
        env = os.environ | {"SYNCD_EMBED_MODEL_PATH": str(other_model_folder(tmp_path))}
        done = subprocess.run([sys.executable, "-m", "syncd", "reindex", "--home", str(indexed)], env=env,
                              capture_output=True, text=True, timeout=300)  # fmt: skip
        assert done.returncode == 0, done.stderr
        with pytest.raises(IndexError_, match=r"another model \(path:minilm-copy@"):
            reader.search("green tea", user_id="ana")
    settings = Settings(embed_model_path=other_model_folder(tmp_path))
    with syncd.open(indexed, read_only=True, settings=settings) as switched:
        assert _facts(switched) == ["Green tea in the morning."]


def test_a_postgresql_search_reads_the_model_with_its_rows(pg_home, embedder, monkeypatch):
    """The check read the schema's meta in a transaction of its own before the search's (two
    round trips more per search: a connection's check and the read), and a rebuild swapped in
    between went unseen. It is read in the snapshot the search reads its rows from, in the
    statement that sets that snapshot up. White-box: PgIndex.meta is made to fail for the length
    of the searches, which must not call it."""
    from syncd.index.pg_store import PgIndex

    write(pg_home, LOG, "# 2026-11-28\n\n## 10:00\n\n- [fact] Green tea in the morning.\n")
    with syncd.open(pg_home, embedder=embedder) as engine:
        engine.sync()
    with syncd.open(pg_home, embedder=embedder, read_only=True) as reader:
        reader.index.files()  # what a search answer's count of stale files reads, read before
        with monkeypatch.context() as patch:
            patch.setattr(PgIndex, "meta", lambda self: pytest.fail("a search read the meta on its own"))
            assert reader.search("green tea", user_id="ana")
            assert reader.nearest_facts(reader.embed(["tea"])[0], user_id="ana", limit=3)


def test_a_lancedb_rebuild_never_shows_new_rows_under_the_old_model_s_name(home, embedder, other, monkeypatch):
    """A rebuild with another model swapped the rows in, then wrote meta.json: in between, a
    reader of the old model found meta.json naming its model and ranked its query by the new
    model's vectors. Now the rebuild marks meta.json before it swaps (the reader refuses: the
    rows may be either model's) and names the new model after. White-box: a reader searches at
    that moment, from inside Index._replace_rows."""
    write(home, LOG, "# 2026-11-28\n\n## 10:00\n\n- [fact] Green tea in the morning.\n")
    with syncd.open(home, embedder=embedder) as engine:
        engine.sync()
    seen: list[str] = []
    replace = Index._replace_rows

    def then_search(self, aside):
        replace(self, aside)
        with syncd.open(home, embedder=embedder, read_only=True) as reader:
            try:
                seen.append(f"hits: {[h.content for h in reader.search('green tea', user_id='ana')]}")
            except IndexError_ as exc:
                seen.append(str(exc))

    monkeypatch.setattr(Index, "_replace_rows", then_search)
    with syncd.open(home, embedder=other) as switching:
        switching.reindex()
    assert len(seen) == 1 and "being rebuilt with another model" in seen[0], seen
    assert other.model_id in seen[0] and embedder.model_id in seen[0]
    meta = json.loads((home / ".syncd" / "index" / "meta.json").read_text())
    assert meta["model_id"] == other.model_id and "replacing" not in meta


def test_a_rebuild_killed_after_its_swap_is_redone_by_either_model_s_writer(home, embedder, other, monkeypatch):
    """Killed between the swap and meta.json (here: an error there), the mark stays: a reader of
    either model refuses, and the writer of the old model, which found its own name in meta.json,
    took the new rows for its own; it rebuilds them instead. White-box: Index.write_meta fails
    once the rows are swapped."""
    write(home, LOG, "# 2026-11-28\n\n## 10:00\n\n- [fact] Green tea in the morning.\n")
    with syncd.open(home, embedder=embedder) as engine:
        engine.sync()
    replace, write_meta = Index._replace_rows, Index.write_meta
    swapped: list[bool] = []

    def swap(self, aside):
        replace(self, aside)
        swapped.append(True)

    def killed(self, **fields):
        if swapped:
            raise KeyboardInterrupt
        write_meta(self, **fields)

    monkeypatch.setattr(Index, "_replace_rows", swap)
    monkeypatch.setattr(Index, "write_meta", killed)
    with syncd.open(home, embedder=other) as switching, pytest.raises(KeyboardInterrupt):
        switching.reindex()
    monkeypatch.undo()
    for model in (embedder, other):
        with syncd.open(home, embedder=model, read_only=True) as reader:
            with pytest.raises(IndexError_, match="being rebuilt with another model"):
                reader.search("green tea", user_id="ana")
    with syncd.open(home, embedder=embedder) as engine:
        engine.sync()
        assert engine.index.meta()["model_id"] == embedder.model_id and "replacing" not in engine.index.meta()
        assert _facts(engine) == ["Green tea in the morning."]


def test_status_of_another_model_s_index_says_what_is_true(home, embedder, tmp_path):
    """`syncd status` in a process configured with another model said "the next `syncd sync`
    (or `syncd reindex`) rebuilds it": a sync there would rebuild the home's index for that
    process's model. It says which model built it, which one is configured, and the two ways on."""
    write(home, LOG, "# 2026-11-28\n\n## 10:00\n\n- [fact] Green tea in the morning.\n")
    with syncd.open(home, embedder=embedder) as engine:
        engine.sync()
    folder = other_model_folder(tmp_path)
    shown = run_main("status", "--home", str(home), env={"SYNCD_EMBED_MODEL_PATH": str(folder)}).stdout
    line = next(line for line in shown.splitlines() if line.startswith("index ") and "model" in line)
    assert f"another model ({embedder.model_id}, 384 dimensions)" in line and "path:minilm-copy@" in line, line
    assert "`syncd reindex` to rebuild the index with this one" in line and "syncd sync" not in line, line


@pytest.mark.parametrize("damaged", [b"[1]", b'"x"', b"null", b"\xff\xfe{"])
def test_a_damaged_meta_json_refuses_no_one_and_the_next_sync_writes_it_anew(home, embedder, damaged):
    """Every search and every change reads meta.json for the index's model: one that was JSON
    but no object, or no UTF-8, was a Python traceback in each of them (`syncd search` too),
    until someone deleted it by hand. It reads as no meta: searched, written beside, and the
    writer's next sync rebuilds the index and writes it anew."""
    write(home, LOG, "# 2026-11-28\n\n## 10:00\n\n- [fact] Green tea in the morning.\n")
    with syncd.open(home, embedder=embedder) as engine:
        engine.sync()
    meta = home / ".syncd" / "index" / "meta.json"
    meta.write_bytes(damaged)
    shown = run_main("search", "green tea", "--home", str(home))
    assert shown.returncode == 0 and "Traceback" not in shown.stderr, shown.stderr
    assert "Green tea in the morning." in shown.stdout
    with syncd.open(home, read_only=True, embedder=embedder) as agent:
        assert agent.search("green tea", user_id="ana")
        agent.write_file(NEW_LOG, b"# 2026-11-29\n\n## 10:00\n\n- [fact] Coffee at noon.\n")
    with syncd.open(home, embedder=embedder) as engine:
        engine.sync()
        assert json.loads(meta.read_text())["model_id"] == embedder.model_id
        assert sorted(h.content for h in engine.search("coffee or tea", user_id="ana", kind="fact")) == [
            "Coffee at noon.",
            "Green tea in the morning.",
        ]
