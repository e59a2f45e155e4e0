"""The agent serializer: JSON v2 instead of pickle, and the one safe way to read a legacy pickle.

``serialize_agent`` turns an agent (anything with ``memory.steps`` or ``steps``), a list of steps or
an :class:`AgentState` into JSON v2 bytes; ``deserialize_agent`` reads them back. Steps are plain
dicts; smolagents' step objects (TaskStep, PlanningStep, ActionStep, FinalAnswerStep) are turned
into them by attribute, so smolagents stays an optional extra, never imported by the core.

A legacy pickle is never unpickled unless the caller passes ``allow_pickle=True``, and even then
only through :class:`SafeUnpickler`, which builds nothing outside a fixed list of plain classes: a
pickle that names ``os.system`` (or any other callable) raises UnsafePickleError before anything
runs.
"""

from __future__ import annotations

import datetime as dt
import io
import math
import pickle
from collections.abc import Iterable, Sequence
from typing import Any

from ..errors import ParseError, UnsafePickleError
from ..formats.agent_state import STEP_KINDS, AgentState, check_step, parse_state, render_state, sniff_format
from .files import utc_now

__all__ = [
    "SAFE_PICKLE_CLASSES",
    "SafeUnpickler",
    "load_legacy_pickle",
    "plain_step",
    "plain_steps",
    "agent_steps",
    "serialize_agent",
    "deserialize_agent",
]

# What a legacy agent state may be built from: containers and scalars, nothing that runs code.
SAFE_PICKLE_CLASSES: frozenset[tuple[str, str]] = frozenset(
    {
        ("builtins", name)
        for name in (
            "dict",
            "list",
            "tuple",
            "set",
            "frozenset",
            "str",
            "bytes",
            "bytearray",
            "int",
            "float",
            "complex",
            "bool",
        )
    }
    | {
        ("collections", "OrderedDict"),
        ("datetime", "datetime"),
        ("datetime", "date"),
        ("datetime", "time"),
        ("datetime", "timedelta"),
        ("datetime", "timezone"),
    }
)


class SafeUnpickler(pickle.Unpickler):
    """An unpickler that refuses every global outside ``allowed`` and every persistent id."""

    def __init__(self, file: io.BytesIO, allowed: Iterable[tuple[str, str]] = SAFE_PICKLE_CLASSES):
        super().__init__(file)
        self.allowed = frozenset(allowed)

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in self.allowed:
            raise UnsafePickleError(f"the pickle wants {module}.{name}, which is not on the allowed list", module, name)
        return super().find_class(module, name)

    def persistent_load(self, pid: Any) -> Any:
        raise UnsafePickleError("the pickle refers to a persistent object, which is never loaded")


def load_legacy_pickle(
    data: bytes, *, allow_pickle: bool = False, extra_classes: Iterable[tuple[str, str]] = ()
) -> Any:
    """Unpickle ``data`` only when asked, and only into allowed classes (UnsafePickleError else)."""
    if not allow_pickle:
        raise UnsafePickleError("this agent state is a legacy pickle; pass allow_pickle=True to read it safely")
    try:
        return SafeUnpickler(io.BytesIO(data), SAFE_PICKLE_CLASSES | frozenset(extra_classes)).load()
    except UnsafePickleError:
        raise
    except Exception as exc:  # noqa: BLE001 - a corrupt pickle is data, not a crash
        raise ParseError(f"the legacy pickle cannot be read: {exc}") from None


# -- steps as plain data -----------------------------------------------------------------------------

_SMOLAGENTS_KINDS = {
    "TaskStep": "task",
    "PlanningStep": "planning",
    "ActionStep": "action",
    "FinalAnswerStep": "final_answer",
}


