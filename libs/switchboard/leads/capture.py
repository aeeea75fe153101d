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
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from sqlalchemy import exists
from sqlalchemy import select as sa_select
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
from switchboard.standins.offline_demo import OFFLINE_MARKER

__all__ = [
    "OFFLINE_HEURISTIC",
    "ModelCheck",
    "capture_lead",
    "capture_lead_in",
    "heuristic_may_find_intent",
    "lead_recorded",
    "list_leads",
    "stage_lead_created",
]

log = get_logger(__name__)

OFFLINE_HEURISTIC = "offline_heuristic"
"""``leads.detected_by`` when the keyword heuristic decided (no provider model configured)."""
HEURISTIC_FALLBACK = "heuristic_fallback"
"""``leads.detected_by`` when the model's answer did not validate and the heuristic decided."""

ModelCheck = Callable[[list[dict[str, Any]]], Awaitable[tuple[str | None, str | None]]]
"""``check(prompt) -> (answer text, model id)``: one completion without tools (the orchestrator's gateway)."""


def stage_lead_created(session: AsyncSession, lead: Lead) -> None:
    """``lead.created`` for the tenant's systems, in the transaction that records ``lead``."""
    stage_event(
        session,
        tenant_id=lead.tenant_id,
        event_type="lead.created",
        data={
            "lead_id": lead.id,
            "conversation_id": lead.conversation_id,
            "customer_id": lead.customer_id,
            "interest": lead.interest,
            "summary": lead.summary,
            "consent": lead.consent,
            "source": lead.source,
            "detected_by": lead.detected_by,
        },
    )


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
            sessions,
            tenant_id=tenant_id,
            conversation_id=conversation_id,
            customer_id=customer_id,
            window_messages=window_messages,
            model_check=model_check,
            trace_id=trace_id,
        )
    except Exception as exc:  # noqa: BLE001 (a lead is never worth a failed turn; logged)
        log.error("lead_capture_failed", trace_id=trace_id, error=f"{type(exc).__name__}: {exc}"[:300])
        return None


async def _capture(
    sessions: async_sessionmaker[AsyncSession],
    *,
    tenant_id: uuid.UUID,
    conversation_id: uuid.UUID,
    customer_id: uuid.UUID,
    window_messages: int,
    model_check: ModelCheck | None,
    trace_id: str,
) -> Lead | None:
    async with sessions() as session:
        window = await _read_window(
            session,
            tenant_id=tenant_id,
            conversation_id=conversation_id,
            customer_id=customer_id,
            window_messages=window_messages,
        )
    if window is None:
        return None
    messages, opted_out = window
    verdict, detected_by = await _decide(messages, opted_out, model_check, trace_id)
    if not verdict.buying_intent:
        return None
    async with session_scope(sessions) as session:
        lead = await _insert_lead(
            session,
            tenant_id=tenant_id,
            conversation_id=conversation_id,
            customer_id=customer_id,
            verdict=verdict,
            detected_by=detected_by,
        )
    if lead is not None:
        lead_recorded(lead, trace_id)
    return lead


def heuristic_may_find_intent(rows: Sequence[Any], *, window_messages: int) -> bool:
    """Whether the offline heuristic finds buying intent in the newest ``window_messages`` of ``rows``:
    the turn's own rows, in memory, so that a turn without intent (most) skips :func:`capture_lead_in`'s
    savepoint and reads. ``True`` sends the caller to :func:`capture_lead_in`, which reads the window
    and the conversation's leads again and decides.

    Args:
        rows: the conversation's ``user`` and ``assistant`` rows (:class:`~switchboard.db.models.Message`
            or objects with its ``role``, ``kind``, ``text``, ``raw`` and ``tool_calls``), oldest first,
            as :func:`~switchboard.conversations.read_history` returns them; other roles are skipped.
        window_messages: how many of the newest rows the check reads (``leads.intent_window_messages``).
    """
    kept = [row for row in rows if row.role in ("user", "assistant")]
    window = kept[-window_messages:] if window_messages > 0 else []
    return heuristic_intent(_window(window), opted_out=False).buying_intent  # consent is not intent


async def capture_lead_in(
    session: AsyncSession,
    *,
    tenant_id: uuid.UUID,
    conversation_id: uuid.UUID,
    customer_id: uuid.UUID,
    window_messages: int,
    trace_id: str,
) -> Lead | None:
    """:func:`capture_lead` with the offline heuristic inside the caller's transaction (the turn's
    persist: no session, checkout or BEGIN/COMMIT of its own), in a SAVEPOINT so that a failure here
    rolls back only the lead's work and never the caller's (logged ``lead_capture_failed``).

    The caller calls :func:`lead_recorded` with the lead after its transaction commits.

    Returns:
        The lead staged now, or ``None`` (no intent, a lead exists, or the check failed: logged).
    """
    try:
        async with session.begin_nested():
            window = await _read_window(
                session,
                tenant_id=tenant_id,
                conversation_id=conversation_id,
                customer_id=customer_id,
                window_messages=window_messages,
            )
            if window is None:
                return None
            verdict, detected_by = await _decide(*window, None, trace_id)
            if not verdict.buying_intent:
                return None
            return await _insert_lead(
                session,
                tenant_id=tenant_id,
                conversation_id=conversation_id,
                customer_id=customer_id,
                verdict=verdict,
                detected_by=detected_by,
            )
    except Exception as exc:  # noqa: BLE001 (a lead is never worth a failed turn; logged)
        log.error("lead_capture_failed", trace_id=trace_id, error=f"{type(exc).__name__}: {exc}"[:300])
        return None


