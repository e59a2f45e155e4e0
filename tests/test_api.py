"""The public API is small and pinned: adding or removing a name is a deliberate change."""

from __future__ import annotations

import subprocess
import sys
import types

import pytest

import syncd
import syncd.engine.audit
import syncd.memory
import syncd.session


def test_every_error_syncd_raises_is_importable_from_syncd():
    """A caller catches syncd's errors by name from ``syncd`` (``except syncd.StorageError``), not
    from a module whose place may change: every public error class of syncd.errors is exported."""
    import inspect

    import syncd.errors

    raised = {
        name
        for name, value in vars(syncd.errors).items()
        if inspect.isclass(value) and issubclass(value, syncd.errors.SyncdError) and not name.startswith("_")
    }
    assert raised <= set(syncd.__all__), sorted(raised - set(syncd.__all__))
    assert all(getattr(syncd, name) is getattr(syncd.errors, name) for name in raised)


def test_public_names_are_pinned():
    assert sorted(syncd.__all__) == sorted(
        [
            "__version__",
            "init",
            "open",
            "Engine",
            "Status",
            "Hit",
            "Intent",
            "InitReport",
            "Settings",
            "WikiManager",
            "AccessError",
            "BlockLimitError",
            "ChangedMeanwhileError",
            "CommitDeferredError",
            "ConfigError",
            "ConflictError",
            "EmbeddingError",
            "ExtractionError",
            "GitBusyError",
            "HistoryError",
            "HomeError",
            "IndexDamaged",
            "IndexError_",
            "IndexUnreachable",
            "InvalidIdError",
            "InvalidInputError",
            "LockedError",
            "NotFoundError",
            "OverwrittenError",
            "ParseError",
            "QueryError",
            "RemoteError",
            "RemoteRefused",
            "RevertError",
            "SessionError",
            "StorageError",
            "SyncdError",
            "UnsafePickleError",
            "TranscriptManager",
            "StateMirror",
            "SessionPolicy",
            "SessionLifecycle",
            "ContextCompressor",
            "TranscriptIndexer",
            "MarkdownIndexer",
            "SessionRunner",
        ]
    )
    for name in syncd.__all__:
        assert getattr(syncd, name) is not None


def test_audit_names_are_pinned():
    assert sorted(syncd.engine.audit.__all__) == sorted(
        [
            "LogEntry",
            "FactHistory",
            "FactChange",
            "CommitEffect",
            "read_log",
            "log",
            "fact_history",
            "blame",
            "commit_effect",
            "revert",
        ]
    )


@pytest.mark.parametrize("module", [syncd, syncd.memory, syncd.engine.audit, syncd.session], ids=lambda m: m.__name__)
def test_all_lists_exactly_the_public_names(module):
    """Nothing public slips in (an import left over) or out (a name promised but gone)."""
    defined = {
        name
        for name, value in vars(module).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType) and name != "annotations"
    }
    lazy = set(getattr(module, "_LAZY", {}))
    assert defined | lazy | ({"__version__"} & set(module.__all__)) == set(module.__all__)
    for name in module.__all__:
        assert getattr(module, name) is not None


def test_every_error_is_a_syncd_error():
    for name in syncd.__all__:
        value = getattr(syncd, name)
        if isinstance(value, type) and name.endswith("Error"):
            assert issubclass(value, syncd.SyncdError)


def test_cli_help_runs_without_loading_the_index():
    out = subprocess.run([sys.executable, "-m", "syncd", "--help"], capture_output=True, text=True)
    assert out.returncode == 0 and "search" in out.stdout


def test_the_errors_a_write_raises_when_nothing_was_kept_are_importable_from_syncd():
    """`except syncd.GitBusyError` (retry) and `except syncd.OverwrittenError` (read again) are
    what README tells a caller of write_file to do: both failed with AttributeError."""
    from syncd import errors

    assert syncd.GitBusyError is errors.GitBusyError and syncd.OverwrittenError is errors.OverwrittenError
    assert issubclass(errors.CommitDeferredError, syncd.GitBusyError)  # a subclass a caller gets by its base
