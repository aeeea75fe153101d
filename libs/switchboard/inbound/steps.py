"""The inbound steps, in order (:data:`STEPS`). Each takes the job's :class:`InboundContext` and returns
an :class:`Outcome` to end the run, or ``None`` to go on to the next step. None names a channel:
what differs per channel is behind :class:`~switchboard.channels.base.Channel`.

1. :func:`record_only` — rows that never wake the agent (stickers, reactions, system messages,
   echoes) are recorded; an echo of our own send is recorded on its outbox row
   (:mod:`switchboard.outbox.echoes`), any other echo is a person typing in the business's own app and
   hands the conversation to a person.
2. :func:`customer_profile` — a customer without a name on a channel whose webhooks carry none
   (Instagram) gets the provider's name and username, once, cached.
3. :func:`agent_console` — a message from one of the tenant's human agents is a slash command or a
   reply to relay (:mod:`switchboard.handoff.relay`), never a customer message.
4. :func:`customer_limit` — over the per-customer limit: one polite slow-down reply per window.
5. :func:`tenant_limit` — over the per-tenant limit: ``Retry`` later; the customer sees nothing.
6. :func:`csat_answer` — a tapped satisfaction rating (:mod:`switchboard.conversations.csat`) is stored
   and thanked, without a model turn, in the conversation it rates; the customer is invited to add a
   comment. :func:`csat_comment` — their next text (attached to the rated conversation by the claim) is
   kept as the comment and thanked, without a model turn.
7. :func:`buttons` — a configured button payload acts without a model turn (opt-out, talk to a person).
8. :func:`human_mode` — a conversation with a person: the message is relayed to the agent.
9. :func:`coalesce` — a newer message of the same customer is waiting: that one's turn answers both.
10. :func:`lock_conversation` — one turn at a time per conversation.
11. :func:`absorb_older` — older waiting messages of the customer join this turn.
12. :func:`out_of_hours` — outside the tenant's business hours with ``hours.outside_hours = "person"``:
    no model turn; the conversation waits for a person at the next opening and the customer is told when.
13. :func:`reply_cap` — a channel's cap on automatic replies per conversation (Gmail): over it, a person.
14. :func:`media_to_text` — every message of the turn with media becomes text first; a voice message
    no transcription could read (even converted to WAV) is told to the customer
    (``agent.unreadable_audio_reply``) and hands the conversation to a person.
15. :func:`turn` — ``POST /v1/turns``; an answer not ready by the tenant's ``agent.first_reply_deadline_s``
    (from the message's arrival) sends ``agent.holding_reply`` first, once (:func:`answer_or_hold`); the reply (and its structured parts, rendered by the channel) is
    split to the channel's limits into the outbox. A tapped button or list row reaches the model as its
    title with the option id (:func:`switchboard.replies.chosen_option_text`).
16. :func:`send_reply` — the delivery loop sends the parts.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import timedelta
from functools import partial
from typing import Any

from arq.worker import Retry
from sqlalchemy import and_, func, or_, true, update
from sqlmodel import col, select

from switchboard.budgets.spend import budget_state
from switchboard.channels.base import business_app_of, split_text
from switchboard.contracts import TurnRequest, TurnResult
from switchboard.conversations import Actor, csat
from switchboard.db.models import (
    Conversation,
    ConversationStatus,
    Customer,
    InboundState,
    Message,
    Outbox,
    OutboxPurpose,
    OutboxStatus,
    Tenant,
    utcnow,
)
from switchboard.handoff import hours
from switchboard.handoff.hours import waiting_reply
from switchboard.handoff.relay import agent_for_row, handle_agent_message, relay_customer_message
from switchboard.handoff.service import escalate_and_notify
from switchboard.inbound.context import COMMENT_MARK, Dead, InboundContext, Outcome
from switchboard.inbound.media import (
    MAX_MEDIA_BYTES,
    MEDIA_KINDS,
    AudioNotUnderstood,
    MediaModels,
    MediaUnavailable,
    cost_by_kind,
)
from switchboard.inbound.media import media_to_text as convert_media
from switchboard.inbound.ratelimit import count_in_window, take_slot
from switchboard.inbound.turn_client import ContractViolation, OrchestratorUnavailable, request_turn
from switchboard.llm.health import MODEL_UNAVAILABLE
from switchboard.observability import get_logger, metrics
from switchboard.outbox import reply_items, text_items, write_outbox
from switchboard.outbox.delivery import DeliveryScope, deliver
from switchboard.outbox.echoes import match_echo
from switchboard.outbox.jobs import delivery_deps_from
from switchboard.queue.jobs import Backoff, enqueue_deliver_outbox
from switchboard.queue.keys import (
    burst_key,
    contract_violation_counter_key,
    conversation_lock_key,
    customer_rate_key,
    customer_slowdown_key,
    deliver_job_id,
    inbound_failures_key,
    profile_cache_key,
    tenant_rate_key,
)
from switchboard.queue.lease import LEASE_S, lease
from switchboard.replies.parts import CHOICE_KINDS, chosen_option_text
from switchboard.tenant_settings import RateLimitSettings, tenant_settings_from

__all__ = [
    "STEPS",
    "Step",
    "SLOWDOWN_TEXT",
    "CONTRACT_VIOLATION_MAX_TRIES",
    "finish",
    "retry_or_dead",
    "release_lock",
    "BUTTON_KINDS",
    "business_app_echo_reason",
    "answer_or_hold",
]

_PERSON_ACTORS = frozenset({"agent", "business_app", "console_user", "api"})
"""Actor types of a person (``conversations.status_actor_type``): a takeover that silences the AI's reply."""

log = get_logger(__name__)

OLDER_CLAIM_WAIT_S = 5.0
"""Longest wait of a turn for an older message of the customer whose job has claimed it (seconds)."""
OLDER_CLAIM_POLL_S = 0.1
"""How often that wait looks again (seconds)."""

Step = Callable[[InboundContext], Awaitable[Outcome | None]]

SLOWDOWN_TEXT: str = RateLimitSettings.model_fields["slowdown_reply"].default
"""The one polite reply a customer over the per-customer limit gets per window (English default; a
tenant's ``rate_limits.slowdown_reply``, or its translation in the tenant's ``locale.language``, wins)."""
CONTRACT_VIOLATION_MAX_TRIES = 3
"""Tries of a turn whose answer broke the contract before it is logged as ``contract_violation``."""
LOCK_BACKOFF = Backoff(1.0, 10.0)
"""Wait before trying again when another turn of the same conversation holds the lock (grows per try)."""
RETRY_MAX_DEFER_S = 60.0
"""Longest wait between two tries of a turn that hit a transient failure, seconds."""
PROFILE_RETRY_S = 300
"""After a failed profile lookup, the customer's profile is asked again at the earliest this much later."""
ECHO_WAIT_TRIES = 5
"""Runs an echo waits while one of our sends to the same customer is in flight and unmatched (its answer,
the mid, may still come) before it counts as a person's message."""
ECHO_BACKOFF = Backoff(1.0, 2.0)
"""Wait between those runs (about 1, then 2 seconds, jittered)."""
BUTTON_KINDS = CHOICE_KINDS
"""Row kinds whose stored ``payload`` is a button id (:data:`switchboard.replies.parts.CHOICE_KINDS`)."""
_RELEASE_LOCK = (
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end"
)


