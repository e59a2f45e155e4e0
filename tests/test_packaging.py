"""The wheel ships every part of the engine: a subpackage missing from pyproject's explicit list
would import from a source checkout and vanish from an installed wheel."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_subpackage_is_listed_for_the_wheel():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    on_disk = {
        ".".join(init.parent.relative_to(ROOT).parts)
        for init in (ROOT / "syncd").rglob("__init__.py")
        if "__pycache__" not in init.parts
    }
    assert on_disk - listed == set()
    for name, folder in config["package-dir"].items():
        assert name in listed and (ROOT / folder / "__init__.py").is_file(), name
