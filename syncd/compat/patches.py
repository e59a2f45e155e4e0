"""Patches of watchdog's inotify observer, of fastembed's onnxruntime session and of what
importing lancedb does (see the package's docstring for the rule they follow)."""

from __future__ import annotations

import contextlib
import inspect
import logging
import os
import sys
import threading
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

__all__ = [
    "fastembed_layout_problems",
    "fastembed_lazy_problems",
    "fastembed_quiet_session",
    "fastembed_truncation",
    "import_lancedb",
    "lancedb_defer_rest_client",
    "lancedb_layout_problems",
    "overrides_layout_problems",
    "quiet_session_options",
    "watchdog_decline_watches",
    "watchdog_forget_vanished_watches",
    "watchdog_layout_problems",
    "watchdog_walk_iteratively",
]

log = logging.getLogger(__name__)

Walk = Callable[..., Iterator[tuple[str, list[str], list[str]]]]


# -- watchdog --------------------------------------------------------------------------------------


def _watch_group() -> Any:
    """watchdog's InotifyWatchGroup, or None where there is none (it is typed Any: the patches
    reach for its private methods)."""
    try:
        from watchdog.observers.inotify import InotifyWatchGroup
    except ImportError:  # not Linux, or a watchdog without this class: nothing of it to patch
        return None
    return InotifyWatchGroup


def watchdog_layout_problems() -> list[str]:
    """What the watchdog patches rely on and this watchdog lacks (empty: all there). Off Linux
    there is no inotify observer and nothing to patch, so nothing is missing."""
    try:
        from watchdog.observers import inotify
    except ImportError:
        return []
    problems = []
    if not isinstance(getattr(inotify, "os", None), types.ModuleType):
        problems.append("watchdog.observers.inotify no longer walks with its module-level name `os`")
    group = _watch_group()
    if group is None:
        return [*problems, "watchdog.observers.inotify.InotifyWatchGroup is gone"]
    expected = {"_remove_watch_internally": ["self", "wd"], "_add_callback": ["self", "path"]}
    for name, parameters in expected.items():
        method = getattr(group, name, None)
        if method is None:
            problems.append(f"InotifyWatchGroup.{name} is gone")
        elif list(inspect.signature(method).parameters) != parameters:
            problems.append(f"InotifyWatchGroup.{name} takes {list(inspect.signature(method).parameters)}")
    fields = getattr(group, "__dataclass_fields__", {})
    for name in ("path", "is_recursive", "_active_callbacks_by_watch", "_active_callbacks_by_path"):
        if name not in fields:
            problems.append(f"InotifyWatchGroup has no field {name}")
    return problems


def _patchable(what: str) -> bool:
    problems = watchdog_layout_problems()
    if problems:
        log.warning("watchdog changed (%s): %s left as watchdog does it", "; ".join(problems), what)
    return not problems


class _OsWithWalk(types.ModuleType):
    """The ``os`` module as watchdog's inotify observer sees it, with another ``walk``."""

    def __init__(self, walk: Walk):
        super().__init__("os")
        self.walk = walk

    def __getattr__(self, name: str) -> object:
        return getattr(os, name)


def watchdog_walk_iteratively(walk: Walk) -> None:
    """watchdog adds its recursive inotify watches with ``os.walk``, which on Python 3.11 calls
    itself once per folder level: a tree ~1,000 folders deep raises RecursionError when the watch
    starts (and, later, in watchdog's own thread when such a tree is created or moved in, which
    silently ends all watching). Python 3.12's ``os.walk`` is iterative; on 3.11 watchdog's module
    is given ``walk`` (an iterative one) instead. Only the name ``os`` inside that one module
    changes, and only what it walks."""
    if sys.version_info >= (3, 12) or _watch_group() is None or not _patchable("its os.walk"):
        return
    from watchdog.observers import inotify

    if not isinstance(inotify.os, _OsWithWalk):
        inotify.os = _OsWithWalk(walk)


def watchdog_forget_vanished_watches() -> None:
    """watchdog's inotify thread raises KeyError, and dies, when a watched folder vanishes while
    its removal is under way (an index rebuilt aside under .syncd/ and renamed away): it pops the
    folder from a dict that no longer holds it. Forgetting a watch that is already forgotten is
    what it means to do, so it is given a version that does just that and the thread lives on."""
    group = _watch_group()
    if group is None or getattr(group._remove_watch_internally, "_syncd", False):
        return
    if not _patchable("a vanished folder's watch"):
        return

    def remove_watch_internally(self, wd) -> None:
        path = self._active_callbacks_by_watch.pop(wd, None)
        if path is None:
            return
        other = self._active_callbacks_by_path.pop(path, None)
        if other is not None and other != wd:
            self._active_callbacks_by_path[path] = other  # the path belongs to a newer watch

    remove_watch_internally._syncd = True  # type: ignore[attr-defined]
    group._remove_watch_internally = remove_watch_internally


