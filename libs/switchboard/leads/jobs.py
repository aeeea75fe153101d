"""The lead-intent check by a model, off the turn: the reply is sent first, the check runs after it.

:func:`capture_lead_by_model` is the check itself (one completion through the tenant's Router);
:func:`check_lead_intent` is the background job (``check_lead_intent``, :mod:`switchboard.queue.jobs`)
the orchestrator queues after writing an answered turn. ``ctx`` holds ``resources`` and
``model_gateway`` (set in the worker's ``on_startup``).
"""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel.ext.asyncio.session import AsyncSession

from switchboard.crypto import CredentialDecryptError
from switchboard.db.models import Lead, Tenant
from switchboard.leads.capture import capture_lead, lead_recorded
from switchboard.llm.router import ModelCallFailed, ModelGateway
from switchboard.llm.trimming import strip_reasoning
from switchboard.observability import get_logger
from switchboard.tenant_settings import TenantSettings, cached_tenant_settings

__all__ = ["capture_lead_by_model", "check_lead_intent"]

log = get_logger(__name__)


async def capture_lead_by_model(
    sessions: async_sessionmaker[AsyncSession],
    gateway: ModelGateway,
    *,
    settings: TenantSettings,
    tenant_id: uuid.UUID,
    conversation_id: uuid.UUID,
    customer_id: uuid.UUID,
    trace_id: str,
) -> Lead | None:
    """The intent check by the tenant's model (:func:`~switchboard.leads.capture_lead`); never raises.

    Returns:
        The lead recorded now (committed, metric counted), or ``None``: no intent, a lead exists, or the
        model failed (logged ``lead_intent_check_failed``).
    """
    try:
        router = gateway.router_for(tenant_id, settings.llm)
    except CredentialDecryptError:
        return None  # logged by the gateway with the deployment id

    async def model_check(prompt: list[dict[str, Any]]) -> tuple[str | None, str | None]:
        try:
            reply = await gateway.complete(router, prompt, tools=None, llm=settings.llm, trace_id=trace_id)
        except ModelCallFailed as exc:
            log.warning("lead_intent_check_failed", trace_id=trace_id, error=str(exc)[:300])
            return None, None
        return strip_reasoning(reply.content), reply.model_id

    lead = await capture_lead(
        sessions,
        tenant_id=tenant_id,
        conversation_id=conversation_id,
        customer_id=customer_id,
        window_messages=settings.leads.intent_window_messages,
        model_check=model_check,
        trace_id=trace_id,
    )
    if lead is not None:
        lead_recorded(lead, trace_id)
    return lead


async def check_lead_intent(
    ctx: dict[str, Any], tenant_id: str, conversation_id: str, customer_id: str, trace_id: str
) -> str:
    """Job: the model's intent check of one conversation after an answered turn.

    Returns:
        ``recorded`` (a lead was recorded), ``none`` (no intent, a lead exists, the check failed) or
        ``skipped`` (the tenant is gone or turned leads off meanwhile).
    """
    sessions = ctx["resources"].sessions
    async with sessions() as session:
        tenant = await session.get(Tenant, uuid.UUID(tenant_id))
    if tenant is None:
        return "skipped"
    settings = cached_tenant_settings(tenant.settings_extensions, tenant_id=tenant_id)
    if not settings.leads.enabled:
        return "skipped"
    lead = await capture_lead_by_model(
        sessions,
        ctx["model_gateway"],
        settings=settings,
        tenant_id=uuid.UUID(tenant_id),
        conversation_id=uuid.UUID(conversation_id),
        customer_id=uuid.UUID(customer_id),
        trace_id=trace_id,
    )
    return "recorded" if lead is not None else "none"
