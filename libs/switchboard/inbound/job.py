"""``process_inbound``: one stored inbound message of any channel → (maybe) one turn → reply, exactly once.

The job receives the id of a stored ``messages`` row (the durable queue) and is safe to run any number
of times (ARQ is at-least-once; a killed worker's job runs again). It claims the row (:func:`claim`),
then runs :data:`switchboard.inbound.steps.STEPS` in order until one returns an
:class:`~switchboard.inbound.context.Outcome`.
"""

from __future__ import annotations

import uuid
from typing import Any

from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from switchboard.contracts import StoredInbound, trace_id_for
from switchboard.conversations import Actor, channel_identities, csat, open_conversation, resolve_customer
from switchboard.db.models import ChannelAccount, Conversation, Customer, InboundState, Message, utcnow
from switchboard.events import emit
from switchboard.events.outbox import has_subscriber
from switchboard.handoff.relay import agent_of_row
from switchboard.inbound.context import COMMENT_MARK, Dead, InboundContext, Outcome, WorkerDeps
from switchboard.inbound.steps import STEPS, release_lock
from switchboard.live_updates import publish_conversation_event
from switchboard.observability import get_logger, message_context, metrics, tracing
from switchboard.replies.parts import CHOICE_KINDS

__all__ = ["process_inbound", "claim"]

log = get_logger(__name__)


async def claim(deps: WorkerDeps, job: dict[str, Any], row_id: uuid.UUID) -> InboundContext | None:
    """Load and claim the row in one transaction: resolve the customer from the sender's identities and
    their open conversation (a tapped satisfaction rating: the conversation it rates), attach the row,
    move the service window's start.

    Returns ``None`` when the row is missing or already finished (``done`` / ``dead``); a row whose
    channel account was removed is dead-lettered.
    """
    async with deps.resources.sessions() as session, session.begin():
        # the row (locked) and its channel account in one statement
        found = (
            await session.exec(
                select(Message, ChannelAccount)
                .outerjoin(ChannelAccount, col(ChannelAccount.id) == Message.channel_account_id)
                .where(Message.id == row_id)
                .with_for_update(of=Message)  # type: ignore[arg-type]
            )
        ).first()
        if found is None:
            log.warning("inbound_missing", inbound_message_id=str(row_id))
            return None
        row, account = found
        if row.inbound_state in (InboundState.done.value, InboundState.dead.value):
            return None
        if account is None:
            row.inbound_state = InboundState.dead.value
            row.last_error = "channel account removed"
            log.error("inbound_dead_letter", inbound_message_id=str(row_id), error=row.last_error)
            metrics.DEAD_LETTERS.labels("inbound").inc()
            return None
        channel = deps.channel(row.channel)
        stored = StoredInbound.of(row.raw)
        customer = (
            await resolve_customer(
                session,
                tenant_id=row.tenant_id,
                identities=channel_identities(row.channel, stored.identities),
                display_name=stored.sender_name if row.direction == "inbound" else None,
                sent_at=row.sent_at,
            )
        ).customer
        rating = csat.parse_payload(stored.payload) if row.kind in CHOICE_KINDS else None
        comment_of = await _comment_of(session, row, stored, customer) if rating is None else None
        conversation = (
            (await csat.rated_conversation(session, customer=customer, rating=rating) if rating else None)
            or comment_of
        ) or await open_conversation(
            session,
            customer=customer,
            channel_account_id=account.id,
            actor=Actor.business_app() if stored.echo else None,
            thread_key=stored.thread_key,
        )
        if stored.review and not any(f.get("message_id") == str(row.id) for f in conversation.review_flags):
            conversation.review_flags = [
                *conversation.review_flags,
                *(
                    {"kind": kind, "message_id": str(row.id), "at": utcnow().isoformat()}
                    for kind in stored.review
                ),
            ]
            log.warning(
                "conversation_flagged_for_review",
                inbound_message_id=str(row_id),
                kinds=stored.review,
                conversation_id=str(conversation.id),
            )
        row.conversation_id = conversation.id
        if comment_of is not None:  # a re-run finds it in the same conversation, kept as the comment once
            row.raw = {**(row.raw or {}), COMMENT_MARK: str(comment_of.id)}
        if row.processing_attempts == 0 and row.role == "user":  # once, on the first claim
            await _emit_message_created(session, row)
        row.inbound_state = InboundState.processing.value
        row.processing_attempts += 1
        row.trace_id = row.trace_id or trace_id_for(conversation.id, row.id)
        if row.direction == "inbound" and row.kind != "system" and row.sent_at is not None:
            last = conversation.last_customer_message_at
            if last is None or row.sent_at > last:
                conversation.last_customer_message_at = row.sent_at
        session.add(conversation)
        session.add(row)
    return InboundContext(
        deps=deps,
        job=job,
        row=row,
        stored=stored,
        customer=customer,
        conversation=conversation,
        account=account,
        channel=channel,
    )