# --- shared helpers -------------------------------------------------------------------------------


def business_app_echo_reason(channel: str) -> str:
    """``"a human replied from the WhatsApp Business app"``: the escalation reason of an echo."""
    return f"a human replied from the {business_app_of(channel)}"


async def finish(ic: InboundContext, state: InboundState, error: str | None = None) -> None:
    """Move the row to ``state`` (``done`` / ``dead``) with the reason in ``last_error``."""
    async with ic.deps.resources.sessions() as session, session.begin():
        await session.exec(
            update(Message)
            .where(col(Message.id) == ic.row_id)
            .values(inbound_state=state.value, last_error=error, processed_at=utcnow())
        )


async def _set_pending(ic: InboundContext, error: str | None) -> None:
    async with ic.deps.resources.sessions() as session, session.begin():
        await session.exec(
            update(Message)
            .where(col(Message.id) == ic.row_id, Message.inbound_state == InboundState.processing.value)
            .values(inbound_state=InboundState.pending.value, last_error=error)
        )


async def retry_or_dead(deps: Any, job: dict[str, Any], row_id: uuid.UUID, error: str) -> Retry:
    """A transient failure: ``Retry`` with a growing delay, or the dead-letter state after
    ``INBOUND_MAX_TRIES`` failures of this row (counted apart from lock/limit deferrals).

    Raises:
        Dead: the row was dead-lettered (the job returns :attr:`Outcome.dead`).
    """
    job_try = int(job.get("job_try", 1))
    key = inbound_failures_key(row_id)
    failures = int(await deps.redis.incr(key))
    await deps.redis.expire(key, 86_400)
    dead = failures >= deps.settings.inbound_max_tries
    async with deps.resources.sessions() as session, session.begin():
        if dead:
            await session.exec(
                update(Message)
                .where(col(Message.id) == row_id)
                .values(inbound_state=InboundState.dead.value, last_error=error, processed_at=utcnow())
            )
        else:
            await session.exec(
                update(Message)
                .where(col(Message.id) == row_id, Message.inbound_state == InboundState.processing.value)
                .values(inbound_state=InboundState.pending.value, last_error=error)
            )
    if dead:
        log.error("inbound_dead_letter", inbound_message_id=str(row_id), job_try=job_try, error=error)
        metrics.DEAD_LETTERS.labels("inbound").inc()
        raise Dead()
    defer_s = Backoff(deps.settings.inbound_retry_defer_s, RETRY_MAX_DEFER_S).delay_s(failures)
    log.warning(
        "inbound_retry", inbound_message_id=str(row_id), job_try=job_try, defer_s=defer_s, error=error
    )
    return Retry(defer=defer_s)


async def _deliver(ic: InboundContext, scope: DeliveryScope) -> int:
    """Send what ``scope`` has due now; parts waiting for a retry get a deferred delivery job.

    Returns the parts sent now.
    """
    report = await deliver(delivery_deps_from(ic.job), scope)
    if report.retry_in_s is not None:
        await enqueue_deliver_outbox(
            ic.deps.redis,
            job_id=deliver_job_id(scope.inbound_message_id or scope.conversation_id, report.retry_in_s),
            defer_s=report.retry_in_s,
            inbound_message_id=scope.inbound_message_id,
            conversation_id=scope.conversation_id,
            plus_conversation_id=scope.plus_conversation_id,
        )
    return report.sent


async def _deliver_row(ic: InboundContext) -> int:
    """Send this row's parts and notices written about the conversation meanwhile (an escalation), in
    one pass (oldest first). Returns the parts sent."""
    return await _deliver(
        ic, DeliveryScope(inbound_message_id=ic.row_id, plus_conversation_id=ic.conversation.id)
    )


async def _write_reply(
    ic: InboundContext, texts: list[str], trace_id: str, structured: list[Any] | None = None
) -> None:
    """The reply parts for this row (split to the channel's limit; ``structured`` parts after the text,
    rendered by the channel), written once however often the job runs."""
    limit, unit = ic.channel.capabilities.text_limit, ic.channel.capabilities.text_unit
    address = {
        "conversation_id": ic.conversation.id,
        "channel": ic.row.channel,
        "channel_account_id": ic.account.id,
        "recipient": ic.reply_address,
    }
    if structured:
        items = reply_items("\n\n".join(texts), structured, **address)
    else:
        items = text_items([part for text in texts for part in split_text(text, limit, unit)], **address)
    async with ic.deps.resources.sessions() as session, session.begin():
        await write_outbox(
            session, tenant_id=ic.row.tenant_id, items=items, inbound_message_id=ic.row_id, trace_id=trace_id
        )
    if ic.lock_token is not None:
        ic.notes["has_reply"] = True


async def _has_reply(ic: InboundContext) -> bool:
    """Whether this row's reply is in the outbox (a re-run after it was written).

    Read once while the conversation lock is held and remembered: only this run's ``turn`` writes the
    row's reply then, and it does not ask again after writing. Before the lock it is read each time."""
    if "has_reply" in ic.notes:
        return bool(ic.notes["has_reply"])
    async with ic.deps.resources.sessions() as session:
        found = (
            await session.exec(
                select(Outbox.id)
                .where(Outbox.inbound_message_id == ic.row_id, Outbox.purpose == OutboxPurpose.reply.value)
                .limit(1)
            )
        ).first()
    if ic.lock_token is not None:
        ic.notes["has_reply"] = found is not None
    return found is not None


async def _reply_failure(ic: InboundContext) -> str | None:
    """The error code of a failed reply part of this row, if any."""
    async with ic.deps.resources.sessions() as session:
        return (
            await session.exec(
                select(Outbox.error_code)
                .where(
                    Outbox.inbound_message_id == ic.row_id,
                    Outbox.purpose == OutboxPurpose.reply.value,
                    Outbox.status == OutboxStatus.failed.value,
                )
                .limit(1)
            )
        ).first()


