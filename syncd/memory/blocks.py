"""Core memory blocks: small markdown files an agent keeps in its prompt, resolved by scope.

A label (persona, user, facts, context, or any other lowercase word) may exist at three scopes;
the most specific wins, per label: ``users/<u>/chats/<c>/core/`` > ``users/<u>/core/`` >
``memory/core/``, then a built-in default. A block's text is its body; frontmatter, if a person
added some, is kept on every rewrite, and a ``limit`` key in it overrides the default size limit.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ..config import Settings
from ..errors import BlockLimitError
from ..formats import Page, decode_markdown_lossy, parse_page
from ..home import Home, read_regular, validate_id, validate_label

__all__ = [
    "CORE_LABELS",
    "DEFAULT_BLOCKS",
    "CoreBlock",
    "block_folders",
    "block_limit",
    "read_block",
    "resolve_blocks",
    "resolve_kept_blocks",
    "render_block",
    "format_blocks",
]

log = logging.getLogger(__name__)

CORE_LABELS = ("persona", "user", "facts", "context")

DEFAULT_BLOCKS = {
    "persona": "I am a helpful assistant with a long-term memory kept as plain markdown files.",
    "user": "Nothing is known about this user yet.",
    "facts": "No key facts have been summarised yet.",
    "context": "No notes about this conversation yet.",
}


@dataclass(frozen=True)
class CoreBlock:
    """A resolved block: its text, which scope it came from and the file it lives in."""

    label: str
    content: str
    scope: str  # "chat", "user", "global" or "default"
    path: str | None
    limit: int


def block_limit(page: Page | None, settings: Settings) -> int:
    if page is not None:
        value = page.frontmatter.get("limit")
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return settings.block_char_limit


def _read_page(path: Path, home: Home) -> Page | None:
    """The block file at ``path``, or None when there is none or it cannot be used. One block
    that is a symbolic link, unreadable or not UTF-8 must not take the prompt of every user down
    with it: it is skipped (or read with U+FFFD) and reported, and the next scope answers."""
    rel = path.relative_to(home.root).as_posix()
    try:
        data = read_regular(home.root, rel)
    except OSError as exc:
        log.warning("block %s is not used: %s", rel, exc.strerror or exc)
        return None
    if data is None:
        return None
    text, warning = decode_markdown_lossy(data, rel)
    if warning:
        log.warning("block %s: %s", rel, warning)
    return parse_page(text)


class _OnDisk:
    """Block files read from the home's tree."""

    def __init__(self, home: Home):
        self.home = home

    def page(self, path: Path) -> Page | None:
        return _read_page(path, self.home)

    def names(self, folder: Path) -> list[str]:
        if not folder.is_dir() or folder.is_symlink():
            return []
        return [item.name for item in folder.glob("*.md")]


class _Kept:
    """Block files as an index kept their texts (``{home-relative path: text}``), for a reader
    holding no copy of the home: the same resolution over the same texts."""

    def __init__(self, texts: Mapping[str, str]):
        self.home = Home("/")  # only for its path rules: every path is made relative to it again
        self.texts = texts

    def _rel(self, path: Path) -> str:
        return path.relative_to(self.home.root).as_posix()

    def page(self, path: Path) -> Page | None:
        text = self.texts.get(self._rel(path))
        return None if text is None else parse_page(text)

    def names(self, folder: Path) -> list[str]:
        prefix = self._rel(folder) + "/"
        return [rel[len(prefix) :] for rel in self.texts if rel.startswith(prefix) and "/" not in rel[len(prefix) :]]


def _scopes(home: Home, label: str, user_id: str | None, chat_id: str | None) -> list[tuple[str, Path]]:
    scopes = []
    if user_id is not None and chat_id is not None:
        scopes.append(("chat", home.block_path(label, user_id, chat_id)))
    if user_id is not None:
        scopes.append(("user", home.block_path(label, user_id)))
    scopes.append(("global", home.block_path(label)))
    return scopes


def _block(
    files: _OnDisk | _Kept, settings: Settings, label: str, user_id: str | None, chat_id: str | None
) -> CoreBlock:
    validate_label(label)
    for scope, path in _scopes(files.home, label, user_id, chat_id):
        page = files.page(path)
        if page is not None and page.body.strip():
            rel = path.relative_to(files.home.root).as_posix()
            return CoreBlock(label, page.body.strip(), scope, rel, block_limit(page, settings))
    return CoreBlock(label, DEFAULT_BLOCKS.get(label, ""), "default", None, settings.block_char_limit)


def read_block(home: Home, settings: Settings, label: str, user_id: str | None, chat_id: str | None) -> CoreBlock:
    """The block ``label`` as this user in this chat sees it."""
    return _block(_OnDisk(home), settings, label, user_id, chat_id)


def _resolve(
    files: _OnDisk | _Kept, settings: Settings, user_id: str | None, chat_id: str | None
) -> dict[str, CoreBlock]:
    if user_id is not None:
        validate_id("user", user_id)
    if chat_id is not None:
        validate_id("chat", chat_id)
    labels = set()
    for _, path in _scopes(files.home, "persona", user_id, chat_id):
        for name in files.names(path.parent):
            if name.endswith(".md"):
                try:
                    labels.add(validate_label(name[:-3]))
                except ValueError:
                    continue
    extra = sorted(labels - set(CORE_LABELS))
    return {label: _block(files, settings, label, user_id, chat_id) for label in (*CORE_LABELS, *extra)}


def resolve_blocks(home: Home, settings: Settings, user_id: str | None, chat_id: str | None) -> dict[str, CoreBlock]:
    """The four core labels (always, defaults filling gaps) plus any other block on disk."""
    return _resolve(_OnDisk(home), settings, user_id, chat_id)


def block_folders(user_id: str | None, chat_id: str | None) -> list[str]:
    """The home-relative folders whose block files make up ``resolve_blocks``' answer."""
    home = Home("/")
    return [path.parent.relative_to(home.root).as_posix() for _, path in _scopes(home, "persona", user_id, chat_id)]


def resolve_kept_blocks(
    texts: Mapping[str, str], settings: Settings, user_id: str | None, chat_id: str | None
) -> dict[str, CoreBlock]:
    """``resolve_blocks`` over the block files' texts an index kept (``{path: text}``, those of
    :func:`block_folders`), for a reader with no copy of the home: the same blocks."""
    return _resolve(_Kept(texts), settings, user_id, chat_id)


def render_block(current: str | None, label: str, content: str, settings: Settings) -> str:
    """The file text for a block holding ``content``, keeping the current file's frontmatter.
    Raises BlockLimitError when the content is over the block's limit."""
    page = parse_page(current) if current is not None else None
    body = content.strip()
    limit = block_limit(page, settings)
    if len(body) > limit:
        raise BlockLimitError(label, len(body), limit)
    prefix = page.frontmatter_raw if page is not None else ""
    if body and not prefix and parse_page(f"{body}\n").frontmatter_raw:
        # Text that opens like frontmatter (a `---` line, YAML, `---`) would be read back as the
        # block's settings, not its text: its first lines lost, its limit whatever they said.
        # An empty frontmatter before it keeps all of it text.
        prefix = "---\n---\n"
    return f"{prefix}{body}\n" if body else prefix


def format_blocks(blocks: dict[str, CoreBlock]) -> str:
    return "\n".join(f"<{b.label}>\n{b.content}\n</{b.label}>" for b in blocks.values() if b.content)
