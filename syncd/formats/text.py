"""Bytes to text and the few line-level markdown rules every format shares.

Every format in syncd promises that rendering an unchanged parse gives back the exact bytes that
were read, so this layer never normalises anything:

* decoding is strict UTF-8 and a UTF-8 byte order mark is *kept* as ``'\\ufeff'`` at the start of
  the string (``utf-8-sig`` would drop it and the rewrite would lose three bytes);
* lines are split on ``'\\n'`` only. ``str.splitlines`` also splits on ``\\x0b``, ``\\x1c``,
  ``\\x85``, ``\\u2028`` and a lone ``\\r``; a file containing any of those would come back
  different. A ``'\\r'`` directly before ``'\\n'`` is part of the line ending; a lone ``'\\r'`` is
  ordinary line content;
* code fences and YAML frontmatter are recognised here, once, so that daily logs and pages agree
  on what is "inside code" (where nothing is a fact, a heading, a link or a tag).

Fence rule (deliberately wider than CommonMark's three-space limit): a line whose first non-blank
characters are three or more backticks or tildes opens a fence, whatever its indentation, because
fences nested in list items are common in notes and text inside them must never turn into facts
or tags. A backtick fence's info string may not contain a backtick (otherwise it is inline code).
The fence closes on a line holding only the same character, at least as many times. An unclosed
fence runs to the end of the file.

Frontmatter rule (what Obsidian does): the very first line is ``---`` (a byte order mark before it
is allowed) and a later line is ``---``; trailing spaces or tabs on either are tolerated. Without
the closing line there is no frontmatter.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import AnyStr

from ..errors import ParseError

__all__ = [
    "BOM",
    "decode_markdown",
    "decode_markdown_lossy",
    "encode_markdown",
    "split_lines_keepends",
    "split_lines",
    "fence_opener",
    "closes_fence",
    "frontmatter_line_count",
    "opens_frontmatter",
    "atx_heading",
    "shared_ends",
]

BOM = "\ufeff"

_FENCE_OPEN_RE = re.compile(r"[ \t]*(`{3,}|~{3,})(.*)")
_FENCE_CLOSE_RE = re.compile(r"[ \t]*(`{3,}|~{3,})[ \t]*")
_ATX_OPEN_RE = re.compile(r" {0,3}(#{1,6})(?=[ \t]|\Z)")


def decode_markdown(data: bytes, path: Path | str | None = None) -> str:
    """Decode a markdown file's bytes strictly as UTF-8, keeping a byte order mark as ``'\\ufeff'``.

    Raises ParseError carrying ``path`` and the 1-based line of the first invalid byte, because a
    person has to find and fix that byte; guessing another encoding would make the rewrite lossy.
    """
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        bad = data[exc.start : exc.start + 1].hex()
        raise ParseError(
            f"not valid UTF-8 (byte 0x{bad} at offset {exc.start}: {exc.reason}); fix that byte first: "
            "syncd never rewrites a file it cannot read exactly",
            path,
            line,
        ) from None


# Lines named in a replacement warning: enough to find the damage, bounded for a badly broken file.
_BAD_LINES_SHOWN = 5


def decode_markdown_lossy(data: bytes, path: Path | str | None = None) -> tuple[str, str | None]:
    """Decode for reading only: invalid UTF-8 becomes U+FFFD instead of failing, so one bad byte
    costs one line's characters, not the whole file. Returns the text and, when bytes were
    replaced, a warning naming the lines that hold them.

    The text is lossy, so nothing decoded here may ever be written back: rewrites go through
    :func:`decode_markdown`, which refuses.
    """
    try:
        return decode_markdown(data, path), None
    except ParseError:
        pass
    # Line by line, which is exact: a newline byte is never part of a multi-byte sequence.
    lines: list[int] = []
    for number, raw in enumerate(data.split(b"\n"), 1):
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError:
            lines.append(number)
            if len(lines) > _BAD_LINES_SHOWN:
                break
    shown = ", ".join(map(str, lines[:_BAD_LINES_SHOWN])) + (" and more" if len(lines) > _BAD_LINES_SHOWN else "")
    plural = "s" if len(lines) > 1 else ""
    warning = (
        f"not valid UTF-8 on line{plural} {shown}; indexed with U+FFFD in place of the bad bytes and "
        "left as it is on disk (fix those bytes: syncd will not rewrite this file until then)"
    )
    return data.decode("utf-8", errors="replace"), warning


def encode_markdown(text: str) -> bytes:
    """The exact inverse of decode_markdown (a leading ``'\\ufeff'`` becomes the BOM bytes)."""
    return text.encode("utf-8")


def split_lines_keepends(text: str) -> list[str]:
    """Split on ``'\\n'`` only, each piece keeping its ending; ``''.join(result) == text``."""
    pieces = text.split("\n")
    last = pieces.pop()
    out = [p + "\n" for p in pieces]
    if last:
        out.append(last)
    return out


def split_lines(text: str) -> list[tuple[str, str]]:
    """Split into ``(content, ending)`` pairs, ending being ``'\\n'``, ``'\\r\\n'`` or ``''``.

    Only the final piece can have the empty ending (a file without a final newline). An empty text
    has no lines. ``''.join(c + e for c, e in result) == text``.
    """
    pieces = text.split("\n")
    last = pieces.pop()
    out = [(p[:-1], "\r\n") if p.endswith("\r") else (p, "\n") for p in pieces]
    if last:
        # A lone trailing '\r' with no '\n' after it is content: there is no line ending to keep.
        out.append((last, ""))
    return out


def fence_opener(line: str) -> tuple[str, int] | None:
    """``(fence character, run length)`` if ``line`` (no ending) opens a code fence, else None."""
    m = _FENCE_OPEN_RE.match(line)
    if m is None:
        return None
    run = m.group(1)
    if run[0] == "`" and "`" in m.group(2):
        return None
    return run[0], len(run)


def closes_fence(line: str, char: str, length: int) -> bool:
    """Whether ``line`` closes a fence opened with ``length`` times ``char``."""
    m = _FENCE_CLOSE_RE.fullmatch(line)
    return m is not None and m.group(1)[0] == char and len(m.group(1)) >= length


def _is_frontmatter_delimiter(line: str) -> bool:
    return line.rstrip(" \t") == "---"


def opens_frontmatter(line: str) -> bool:
    """Whether ``line`` (no ending), as a file's first line, opens frontmatter (if a later ``---``
    closes it)."""
    return _is_frontmatter_delimiter(line[1:] if line.startswith(BOM) else line)


def frontmatter_line_count(lines: Sequence[str]) -> int:
    """How many of ``lines`` (contents, no endings) form the frontmatter block; 0 if there is none.

    The count includes both ``---`` lines, so ``lines[count:]`` is the body.
    """
    if not lines or not opens_frontmatter(lines[0]):
        return 0
    for i in range(1, len(lines)):
        if _is_frontmatter_delimiter(lines[i]):
            return i + 1
    return 0


def atx_heading(line: str) -> tuple[int, str] | None:
    """``(level, text)`` if ``line`` is an ATX heading (CommonMark), else None.

    Done by hand rather than with one regex: a lazy group followed by an optional closing
    sequence backtracks quadratically on a heading padded with many spaces.
    """
    m = _ATX_OPEN_RE.match(line)
    if m is None:
        return None
    text = line[m.end() :].strip(" \t")
    bare = text.rstrip("#")
    if bare != text and (not bare or bare[-1] in " \t"):
        text = bare.rstrip(" \t")
    return len(m.group(1)), text


def _common_run(old: AnyStr, new: AnyStr, limit: int, from_end: bool) -> int:
    """Length of the longest common prefix (or suffix) of two texts, at most ``limit``. Compared in
    blocks of 64 Ki, then 4 Ki, 256, 16, 1 characters, each a C memcmp: linear, and a few dozen
    steps for texts that part once."""
    done, step = 0, 1 << 16
    while step:
        while done + step <= limit:
            if from_end:
                same = old[len(old) - done - step : len(old) - done] == new[len(new) - done - step : len(new) - done]
            else:
                same = old[done : done + step] == new[done : done + step]
            if not same:
                break
            done += step
        step >>= 4
    return done


def shared_ends(old: AnyStr, new: AnyStr) -> tuple[int, int]:
    """Lengths of a common head and tail of two texts (both str or both bytes), each made of
    whole lines and not overlapping: what lies between is all an edit changed (a few lines of a
    big log). The tail starts a line in both texts; it may be a last line without a newline."""
    newline = "\n" if isinstance(old, str) else b"\n"
    head = _common_run(old, new, min(len(old), len(new)), from_end=False)
    head = old.rfind(newline, 0, head) + 1
    tail = _common_run(old, new, min(len(old), len(new)) - head, from_end=True)
    # The tail starts after a newline inside the shared run, so it starts a line in both texts.
    start = old.find(newline, len(old) - tail)
    return head, 0 if start == -1 else len(old) - start - 1
