"""Which home a shared index's schema belongs to, so that two homes never write one schema.

A home records its schema in its ``.git/config`` (index.backend), and a copy of the home's folder
(``cp -a``, an rsync to another machine, a backup restored beside it) carries that record along:
both writers then wrote their own files' rows into the one schema, each searching the other's
memory and each status naming the other's commit as the index's. The writer of a home therefore
claims its schema (the machine's name and the home's path, kept in the schema beside its token
hashes) and refuses one claimed by another home of this machine that is still there with the same
record. A home that moved (its old path gone, or recording another schema now) hands its schema on
silently, and so does a claim made under another machine name: that home cannot be looked at from
here, and a container's name changes with every start, so refusing would lock a home out of its
own index (a copy taken to another machine is the case this cannot tell).
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..index.backend import IndexUnreachable, recorded_schema

__all__ = ["claim_schema"]


def claim_schema(root: Path, index: Any) -> None:
    """Claim ``index``'s schema for the home at ``root`` (its writer opening it); ConfigError,
    saying how to give this home a schema of its own, when another home keeps it. A database
    that cannot be reached now is claimed at the writer's next start: the writer still starts,
    as the README promises, writing markdown while the index is behind."""
    if not callable(getattr(index, "holder", None)):
        return  # an embedded index lives inside its home: nothing to share
    me = f"{socket.gethostname()}:{root.resolve()}"
    try:
        holder = index.holder()
        if holder == me:
            return
        if holder is not None and not _moved(holder, index.schema):
            raise ConfigError(
                f"the index at {index.where} is the home {holder}'s, not this one's ({root}): a copy of "
                f"that home? give this one its own with `git -C {root} config --unset syncd.indexschema`"
            )
        index.set_holder(me)
    except IndexUnreachable:
        return


def _moved(holder: str, schema: str) -> bool:
    """Whether the home ``holder`` names is no longer there to keep ``schema``; one claimed under
    another machine name is taken as moved (see the module doc)."""
    host, _, path = holder.partition(":")
    if host != socket.gethostname():
        return True
    old = Path(path)
    try:
        return not (old / ".git").exists() or recorded_schema(old) != schema
    except ConfigError:
        return True  # not a git repository any more
