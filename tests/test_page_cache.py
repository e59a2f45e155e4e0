"""Where a file written without an fsync may be believed (syncd.home.page_cache): the filesystem
a folder is on, read from the kernel's list of mounts, and the boot it names."""

from __future__ import annotations

import posixpath
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from syncd.home import page_cache

from .strategies import examples

MOUNTS = """\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
30 22 0:26 / /home/ana/net rw shared:2 - nfs4 server:/export rw
31 30 0:27 / /home/ana/net/local\\040copy rw shared:3 - tmpfs tmpfs rw
32 22 0:28 / /mnt/fuse rw shared:4 - fuse.sshfs ana@host: rw
33 22 0:29 / /mnt rw shared:5 - xfs /dev/sdb1 rw
"""


def _mounts(tmp_path: Path, monkeypatch, text: str) -> None:
    table = tmp_path / "mountinfo"
    table.write_text(text, encoding="utf-8")
    monkeypatch.setattr(page_cache, "_MOUNTS", str(table))


def test_a_folder_is_on_the_filesystem_of_the_deepest_mount_that_holds_it(tmp_path, monkeypatch):
    _mounts(tmp_path, monkeypatch, MOUNTS)
    assert page_cache.filesystem_type(Path("/home/ana/memory")) == "ext4"
    assert page_cache.filesystem_type(Path("/home/ana/net/memory")) == "nfs4"
    assert page_cache.filesystem_type(Path("/home/ana/net/local copy/x")) == "tmpfs"  # "\040" is a space
    assert page_cache.filesystem_type(Path("/home/ana/netx")) == "ext4"  # a prefix of a name is not a parent
    assert page_cache.filesystem_type(Path("/mnt/fuse/memory")) == "fuse.sshfs"
    assert page_cache.filesystem_type(Path("/mnt/other")) == "xfs"


def test_only_a_local_filesystem_of_a_named_boot_lets_a_file_go_unsynced(tmp_path, monkeypatch):
    _mounts(tmp_path, monkeypatch, MOUNTS)
    monkeypatch.setattr(page_cache, "boot_id", lambda: "this boot")
    assert page_cache.unsynced_boot(Path("/home/ana/memory")) == "this boot"
    assert page_cache.unsynced_boot(Path("/home/ana/net/memory")) is None  # NFS
    assert page_cache.unsynced_boot(Path("/mnt/fuse/memory")) is None  # a user-space filesystem
    monkeypatch.setattr(page_cache, "boot_id", lambda: None)
    assert page_cache.unsynced_boot(Path("/home/ana/memory")) is None
    monkeypatch.setattr(page_cache, "_MOUNTS", str(tmp_path / "missing"))
    assert page_cache.filesystem_type(Path("/home")) is None


def test_this_machine_names_its_boot_and_the_filesystem_of_the_tests(tmp_path):
    assert page_cache.boot_id()  # Linux, as CI is
    assert page_cache.filesystem_type(tmp_path)


_NAMES = st.text(alphabet="ab c", min_size=1, max_size=3).filter(lambda n: n.strip() == n and n)
_PATHS = st.lists(_NAMES, max_size=4).map(lambda parts: "/" + "/".join(parts))


@settings(max_examples=examples(200), deadline=None)
@given(mounts=st.lists(st.tuples(_PATHS, st.sampled_from(["ext4", "nfs", "tmpfs"])), max_size=6), folder=_PATHS)
def test_law_the_deepest_mount_holding_a_folder_names_its_filesystem(tmp_path_factory, mounts, folder):
    tmp = tmp_path_factory.mktemp("mounts")
    lines = [
        f"{n} 1 0:{n} / {path.replace(' ', chr(92) + '040')} rw - {kind} src rw"
        for n, (path, kind) in enumerate(mounts)
    ]
    table = tmp / "mountinfo"
    table.write_text("\n".join(lines) + "\n", encoding="utf-8")
    holding = [
        (len(path), n, kind)
        for n, (path, kind) in enumerate(mounts)
        if folder == path or posixpath.commonpath([folder, path]) == path
    ]
    expected = max(holding)[2] if holding else None  # the deepest; of equals, the last mounted
    original = page_cache._MOUNTS  # white-box: the table the kernel lists, swapped for one written here
    page_cache._MOUNTS = str(table)
    try:
        assert page_cache.filesystem_type(Path(folder)) == expected
    finally:
        page_cache._MOUNTS = original
