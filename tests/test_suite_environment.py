"""The suite's own environment (tests/conftest.py): no test sees the SYNCD_* settings, the HOME or
the git identity of whoever runs the suite, nor what an earlier test left in them."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from .conftest import SUITE_GIT_EMAIL, SUITE_GIT_NAME


def _global_git(key: str) -> str:
    return subprocess.run(["git", "config", "--global", key], capture_output=True, text=True, check=False).stdout


def test_a_test_starts_without_syncd_settings_and_with_a_home_of_its_own(tmp_path_factory):
    assert [name for name in os.environ if name.startswith("SYNCD_")] == []
    home = Path.home()
    assert home.is_relative_to(tmp_path_factory.getbasetemp())
    assert [p.name for p in home.iterdir()] == [".gitconfig"]
    assert (_global_git("user.name"), _global_git("user.email")) == (f"{SUITE_GIT_NAME}\n", f"{SUITE_GIT_EMAIL}\n")
    # Left behind on purpose, without monkeypatch: the next test must see neither.
    os.environ["SYNCD_DEBOUNCE_MS"] = "soon"
    (home / ".gitconfig").write_text("[user]\n\tname = Left Behind\n")
    (home / ".cache").mkdir()


def test_what_the_test_before_left_is_gone():
    """Runs after the one above (pytest keeps a module's order)."""
    assert "SYNCD_DEBOUNCE_MS" not in os.environ
    assert _global_git("user.name") == f"{SUITE_GIT_NAME}\n"
    assert not (Path.home() / ".cache").exists()