async def _tenant(ic: InboundContext) -> Tenant | None:
    """The tenant's row, read once per run (``None``: deleted meanwhile)."""
    if "tenant" not in ic.notes:
        async with ic.deps.resources.sessions() as session:
            ic.notes["tenant"] = await session.get(Tenant, ic.row.tenant_id)
    return ic.notes["tenant"]  # type: ignore[no-any-return]


async def load_tenant_settings(ic: InboundContext) -> Any:
    """The tenant's settings, loaded once per run."""
    if ic.tenant_settings is None:
        tenant = await _tenant(ic)
        ic.tenant_settings = tenant_settings_from(
            tenant.settings_extensions if tenant else None, tenant_id=str(ic.row.tenant_id)
        )
    return ic.tenant_settings


async def release_lock(ic: InboundContext) -> None:
    """Release the conversation lock if this run holds it (only our own token is deleted)."""
    if ic.lock_lease is not None:
        await ic.lock_lease.aclose()
        ic.lock_lease = None
    if ic.lock_token is not None:
        await ic.deps.redis.eval(_RELEASE_LOCK, 1, conversation_lock_key(ic.conversation.id), ic.lock_token)
        ic.lock_token = None


# --- the steps ------------------------------------------------------------------------------------


async def record_only(ic: InboundContext) -> Outcome | None:
    """Rows that never wake the agent: recorded; an echo of the business's own app hands over to a
    person; channel effects (a number change) run in the same transaction."""
    row = ic.row
    if ic.stored.action == "process" and row.direction == "inbound":
        return None
    if ic.stored.echo:
        async with ic.deps.resources.sessions() as session, session.begin():
            match = await match_echo(session, row, row.sender_external_id or "")
        if match.verdict == "ours":
            return Outcome.echo_of_ours
        if match.verdict == "wait" and int(ic.job.get("job_try", 1)) < ECHO_WAIT_TRIES:
            log.info("echo_waits_for_send", job_try=int(ic.job.get("job_try", 1)))
            raise ECHO_BACKOFF.retry(int(ic.job.get("job_try", 1)))
        # nothing of ours matches: a person typed it in the provider's own app
    if ic.stored.echo and ic.conversation.status == ConversationStatus.ai.value:
        assignment = await escalate_and_notify(
            ic.deps.resources.sessions,
            ic.deps.gateway,
            tenant_id=row.tenant_id,
            conversation_id=ic.conversation.id,
            reason=business_app_echo_reason(row.channel),
            trace_id=row.trace_id or "",
            actor=Actor.business_app(),
            redis=ic.deps.redis,
        )
        log.info("business_app_echo", handoff="human", queued=assignment.agent is None)
        await _deliver(
            ic, DeliveryScope(conversation_id=ic.conversation.id)
        )  # due rows (the notice is queued)
    async with ic.deps.resources.sessions() as session, session.begin():
        await ic.channel.on_record_only(session, row, ic)
        await session.exec(
            update(Message)
            .where(col(Message.id) == row.id)
            .values(inbound_state=InboundState.done.value, processed_at=utcnow(), last_error=None)
        )
    return Outcome.recorded


async def customer_profile(ic: InboundContext) -> Outcome | None:
    """A customer without a name, on a channel whose webhooks carry none (Instagram): ask the provider
    once (``Channel.customer_profile``, cached ``INSTAGRAM_PROFILE_CACHE_S`` in Redis, a failure
    :data:`PROFILE_RETRY_S`) and
    keep the name and username on the customer. Optional: a failure is logged and the message goes on."""
    row, customer = ic.row, ic.customer
    ttl_s = int(ic.settings.instagram_profile_cache_s)
    if customer.display_name or row.direction != "inbound" or not row.sender_external_id or ttl_s <= 0:
        return None
    section = getattr(await load_tenant_settings(ic), row.channel, None)
    if section is not None and getattr(section, "fetch_profiles", True) is False:
        return None
    key = profile_cache_key(row.channel, row.channel_account_id, row.sender_external_id)
    cached = await ic.deps.redis.get(key)
    if cached is not None:
        profile = json.loads(cached)
    else:
        try:
            profile = await ic.channel.customer_profile(ic.account, row.sender_external_id)
        except Exception as exc:  # noqa: BLE001 (a name is a courtesy: never blocks the message)
            log.warning("customer_profile_failed", error=f"{type(exc).__name__}: {exc}"[:200])
            profile = {}
        if profile is None:  # the channel has no lookup
            return None
        # a failure is remembered briefly (PROFILE_RETRY_S), so a refused lookup is not asked per message
        await ic.deps.redis.set(
            key, json.dumps(profile), ex=ttl_s if profile else min(ttl_s, PROFILE_RETRY_S)
        )
    if not profile:
        return None
    async with ic.deps.resources.sessions() as session, session.begin():
        stored = await session.get(Customer, customer.id, with_for_update=True)
        if stored is not None and not stored.display_name:
            stored.display_name = (profile.get("name") or profile.get("username") or "")[:200] or None
            if profile.get("username"):
                stored.profile = {**(stored.profile or {}), "username": profile["username"]}
            stored.updated_at = utcnow()
            session.add(stored)
            ic.customer = stored
    log.info("customer_profile_stored", has_username=bool(profile.get("username")))
    return None


async def agent_console(ic: InboundContext) -> Outcome | None:
    """A human agent's phone: a slash command or a reply to relay, never a customer message."""
    row = ic.row
    agent = await agent_for_row(ic.deps.resources.sessions, row)
    if agent is None:
        return None
    outcome = await handle_agent_message(
        ic.deps.resources.sessions,
        ic.deps.gateway,
        row=row,
        agent=agent,
        console=ic.conversation,
        redis=ic.deps.redis,
    )
    # the agent's held-back notices first (their window just opened), then this message's answers
    await _deliver(ic, DeliveryScope(tenant_id=row.tenant_id, recipient=agent.phone))
    await _deliver(ic, DeliveryScope(inbound_message_id=row.id))
    await finish(ic, InboundState.done, None)
    return Outcome(outcome)


async def suspended(ic: InboundContext) -> Outcome | None:
    """A tenant a platform admin suspended (``tenants.suspended_at``): the message stays stored, unanswered."""
    tenant = await _tenant(ic)
    if tenant is None or tenant.suspended_at is None:
        return None
    log.warning("inbound_tenant_suspended")
    await finish(ic, InboundState.done, "tenant suspended: not answered")
    return Outcome.suspended