def watchdog_decline_watches(unwatched: Callable[[str], bool]) -> None:
    """watchdog's recursive watch puts an inotify watch on every folder below its root, and
    Python then decodes, wraps and queues every event in them before a handler can drop it. It is
    given an ``_add_callback`` that declines the folders ``unwatched`` names (their path relative
    to the root of the watch that asks, with ``/``), so their events never reach Python."""
    group = _watch_group()
    if group is None or getattr(group._add_callback, "_syncd", False):
        return
    if not _patchable("the folders it watches"):
        return
    add_callback = group._add_callback

    def add_callback_unless_unwatched(self, path: bytes) -> None:
        top = self.path.rstrip(b"/") + b"/"
        if self.is_recursive and path.startswith(top):
            if unwatched(os.fsdecode(path[len(top) :]).replace(os.sep, "/")):
                return
        add_callback(self, path)

    add_callback_unless_unwatched._syncd = True  # type: ignore[attr-defined]
    group._add_callback = add_callback_unless_unwatched


# -- fastembed -------------------------------------------------------------------------------------


def fastembed_layout_problems(model: Any) -> list[str]:
    """What the fastembed patches rely on in a loaded ``TextEmbedding`` and it lacks (empty: all
    there): its onnxruntime session at ``model.model.model`` with the path it was loaded from,
    and its tokenizer at ``model.model.tokenizer``."""
    problems = _session_problems(model)
    if getattr(getattr(model, "model", None), "tokenizer", None) is None:
        problems.append("TextEmbedding.model.tokenizer is gone")
    return problems


def _session_problems(model: Any) -> list[str]:
    import onnxruntime as ort

    session = getattr(getattr(model, "model", None), "model", None)
    if not isinstance(session, ort.InferenceSession):
        return ["TextEmbedding.model.model is no longer an onnxruntime InferenceSession"]
    if not isinstance(getattr(session, "_model_path", None), str):
        return ["onnxruntime's InferenceSession no longer keeps _model_path"]
    return []


def fastembed_quiet_session(model: Any, threads: int | None) -> None:
    """Give ``model`` (a loaded ``TextEmbedding``) an onnxruntime session whose idle threads sleep
    instead of spinning.

    By default onnxruntime's worker threads busy-wait after every run. On a small machine that
    steals the CPU from the vector product that follows a query's embedding, so a search waits on
    threads that have nothing to do, and batch embedding loses throughput to them as well.
    fastembed exposes no such option, so the session it built is replaced by one over the same
    model file with the same threads; if fastembed's layout ever changes, its own session is kept
    and only the speed is lost. A ``TextEmbedding`` made with ``lazy_load=True`` has built no
    session yet: it is given this one (and its tokenizer), so a process that embeds builds one
    session, not two (building one is a share of every one-shot ``syncd search``; bench_cli.py
    measures it).
    """
    import onnxruntime as ort

    inner = getattr(model, "model", None)
    if inner is not None and getattr(inner, "model", None) is None:  # lazy: no such attribute yet
        _quiet_lazy_session(inner, quiet_session_options(threads))
        return
    problems = _session_problems(model)
    if problems:
        log.warning("fastembed changed (%s); keeping onnxruntime's default threads", "; ".join(problems))
        return
    assert inner is not None  # _session_problems found it there
    session = inner.model
    path = session._model_path
    options = quiet_session_options(threads)
    providers = session.get_providers()
    # Let the first session go before the second is built, so its memory is reused, not added.
    inner.model = session = None
    try:
        inner.model = ort.InferenceSession(path, sess_options=options, providers=providers)
    except Exception as exc:  # noqa: BLE001 (fastembed loads its own session again on the first embed)
        log.warning("keeping onnxruntime's default threads for %s: %s", path, exc)


def quiet_session_options(threads: int | None) -> Any:
    """onnxruntime session options as fastembed sets them, with idle threads that sleep (also
    those of the bundled model's session, which syncd runs without fastembed: onnx_runner.py)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    if threads is not None:
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = threads
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.add_session_config_entry("session.inter_op.allow_spinning", "0")
    return options


def fastembed_lazy_problems(model: Any) -> list[str]:
    """What giving a lazily loaded ``TextEmbedding`` its session relies on and it lacks (empty:
    all there): the model file's folder and name, and the method that loads its tokenizer."""
    inner = getattr(model, "model", None)
    problems = []
    if not isinstance(getattr(inner, "_model_dir", None), Path):
        problems.append("TextEmbedding.model._model_dir is gone")
    if not isinstance(getattr(getattr(inner, "model_description", None), "model_file", None), str):
        problems.append("TextEmbedding.model.model_description.model_file is gone")
    if not callable(getattr(inner, "_ensure_tokenizer", None)):
        problems.append("TextEmbedding.model._ensure_tokenizer is gone")
    return problems