async def _read_window(
    session: AsyncSession,
    *,
    tenant_id: uuid.UUID,
    conversation_id: uuid.UUID,
    customer_id: uuid.UUID,
    window_messages: int,
) -> tuple[list[dict[str, Any]], bool] | None:
    """``(window messages, customer opted out)``, or ``None`` when the conversation has a lead already.
    The lead check and the customer's profile are one query (one round trip)."""
    has_lead = exists().where(col(Lead.tenant_id) == tenant_id, col(Lead.conversation_id) == conversation_id)
    profile = sa_select(col(Customer.profile)).where(col(Customer.id) == customer_id).scalar_subquery()
    connection = await session.connection()  # after the caller's flush (begin_nested / autoflush)
    found = (await connection.execute(sa_select(has_lead.label("has_lead"), profile.label("profile")))).one()
    if found.has_lead:
        return None
    rows = await read_history(
        session,
        tenant_id=tenant_id,
        conversation_id=conversation_id,
        roles=("user", "assistant"),
        limit=window_messages,
    )
    return _window(rows), bool((found.profile or {}).get("marketing_opt_out"))


async def _decide(
    messages: list[dict[str, Any]], opted_out: bool, model_check: ModelCheck | None, trace_id: str
) -> tuple[IntentVerdict, str]:
    """The verdict and ``detected_by``: the model's when it answers validly, else the heuristic's
    (``offline_heuristic`` when the offline stand-in answered, ``heuristic_fallback`` with a warning
    ``lead_intent_answer_invalid`` when a model's answer did not validate)."""
    verdict: IntentVerdict | None = None
    detected_by = OFFLINE_HEURISTIC
    if model_check is not None:
        answer, model_id = await model_check(intent_prompt(messages))
        verdict = parse_model_verdict(answer)
        if verdict is None and (answer or "").lstrip().startswith(OFFLINE_MARKER):
            # the offline stand-in answered (alone, or as a fallback): it cannot judge intent, and its
            # answer is no malformed one; the heuristic decides, as with only the offline model
            detected_by = OFFLINE_HEURISTIC
        elif verdict is None:
            log.warning("lead_intent_answer_invalid", trace_id=trace_id, model=model_id)
            detected_by = HEURISTIC_FALLBACK
        else:
            detected_by = f"model:{model_id or 'unknown'}"[:32]
            if opted_out:
                verdict = verdict.model_copy(update={"consent": "denied"})
    if verdict is None:
        verdict = heuristic_intent(messages, opted_out=opted_out)
    return verdict, detected_by


async def _insert_lead(
    session: AsyncSession,
    *,
    tenant_id: uuid.UUID,
    conversation_id: uuid.UUID,
    customer_id: uuid.UUID,
    verdict: IntentVerdict,
    detected_by: str,
) -> Lead | None:
    """Insert the lead and stage ``lead.created`` in ``session``'s transaction; ``None`` when another turn
    of the conversation recorded it a moment ago (same idempotency key)."""
    notes = (
        "Detected by a keyword heuristic: no provider model is configured (offline model)."
        if detected_by == OFFLINE_HEURISTIC
        else ""
    )
    values: dict[str, Any] = {
        "id": uuid.uuid4(),
        "tenant_id": tenant_id,
        "customer_id": customer_id,
        "conversation_id": conversation_id,
        "interest": verdict.product[:500],
        "notes": notes,
        "status": "new",
        "idempotency_key": f"intent:{conversation_id}",
        "source": "intent",
        "summary": verdict.summary,
        "consent": verdict.consent,
        "detected_by": detected_by,
        "created_at": utcnow(),
    }
    connection = await session.connection()
    inserted = (
        await connection.execute(
            pg_insert(Lead.__table__)  # type: ignore[attr-defined]  # SQLModel sets the table at class creation
            .values(**values)
            .on_conflict_do_nothing(constraint="uq_leads_tenant_idempotency")
            .returning(Lead.__table__.c.id)  # type: ignore[attr-defined]
        )
    ).scalar_one_or_none()
    if inserted is None:
        return None
    lead = Lead(**values)  # the row just written, as written: no read back
    stage_lead_created(session, lead)
    return lead


def lead_recorded(lead: Lead, trace_id: str) -> None:
    """The metric and log line of a lead recorded (after its transaction committed)."""
    metrics.LEADS_CREATED.inc()
    log.info(
        "lead_recorded",
        trace_id=trace_id,
        lead_id=str(lead.id),
        conversation_id=str(lead.conversation_id),
        detected_by=lead.detected_by,
        consent=lead.consent,
    )
