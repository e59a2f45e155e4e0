"""Scale: many small files and huge single rows cost memory in proportion to what is kept, never
one memory mapping per file, and never the whole of an oversized text at once."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

import syncd
from syncd.home import Home, read_at_most
from syncd.index.fulltext import MAX_ANALYZED_CHARS, TextIndex, analyze
from syncd.sync.scan import scan_disk

from .helpers import write


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
