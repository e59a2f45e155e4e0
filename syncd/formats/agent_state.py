"""Agent state as JSON v2 (pure: no I/O, no pickle).

``{"version": 2, "steps": [...], "tools": [...], "serialized_at": "..."}``, indented so a person can
read it and git can diff it. Steps are plain data, each a JSON object whose ``"type"`` is one of
the step kinds the seed names::

    {"type": "task", "task": "..."}
    {"type": "planning", "plan": "...", "facts": "..."}
    {"type": "action", "step_number": 1, "model_output": "...",
     "tool_calls": [{"id": "c1", "name": "search", "arguments": {...}}],
     "observations": "...", "error": null}
    {"type": "final_answer", "answer": ...}

Other fields are kept as they are, so a step round-trips whatever else it carries. ``legacy`` is
set on the placeholder that stands for a legacy pickle, which is never turned into steps here.
"""

from __future__ import annotations

import datetime as dt
import json
import pickletools
from dataclasses import dataclass, field
from typing import Any

from ..errors import ParseError

__all__ = [
    "STATE_VERSION",
    "STEP_KINDS",
    "AgentState",
    "render_state",
    "parse_state",
    "check_step",
    "sniff_format",
    "legacy_placeholder",
]

STATE_VERSION = 2
STEP_KINDS = ("task", "planning", "action", "final_answer")


@dataclass(frozen=True)
class AgentState:
    steps: list[dict[str, Any]] = field(default_factory=list)
    tools: list[Any] = field(default_factory=list)
    serialized_at: str = ""
    legacy: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "version": STATE_VERSION,
            "steps": self.steps,
            "tools": self.tools,
            "serialized_at": self.serialized_at,
        }
        if self.legacy is not None:
            data["legacy"] = self.legacy
        return data


def check_step(step: object, where: str = "step") -> dict[str, Any]:
    """``step`` if it is a JSON object of a known kind, else ParseError saying which."""
    if not isinstance(step, dict):
        raise ParseError(f"{where} is not a JSON object")
    if step.get("type") not in STEP_KINDS:
        raise ParseError(f"{where} has type {step.get('type')!r}; expected one of {', '.join(STEP_KINDS)}")
    calls = step.get("tool_calls")
    if calls is not None and not (isinstance(calls, list) and all(isinstance(c, dict) for c in calls)):
        raise ParseError(f"{where}: tool_calls must be a list of objects")
    return step


def render_state(state: AgentState) -> bytes:
    """The snapshot as UTF-8 JSON; raises ValueError for what JSON cannot hold exactly (NaN)."""
    for n, step in enumerate(state.steps):
        check_step(step, f"step {n}")
    text = json.dumps(state.to_dict(), ensure_ascii=False, allow_nan=False, indent=2)
    try:
        return text.encode("utf-8") + b"\n"
    except UnicodeEncodeError:  # a lone surrogate: escaped, so the str still round-trips
        return json.dumps(state.to_dict(), allow_nan=False, indent=2).encode() + b"\n"


def parse_state(data: bytes) -> AgentState:
    """A JSON v2 snapshot; ParseError for anything else (a pickle is never parsed here)."""
    if sniff_format(data) != "json":
        raise ParseError("not a JSON agent state (legacy pickle or unknown bytes)")
    try:
        obj = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise ParseError(f"agent state is not valid JSON: {exc}") from None
    if not isinstance(obj, dict) or obj.get("version") != STATE_VERSION:
        raise ParseError(f"agent state is not version {STATE_VERSION}")
    steps, tools = obj.get("steps"), obj.get("tools", [])
    if not isinstance(steps, list) or not isinstance(tools, list):
        raise ParseError("agent state needs a list of steps and a list of tools")
    for n, step in enumerate(steps):
        check_step(step, f"step {n}")
    legacy = obj.get("legacy")
    return AgentState(steps, tools, str(obj.get("serialized_at", "")), legacy if isinstance(legacy, dict) else None)


def sniff_format(data: bytes) -> str:
    """``"json"``, ``"pickle"`` or ``"unknown"``, looking at the bytes only (pickletools reads
    opcodes, it never imports or calls anything)."""
    head = data.lstrip()[:1]
    if head == b"{":
        return "json"
    if data[:1] == b"\x80" and len(data) > 1 and 2 <= data[1] <= 5:
        return "pickle"
    try:
        for _ in pickletools.genops(data):
            pass
    except Exception:  # noqa: BLE001 - any failure to read opcodes means "not a pickle"
        return "unknown"
    return "pickle" if data else "unknown"


def legacy_placeholder(fmt: str, size: int, sha256: str, now: dt.datetime) -> AgentState:
    """What the mirror writes in place of a legacy snapshot it will not unpickle."""
    return AgentState(
        serialized_at=now.isoformat(timespec="seconds"),
        legacy={
            "format": fmt,
            "bytes": size,
            "sha256": sha256,
            "note": "a legacy agent state was not unpickled (unsafe); re-save it as JSON v2",
        },
    )
