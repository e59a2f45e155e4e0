"""The engine's seams: no import cycles between syncd's parts, ids that cannot be swapped (seed
names keep the seed's order, everything else takes ids by keyword), the seed's global block scope,
and extraction that never waits on the network for litellm's price list."""

from __future__ import annotations

import ast
import asyncio
import inspect
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import syncd
from syncd.engine.facade import Engine
from syncd.memory import MarkdownMemoryStore, MemoryBlockUpdateTool, MemoryManager

PACKAGE = Path(syncd.__file__).parent


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """Every syncd module ``path`` imports, at module level or inside functions (type-checking
    only imports excepted: they never run)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    type_only = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            type_only.update(id(n) for n in ast.walk(node))
    found = set()
    for node in ast.walk(tree):
        if id(node) in type_only:
            continue
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("syncd"))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            if target.startswith("syncd"):
                found.add(target)
                found.update(f"{target}.{a.name}" for a in node.names)
    return found


def _unit(module: str) -> str | None:
    """The part of syncd a module belongs to: ``syncd.index``, ``syncd.engine``, ..."""
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) >= 2 else None


def _import_graph() -> dict[str, set[str]]:
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    units = {_unit(m) for m in modules} - {None}
    graph: dict[str, set[str]] = {u: set() for u in units}
    for module, path in modules.items():
        source = _unit(module)
        if source is None:
            continue  # syncd/__init__.py: the public face, it may name every part
        for target in _imports(path):
            unit = _unit(target)
            if unit in units and unit != source:
                graph[source].add(unit)
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_the_parts_of_syncd_import_each_other_without_cycles():
    graph = _import_graph()
    assert "syncd.engine" in graph["syncd.memory"]  # MemoryManager(home) opens an engine...
    assert "syncd.memory" not in graph["syncd.engine"]  # ...and the engine never imports memory
    assert "syncd.index" not in graph["syncd.memory"]  # memory goes through its backend protocol
    assert _cycle(graph) is None, f"import cycle: {' -> '.join(_cycle(graph))}"


# Modules of the PostgreSQL index being built now that still import each other (the backend
# seam and its two PostgreSQL halves): listed so that the rule holds for everything else.
MODULE_CYCLES_PENDING = {"syncd.index.backend", "syncd.index.pg_search", "syncd.index.pg_store"}


def test_no_module_imports_itself_through_others():
    """Inside a part too, modules stand on each other one way (a cycle is two modules that are
    one concept, or a helper in the wrong one: formats.facts and formats.reparse were)."""
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph = {
        module: {t for t in _imports(path) if t in modules and t != module and not {module, t} <= MODULE_CYCLES_PENDING}
        for module, path in modules.items()
    }
    assert _cycle(graph) is None, f"import cycle: {' -> '.join(_cycle(graph))}"


# Each folder of syncd is one floor and stands only on the floors below it: an import from a
# floor to its own or a higher one fails here (a new folder must be given its floor).
FLOORS = [
    # settings, errors, the version; other libraries' internals mended (compat)
    {"syncd.errors", "syncd.config", "syncd._version", "syncd.compat"},
    {"syncd.home", "syncd.formats"},  # the home on disk; pure formats
    {"syncd.embedding"},  # vectors: the model's files live in the home's state folder
    {
        "syncd.history",
        "syncd.index",
        "syncd.control",
        "syncd.api",
    },  # git; the index; the socket's wire; the API's models
    {"syncd.sync", "syncd.writes"},  # keeping the index in step; the write path
    {"syncd.engine"},  # the facade and its use cases
    {"syncd.wiki"},  # follows the engine's index by a hook; the engine never imports it
    {"syncd.memory"},
    {"syncd.session"},
    {"syncd.daemon"},  # the process holding a home
    {"syncd.server"},
    {"syncd.cli"},
]


def _floor(unit: str) -> int:
    return next(i for i, floor in enumerate(FLOORS) if unit in floor)


def test_every_part_of_syncd_has_a_floor():
    units = set(_import_graph()) - {"syncd.__main__"}
    assert units == set().union(*FLOORS)


def test_every_import_points_down_a_floor():
    upward = [
        f"{source} (floor {_floor(source)}) -> {target} (floor {_floor(target)})"
        for source, targets in _import_graph().items()
        if source != "syncd.__main__"
        for target in targets
        if _floor(target) >= _floor(source)
    ]
    assert upward == []


def _module_imports(path: Path) -> list[tuple[str, str]]:
    """(module, name) of every ``from module import name`` in ``path`` (relative ones resolved)."""
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            found.extend((target, alias.name) for alias in node.names)
        elif isinstance(node, ast.Import):
            found.extend((alias.name, "") for alias in node.names)
    return found


def test_nothing_inside_imports_the_package_root():
    """``syncd/__init__.py`` imports the parts; a part importing it back (for ``__version__``, say)
    is the one arrow that runs up from every floor at once."""
    modules = {_module_name(p) for p in PACKAGE.rglob("*.py")}
    found = []
    for path in PACKAGE.rglob("*.py"):
        if _module_name(path) in ("syncd", "syncd.__main__"):
            continue
        for target, name in _module_imports(path):
            if (target == "syncd" and f"syncd.{name}" not in modules) or (target, name) == ("syncd", ""):
                found.append(f"{_module_name(path)} imports syncd.{name}")
    assert found == []


# Private names imported across modules while their owners change them (none now).
PRIVATE_IMPORTS_PENDING: set[tuple[str, str]] = set()


def test_no_private_name_is_imported_from_another_module():
    """A name another module needs is part of its module's API, and named so (no underscore)."""
    found = {
        (_module_name(path), f"{target}.{name}")
        for path in PACKAGE.rglob("*.py")
        for target, name in _module_imports(path)
        if target.startswith("syncd") and name.startswith("_") and not name.startswith("__")
    }
    assert found - PRIVATE_IMPORTS_PENDING == set()


