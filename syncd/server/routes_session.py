"""The session routes of the REST API: ``GET /session/{id}/transcript?last_n=N`` and
``GET /session/{id}/state`` (the seed's table).

They belong to the session layer (TranscriptManager, StateMirror), which is wired in here: a
function returning an ``APIRouter`` for :func:`syncd.server.rest.create_app`'s ``routers``,
reading through the same :class:`~syncd.server.service.MemoryService` principal rules (a user
token reads only the sessions of its own user; ids pass ``layout.validate_id`` first). Until the
session layer lands, no route is added.
"""

from __future__ import annotations

__all__ = ["session_routers"]


def session_routers(service) -> list:
    """The routers serving sessions over ``service`` (none yet: see the module's docstring)."""
    return []
