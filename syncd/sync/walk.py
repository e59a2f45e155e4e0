"""A directory walk that never recurses, so no depth of folders can raise RecursionError.

Python 3.11's ``os.walk`` calls itself once per level and fails near 1,000 nested folders; 3.12
made it iterative. :func:`walk` is that iterative walk for every version we support: top-down only,
same tuples, same in-place pruning of ``dirnames``, same ``onerror``, and symlinked folders are
listed but never entered unless ``followlinks``. ``str`` and ``bytes`` tops both work (watchdog
walks with bytes).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import AnyStr

__all__ = ["walk"]


def walk(
    top: AnyStr | os.PathLike[AnyStr],
    topdown: bool = True,
    onerror: Callable[[OSError], object] | None = None,
    followlinks: bool = False,
) -> Iterator[tuple[AnyStr, list[AnyStr], list[AnyStr]]]:
    """``os.walk(top, topdown=True, onerror, followlinks)`` with an explicit stack."""
    if not topdown:
        raise ValueError("walk() is top-down only")
    stack = [os.fspath(top)]
    while stack:
        folder = stack.pop()
        dirs: list = []
        files: list = []
        links: set = set()
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    try:
                        is_dir = entry.is_dir()
                    except OSError:
                        is_dir = False
                    if not is_dir:
                        files.append(entry.name)
                        continue
                    dirs.append(entry.name)
                    if not followlinks:
                        try:
                            if entry.is_symlink():
                                links.add(entry.name)
                        except OSError:
                            links.add(entry.name)
        except OSError as exc:
            if onerror is not None:
                onerror(exc)
            continue
        yield folder, dirs, files
        # Reversed, so the stack pops folders in listing order, as the recursive walk visits them.
        for name in reversed(dirs):
            if name not in links:
                stack.append(os.path.join(folder, name))