FRONT_ENDS = ("syncd.cli", "syncd.server", "syncd.daemon.control")
# Front ends being moved onto the engine's use cases (none now).
HISTORY_IMPORTS_PENDING: set[str] = set()


def _front_end_files() -> list[tuple[str, Path]]:
    files = [(_module_name(p), p) for p in PACKAGE.rglob("*.py") if _module_name(p).startswith(FRONT_ENDS)]
    workbench = PACKAGE.parent / "workbench"
    return files + [(f"workbench.{p.stem}", p) for p in workbench.glob("*.py")]


def test_front_ends_go_through_the_facade():
    """The command line, the servers, the daemon's socket and the workbench reach history and
    the index through the engine's use cases (syncd.engine), never ``syncd.history`` directly."""
    found = [
        f"{name} imports {target}"
        for name, path in _front_end_files()
        for target, _ in _module_imports(path)
        if (target == "syncd.history" or target.startswith("syncd.history.")) and name not in HISTORY_IMPORTS_PENDING
    ]
    assert found == []


def test_only_the_engine_touches_its_index():
    """``engine.index`` (the store behind the facade) is the engine's own: anything else asks the
    engine (Engine.counts, indexed_files, stale_count, ...)."""
    found = []
    for path in [*PACKAGE.rglob("*.py"), *(PACKAGE.parent / "workbench").glob("*.py")]:
        if path.is_relative_to(PACKAGE / "engine"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr == "index":
                owner = node.value
                name = owner.attr if isinstance(owner, ast.Attribute) else getattr(owner, "id", "")
                if "engine" in name.lower():
                    found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}")
    assert found == []


def test_ids_are_keyword_only_outside_the_seed_names():
    # Two strings side by side are too easy to swap: outside the seed's own methods, ids by name.
    for function in (Engine.search, Engine.nearest_facts, MemoryManager.core_blocks, MemoryManager.store):
        for name, parameter in inspect.signature(function).parameters.items():
            if name in ("user_id", "chat_id", "session_id"):
                assert parameter.kind is inspect.Parameter.KEYWORD_ONLY, f"{function.__qualname__}({name})"
    with pytest.raises(TypeError):
        Engine.search(None, "tea", "ana")  # type: ignore[misc]


