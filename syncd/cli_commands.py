"""Engine-backed CLI commands (sync, reindex, search, status, watch, history), registered by cli."""

from __future__ import annotations

__all__ = ["register"]


def register(command) -> None:
    """Add this module's commands through ``command(name, func, help)`` from cli.build_parser."""
