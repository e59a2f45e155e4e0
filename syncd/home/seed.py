"""The pages a new home's wiki vault starts with, shipped as ``syncd.vault_template``.

``syncd init`` writes the missing ones into a home it creates or adopts; ``WikiManager.bootstrap``
seeds a vault that holds none of them.
"""

from __future__ import annotations

from importlib import resources

__all__ = ["vault_seed"]


def vault_seed() -> dict[str, bytes]:
    """The seed pages by file name, read from the installed package (``syncd.vault_template``)."""
    seed = resources.files("syncd.vault_template")
    return {item.name: item.read_bytes() for item in seed.iterdir() if item.name.endswith(".md")}
