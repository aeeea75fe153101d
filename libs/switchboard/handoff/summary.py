"""LLM-written handoff summaries: what the person taking over needs to know, from the conversation so far."""

from __future__ import annotations

import asyncio
import uuid

from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel.ext.asyncio.session import AsyncSession

from switchboard.channels.render import shorten
from switchboard.conversations import transcript
from switchboard.crypto import CredentialDecryptError
from switchboard.llm.router import ModelCallFailed, ModelGateway
from switchboard.llm.trimming import strip_reasoning
from switchboard.observability import get_logger
from switchboard.tenant_settings import load_tenant_settings

__all__ = ["HANDOFF_SUMMARY_INSTRUCTION", "write_handoff_summary"]

log = get_logger(__name__)

HANDOFF_SUMMARY_INSTRUCTION = (
    "Write a handoff note for the person from the team who takes over this customer conversation: "
    "in at most 5 short lines say who the customer is (if known), what they want, what was already "
    "answered or tried, and what is still open. Write only the note."
)
"""System message of the summary call (the offline model answers it deterministically when scripted)."""
TRANSCRIPT_MESSAGES = 40
"""Newest messages of the conversation shown to the summary model."""
SUMMARY_TIMEOUT_S = 60.0
"""The longest the summary call may take, all retries and fallbacks included, seconds: then the
customer's messages quoted are the summary (below the ``handoff_notice`` job's 120 s, so the notice
always goes out)."""


async def write_handoff_summary(
    sessions: async_sessionmaker[AsyncSession],
    gateway: ModelGateway | None,
    *,
    tenant_id: uuid.UUID,
    conversation_id: uuid.UUID,
    trace_id: str,
) -> str:
    """A summary of the conversation for a human agent, at most ``handoff.summary_max_chars`` long
    (a longer one is cut at a word boundary with an ``…``).

    Uses the tenant's Router (one words-only call, at most :data:`SUMMARY_TIMEOUT_S`). When the model
    fails, is slower than that, or answers nothing, the summary is the customer's messages quoted (newest
    kept), so the agent always gets something; so it is without a ``gateway``.
    Never raises for model trouble (logged as ``handoff_summary_failed``).
    """
    async with sessions() as session:
        settings = await load_tenant_settings(session, tenant_id)
        lines = await transcript(
            session, tenant_id=tenant_id, conversation_id=conversation_id, limit=TRANSCRIPT_MESSAGES
        )
    limit = settings.handoff.summary_max_chars
    # cut at a word with an ellipsis (the newest messages kept), never mid-word
    quoted = " / ".join(line for line in lines if line.startswith("Customer:"))
    fallback = shorten(quoted, limit, "chars", words=True, keep="end") if quoted else "(no messages yet)"
    if not lines or gateway is None:
        return fallback
    prompt = [
        {"role": "system", "content": HANDOFF_SUMMARY_INSTRUCTION},
        {"role": "user", "content": "\n".join(lines)},
    ]
    try:
        router = gateway.router_for(tenant_id, settings.llm)
        async with asyncio.timeout(SUMMARY_TIMEOUT_S):
            reply = await gateway.complete(router, prompt, tools=None, llm=settings.llm, trace_id=trace_id)
    except (ModelCallFailed, CredentialDecryptError, TimeoutError) as exc:
        log.warning("handoff_summary_failed", conversation_id=str(conversation_id), error=str(exc)[:300])
        return fallback
    text = (strip_reasoning(reply.content) or "").strip()
    return shorten(text, limit, "chars", words=True) if text else fallback