async def customer_limit(ic: InboundContext) -> Outcome | None:
    """Over the per-customer limit (sliding window): one polite reply per window, then silence.

    The limit and window are the tenant's ``rate_limits`` where set, else the process values; the
    reply is the tenant's ``rate_limits.slowdown_reply`` (in its language unless it wrote its own).
    """
    row, settings, redis = ic.row, ic.settings, ic.deps.redis
    limits = (await load_tenant_settings(ic)).rate_limits
    limit = limits.customer_rate_limit or settings.customer_rate_limit
    window_s = limits.customer_rate_window_s or settings.customer_rate_window_s
    window = await count_in_window(
        redis, customer_rate_key(row.tenant_id, ic.customer.id), str(row.id), window_s
    )
    if window.count <= limit:
        return None
    notice_key = customer_slowdown_key(row.tenant_id, ic.customer.id)
    owner = await redis.set(notice_key, str(row.id), nx=True, ex=max(1, int(window_s)))
    owner = owner or (await redis.get(notice_key)) == str(row.id).encode()  # a re-run of the owner
    log.warning("customer_rate_limited", count=window.count, limit=limit)
    if not owner:
        await finish(ic, InboundState.done, "customer rate limit: not answered")
        return Outcome.rate_limited
    await _write_reply(ic, [limits.slowdown_reply], row.trace_id or "")
    await _deliver_row(ic)
    await finish(ic, InboundState.done, "customer rate limit: slow-down reply sent")
    return Outcome.slowdown_sent


async def tenant_limit(ic: InboundContext) -> Outcome | None:
    """Over the per-tenant limit (the tenant's ``rate_limits`` where set, else the process values):
    a ``Retry`` after at least ``TENANT_RATE_DEFER_S`` (jittered up to twice it, longer each try); the
    customer sees nothing.

    Raises:
        Retry: the tenant's window is full.
    """
    row, settings = ic.row, ic.settings
    limits = (await load_tenant_settings(ic)).rate_limits
    limit = limits.tenant_rate_limit or settings.tenant_rate_limit
    slot = await take_slot(
        ic.deps.redis,
        tenant_rate_key(row.tenant_id),
        str(row.id),
        limits.tenant_rate_window_s or settings.tenant_rate_window_s,
        limit,
    )
    if slot.allowed:
        return None
    # at least TENANT_RATE_DEFER_S (the window must have room again), up to twice it, longer each try
    base_s = settings.tenant_rate_defer_s
    wait_s = Backoff(2 * base_s, 8 * base_s).delay_s(int(ic.job.get("job_try", 1)))
    await _set_pending(ic, f"tenant rate limit: deferred {wait_s:.1f} s")
    log.warning("tenant_rate_limited", limit=limit, defer_s=round(wait_s, 3))
    raise Retry(defer=wait_s)


def _button_action(ic: InboundContext, actions: dict[str, str]) -> str | None:
    payload = ic.stored.payload
    if ic.row.kind not in BUTTON_KINDS or not isinstance(payload, str) or not payload.strip():
        return None
    return actions.get(payload.strip().lower())


async def buttons(ic: InboundContext) -> Outcome | None:
    """A configured button payload acts at once: the channel's own (opt-out) win over the tenant's
    ``handoff.button_payloads`` (talk to a person). Payloads compare case-insensitively."""
    tenant_settings = await load_tenant_settings(ic)
    actions = {p.strip().lower(): "handoff" for p in tenant_settings.handoff.button_payloads if p.strip()}
    actions.update(ic.channel.acted_buttons(tenant_settings))
    ic.acted_payloads = frozenset(actions)
    action = _button_action(ic, actions)
    if action == "opt_out":
        return await _opt_out(ic)
    if action == "handoff" and (
        ic.conversation.status != ConversationStatus.human.value
        or (ic.row.raw or {}).get("button_action") == "handoff"  # a re-run of this row's own escalation
    ):
        return await _button_handoff(ic)
    return None


async def csat_answer(ic: InboundContext) -> Outcome | None:
    """A tapped satisfaction rating of this conversation (the claim attached the tap to the conversation
    it rates): stored the first time, and ``csat.thanks_reply`` written in the same transaction, so a
    re-run only resumes sending and a second tap changes nothing."""
    rating = csat.parse_payload(ic.stored.payload) if ic.row.kind in BUTTON_KINDS else None
    if rating is None or rating.conversation_id != ic.conversation.id:
        return None
    settings = await load_tenant_settings(ic)
    row = ic.row
    async with ic.deps.resources.sessions() as session, session.begin():
        stored = await csat.record_answer(
            session, tenant_id=row.tenant_id, customer_id=ic.customer.id, rating=rating
        )
        if stored:
            follow_up = settings.csat.comment_question.strip()  # the next text is kept as the comment
            await _write_texts(ic, session, [settings.csat.thanks_reply, *([follow_up] if follow_up else [])])
    await _deliver_row(ic)
    await finish(ic, InboundState.done, None)
    return Outcome.csat_answered


async def _write_texts(ic: InboundContext, session: Any, texts: list[str]) -> None:
    """Write ``texts`` to the customer, keyed by this inbound row, in ``session``'s transaction."""
    items = text_items(
        texts,
        conversation_id=ic.conversation.id,
        channel=ic.row.channel,
        channel_account_id=ic.account.id,
        recipient=ic.reply_address,
    )
    await write_outbox(
        session,
        tenant_id=ic.row.tenant_id,
        items=items,
        inbound_message_id=ic.row.id,
        trace_id=ic.row.trace_id,
    )


async def csat_comment(ic: InboundContext) -> Outcome | None:
    """A text message the claim attached to the closed conversation the customer just rated (they were
    invited to add a comment): kept as the rating's comment and thanked (``csat.comment_thanks``), with
    no model turn. The thanks is written in the same transaction as the comment, which is kept once, so
    a re-run only resumes sending."""
    row = ic.row
    if (row.raw or {}).get(COMMENT_MARK) != str(ic.conversation.id):
        return None
    settings = await load_tenant_settings(ic)
    async with ic.deps.resources.sessions() as session, session.begin():
        if await csat.record_comment(
            session, tenant_id=row.tenant_id, conversation_id=ic.conversation.id, text=row.text or ""
        ):
            await _write_texts(ic, session, [settings.csat.comment_thanks])
    await _deliver_row(ic)
    await finish(ic, InboundState.done, None)
    return Outcome.csat_commented