async def _comment_of(
    session: AsyncSession, row: Message, stored: StoredInbound, customer: Customer
) -> Conversation | None:
    """The rated conversation this customer text comments on (:func:`csat.awaiting_comment`; on a re-run,
    the one the first claim marked in ``raw``), or ``None``."""
    if row.kind != "text" or row.role != "user" or row.direction != "inbound" or stored.echo:
        return None
    marked = (row.raw or {}).get(COMMENT_MARK)
    if marked:
        return await session.get(Conversation, uuid.UUID(marked))
    return await csat.awaiting_comment(session, customer=customer, channel=row.channel)


async def _emit_message_created(session: AsyncSession, row: Message) -> None:
    """``message.created`` for the tenant's systems, with the conversation the row now belongs to, in the
    claim's transaction; written only when one of the tenant's endpoints takes it (the webhook path never
    pays for it), and never for a human agent's own message from their phone (a slash command or a reply
    to relay is not a customer's message). An event that does not validate is logged and left out."""
    if not await has_subscriber(session, tenant_id=row.tenant_id, event_type="message.created"):
        return
    if await agent_of_row(session, row) is not None:
        return
    try:
        await emit(
            session,
            tenant_id=row.tenant_id,
            event_type="message.created",
            if_subscribed=True,
            data={
                "message_id": row.id,
                "conversation_id": row.conversation_id,
                "channel": row.channel,
                "direction": "inbound",
                "role": "user",
                "kind": row.kind,
                "text": row.text,
            },
        )
    except ValueError as exc:  # pydantic.ValidationError is a ValueError
        log.error(
            "event_not_emitted",
            event_type="message.created",
            inbound_message_id=str(row.id),
            error=str(exc)[:300],
        )


async def process_inbound(ctx: dict[str, Any], inbound_message_id: str) -> str:
    """ARQ job: handle one stored inbound row (see the module docstring).

    Returns:
        The :class:`~switchboard.inbound.context.Outcome` value of the run.

    Raises:
        Retry: tenant limit reached, conversation busy, orchestrator or media temporarily failing, the
            database unavailable (:func:`switchboard.db.errors.is_connection_error`: no failure counted).
    """
    deps: WorkerDeps = ctx["deps"]
    row_id = uuid.UUID(inbound_message_id)
    try:
        ic = await claim(deps, ctx, row_id)
        if ic is None:
            return Outcome.missing_or_finished.value
        await publish_conversation_event(
            deps.resources.redis,
            tenant_id=ic.row.tenant_id,
            conversation_id=ic.conversation.id,
            kind="message",
        )
        with (
            message_context(
                tenant_id=str(ic.row.tenant_id),
                conversation_id=str(ic.conversation.id),
                trace_id=ic.row.trace_id,
            ),
            tracing.message_span(
                "inbound.message",
                ic.row.trace_id or "",
                first_attempt=ic.row.processing_attempts <= 1,
                attributes={
                    "channel": ic.row.channel,
                    "tenant.id": str(ic.row.tenant_id),
                    "conversation.id": str(ic.conversation.id),
                    "inbound_message.id": str(row_id),
                    "inbound_message.kind": ic.row.kind,
                    "job.try": int(ctx.get("job_try") or 1),
                },
            ) as current,
        ):
            log.info(
                "inbound_processing",
                inbound_message_id=str(row_id),
                channel=ic.row.channel,
                job_try=ctx.get("job_try"),
                kind=ic.row.kind,
            )
            try:
                for step in STEPS:
                    outcome = await step(ic)
                    if outcome is not None:
                        log.info("inbound_outcome", outcome=outcome.value, step=step.__name__)
                        await publish_conversation_event(
                            deps.resources.redis,
                            tenant_id=ic.row.tenant_id,
                            conversation_id=ic.conversation.id,
                            kind="reply",
                        )
                        current.set_attribute("inbound.outcome", outcome.value)
                        return outcome.value
            finally:
                await release_lock(ic)
        raise AssertionError("the last inbound step always returns an outcome")
    except Dead:
        return Outcome.dead.value
