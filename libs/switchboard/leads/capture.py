"""Recording leads: once per conversation, after a turn, when the intent check finds buying intent.

:func:`capture_lead` runs after every answered turn (:class:`switchboard.agent.turns.Orchestrator`).
It is cheap when there is nothing to do: a conversation that has a lead already (from the intent check
or the ``create_lead`` tool) costs one indexed query and no model call. The lead is inserted with the
idempotency key ``intent:<conversation id>`` (unique per tenant, ``ON CONFLICT DO NOTHING``), so two
turns finishing at once record one lead; ``lead.created`` (:mod:`switchboard.events`) is written in the
same transaction. Failures are logged and never fail the turn.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from switchboard.conversations import read_history
from switchboard.db.engine import session_scope
from switchboard.db.models import Customer, Lead, utcnow
from switchboard.events import stage_event
from switchboard.leads.intent import IntentVerdict, heuristic_intent, intent_prompt, parse_model_verdict
from switchboard.observability import get_logger, metrics
from switchboard.replies.parts import CHOICE_KINDS, chosen_option_text

__all__ = ["OFFLINE_HEURISTIC", "ModelCheck", "capture_lead", "list_leads", "stage_lead_created"]

log = get_logger(__name__)

OFFLINE_HEURISTIC = "offline_heuristic"
"""``leads.detected_by`` when the keyword heuristic decided (no provider model configured)."""
HEURISTIC_FALLBACK = "heuristic_fallback"
"""``leads.detected_by`` when the model's answer did not validate and the heuristic decided."""

ModelCheck = Callable[[list[dict[str, Any]]], Awaitable[tuple[str | None, str | None]]]
"""``check(prompt) -> (answer text, model id)``: one completion without tools (the orchestrator's gateway)."""


def stage_lead_created(session: AsyncSession, lead: Lead) -> None:
    """``lead.created`` for the tenant's systems, in the transaction that records ``lead``."""
    stage_event(session, tenant_id=lead.tenant_id, event_type="lead.created", data={
        "lead_id": lead.id, "conversation_id": lead.conversation_id, "customer_id": lead.customer_id,
        "interest": lead.interest, "summary": lead.summary, "consent": lead.consent, "source": lead.source,
        "detected_by": lead.detected_by,
    })  # fmt: skip


async def list_leads(
    session: AsyncSession, *, tenant_id: uuid.UUID, limit: int = 100, source: str | None = None
) -> list[Lead]:
    """The tenant's leads, newest first (``source``: ``tool`` or ``intent`` only)."""
    query = select(Lead).where(Lead.tenant_id == tenant_id)
    if source is not None:
        query = query.where(Lead.source == source)
    return list((await session.exec(query.order_by(col(Lead.created_at).desc()).limit(limit))).all())


def _window(rows: list[Any]) -> list[dict[str, Any]]:
    out = []
    for row in rows:
        text = row.text or ""
        payload = ((row.raw or {}).get("normalized") or {}).get("payload")
        if row.role == "user" and row.kind in CHOICE_KINDS and isinstance(payload, str):
            text = chosen_option_text(text, payload)
        message: dict[str, Any] = {"role": row.role, "content": text}
        if row.tool_calls:
            message["tool_calls"] = row.tool_calls
        out.append(message)
    return out


async def capture_lead(
    sessions: async_sessionmaker[AsyncSession],
    *,
    tenant_id: uuid.UUID,
    conversation_id: uuid.UUID,
    customer_id: uuid.UUID,
    window_messages: int,
    model_check: ModelCheck | None,
    trace_id: str,
) -> Lead | None:
    """Record the conversation's lead if the last ``window_messages`` show buying intent and it has none.

    Args:
        model_check: the provider model's completion, or ``None`` to use the offline heuristic.

    Returns:
        The lead recorded now, or ``None`` (no intent, a lead exists, or the check failed: logged).
    """
    try:
        return await _capture(
            sessions, tenant_id=tenant_id, conversation_id=conversation_id, customer_id=customer_id,
            window_messages=window_messages, model_check=model_check, trace_id=trace_id,
        )  # fmt: skip
    except Exception as exc:  # noqa: BLE001 (a lead is never worth a failed turn; logged)
        log.error("lead_capture_failed", trace_id=trace_id, error=f"{type(exc).__name__}: {exc}"[:300])
        return None


async def _capture(
    sessions: async_sessionmaker[AsyncSession], *, tenant_id: uuid.UUID, conversation_id: uuid.UUID,
    customer_id: uuid.UUID, window_messages: int, model_check: ModelCheck | None, trace_id: str,
) -> Lead | None:  # fmt: skip
    async with sessions() as session:
        existing = (
            await session.exec(
                select(Lead.id)
                .where(Lead.tenant_id == tenant_id, Lead.conversation_id == conversation_id)
                .limit(1)
            )
        ).first()
        if existing is not None:
            return None
        rows = await read_history(
            session, tenant_id=tenant_id, conversation_id=conversation_id, roles=("user", "assistant"),
            limit=window_messages,
        )  # fmt: skip
        customer = await session.get(Customer, customer_id)
    messages = _window(rows)
    opted_out = bool(customer is not None and (customer.profile or {}).get("marketing_opt_out"))
    verdict: IntentVerdict | None = None
    detected_by = OFFLINE_HEURISTIC
    if model_check is not None:
        answer, model_id = await model_check(intent_prompt(messages))
        verdict = parse_model_verdict(answer)
        if verdict is None:
            log.warning("lead_intent_answer_invalid", trace_id=trace_id, model=model_id)
            detected_by = HEURISTIC_FALLBACK
        else:
            detected_by = f"model:{model_id or 'unknown'}"[:32]
            if opted_out:
                verdict = verdict.model_copy(update={"consent": "denied"})
    if verdict is None:
        verdict = heuristic_intent(messages, opted_out=opted_out)
    if not verdict.buying_intent:
        return None
    notes = (
        "Detected by a keyword heuristic: no provider model is configured (offline model)."
        if detected_by == OFFLINE_HEURISTIC
        else ""
    )
    lead_id = uuid.uuid4()
    async with session_scope(sessions) as session:
        connection = await session.connection()
        inserted = (
            await connection.execute(
                pg_insert(Lead.__table__)  # type: ignore[arg-type]
                .values(
                    id=lead_id,
                    tenant_id=tenant_id,
                    customer_id=customer_id,
                    conversation_id=conversation_id,
                    interest=verdict.product[:500],
                    notes=notes,
                    status="new",
                    idempotency_key=f"intent:{conversation_id}",
                    source="intent",
                    summary=verdict.summary,
                    consent=verdict.consent,
                    detected_by=detected_by,
                    created_at=utcnow(),
                )
                .on_conflict_do_nothing(constraint="uq_leads_tenant_idempotency")
                .returning(Lead.__table__.c.id)  # type: ignore[attr-defined]
            )
        ).scalar_one_or_none()
        if inserted is None:
            return None  # another turn of the conversation recorded it a moment ago
        lead = await session.get(Lead, lead_id)
        assert lead is not None
        stage_lead_created(session, lead)
    metrics.LEADS_CREATED.inc()
    log.info(
        "lead_recorded", trace_id=trace_id, lead_id=str(lead_id), conversation_id=str(conversation_id),
        detected_by=detected_by, consent=verdict.consent,
    )  # fmt: skip
    return lead