async def _opt_out(ic: InboundContext) -> Outcome:
    """Record ``customers.profile["marketing_opt_out"]`` and write one confirmation in one transaction,
    so a re-run only resumes sending. Ordinary messages are still answered afterwards."""
    row = ic.row
    reply = ic.channel.opt_out_reply(ic.tenant_settings)  # type: ignore[attr-defined]
    async with ic.deps.resources.sessions() as session, session.begin():
        done = (
            await session.exec(select(Outbox.id).where(Outbox.inbound_message_id == row.id).limit(1))
        ).first()
        if done is None:
            customer = (
                await session.exec(select(Customer).where(Customer.id == ic.customer.id).with_for_update())
            ).one()
            customer.profile = {
                **(customer.profile or {}),
                "marketing_opt_out": {
                    "at": utcnow().isoformat(),
                    "source": {
                        "channel": row.channel,
                        "payload": ic.stored.payload,
                        "message_id": row.external_id,
                    },
                },
            }
            customer.updated_at = utcnow()
            session.add(customer)
            log.info("customer_opted_out", customer_id=str(customer.id), payload=ic.stored.payload)
    if done is None:
        await _write_reply(ic, [reply], row.trace_id or "")
    await _deliver_row(ic)
    await finish(ic, InboundState.done, None)
    return Outcome.opted_out


async def _button_handoff(ic: InboundContext) -> Outcome:
    """Escalate as ``escalate_to_human`` does (least-loaded online agent or the queue, the agent's notice
    with a summary), then tell the customer (``agent.handoff_reply`` or ``handoff.queue_reply``).

    The row is marked (``raw.button_action``) before escalating, so a re-run still takes this path once
    the conversation is in human mode; once the customer's reply is in the outbox a re-run only resumes
    sending.
    """
    row = ic.row
    if not await _has_reply(ic):
        title = (row.text or "").strip() or str(ic.stored.payload)
        async with ic.deps.resources.sessions() as session, session.begin():
            await session.exec(
                update(Message)
                .where(col(Message.id) == row.id)
                .values(raw=Message.raw.op("||")({"button_action": "handoff"}))  # type: ignore[union-attr]
            )
        assignment = await escalate_and_notify(
            ic.deps.resources.sessions,
            ic.deps.gateway,
            tenant_id=row.tenant_id,
            conversation_id=ic.conversation.id,
            reason=f"customer pressed {title}",
            trace_id=row.trace_id or "",
            actor=Actor.customer(ic.customer.id),
            redis=ic.deps.redis,
        )
        queued = assignment.agent is None
        log.info("conversation_escalated", source="button", payload=ic.stored.payload, queued=queued)
        settings = ic.tenant_settings
        await _write_reply(
            ic,
            [waiting_reply(settings, assignment.opens_at) if queued else settings.agent.handoff_reply],
            row.trace_id or "",
        )
    await _deliver_row(ic)
    await finish(ic, InboundState.done, None)
    return Outcome.button_handoff


async def human_mode(ic: InboundContext) -> Outcome | None:
    """With a person: relay to the assigned agent (or wait in the queue); no model call."""
    if ic.conversation.status != ConversationStatus.human.value:
        return None
    relayed = await relay_customer_message(
        ic.deps.resources.sessions, row=ic.row, conversation=ic.conversation, customer=ic.customer
    )
    await _deliver(ic, DeliveryScope(inbound_message_id=ic.row_id))
    await finish(ic, InboundState.done, None)
    log.info("inbound_for_human", handoff="human", relay=relayed)
    return Outcome.human_mode


def _not_acted_button(ic: InboundContext) -> Any:
    """Rows that are not buttons handled without a turn (a turn must never swallow one, nor wait for it)."""
    if not ic.acted_payloads:
        return true()
    payload = Message.raw["normalized"]["payload"].astext  # type: ignore[index]
    return or_(
        col(Message.kind).notin_(BUTTON_KINDS),
        payload.is_(None),
        func.lower(func.trim(payload)).notin_(sorted(ic.acted_payloads)),
    )


def _same_customer(ic: InboundContext) -> Any:
    """Inbound rows of this customer on this account (attached to the conversation, or not yet)."""
    ids = {ic.row.sender_external_id, ic.customer.external_user_id, ic.customer.phone}
    ids |= {identity.value for identity in ic.stored.identities}
    ids.discard(None)
    same_sender: Any = col(Message.sender_external_id).in_(ids)
    if ic.stored.thread_key:  # a thread is a conversation (Gmail): another thread's mail waits for its own
        same_sender = and_(
            same_sender,
            Message.raw["normalized"]["thread_key"].astext == ic.stored.thread_key,  # type: ignore[index]
        )
    return and_(
        Message.channel_account_id == ic.row.channel_account_id,
        Message.direction == "inbound",
        or_(Message.conversation_id == ic.conversation.id, same_sender),
    )


async def coalesce(ic: InboundContext) -> Outcome | None:
    """A newer message of this customer (one that wakes the agent) is waiting: leave this one to that
    message's turn, unless the burst is older than ``INBOUND_MAX_WAIT_S``."""
    row, redis = ic.row, ic.deps.redis
    ic.burst_key = burst_key(ic.conversation.id)
    burst_start = await redis.get(ic.burst_key)
    burst_age_s = time.time() - float(burst_start) if burst_start else 0.0
    if burst_age_s >= ic.settings.inbound_max_wait_s:
        return None
    async with ic.deps.resources.sessions() as session:
        newer = (
            await session.exec(
                select(Message.id)
                .where(
                    _same_customer(ic),
                    Message.id != row.id,
                    Message.created_at > row.created_at,
                    col(Message.inbound_state).in_(
                        (InboundState.pending.value, InboundState.processing.value)
                    ),
                    Message.raw["normalized"]["action"].astext == "process",  # type: ignore[index]
                    _not_acted_button(ic),
                )
                .limit(1)
            )
        ).first()
    if newer is None:
        return None
    await redis.set(ic.burst_key, str(row.created_at.timestamp()), nx=True, ex=3600)
    async with ic.deps.resources.sessions() as session, session.begin():
        await session.exec(
            update(Message)
            .where(col(Message.id) == row.id)
            .values(
                inbound_state=InboundState.done.value,
                last_error="coalesced into a newer message's turn",
                processed_at=utcnow(),
                raw=Message.raw.op("||")({"coalesced": True}),  # type: ignore[union-attr]
            )
        )
    log.info("inbound_coalesced", inbound_message_id=str(row.id), into=str(newer))
    return Outcome.coalesced


async def lock_conversation(ic: InboundContext) -> Outcome | None:
    """One turn at a time per conversation: a Redis lock held as a lease (:mod:`switchboard.queue.lease`),
    renewed while this run lives and lapsing within ``LEASE_S`` of a killed worker.

    Raises:
        Retry: another turn of the conversation holds the lock (the delay grows per try).
    """
    token = uuid.uuid4().hex
    key = conversation_lock_key(ic.conversation.id)
    if not await ic.deps.redis.set(key, token, nx=True, px=int(LEASE_S * 1000)):
        await _set_pending(ic, "conversation busy")
        raise LOCK_BACKOFF.retry(int(ic.job.get("job_try", 1)))
    ic.lock_token = token
    # a lease: renewed while this run lives, so a killed worker's lock lapses within LEASE_S
    ic.lock_lease = contextlib.AsyncExitStack()
    await ic.lock_lease.enter_async_context(lease(ic.deps.redis, key, token=token))
    async with ic.deps.resources.sessions() as session:  # a duplicate job may have finished it meanwhile
        state = (await session.exec(select(Message.inbound_state).where(Message.id == ic.row_id))).first()
    if state in (InboundState.done.value, InboundState.dead.value):
        return Outcome.missing_or_finished
    return None


