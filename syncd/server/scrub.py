"""No message a server sends names its folders: the home becomes home-relative paths, the
server's state and the account's home folder are named as such."""

from __future__ import annotations

from pathlib import Path

__all__ = ["scrubber"]


def scrubber(root: Path, *more: Path):
    """A function that rewrites a message so it names no folder of the server's: a path inside the
    home ``root`` becomes home-relative, ``more`` folders (where the server keeps its state) and
    the account's home folder are named as such."""
    places: list[tuple[str, str]] = []
    try:
        account = [(Path.home(), "~")]
    except RuntimeError:  # no home folder known: nothing of it to hide
        account = []
    for folder, shown in ((root, ""), *((m, "<server state>") for m in more), *account):
        for form in dict.fromkeys((str(folder), str(Path(folder).resolve()))):
            if len(form) > 1:
                places.append((form + "/", f"{shown}/" if shown else ""))
                places.append((form, shown or "."))
    places.sort(key=lambda p: len(p[0]), reverse=True)  # the home before the account's folder holding it

    def scrub(message: str) -> str:
        for form, shown in places:
            message = message.replace(form, shown)
        return message

    return scrub
