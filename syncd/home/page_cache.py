"""When a file written without an fsync may be believed: within the boot that wrote it, on a
filesystem whose pages this machine's kernel keeps.

Bytes a process writes go to the kernel's page cache, which every later process reads, and stay
there until they are written back. A crash of the writing process loses none of them; a power
cut or a crash of the system can, and both start a new boot, which Linux names by a random id
(``/proc/sys/kernel/random/boot_id``). So derived data that is cheap to remake (the rows image,
syncd/index/rows_image.py) may skip the fsync when it records the boot it was written in and is
disowned in any other. That holds only where this kernel's page cache is the copy every reader
sees: a local filesystem. On a network or user-space filesystem (NFS, SMB, sshfs, 9p, virtiofs)
the unsynced bytes live in a server or a daemon that can fail while this boot goes on, so there
the fsync stays. Not covered: a disk that fails to write pages back, which loses every file
written without an fsync (the index's tables among them) and is what the markdown's own fsyncs
are for.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

__all__ = ["boot_id", "filesystem_type", "unsynced_boot"]

_BOOT_ID = "/proc/sys/kernel/random/boot_id"
_MOUNTS = "/proc/self/mountinfo"
# Filesystems whose pages this kernel keeps: written back by it, read by every process from it.
_LOCAL_TYPES = frozenset(
    {"ext2", "ext3", "ext4", "xfs", "btrfs", "f2fs", "jfs", "reiserfs", "bcachefs", "zfs", "tmpfs", "ramfs", "overlay"}
)


@functools.cache
def boot_id() -> str | None:
    """This boot of the machine, or None where the system names none."""
    try:
        return Path(_BOOT_ID).read_text(encoding="ascii").strip() or None
    except (OSError, UnicodeDecodeError):
        return None


def unsynced_boot(folder: Path) -> str | None:
    """The boot a file written under ``folder`` without an fsync may be believed in (see the
    module's docstring), or None when such a file must be fsynced: no boot id, or a filesystem
    that is not known to be local."""
    boot = boot_id()
    if boot is None:
        return None
    return boot if filesystem_type(folder) in _LOCAL_TYPES else None


def filesystem_type(folder: Path) -> str | None:
    """The type of the filesystem ``folder`` is on (the mount that holds it, as the kernel lists
    its mounts for this process), or None when it cannot be told."""
    try:
        where = os.path.realpath(folder)
        lines = Path(_MOUNTS).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    best: tuple[int, str] | None = None
    for line in lines:
        fields, _, rest = line.partition(" - ")
        parts = fields.split()
        if len(parts) < 5 or not rest:
            continue
        # Spaces and the like in a mount point are written as octal escapes ("\040").
        mount = parts[4].encode("latin-1", "backslashreplace").decode("unicode_escape")
        inside = where == mount or where.startswith(mount.rstrip("/") + "/")
        if inside and (best is None or len(mount) >= best[0]):
            best = (len(mount), rest.split()[0])
    return best[1] if best is not None else None