async def absorb_older(ic: InboundContext) -> Outcome | None:
    """Older messages of this customer that no job has started join this turn (it answers them too).

    An older message whose own job has claimed it but not reached the conversation lock (this turn
    holds it) is about to step aside for this one (:func:`coalesce`) or to wait for the lock: this turn
    waits up to :data:`OLDER_CLAIM_WAIT_S` for that, so a voice note sent just before an image is read
    in the image's turn instead of showing as an unread file in its history.
    """
    row = ic.row
    deadline = time.monotonic() + OLDER_CLAIM_WAIT_S
    older = (
        _same_customer(ic),
        Message.id != row.id,
        Message.created_at < row.created_at,
        _not_acted_button(ic),
    )
    while True:
        async with ic.deps.resources.sessions() as session, session.begin():
            result = await session.exec(
                update(Message)
                .where(*older, Message.inbound_state == InboundState.pending.value)
                .values(
                    conversation_id=ic.conversation.id,
                    inbound_state=InboundState.done.value,
                    last_error=f"coalesced into {row.id}",
                    processed_at=utcnow(),
                    raw=Message.raw.op("||")({"coalesced": True}),  # type: ignore[union-attr]
                )
            )
            claimed = (
                await session.exec(
                    select(func.count())
                    .select_from(Message)
                    .where(*older, Message.inbound_state == InboundState.processing.value)
                )
            ).one()
        if result.rowcount:
            log.info("inbound_absorbed_older", count=int(result.rowcount))
        if not claimed:
            return None
        if time.monotonic() >= deadline:  # a killed worker's claim: the sweeper takes that row later
            log.warning("inbound_older_still_claimed", count=int(claimed))
            return None
        await asyncio.sleep(OLDER_CLAIM_POLL_S)


async def out_of_hours(ic: InboundContext) -> Outcome | None:
    """Outside the tenant's business hours, when the AI is not to answer then (``hours.outside_hours =
    "person"``): no model call; the conversation goes to the queue until the next opening and the
    customer gets ``hours.out_of_hours_reply`` naming it. Its next messages wait in the queue
    (:func:`human_mode`), so the reply goes out once."""
    settings = await load_tenant_settings(ic)
    if settings.hours.outside_hours != "person" or await _has_reply(ic):
        return None
    week = hours.business_hours(settings)
    if week is None or week.is_open(hours.utcnow()):
        return None
    row = ic.row
    assignment = await escalate_and_notify(
        ic.deps.resources.sessions,
        ic.deps.gateway,
        tenant_id=row.tenant_id,
        conversation_id=ic.conversation.id,
        reason="wrote outside business hours",
        trace_id=row.trace_id or "",
        actor=Actor.system(),
        redis=ic.deps.redis,
    )
    reply = waiting_reply(settings, assignment.opens_at) if assignment.agent is None else None
    if reply is not None:
        await _write_reply(ic, [reply], row.trace_id or "")
    log.info("inbound_out_of_hours", opens_at=str(assignment.opens_at), queued=assignment.agent is None)
    await _deliver_row(ic)
    await finish(ic, InboundState.done, None)
    return Outcome.out_of_hours


async def reply_cap(ic: InboundContext) -> Outcome | None:
    """A channel with a cap on automatic replies per conversation (Gmail: ``auto_reply_cap`` in
    ``auto_reply_window_s``, so two robots never answer each other for long): over it, the
    conversation goes to a person (assigned or queued, with the agent's notice) and no model is called."""
    if not ic.channel.capabilities.reply_cap or await _has_reply(ic):
        return None
    cap = ic.channel.auto_reply_cap(await load_tenant_settings(ic))
    if cap is None:
        return None
    limit, window_s = cap
    since = utcnow() - timedelta(seconds=window_s)
    async with ic.deps.resources.sessions() as session:
        replies = (
            await session.exec(
                select(func.count())
                .select_from(Outbox)
                .where(
                    Outbox.conversation_id == ic.conversation.id,
                    Outbox.purpose == OutboxPurpose.reply.value,
                    Outbox.part_index == 0,
                    Outbox.created_at >= since,
                )
            )
        ).one()
    if int(replies) < limit:
        return None
    row = ic.row
    assignment = await escalate_and_notify(
        ic.deps.resources.sessions,
        ic.deps.gateway,
        tenant_id=row.tenant_id,
        conversation_id=ic.conversation.id,
        reason=f"automatic replies capped: {limit} in {window_s:g} s",
        trace_id=row.trace_id or "",
        actor=Actor.system(),
        redis=ic.deps.redis,
    )
    log.warning(
        "auto_reply_cap_reached",
        replies=int(replies),
        limit=limit,
        window_s=window_s,
        queued=assignment.agent is None,
    )
    await _deliver(ic, DeliveryScope(conversation_id=ic.conversation.id))  # due rows (the notice is queued)
    await finish(ic, InboundState.done, "automatic reply cap reached: handed to a person")
    return Outcome.reply_capped


async def _audio_not_understood(ic: InboundContext, message: Message, exc: AudioNotUnderstood) -> Outcome:
    """The voice message keeps its notice as its text; the conversation goes to a person (assigned or
    queued, the agent told as for ``escalate_to_human``) and the customer gets
    ``agent.unreadable_audio_reply``, once however often the job runs."""
    row = ic.row
    if not await _has_reply(ic):
        async with ic.deps.resources.sessions() as session, session.begin():
            await session.exec(
                update(Message)
                .where(col(Message.id) == message.id)
                .values(text=exc.text, raw=Message.raw.op("||")({"media_text": True}))  # type: ignore[union-attr]
            )
        assignment = await escalate_and_notify(
            ic.deps.resources.sessions,
            ic.deps.gateway,
            tenant_id=row.tenant_id,
            conversation_id=ic.conversation.id,
            reason="a voice message could not be understood",
            trace_id=row.trace_id or "",
            actor=Actor.system(),
            redis=ic.deps.redis,
        )
        log.warning(
            "audio_not_understood",
            inbound_message_id=str(message.id),
            error=str(exc)[:300],
            queued=assignment.agent is None,
        )
        await _write_reply(ic, [ic.tenant_settings.agent.unreadable_audio_reply], row.trace_id or "")
    await _deliver_row(ic)
    await finish(ic, InboundState.done, "voice message not understood: handed to a person")
    return Outcome.audio_not_understood


