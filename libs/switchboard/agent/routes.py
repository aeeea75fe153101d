"""``POST /v1/turns``: the worker → orchestrator contract over HTTP (service-token authenticated)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Request

from switchboard.agent.turns import Orchestrator, TurnRejected
from switchboard.api.auth import ServiceAuth
from switchboard.api.deps import ResourcesDep, SettingsDep, gateway_from_app
from switchboard.contracts import TurnRequest, TurnResult
from switchboard.tools.mcp_client import McpToolSource

__all__ = ["turns_router", "orchestrator_from_app", "OrchestratorDep"]

turns_router = APIRouter(prefix="/v1", tags=["turns"])


def orchestrator_from_app(request: Request, settings: SettingsDep, resources: ResourcesDep) -> Orchestrator:
    """The process's :class:`Orchestrator`, built on first use from the app's settings and resources.

    A test or an embedding process may set ``app.state.orchestrator`` itself.
    """
    state = request.app.state
    orchestrator = getattr(state, "orchestrator", None)
    if orchestrator is None:
        orchestrator = Orchestrator(
            sessions=resources.sessions,
            gateway=gateway_from_app(request, settings),
            toolsets=[McpToolSource.from_settings(settings, resources.sessions)],
            redis=resources.redis,  # after-turn checks go to the background queue
        )
        state.orchestrator = orchestrator
    return orchestrator


OrchestratorDep = Annotated[Orchestrator, Depends(orchestrator_from_app)]


@turns_router.post(
    "/turns",
    response_model=TurnResult,
    dependencies=[ServiceAuth],
    summary="Answer one inbound message (runs the bounded tool loop)",
    description=(
        "Loads the conversation's history from Postgres, runs the agent's bounded tool loop through the "
        "tenant's model Router, stores the turn and returns exactly one of `reply` or `silent: true`. "
        "Idempotent per `inbound_message_id`: a repeat returns the stored result without calling a model. "
        "404: the conversation is not the tenant's; 422: the customer or message id does not match it."
    ),
    responses={
        404: {"description": "Unknown tenant or conversation"},
        422: {"description": "Mismatched ids"},
    },
)
async def post_turn(body: TurnRequest, orchestrator: OrchestratorDep) -> TurnResult:
    try:
        return await orchestrator.handle_turn(body)
    except TurnRejected as exc:
        raise HTTPException(status_code=exc.status_code, detail=str(exc)) from None
