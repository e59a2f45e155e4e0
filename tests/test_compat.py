"""The internals of watchdog and fastembed that syncd.compat.patches relies on are still there.

The patches check the same thing before they touch anything and then leave a changed library
alone (only a warning says so); here an upgrade that moved them fails loudly instead."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from syncd.compat import patches
from syncd.config import DEFAULT_EMBED_MODEL
from syncd.embedding.fastembed_backend import default_model_dir
from syncd.sync.events import is_unwatched_folder
from syncd.sync.walk import walk


def test_watchdog_still_has_what_the_patches_mend():
    assert patches.watchdog_layout_problems() == []


def test_a_moved_watchdog_internal_is_reported(monkeypatch):
    # The check above must be able to fail: a method taking other parameters is named.
    from watchdog.observers.inotify import InotifyWatchGroup

    monkeypatch.setattr(InotifyWatchGroup, "_add_callback", lambda self, path, mask: None)
    problems = patches.watchdog_layout_problems()
    assert len(problems) == 1 and "_add_callback" in problems[0]


def test_the_watchdog_patches_are_in_place_and_idempotent():
    from watchdog.observers import inotify
    from watchdog.observers.inotify import InotifyWatchGroup

    for _ in range(2):
        patches.watchdog_walk_iteratively(walk)
        patches.watchdog_forget_vanished_watches()
        patches.watchdog_decline_watches(is_unwatched_folder)
    # White-box: watchdog's private methods are what compat patches; this fails when watchdog changes.
    assert InotifyWatchGroup._remove_watch_internally._syncd
    assert InotifyWatchGroup._add_callback._syncd
    if sys.version_info < (3, 12):
        assert inotify.os.walk is walk and inotify.os.sep == os.sep  # the rest is the real os


@pytest.fixture(scope="module")
def text_embedding(tmp_path_factory):
    """fastembed's TextEmbedding loaded as syncd loads its default model."""
    from fastembed import TextEmbedding

    folder = default_model_dir(tmp_path_factory.mktemp("models"))
    return TextEmbedding(DEFAULT_EMBED_MODEL, specific_model_path=str(folder), cache_dir=str(folder), threads=1)


def test_fastembed_still_has_what_the_patches_mend(text_embedding):
    assert patches.fastembed_layout_problems(text_embedding) == []
    assert patches.fastembed_truncation(text_embedding)["max_length"] > 0


def test_the_quiet_session_embeds_as_fastembeds_own_did(text_embedding):
    before = next(iter(text_embedding.embed(["Keeps bees on the roof."])))
    patches.fastembed_quiet_session(text_embedding, threads=1)
    assert patches.fastembed_layout_problems(text_embedding) == []  # still a session of the model
    after = next(iter(text_embedding.embed(["Keeps bees on the roof."])))
    assert float(abs(before - after).max()) < 1e-5


def test_a_lazily_loaded_model_gets_one_quiet_session_and_embeds_the_same(text_embedding, tmp_path_factory):
    """syncd builds its TextEmbedding with lazy_load (no session) and gives it the one session
    it runs on: the vectors are those of fastembed's own session."""
    from fastembed import TextEmbedding

    folder = default_model_dir(tmp_path_factory.mktemp("models"))
    lazy = TextEmbedding(
        DEFAULT_EMBED_MODEL, specific_model_path=str(folder), cache_dir=str(folder), threads=1, lazy_load=True
    )
    assert getattr(lazy.model, "model", None) is None and patches.fastembed_lazy_problems(lazy) == []
    patches.fastembed_quiet_session(lazy, threads=1)
    assert patches.fastembed_layout_problems(lazy) == []  # a session of the model, and its tokenizer
    texts = ["Keeps bees on the roof.", "Prefers short answers in the morning."]
    got = np.array(list(lazy.embed(texts)))
    want = np.array(list(text_embedding.embed(texts)))
    assert float(abs(got - want).max()) < 1e-5


def test_a_moved_fastembed_internal_is_reported():
    class Inner:
        model = object()  # not an InferenceSession
        tokenizer = None

    class Model:
        model = Inner()

    problems = patches.fastembed_layout_problems(Model())
    assert len(problems) == 2


def test_lance_namespace_still_has_what_the_lancedb_patch_defers():
    assert patches.lancedb_layout_problems() == []


def test_lancedb_imports_without_the_rest_apis_which_still_import_when_asked_for():
    """In a fresh process: after the patch, importing lancedb runs none of the REST API modules,
    and the REST client package still hands out its names (its __init__ runs then)."""
    code = (
        "import sys\n"
        "from syncd.compat.patches import lancedb_defer_rest_client\n"
        "lancedb_defer_rest_client()\n"
        "import lancedb\n"
        "apis = [m for m in sys.modules if m.startswith('lance_namespace_urllib3_client.api.')]\n"
        "assert apis == [], apis\n"
        "import lance_namespace_urllib3_client as client\n"
        "assert client.TableApi.__name__ == 'TableApi' and client.ApiClient.__name__ == 'ApiClient'\n"
        "assert 'lance_namespace_urllib3_client.api.table_api' in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


def test_the_overrides_package_still_has_what_the_lancedb_import_patch_replaces():
    assert patches.overrides_layout_problems() == []


def test_lancedb_imports_with_overrides_only_marked_and_the_check_is_back_after():
    """In a fresh process on Python before 3.12: lancedb's methods are marked as overrides
    without being checked (as typing.override does on 3.12), and ``overrides.override`` checks
    again for whoever imports it next: a method overriding nothing is refused."""
    code = (
        "import sys\n"
        "import overrides\n"
        "checking = overrides.override\n"
        "from syncd.compat.patches import import_lancedb\n"
        "lancedb = import_lancedb()\n"
        "import lancedb.db\n"
        "assert overrides.override is checking\n"
        "assert lancedb.db.LanceDBConnection.open_table.__override__ is True\n"
        "if sys.version_info < (3, 12):\n"
        "    assert lancedb.db.override is not checking\n"
        "class Base:\n"
        "    pass\n"
        "try:\n"
        "    class Child(Base):\n"
        "        @overrides.override\n"
        "        def nothing_above(self): ...\n"
        "except TypeError:\n"
        "    pass\n"
        "else:\n"
        "    raise AssertionError('overrides.override no longer checks')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
