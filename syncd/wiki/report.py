"""What ``syncd lint``, ``syncd links`` and ``syncd backlinks`` print: text for people, JSON
for programs (one object, keys sorted, stable order), and the exit code. Pure.

Intended commands (wired in ``syncd/cli`` by whoever owns it):

* ``syncd lint [--json] [--vault PATH]``: every finding; exit 1 when any is an error, else 0.
* ``syncd links PAGE [--json] [--vault PATH]``: the links of PAGE, each resolved.
* ``syncd backlinks PAGE [--json] [--vault PATH]``: the links elsewhere that open PAGE.

PAGE is a vault path (``people/Bob.md``) or a name as written in a link (``Bob``).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence

from .graph import Edge, shown
from .lint import SEVERITIES, Finding

__all__ = [
    "lint_exit_code", "lint_lines", "lint_json", "links_lines", "links_json", "backlinks_lines", "backlinks_json",
]  # fmt: skip


def lint_exit_code(findings: Sequence[Finding]) -> int:
    return 1 if any(f.severity == "error" for f in findings) else 0


def _summary(findings: Sequence[Finding]) -> str:
    counts = Counter(f.severity for f in findings)
    parts = [f"{counts[s]} {s}{'s' if counts[s] != 1 else ''}" for s in SEVERITIES if counts[s]]
    return ", ".join(parts) if parts else "no findings"


def lint_lines(findings: Sequence[Finding]) -> list[str]:
    """``path:line: severity code: message`` per finding, then a one-line summary. Lines, not
    one text: a message may quote a newline (a title, an alias, a source), which the terminal
    must be shown as an escape, never as the start of another finding."""
    lines = [f"{f.path}:{f.line}: {f.severity} {f.code}: {f.message}" for f in findings]
    lines.append(_summary(findings))
    return lines


def lint_json(findings: Sequence[Finding]) -> str:
    counts = Counter(f.severity for f in findings)
    doc = {"findings": [f.to_dict() for f in findings], "counts": {s: counts[s] for s in SEVERITIES}}
    return json.dumps(doc, ensure_ascii=False, indent=2, sort_keys=True) + "\n"


def _edge_dict(edge: Edge) -> dict[str, object]:
    link, res = edge.link, edge.resolution
    return {
        "source": edge.source,
        "line": link.line,
        "link": shown(link),
        "embed": link.embed,
        "target": res.target,
        "subpath": link.subpath or None,
        "subpath_found": edge.subpath_ok if res.target is not None and link.subpath else None,
        "candidates": list(res.candidates),
    }


def _edge_line(edge: Edge, where: str) -> str:
    d = _edge_dict(edge)
    target = d["target"] or "(unresolved)"
    note = "" if d["subpath_found"] in (None, True) else f" ({link_sub(edge)} not found)"
    amb = f" (also: {', '.join(edge.resolution.candidates[1:])})" if edge.resolution.ambiguous else ""
    return f"{where}:{edge.link.line}: {d['link']} -> {target}{note}{amb}"


def link_sub(edge: Edge) -> str:
    return edge.link.subpath


def links_lines(page: str, edges: Sequence[Edge]) -> list[str]:
    lines = [_edge_line(e, page) for e in edges]
    lines.append(f"{len(edges)} link{'s' if len(edges) != 1 else ''} in {page}")
    return lines


def links_json(page: str, edges: Sequence[Edge]) -> str:
    return json.dumps({"page": page, "links": [_edge_dict(e) for e in edges]}, ensure_ascii=False, indent=2,
                      sort_keys=True) + "\n"  # fmt: skip


def backlinks_lines(page: str, edges: Sequence[Edge]) -> list[str]:
    lines = [_edge_line(e, e.source) for e in edges]
    lines.append(f"{len(edges)} backlink{'s' if len(edges) != 1 else ''} to {page}")
    return lines


def backlinks_json(page: str, edges: Sequence[Edge]) -> str:
    return json.dumps({"page": page, "backlinks": [_edge_dict(e) for e in edges]}, ensure_ascii=False,
                      indent=2, sort_keys=True) + "\n"  # fmt: skip
