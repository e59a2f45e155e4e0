"""Core memory blocks: small markdown files an agent keeps in its prompt, resolved by scope.

A label (persona, user, facts, context, or any other lowercase word) may exist at three scopes;
the most specific wins, per label: ``users/<u>/chats/<c>/core/`` > ``users/<u>/core/`` >
``memory/core/``, then a built-in default. A block's text is its body; frontmatter, if a person
added some, is kept on every rewrite, and a ``limit`` key in it overrides the default size limit.
"""

from __future__ import annotations

import logging
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
    "block_limit",
    "read_block",
    "resolve_blocks",
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


def _scopes(home: Home, label: str, user_id: str | None, chat_id: str | None) -> list[tuple[str, Path]]:
    scopes = []
    if user_id is not None and chat_id is not None:
        scopes.append(("chat", home.block_path(label, user_id, chat_id)))
    if user_id is not None:
        scopes.append(("user", home.block_path(label, user_id)))
    scopes.append(("global", home.block_path(label)))
    return scopes


def read_block(home: Home, settings: Settings, label: str, user_id: str | None, chat_id: str | None) -> CoreBlock:
    """The block ``label`` as this user in this chat sees it."""
    validate_label(label)
    for scope, path in _scopes(home, label, user_id, chat_id):
        page = _read_page(path, home)
        if page is not None and page.body.strip():
            rel = path.relative_to(home.root).as_posix()
            return CoreBlock(label, page.body.strip(), scope, rel, block_limit(page, settings))
    return CoreBlock(label, DEFAULT_BLOCKS.get(label, ""), "default", None, settings.block_char_limit)


def _labels_on_disk(home: Home, user_id: str | None, chat_id: str | None) -> set[str]:
    labels = set()
    for _, path in _scopes(home, "persona", user_id, chat_id):
        folder = path.parent
        if folder.is_dir() and not folder.is_symlink():
            for item in folder.glob("*.md"):
                try:
                    labels.add(validate_label(item.name[:-3]))
                except ValueError:
                    continue
    return labels


def resolve_blocks(home: Home, settings: Settings, user_id: str | None, chat_id: str | None) -> dict[str, CoreBlock]:
    """The four core labels (always, defaults filling gaps) plus any other block on disk."""
    if user_id is not None:
        validate_id("user", user_id)
    if chat_id is not None:
        validate_id("chat", chat_id)
    extra = sorted(_labels_on_disk(home, user_id, chat_id) - set(CORE_LABELS))
    return {label: read_block(home, settings, label, user_id, chat_id) for label in (*CORE_LABELS, *extra)}


def render_block(current: str | None, label: str, content: str, settings: Settings) -> str:
    """The file text for a block holding ``content``, keeping the current file's frontmatter.
    Raises BlockLimitError when the content is over the block's limit."""
    page = parse_page(current) if current is not None else None
    body = content.strip()
    limit = block_limit(page, settings)
    if len(body) > limit:
        raise BlockLimitError(label, len(body), limit)
    prefix = page.frontmatter_raw if page is not None else ""
    return f"{prefix}{body}\n" if body else prefix


def format_blocks(blocks: dict[str, CoreBlock]) -> str:
    return "\n".join(f"<{b.label}>\n{b.content}\n</{b.label}>" for b in blocks.values() if b.content)