def _quiet_lazy_session(inner: Any, options: Any) -> None:
    import onnxruntime as ort

    problems = fastembed_lazy_problems(types.SimpleNamespace(model=inner))
    if problems:
        log.warning("fastembed changed (%s); it loads its own session", "; ".join(problems))
        return
    path = inner._model_dir / inner.model_description.model_file
    inner._ensure_tokenizer()
    # A model file no session can be made of fails here as it would in fastembed: it is the
    # model's fault, not a changed fastembed's, and the caller says so.
    inner.model = ort.InferenceSession(str(path), sess_options=options, providers=["CPUExecutionProvider"])


def fastembed_truncation(model: Any) -> dict:
    """How ``model``'s tokenizer truncates (``max_length``, ``direction``), or {} when unknown."""
    tokenizer = getattr(getattr(model, "model", None), "tokenizer", None)
    return getattr(tokenizer, "truncation", None) or {}


# -- lancedb ---------------------------------------------------------------------------------------

# lance_namespace's generated REST client: its package __init__ imports every REST API class.
_LANCE_REST_CLIENT = "lance_namespace_urllib3_client"


def lancedb_layout_problems() -> list[str]:
    """What the lancedb patch relies on and is missing (empty: all there): lance_namespace's REST
    client as a package found on the path, whose __init__ can be run later. Without the package
    there is nothing to defer."""
    import importlib.util

    spec = importlib.util.find_spec(_LANCE_REST_CLIENT)
    if spec is None:
        return []
    if spec.submodule_search_locations is None or spec.loader is None:
        return [f"{_LANCE_REST_CLIENT} is no longer a package with a loader"]
    return []


def lancedb_defer_rest_client() -> None:
    """``import lancedb`` imports lance_namespace, which imports the models of its generated REST
    client, whose package ``__init__`` also imports every REST API class: some 370 methods that
    pydantic's ``validate_call`` builds a validator for at import, about half of the import of
    lancedb (seconds on a loaded machine), for REST namespaces syncd never uses. Before lancedb
    is imported, the package is put in ``sys.modules`` without running its ``__init__``: its
    modules import as before (the models lancedb uses), and the ``__init__`` runs on the first
    name anyone asks of the package itself, so nothing is lost to code that does use it."""
    import importlib.util

    if _LANCE_REST_CLIENT in sys.modules or "lancedb" in sys.modules:
        return
    problems = lancedb_layout_problems()
    if problems:
        log.warning("lance_namespace changed (%s): lancedb imports it as it does", "; ".join(problems))
        return
    spec = importlib.util.find_spec(_LANCE_REST_CLIENT)
    if spec is None or spec.loader is None:
        return
    package = importlib.util.module_from_spec(spec)
    loader = spec.loader

    def run_init_on_first_use(name: str) -> Any:
        del package.__getattr__
        loader.exec_module(package)
        return getattr(package, name)

    # A module's __getattr__ (PEP 562) is an attribute set on it; typeshed declares ModuleType's a method.
    package.__getattr__ = run_init_on_first_use  # type: ignore[method-assign]
    sys.modules[_LANCE_REST_CLIENT] = package


def overrides_layout_problems() -> list[str]:
    """What the overrides patch relies on and is missing (empty: all there): on Python before
    3.12, lancedb takes ``override`` from the ``overrides`` package by name at import."""
    if sys.version_info >= (3, 12):
        return []
    try:
        import overrides
    except ImportError:
        return ["the overrides package is gone"]
    return [] if callable(getattr(overrides, "override", None)) else ["overrides.override is gone"]


def _marked_override(method: Any = None, **_checks: Any) -> Any:
    """``typing.override`` of Python 3.12, which lancedb uses there: mark the method, check nothing."""
    if method is None:
        return _marked_override
    with contextlib.suppress(AttributeError, TypeError):  # a built-in or slotted object: unmarked, as typing's
        method.__override__ = True
    return method


@contextlib.contextmanager
def _overrides_marked_only() -> Iterator[None]:
    """On Python before 3.12, lancedb's classes decorate their methods with ``overrides.override``,
    which at import reads each caller's bytecode to find its base classes and compares the
    signatures (about a fifth of importing lancedb, 0.1 s each CLI command that opens the index);
    on 3.12 lancedb uses ``typing.override``, which only marks. While lancedb imports, the package
    hands out the marking one: lancedb runs as it does on 3.12, and the real check is back for any
    later importer."""
    if sys.version_info >= (3, 12) or "lancedb" in sys.modules or overrides_layout_problems():
        yield
        return
    import overrides

    checking = overrides.override
    overrides.override = _marked_override
    try:
        yield
    finally:
        overrides.override = checking


# Two threads importing lancedb first at once would each swap overrides.override, and the second
# to restore it could put back the first's marking one.
_importing_lancedb = threading.Lock()


def import_lancedb() -> types.ModuleType:
    """lancedb, imported with the patches above (its REST client deferred, its overrides only
    marked); every syncd module that needs lancedb takes it from here."""
    with _importing_lancedb:
        lancedb_defer_rest_client()
        with _overrides_marked_only():
            import lancedb
    return lancedb
