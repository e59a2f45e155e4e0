"""Read-only homes for tests, as a user meets them: a read-only bind mount of a home (a backup, a
snapshot, a container's volume), and a process that may not write what root's files forbid.

Both need root (CI runs the suite as root); elsewhere the test that asks says why and skips. A
mount is undone when the test ends, passed or failed."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

__all__ = ["WITHOUT_ROOT_POWERS", "case_insensitive_folder", "read_only_view", "without_root_powers"]

# A command run as root without the capabilities that let root ignore a file's mode: ``chmod``
# binds it then, as it binds any user (what a home someone else owns looks like, without a second
# user who could run this interpreter).
WITHOUT_ROOT_POWERS = ["setpriv", "--bounding-set=-dac_override,-dac_read_search,-fowner"]


def _need_root() -> None:
    if os.geteuid() != 0:
        pytest.skip("a read-only mount and dropping root's powers need root (CI runs as root)")


@contextlib.contextmanager
def read_only_view(folder: Path, where: Path) -> Iterator[Path]:
    """``folder`` seen read-only at ``where`` (a bind mount remounted ``ro``): every write there
    fails with EROFS, as on a read-only disk, while ``folder`` itself stays writable."""
    _need_root()
    where.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "--bind", str(folder), str(where)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot bind-mount {folder}: {done.stderr.strip() or done.returncode}")
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(where)], check=True, capture_output=True)
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def without_root_powers(args: list[str]) -> list[str]:
    """``python -m syncd ARGS`` run :data:`WITHOUT_ROOT_POWERS`."""
    _need_root()
    return [*WITHOUT_ROOT_POWERS, sys.executable, "-m", "syncd", *args]


@contextlib.contextmanager
def case_insensitive_folder(where: Path) -> Iterator[Path]:
    """A FAT file system (case-insensitive, case-preserving, as a USB stick or macOS's default
    disk) mounted at ``where``: a small image, made with mkfs.vfat and mounted through FUSE
    (fusefat: containers seldom have the kernel's vfat). Debian's ``dosfstools`` and ``fusefat``
    (see the README's test command)."""
    _need_root()
    image = where.with_suffix(".img")
    where.mkdir(parents=True, exist_ok=True)
    with open(image, "wb") as handle:
        handle.truncate(32 * 1024 * 1024)
    made = subprocess.run(["mkfs.vfat", str(image)], capture_output=True, text=True)
    mounted = subprocess.run(["fusefat", "-o", "rw+", str(image), str(where)], capture_output=True, text=True)
    if made.returncode != 0 or mounted.returncode != 0:
        pytest.skip(f"cannot mount a FAT image (dosfstools, fusefat): {made.stderr.strip() or mounted.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["fusermount", "-u", str(where)], check=False, capture_output=True)
