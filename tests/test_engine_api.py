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
    extraction._use_bundled_prices()
    assert os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] == "False"
