"""The tests' own rules (issue 26), checked on their source: a test waits on a condition through
helpers.wait_for / poll, not a sleep of its own; a test reaches the product through public names.

A ``time.sleep`` in a test module must say why on its line or the line above (the sleep is the
point: a quiet period, a slow client, a client obeying Retry-After). A private name (``x._name``
on anything but self/cls, or ``from m import _name``) must be marked "white-box" earlier in its
top-level definition (or just above, at module level), saying why no public name will do.
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent
# Helper modules hold the polling loops and the fakes the tests share.
HELPERS = {p.name for p in TESTS.glob("*.py") if not p.name.startswith("test_")}


def _private(node: ast.AST) -> str | None:
    if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
        if not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
            return f".{node.attr}"
    if isinstance(node, ast.ImportFrom):
        names = [a.name for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]
        return f"import {', '.join(names)}" if names else None
    return None


def _sleep(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "sleep"
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "time"
    )


def _findings(path: Path) -> list[str]:
    lines = path.read_text().splitlines()
    tree = ast.parse("\n".join(lines))
    tops = [(n.lineno, n.end_lineno or n.lineno) for n in tree.body if not isinstance(n, ast.Import | ast.ImportFrom)]

    def marked(line: int) -> bool:
        start = next((a for a, b in tops if a <= line <= b), max(1, line - 2))
        return any("white-box" in text.lower() for text in lines[start - 1 : line])

    found = []
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        name = _private(node)
        if name and not marked(line):
            found.append(f"{path.name}:{line}: {name} with no white-box note saying why")
        if _sleep(node) and path.name not in HELPERS:
            said = "#" in lines[line - 1] or lines[line - 2].lstrip().startswith("#")
            if not said:
                found.append(f"{path.name}:{line}: time.sleep with no comment saying why it is not a wait_for")
    return found


def test_every_sleep_says_why_and_every_private_name_is_marked_white_box():
    found = [f for path in sorted(TESTS.glob("test_*.py")) for f in _findings(path)]
    assert not found, "\n".join(found)


def test_the_checks_see_what_they_are_for(tmp_path):
    bad = tmp_path / "test_bad.py"
    bad.write_text("import time\nfrom m import _x\n\ndef test_a(engine):\n    time.sleep(1)\n    engine._rows\n")
    assert [f.split(": ", 1)[1].split(" ")[0] for f in _findings(bad)] == ["import", "time.sleep", "._rows"]
    good = tmp_path / "test_good.py"
    good.write_text(
        "import time\n\ndef test_a(engine, self=None):\n    # white-box: a fault injected where it happens\n"
        "    engine._rows\n    time.sleep(1)  # a quiet period is the point\n    self._x\n"
    )
    assert _findings(good) == []