async def _media_models(ic: InboundContext) -> MediaModels | None:
    """The tenant's model setup for this run's media (``None`` without a gateway: the platform's
    endpoints): its deployments, the turn's time (``loop.turn_timeout_s`` from the claim), and only the
    cheapest group once its monthly budget is spent."""
    gateway = ic.deps.gateway
    if gateway is None:
        return None
    tenant_settings = await load_tenant_settings(ic)
    cheapest_only = False
    if tenant_settings.budget.monthly_usd is not None and any(
        gateway.media_deployments(tenant_settings.llm, kind) for kind in ("transcription", "vision")
    ):
        async with ic.deps.resources.sessions() as session:
            state = await budget_state(
                session, tenant_id=ic.row.tenant_id, settings=tenant_settings.budget, now=utcnow()
            )
        cheapest_only = state.level == "exceeded"
    return MediaModels(
        gateway=gateway,
        tenant_id=ic.row.tenant_id,
        llm=tenant_settings.llm,
        deadline=ic.claimed_at + tenant_settings.loop.turn_timeout_s,
        trace_id=ic.row.trace_id or "",
        cheapest_only=cheapest_only,
        redis=ic.deps.resources.redis,
    )


async def media_to_text(ic: InboundContext) -> Outcome | None:
    """Turn the media of this row — and of every message coalesced into this turn — into text, once
    each (``raw.media_text``), so the agent reads all of them.

    Raises:
        Retry: the media could not be fetched or read now (transient); dead-lettered after the limit.
    """
    row = ic.row
    ic.text = (row.text or "").strip()
    if await _has_reply(ic):  # a re-run after the reply was written: nothing left to read
        return None
    async with ic.deps.resources.sessions() as session:
        coalesced = list(
            (
                await session.exec(
                    select(Message)
                    .where(
                        Message.conversation_id == ic.conversation.id,
                        Message.direction == "inbound",
                        Message.created_at <= row.created_at,
                        Message.id != row.id,
                        Message.raw["coalesced"].astext == "true",  # type: ignore[index]
                        Message.raw["media_text"].astext.is_(None),  # type: ignore[index]
                        col(Message.kind).in_(MEDIA_KINDS),
                    )
                    .order_by(col(Message.created_at))
                )
            ).all()
        )
    costs: dict[str, float] = ic.notes.setdefault("media_cost_usd", {})
    for kind, usd in ((row.raw or {}).get("media_cost_usd") or {}).items():  # read by an earlier run
        costs[kind] = usd
    models: MediaModels | None = None
    for message in [*coalesced, row]:
        if message.kind not in MEDIA_KINDS or not message.media or (message.raw or {}).get("media_text"):
            continue
        if models is None:
            models = await _media_models(ic)
        fetch = partial(ic.channel.fetch_media, ic.account, max_bytes=MAX_MEDIA_BYTES)
        already = len(models.calls) if models is not None else 0
        try:
            text = await convert_media(
                kind=message.kind,
                media=message.media,
                caption=(message.text or "").strip(),
                fetch=fetch,
                http=ic.deps.http,
                settings=ic.settings,
                models=models,
            )
        except AudioNotUnderstood as exc:
            return await _audio_not_understood(ic, message, exc)
        except MediaUnavailable as exc:
            raise await retry_or_dead(ic.deps, ic.job, row.id, str(exc)) from None
        marks: dict[str, Any] = {"media_text": True}
        if models is not None and len(models.calls) > already:
            marks["media_cost_usd"] = cost_by_kind(models.calls[already:])
            for kind, usd in marks["media_cost_usd"].items():
                costs[kind] = round(costs.get(kind, 0.0) + usd, 8)
        async with ic.deps.resources.sessions() as session, session.begin():
            await session.exec(
                update(Message)
                .where(col(Message.id) == message.id)
                .values(text=text, raw=Message.raw.op("||")(marks))  # type: ignore[union-attr]
            )
        log.info(
            "inbound_media_to_text", kind=message.kind, chars=len(text), inbound_message_id=str(message.id)
        )
        if message.id == row.id:
            ic.text = text
    return None


async def turn(ic: InboundContext) -> Outcome | None:
    """``POST /v1/turns`` (idempotent per inbound message); the reply goes to the outbox.

    Raises:
        Retry: the orchestrator is unavailable, or answered outside the contract (a few times).
    """
    row, settings, redis = ic.row, ic.settings, ic.deps.redis
    if await _has_reply(ic):  # a re-run after the reply was written: only sending is left
        return None
    if not ic.text:
        await finish(ic, InboundState.done, "nothing to answer (empty text)")
        return Outcome.empty
    text = ic.text
    if row.kind in BUTTON_KINDS:  # the option id is what a configurator's state keys on
        text = chosen_option_text(text, ic.stored.payload)
    text = f"{ic.stored.context_line}\n{text}" if ic.stored.context_line else text
    request = TurnRequest(
        tenant_id=row.tenant_id,
        conversation_id=ic.conversation.id,
        inbound_message_id=row.id,
        channel=row.channel,
        customer_id=ic.customer.id,
        text=text[:100_000],
        media_cost_usd=ic.notes.get("media_cost_usd") or {},
    )
    asked = request_turn(
        ic.deps.http,
        base_url=settings.orchestrator_url,
        token=settings.secret("service_token"),
        request=request,
        timeout_s=settings.orchestrator_timeout_s,
    )
    call = asyncio.ensure_future(asked)
    try:
        result = await answer_or_hold(ic, call)
    except OrchestratorUnavailable as exc:
        raise await retry_or_dead(ic.deps, ic.job, row.id, str(exc)) from None
    except ContractViolation as exc:
        await redis.incr(contract_violation_counter_key())
        bad_key = inbound_failures_key(row.id) + ":contract"
        bad_answers = int(await redis.incr(bad_key))
        await redis.expire(bad_key, 86_400)
        if bad_answers < CONTRACT_VIOLATION_MAX_TRIES:
            await _set_pending(ic, str(exc))
            log.warning(
                "orchestrator_bad_answer",
                bad_answers=bad_answers,
                status_code=exc.status_code,
                detail=exc.detail,
            )
            raise Backoff(settings.inbound_retry_defer_s, RETRY_MAX_DEFER_S).retry(bad_answers) from None
        log.error("contract_violation", status_code=exc.status_code, detail=exc.detail)
        await finish(ic, InboundState.done, f"contract_violation: {exc.detail}")
        return Outcome.contract_violation
    await redis.delete(ic.burst_key)
    if MODEL_UNAVAILABLE in result.flags:
        return await _park(ic, result.trace_id)
    if result.silent:
        await _deliver(ic, DeliveryScope(conversation_id=ic.conversation.id))  # e.g. an escalation's notice
        await finish(ic, InboundState.done, None)
        log.info("turn_silent", trace_id=result.trace_id)
        return Outcome.silent
    assert result.reply is not None
    async with ic.deps.resources.sessions() as session:
        # one row: the status and who set it (the lifecycle writes both, ``status_actor_type``)
        now_status, last_actor = (
            await session.exec(
                select(Conversation.status, Conversation.status_actor_type).where(
                    Conversation.id == ic.conversation.id
                )
            )
        ).one()
    # The AI's own escalation (or close) in this turn changes the status too, and its reply ("a person
    # will take over") must still go out; only a person's takeover silences it.
    if now_status != ConversationStatus.ai.value and last_actor in _PERSON_ACTORS:
        # a person took the conversation over while the model was answering: the AI stops at once
        await finish(ic, InboundState.done, "taken over by a person during the turn: reply not sent")
        log.info("turn_reply_dropped_taken_over", trace_id=result.trace_id, status=now_status)
        return Outcome.human_mode
    await _write_reply(ic, [result.reply], result.trace_id, structured=list(result.parts))
    return None


