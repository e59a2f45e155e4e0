"""The session routes of the REST API: the seed's ``GET /session/{id}/transcript?last_n=N`` and
``GET /session/{id}/state``, and ``GET /sessions`` to find them.

They read through :class:`~syncd.server.service.MemoryService`'s principal rules (a user token
reads only the sessions of its own user; an admin token names the user), and the session id is
validated by the shared schema before it reaches a path.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query

from ..api import schemas as s
from .rest import UserParam, Who, bearer
from .service import MemoryService

__all__ = ["session_routers"]


def session_routers(svc: MemoryService) -> list[APIRouter]:
    """The routers serving sessions over ``svc``, for :func:`~syncd.server.rest.create_app`."""
    r = APIRouter(tags=["sessions"], dependencies=[Depends(bearer)])

    @r.get("/sessions", response_model=s.SessionsOut, summary="The user's sessions")
    async def sessions(who: Who, user_id: UserParam = None):
        return await svc.sessions(who, s.SessionsInput(user_id=user_id))

    @r.get("/session/{session_id}/transcript", response_model=s.TranscriptOut, summary="A session's transcript")
    async def transcript(
        session_id: s.SessionId,
        who: Who,
        user_id: UserParam = None,
        last_n: Annotated[int | None, Query(ge=0, le=100_000, description="Only the last N entries.")] = None,
    ):
        return await svc.transcript(who, s.TranscriptInput(session_id=session_id, user_id=user_id, last_n=last_n))

    @r.get("/session/{session_id}/state", response_model=s.SessionStateOut, summary="A session's agent state")
    async def state(session_id: s.SessionId, who: Who, user_id: UserParam = None):
        return await svc.session_state(who, s.SessionStateInput(session_id=session_id, user_id=user_id))

    return [r]