SEED = {
    MemoryManager.add_memory: ["content", "user_id", "chat_id"],
    MemoryManager.search_memories: ["query", "limit", "chat_id", "user_id"],
    MemoryManager.update_memory_block: ["label", "content", "chat_id", "user_id"],
    MemoryManager.get_core_memory: ["chat_id", "user_id"],
    MemoryManager.format_core_memory_for_context: ["chat_id", "user_id"],
    MemoryManager.retrieve_relevant_memories: ["query", "chat_id", "user_id", "limit"],
    MemoryManager.process_conversation_turn_for_memories: ["turn", "chat_id", "user_id"],
    MemoryManager.delete_memory: ["memory_id", "user_id"],
    MemoryManager.get_memory_stats: ["user_id"],
    MemoryManager.refresh_core_memory_facts: ["user_id"],
    MarkdownMemoryStore.append_daily_log: ["chat_id", "facts"],
    MemoryBlockUpdateTool.set_context: ["chat_id", "user_id"],
}


def test_seed_names_keep_the_seeds_parameter_order():
    for function, expected in SEED.items():
        positional = [
            name
            for name, p in inspect.signature(function).parameters.items()
            if name != "self" and p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
        ]
        assert positional[: len(expected)] == expected, function.__qualname__


def test_a_block_with_neither_user_nor_chat_is_the_global_block(engine, home):
    manager = MemoryManager(engine)
    block = asyncio.run(manager.update_memory_block("persona", "I am the house assistant."))
    assert block.scope == "global" and block.path == "memory/core/persona.md"
    assert (home / "memory/core/persona.md").read_text() == "I am the house assistant.\n"
    assert not (home / f"memory/users/{manager.default_user_id}/core/persona.md").exists()
    # Every user sees it; a user's own block is still written when a user is named.
    assert asyncio.run(manager.get_core_memory(None, "bob"))["persona"] == "I am the house assistant."
    assert asyncio.run(manager.update_memory_block("persona", "Bob's helper.", None, "bob")).scope == "user"


def test_extraction_uses_litellms_bundled_price_list(tmp_path):
    """Offline, litellm would retry fetching its price list for ~10 s on import. Run a real
    extraction (mock reply) in a fresh interpreter whose network fetch fails the run if called."""
    script = textwrap.dedent(
        """
        import asyncio, sys
        import httpx

        def no_network(*args, **kwargs):
            print("FETCHED", args[:1], flush=True)
            raise SystemExit(3)

        httpx.get = no_network
        httpx.Client.get = no_network

        from syncd.config import Settings
        from syncd.memory.extraction import ConversationTurn, extract_facts

        reply = '{"facts": [{"content": "Likes tea.", "category": "preference", "importance": 0.5}]}'
        facts, _ = asyncio.run(extract_facts(
            Settings(llm_model="gpt-4o-mini"), ConversationTurn(user_message="I like tea."), {"mock_response": reply}
        ))
        from litellm.litellm_core_utils.get_model_cost_map import get_model_cost_map_source_info
        import litellm
        info = get_model_cost_map_source_info()
        assert [f.content for f in facts] == ["Likes tea."]
        assert info["source"] == "local" and info["is_env_forced"], info
        assert "gpt-4o-mini" in litellm.model_cost
        print("OK")
        """
    )
    env = {k: v for k, v in os.environ.items() if k != "LITELLM_LOCAL_MODEL_COST_MAP"}
    env["PYTHONPATH"] = str(PACKAGE.parent) + os.pathsep + env.get("PYTHONPATH", "")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0 and out.stdout.strip().endswith("OK"), out.stdout + out.stderr


def test_a_person_who_set_the_price_list_switch_keeps_it(monkeypatch):
    from syncd.memory import extraction

    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "False")
    # White-box: the public path (complete) imports litellm, which with "False" fetches prices from
    # the network; the test above runs that path in a process of its own.
    extraction._use_bundled_prices()
    assert os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] == "False"