def _plain(value: Any) -> Any:
    """JSON-safe data from what a step holds (objects become their dict or their text)."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (dt.datetime, dt.date)):
        return value.isoformat()
    if hasattr(value, "dict") and callable(value.dict):
        return _plain(value.dict())
    return str(value)


def _tool_call(call: Any) -> dict[str, Any]:
    if isinstance(call, dict):
        return _plain(call)
    return {
        "id": _plain(getattr(call, "id", None)),
        "name": _plain(getattr(call, "name", None)),
        "arguments": _plain(getattr(call, "arguments", None)),
    }


def plain_step(step: Any) -> dict[str, Any]:
    """A step as JSON v2 data: a dict passes through (checked); a smolagents step object is read
    by its class name and attributes."""
    if isinstance(step, dict):
        return check_step(step)
    kind = _SMOLAGENTS_KINDS.get(type(step).__name__)
    if kind is None:
        raise ParseError(f"cannot serialise a step of type {type(step).__name__}")
    out: dict[str, Any] = {"type": kind}
    if kind == "task":
        out["task"] = _plain(getattr(step, "task", ""))
    elif kind == "planning":
        out["plan"] = _plain(getattr(step, "plan", ""))
        out["facts"] = _plain(getattr(step, "facts", None))
    elif kind == "action":
        out["step_number"] = _plain(getattr(step, "step_number", None))
        out["model_output"] = _plain(getattr(step, "model_output", None))
        out["tool_calls"] = [_tool_call(c) for c in getattr(step, "tool_calls", None) or ()]
        out["observations"] = _plain(getattr(step, "observations", None))
        error = getattr(step, "error", None)
        out["error"] = None if error is None else str(error)
    else:
        out["answer"] = _plain(getattr(step, "output", getattr(step, "final_answer", None)))
    return out


def plain_steps(steps: Iterable[Any]) -> list[dict[str, Any]]:
    return [plain_step(s) for s in steps]


def agent_steps(agent: Any) -> list[Any]:
    """The live step list of an agent: ``agent.memory.steps`` (smolagents), ``agent.steps``, or
    the agent itself when it is a list."""
    if isinstance(agent, list):
        return agent
    memory = getattr(agent, "memory", None)
    if memory is not None and isinstance(getattr(memory, "steps", None), list):
        return memory.steps
    if isinstance(getattr(agent, "steps", None), list):
        return agent.steps
    raise TypeError(f"{type(agent).__name__} has no step list (agent.memory.steps or agent.steps)")


def _tool_names(agent: Any) -> list[Any]:
    tools = getattr(agent, "tools", None)
    if isinstance(tools, dict):
        return sorted(str(name) for name in tools)
    if isinstance(tools, (list, tuple)):
        return [t if isinstance(t, str) else str(getattr(t, "name", t)) for t in tools]
    return []


def serialize_agent(agent: Any, tools: Sequence[Any] | None = None, now: dt.datetime | None = None) -> bytes:
    """JSON v2 bytes of an agent's steps (an agent, a list of steps, or an AgentState)."""
    if isinstance(agent, AgentState):
        return render_state(agent)
    steps = plain_steps(agent_steps(agent))
    at = (now or utc_now()).isoformat(timespec="seconds")
    return render_state(AgentState(steps, list(tools if tools is not None else _tool_names(agent)), at))


def deserialize_agent(
    data: bytes, *, allow_pickle: bool = False, extra_classes: Iterable[tuple[str, str]] = ()
) -> AgentState:
    """An AgentState from JSON v2 bytes, or (only with ``allow_pickle``) from a legacy pickle of
    plain data: a dict with ``steps`` (and ``tools``), or a list of steps."""
    if sniff_format(data) == "json":
        return parse_state(data)
    loaded = load_legacy_pickle(data, allow_pickle=allow_pickle, extra_classes=extra_classes)
    steps, tools = (loaded.get("steps"), loaded.get("tools", [])) if isinstance(loaded, dict) else (loaded, [])
    if not isinstance(steps, list):
        raise ParseError("the legacy pickle holds no list of steps")
    steps = [_plain(s) for s in steps]
    for n, step in enumerate(steps):
        if not isinstance(step, dict) or step.get("type") not in STEP_KINDS:
            raise ParseError(f"step {n} of the legacy pickle is not a known step kind")
    return AgentState(steps, _plain(list(tools)), utc_now().isoformat(timespec="seconds"))
