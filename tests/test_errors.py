"""The error tree: drawn in errors.py's docstring, every class there and exported, none elsewhere.

The drawing is read back and compared with the classes, so it cannot drift from them: a class
added, moved under another parent or removed without its line changing fails here."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re

import syncd
import syncd.errors as errors

_LINE = re.compile(r"^(?P<indent>[│ ]*)(?:[├└]── )?(?P<name>[A-Za-z_]+)\b")


def _drawn_tree() -> dict[str, str | None]:
    """Each class named in the docstring's drawing -> the class drawn as its parent."""
    drawing = errors.__doc__.split("::", 1)[1]
    parents: dict[str, str | None] = {}
    stack: list[tuple[int, str]] = []  # (depth, name) of the path down to the current line
    for line in drawing.strip("\n").splitlines():
        line = line[4:]  # the block's own indentation
        match = _LINE.match(line)
        if match is None:
            continue
        branch = line.lstrip("│ ").startswith(("├", "└"))
        depth = len(match["indent"]) // 4 + 1 if branch else 0
        while stack and stack[-1][0] >= depth:
            stack.pop()
        parents[match["name"]] = stack[-1][1] if stack else None
        stack.append((depth, match["name"]))
    return parents


def _classes() -> dict[str, type]:
    return {
        name: value
        for name, value in vars(errors).items()
        if inspect.isclass(value) and issubclass(value, errors.SyncdError) and value.__module__ == errors.__name__
    }


def _syncd_parent(cls: type) -> str | None:
    """The nearest base that is a SyncdError (mixins such as ValueError are not the tree's)."""
    found = [base.__name__ for base in cls.__bases__ if issubclass(base, errors.SyncdError)]
    assert len(found) <= 1, f"{cls.__name__} has two places in the tree: {found}"
    return found[0] if found else None


def test_the_drawing_is_the_tree():
    drawn = _drawn_tree()
    actual = {name: _syncd_parent(cls) for name, cls in _classes().items()}
    assert drawn == actual


def test_the_drawing_reads_a_nested_branch():
    # The reader above is itself code: it must see a grandchild under its parent, not the root.
    drawn = _drawn_tree()
    assert drawn["SyncdError"] is None
    assert drawn["GitBusyError"] == "SyncdError"
    assert drawn["CommitDeferredError"] == drawn["ChangedMeanwhileError"] == "GitBusyError"


def test_every_error_class_is_exported():
    assert set(errors.__all__) == set(_classes())


def test_no_error_class_lives_outside_errors_py():
    """Import every module of syncd and look at every SyncdError subclass that exists."""
    for module in pkgutil.walk_packages(syncd.__path__, "syncd."):
        if module.name == "syncd.__main__":
            continue  # running it is the command line
        importlib.import_module(module.name)
    stack, seen = [errors.SyncdError], []
    while stack:
        cls = stack.pop()
        seen.append(cls)
        stack.extend(cls.__subclasses__())
    outside = [f"{c.__module__}.{c.__qualname__}" for c in seen if c.__module__ != errors.__name__]
    assert outside == []


def test_mixins_keep_the_builtin_a_caller_may_catch():
    # Code that catches ValueError or PermissionError keeps catching these.
    for cls in (errors.InvalidIdError, errors.InvalidInputError, errors.QueryError, errors.SessionError):
        assert issubclass(cls, ValueError)
    assert issubclass(errors.AccessError, PermissionError)
