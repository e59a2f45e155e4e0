"""Scale: many small files and huge single rows cost memory in proportion to what is kept, never
one memory mapping per file, and never the whole of an oversized text at once."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lancedb.table import LanceTable

import syncd
from syncd.home import Home, read_at_most
from syncd.index.fulltext import MAX_ANALYZED_CHARS, TextIndex, analyze
from syncd.sync.scan import scan_disk

from .daemon_helpers import new_home
from .helpers import assert_matches_rebuild, write
from .strategies import examples


def _mappings() -> int:
    with open("/proc/self/maps", encoding="ascii") as maps:
        return sum(1 for _ in maps)


def test_a_scan_of_thousands_of_small_files_keeps_their_bytes_without_a_mapping_each(tmp_path) -> None:
    """Each kept file was read with a 20 MB request, which glibc serves with a mapping of its own
    that the shrink to the file's size keeps: at 65,530 kept files vm.max_map_count ran out."""
    home = syncd.init(tmp_path / "home").home
    files = 3000
    for i in range(files):
        write(home, f"vault/d{i % 30:02d}/n{i:05d}.md", f"# Note {i}\n\nabout topic {i % 37}\n")
    before = _mappings()
    scan = scan_disk(Home(home), {}, max_file_bytes=20 * 1024 * 1024)
    grown = _mappings() - before
    assert len(scan.contents) >= files
    assert grown < files // 10, f"{grown} new memory mappings for {len(scan.contents)} kept files"


@given(data=st.binary(max_size=3000), limit=st.integers(min_value=1, max_value=4000))
def test_read_at_most_reads_what_is_there_up_to_the_limit(tmp_path_factory, data, limit) -> None:
    path = tmp_path_factory.mktemp("r") / "f.md"
    path.write_bytes(data)
    with open(path, "rb") as handle:
        assert read_at_most(handle, limit) == data[:limit]


def test_full_text_analysis_of_a_huge_row_is_cut() -> None:
    head = "green tea " * (MAX_ANALYZED_CHARS // 10)
    row = head + "marathon " * 100_000
    assert analyze(row) == analyze(head)
    index = TextIndex()
    index.add([row, "marathon in spring"])
    alive = np.ones(2, dtype=bool)
    assert [r for r, _ in index.search("marathon", alive, alive, 5)] == [1]


# -- an edit of a big daily log costs the rows it changed ------------------------------------------

LOG = "memory/users/ana/2026-11-22.md"
_WORDS = ["tea", "kite", "river", "piano", "marathon", "sourdough", "chess", "Lyon", "nurse", "cat"]


def _log_lines(facts: int) -> list[str]:
    lines = ["# 2026-11-22", ""]
    for i in range(facts):
        if i % 5 == 0:
            lines += ["", f"## 09:{i // 5:02d} chat:c1 session:s{i // 5}"]
        lines.append(f"- [context] Ana talked about {_WORDS[i % 10]} and {_WORDS[(i * 3) % 10]} ({i}).")
    return lines + ["", "Some prose about the day."]


def _edit_log(lines: list[str], op: tuple[str, int, int]) -> list[str]:
    """One edit of the kinds people and agents make: a fact's words, its metadata, a fact added,
    removed or moved to another conversation, a heading renamed, a duplicate, prose, an append."""
    kind, a, b = op
    facts = [i for i, line in enumerate(lines) if line.startswith("- [")]
    heads = [i for i, line in enumerate(lines) if line.startswith("## ")]
    lines = list(lines)
    if not facts:
        return lines + [f"- [context] A new fact about {_WORDS[a % 10]}."]
    at, other = facts[a % len(facts)], facts[b % len(facts)]
    if kind == "words":
        lines[at] = f"- [context] Ana now talks about {_WORDS[b % 10]} instead ({a})."
    elif kind == "meta":
        lines[at] = lines[at].replace("[context]", "[goal]") + f" `tag{b % 3}` <!-- imp:0.{b % 9 + 1} -->"
    elif kind == "insert":
        lines.insert(at, f"- [context] Inserted, about {_WORDS[b % 10]}.")
    elif kind == "delete":
        del lines[at]
    elif kind == "move":
        line = lines.pop(at)
        lines.insert(min(other, len(lines)), line)
    elif kind == "heading" and heads:
        lines[heads[a % len(heads)]] = f"## 1{b % 10}:00 chat:c{b % 2 + 1} session:s{b}"
    elif kind == "duplicate":
        lines.insert(other, lines[at])
    elif kind == "prose":
        lines.insert(at, f"Words between facts about {_WORDS[b % 10]}.")
    elif kind == "append":
        lines += ["", f"## 23:{b % 60:02d} chat:c1", f"- [context] Appended about {_WORDS[b % 10]}."]
    return lines


_KINDS = ["words", "meta", "insert", "delete", "move", "heading", "duplicate", "prose", "append"]


# A real engine per example, up to 6 edits of 9 kinds each (8 before; --slow runs 40).
@settings(max_examples=examples(4))
@given(
    ops=st.lists(st.tuples(st.sampled_from(_KINDS), st.integers(0, 200), st.integers(0, 200)), min_size=1, max_size=6)
)
def test_editing_a_log_in_place_equals_a_rebuild(tmp_path_factory, embedder, ops) -> None:
    """Files updated row by row (only the rows an edit changed are rewritten) still equal a
    rebuild of the same tree: tables, vectors, full text and every fact's conversation."""
    root = new_home(tmp_path_factory.mktemp("home"), embedder)
    lines = _log_lines(24)
    write(root, LOG, "\n".join(lines) + "\n")
    with syncd.open(root, embedder=embedder) as engine:
        engine.sync()
        for op in ops:
            lines = _edit_log(lines, op)
            write(root, LOG, "\n".join(lines) + "\n")
            engine.sync([LOG])
        assert_matches_rebuild(engine)


@pytest.mark.parametrize("loaded", [False, True], ids=["rows-written-here", "rows-loaded-from-disk"])
def test_a_one_line_edit_of_a_big_log_writes_only_the_rows_it_changed(home, embedder, monkeypatch, loaded) -> None:
    lines = _log_lines(300)
    write(home, LOG, "\n".join(lines) + "\n")
    if loaded:  # indexed by an earlier engine: this one compares with rows read back from LanceDB
        with syncd.open(home, embedder=embedder) as engine:
            engine.sync()
    with syncd.open(home, embedder=embedder) as engine:
        engine.sync()
        written: list[int] = []
        real_add = LanceTable.add

        def counted(table, data, *args, **kwargs):
            if table.name == "entries":
                written.append(len(data))
            return real_add(table, data, *args, **kwargs)

        monkeypatch.setattr(LanceTable, "add", counted)
        edited = _edit_log(lines, ("words", 152, 3))
        write(home, LOG, "\n".join(edited) + "\n")
        report = engine.sync([LOG])
        # The edited fact and its two neighbours in its conversation (their context windows name
        # it), of 300 facts and a prose chunk.
        assert written == [3]
        assert report.embedded_texts <= 1
        hits = engine.search("Ana now talks about chess instead", user_id="ana", limit=1)
        assert hits and "instead" in hits[0].content