def waited_s(ic: InboundContext, deadline_s: float) -> float:
    """How long the customer has waited for this turn, seconds: since the message arrived (the queue
    and the burst window count: the customer waits through them), or, for a row older than the
    deadline (answered again after the model came back, handed back from a person, swept), since this
    run claimed it: the customer heard from us then, and hears at the deadline again."""
    since_claim = time.monotonic() - ic.claimed_at
    arrived = ic.row.created_at
    if arrived is None:
        return since_claim
    since_arrival = (utcnow() - arrived).total_seconds() - since_claim  # at the claim
    if since_arrival >= deadline_s:
        return since_claim
    return max(0.0, since_arrival) + since_claim


async def answer_or_hold(ic: InboundContext, call: asyncio.Future[TurnResult]) -> TurnResult:
    """The turn's answer (``call``, already running). When it is not ready by the tenant's
    ``agent.first_reply_deadline_s`` (counted from the message's arrival, :func:`waited_s`), the customer gets
    ``agent.holding_reply`` meanwhile: written to the outbox as purpose ``holding`` and sent at once,
    while the answer is still awaited. Once per inbound message (the outbox's unique part key), however
    often the job runs; a failure to send it is logged and never fails the turn.

    Raises:
        whatever ``call`` raises (it is cancelled if this run ends first).
    """
    try:
        agent = (await load_tenant_settings(ic)).agent
        left_s = agent.first_reply_deadline_s - waited_s(ic, agent.first_reply_deadline_s)
        done, _ = await asyncio.wait({call}, timeout=max(0.0, left_s))
        if not done:
            try:
                await _send_holding(ic, agent.holding_reply)
            except Exception as exc:  # noqa: BLE001 (the answer still comes; logged)
                log.error("holding_reply_failed", error=f"{type(exc).__name__}: {exc}"[:300])
        return await call
    finally:
        if not call.done():
            call.cancel()


async def _send_holding(ic: InboundContext, text: str) -> None:
    """Write the holding reply for this row (nothing when a run before wrote it) and send it now."""
    limit, unit = ic.channel.capabilities.text_limit, ic.channel.capabilities.text_unit
    items = text_items(
        split_text(text, limit, unit),
        conversation_id=ic.conversation.id,
        channel=ic.row.channel,
        channel_account_id=ic.account.id,
        recipient=ic.reply_address,
        purpose=OutboxPurpose.holding,
    )
    async with ic.deps.resources.sessions() as session, session.begin():
        written = await write_outbox(
            session,
            tenant_id=ic.row.tenant_id,
            items=items,
            inbound_message_id=ic.row_id,
            trace_id=ic.row.trace_id,
        )
    if not written:
        return  # sent (or being sent) by an earlier run of this message
    log.warning("holding_reply_sent", inbound_message_id=str(ic.row_id), parts=written)
    metrics.HOLDING_REPLIES.inc()
    await _deliver(
        ic, DeliveryScope(inbound_message_id=ic.row_id, purposes=frozenset({OutboxPurpose.holding}))
    )


async def _park(ic: InboundContext, trace_id: str) -> Outcome:
    """Every model failed: the customer gets ``agent.waiting_reply`` (once, a notice of this row) and the
    row waits in ``waiting_model`` until a probe of the tenant's deployments succeeds
    (:mod:`switchboard.inbound.resume`), then its turn runs again."""
    text = (await load_tenant_settings(ic)).agent.waiting_reply
    limit, unit = ic.channel.capabilities.text_limit, ic.channel.capabilities.text_unit
    items = text_items(
        split_text(text, limit, unit),
        conversation_id=ic.conversation.id,
        channel=ic.row.channel,
        channel_account_id=ic.account.id,
        recipient=ic.reply_address,
        purpose=OutboxPurpose.notice,
    )
    async with ic.deps.resources.sessions() as session, session.begin():
        await write_outbox(
            session, tenant_id=ic.row.tenant_id, items=items, inbound_message_id=ic.row_id, trace_id=trace_id
        )
    await _deliver(
        ic, DeliveryScope(inbound_message_id=ic.row_id, purposes=frozenset({OutboxPurpose.notice}))
    )
    await finish(ic, InboundState.waiting_model, "waiting for the model: every deployment failed")
    log.warning("inbound_waiting_for_model", inbound_message_id=str(ic.row_id), trace_id=trace_id)
    return Outcome.waiting_model


async def send_reply(ic: InboundContext) -> Outcome:
    """The delivery loop sends the reply's parts in order (and notices the turn wrote)."""
    await _deliver_row(ic)
    failed = await _reply_failure(ic)
    await finish(ic, InboundState.done, f"reply not sent: {failed}" if failed else None)
    if failed:
        log.warning("reply_not_sent", error_code=failed)
        return Outcome.not_sent
    return Outcome.replied


STEPS: tuple[Step, ...] = (
    record_only,
    customer_profile,
    agent_console,
    suspended,
    customer_limit,
    tenant_limit,
    csat_answer,
    csat_comment,
    buttons,
    human_mode,
    coalesce,
    lock_conversation,
    absorb_older,
    out_of_hours,
    reply_cap,
    media_to_text,
    turn,
    send_reply,
)
"""The inbound job, in order; the first step that returns an :class:`Outcome` ends the run."""
