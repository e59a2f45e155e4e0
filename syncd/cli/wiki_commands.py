"""The wiki commands (lint, links, backlinks): read-only views of a vault's link graph.

They work on the home's ``vault/`` by default, or on any Obsidian vault given with ``--vault``
(then no home is needed). Nothing here loads LanceDB or the model.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import click

from .common import PathArg, echo_json, home_option, json_option, load_settings, resolve_home, say

__all__ = ["COMMANDS"]

vault_option = click.option(
    "--vault",
    type=PathArg(path_type=Path, file_okay=False),
    default=None,
    help="An Obsidian vault folder to read instead of the home's vault/ (no home needed).",
)


def _manager(vault: Path | None, home: Path | None):
    from ..errors import HomeError
    from ..wiki.manager import WikiManager

    limit = load_settings().max_file_bytes
    if vault is not None:
        if not vault.is_dir():
            raise HomeError(f"{vault} is not a folder")
        return WikiManager(vault, max_file_bytes=limit)
    root = resolve_home(home)
    if not (root / "vault").is_dir():
        raise HomeError(f"{root} has no vault/ folder; run `syncd init {root}` to seed one, or pass --vault")
    return WikiManager.for_home(root, max_file_bytes=limit)


@click.command("lint")
@json_option
@vault_option
@home_option
def lint_command(as_json: bool, vault: Path | None, home: Path | None) -> None:
    """Check the vault the way Obsidian resolves it: broken links, embeds, headings and block ids,
    ambiguous names, orphans, index.md and log.md, frontmatter, stale sources; and (a warning
    each) the conflicts a merge with another machine kept both versions of, in the vault and in
    the home's memory/. Reads only; exits 1 when there are errors."""
    from ..wiki.report import lint_exit_code, lint_json, lint_lines

    manager = _manager(vault, home)
    findings = sorted([*manager.lint(), *_conflict_findings(manager.root, vault is None)])
    _print(lint_json(findings) if as_json else lint_lines(findings))
    code = lint_exit_code(findings)
    if code:
        raise click.exceptions.Exit(code)


def _print(report: str | list[str]) -> None:
    """A report on stdout through click (which writes UTF-8 to a stdout Python thinks is ASCII):
    JSON text, or lines whose control characters (a newline a message quotes too) are shown as
    escapes."""
    if isinstance(report, str):
        echo_json(report)
        return
    for line in report:
        say(line)


def _conflict_findings(vault: Path, in_home: bool) -> list:
    """A ``merge-conflict`` warning per conflict kept in the vault (paths vault-relative, as
    every finding's) and, in a home, in memory/ (paths home-relative: ``memory/...``)."""
    from ..engine.conflicts import find_conflicts
    from ..errors import SyncdError
    from ..wiki.lint import Finding

    try:
        if in_home:
            found = [replace(c, path=c.path.removeprefix("vault/")) for c in find_conflicts(vault.parent)]
        else:
            found = find_conflicts(vault, home=False)
    except SyncdError:
        return []  # git missing or refusing: the rest of lint still runs
    return [
        Finding(c.path, c.line, "merge-conflict", f"{c.describe()} (the workbench's Health tab)", "warning")
        for c in found
    ]


@click.command("links")
@click.argument("page")
@json_option
@vault_option
@home_option
def links_command(page: str, as_json: bool, vault: Path | None, home: Path | None) -> None:
    """The links and embeds of PAGE (a vault path, a path as search prints it, or a name or a link
    as written in a page), each resolved."""
    from ..wiki.report import links_json, links_lines

    edges = _manager(vault, home).links(page)
    _print(links_json(page, edges) if as_json else links_lines(page, edges))


@click.command("backlinks")
@click.argument("page")
@json_option
@vault_option
@home_option
def backlinks_command(page: str, as_json: bool, vault: Path | None, home: Path | None) -> None:
    """The links elsewhere in the vault that open PAGE (a vault path, a path as search prints it,
    or a name or a link as written in a page)."""
    from ..wiki.report import backlinks_json, backlinks_lines

    edges = _manager(vault, home).backlinks(page)
    _print(backlinks_json(page, edges) if as_json else backlinks_lines(page, edges))


COMMANDS = [lint_command, links_command, backlinks_command]
