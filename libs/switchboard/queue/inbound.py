"""``process_inbound``: one stored WhatsApp message → (maybe) one orchestrator turn → reply, exactly once.

The job receives the id of a stored ``messages`` row (the durable queue) and is safe to run any
number of times (ARQ is at-least-once; a killed worker's job runs again):

1. Load and claim the row (``done``/``dead`` rows return at once), resolve the customer under either
   of their ids and the open conversation, attach the row (and older unclaimed rows of the same
   customer, which this turn answers too), update the 24-hour window start.
2. Rows that are only recorded (stickers, reactions, system messages, business-app echoes...) are done.
3. Per-customer limit (sliding window in Redis; over it one polite slow-down reply per window, then
   silence) and per-tenant limit (over it ``Retry(defer=TENANT_RATE_DEFER_S)``: the customer sees nothing).
4. Buttons, no model call: a payload in the tenant's ``whatsapp.opt_out_payloads`` records the
   marketing opt-out and sends one confirmation; one in ``handoff.button_payloads`` escalates the
   conversation to a person (:func:`switchboard.handoff.escalate_and_notify`).
   Human mode: stored for the handoff relay, no model call.
5. Bursts coalesce: when a newer message of the same customer is waiting, this row is left to that
   newer message's turn (the orchestrator reads it from the history), unless the burst is older than
   ``INBOUND_MAX_WAIT_S``. One turn at a time per conversation (Redis lock with a TTL).
6. ``POST /v1/turns``; a reply is split to 4,096 characters and written to the outbox *before* sending;
   sending resumes from the first unsent part, so a retried job never sends a part twice.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Any

import httpx
from arq.connections import ArqRedis
from arq.constants import in_progress_key_prefix
from arq.worker import Retry
from sqlalchemy import and_, func, or_, true, update
from sqlalchemy.dialects.postgresql import insert
from sqlmodel import select

from switchboard.channels.whatsapp.accounts import access_token_of
from switchboard.channels.whatsapp.identity import open_conversation, rekey_phone, resolve_customer
from switchboard.channels.whatsapp.media import MediaUnavailable, media_to_text
from switchboard.channels.whatsapp.normalize import MEDIA_KINDS
from switchboard.channels.whatsapp.send import GraphClient, GraphSendError, split_text, within_service_window
from switchboard.channels.whatsapp.statuses import conversation_block_reason
from switchboard.contracts import TurnRequest, trace_id_for
from switchboard.crypto import CredentialCipher
from switchboard.db.models import (
    ChannelAccount,
    Conversation,
    ConversationStatus,
    Customer,
    InboundState,
    Message,
    Outbox,
    OutboxStatus,
    Tenant,
    utcnow,
)
from switchboard.handoff.relay import (
    agent_for_row,
    deliver_handoff_outbox,
    handle_agent_message,
    relay_customer_message,
)
from switchboard.handoff.service import escalate_and_notify
from switchboard.observability import get_logger, message_context
from switchboard.queue.keys import (
    contract_violation_counter_key,
    conversation_lock_key,
    customer_rate_key,
    customer_slowdown_key,
    inbound_failures_key,
    tenant_rate_key,
    whatsapp_throttle_key,
)
from switchboard.queue.turn_client import ContractViolation, OrchestratorUnavailable, request_turn
from switchboard.runtime.resources import Resources
from switchboard.settings import Settings
from switchboard.tenant_settings import TenantSettings, tenant_settings_from

__all__ = ["WorkerDeps", "process_inbound", "send_outbox", "SLOWDOWN_TEXT", "CONTRACT_VIOLATION_MAX_TRIES"]

log = get_logger(__name__)

SLOWDOWN_TEXT = (
    "You're sending messages faster than we can answer them. Please slow down a little; "
    "we'll reply to your latest message shortly."
)
"""The one polite reply a customer over the per-customer limit gets per window."""
CONTRACT_VIOLATION_MAX_TRIES = 3
"""Tries of a turn whose answer broke the contract before it is logged as ``contract_violation``."""
LOCK_RETRY_DEFER_S = 1.0
"""Wait before trying again when another turn of the same conversation holds the lock (grows per try)."""
LOCK_RETRY_MAX_DEFER_S = 10.0
LOCK_MARGIN_S = 5.0
"""The conversation lock outlives the job timeout by this much (seconds)."""
_RELEASE_LOCK = (
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end"
)


@dataclass
class WorkerDeps:
    """What jobs share, built in the worker's ``on_startup`` and kept in ``ctx["deps"]``."""

    resources: Resources
    settings: Settings
    graph: GraphClient
    http: httpx.AsyncClient
    """Client for the orchestrator (and the transcription/vision endpoints)."""
    cipher: CredentialCipher
    gateway: Any = None
    """Model gateway for handoff summaries (``ModelGateway``; ``None``: summaries quote the customer)."""

    @property
    def redis(self) -> ArqRedis:
        assert self.resources.redis is not None
        return self.resources.redis


def _normalized(row: Message) -> dict[str, Any]:
    return (row.raw or {}).get("normalized", {})


async def _finish(deps: WorkerDeps, row_id: uuid.UUID, state: InboundState, error: str | None = None) -> None:
    async with deps.resources.sessions() as session, session.begin():
        await session.execute(
            update(Message)
            .where(Message.id == row_id)
            .values(inbound_state=state.value, last_error=error, processed_at=utcnow())
        )


async def _set_pending(deps: WorkerDeps, row_id: uuid.UUID, error: str | None) -> None:
    async with deps.resources.sessions() as session, session.begin():
        await session.execute(
            update(Message)
            .where(Message.id == row_id, Message.inbound_state == InboundState.processing.value)
            .values(inbound_state=InboundState.pending.value, last_error=error)
        )


async def _retry_or_dead(deps: WorkerDeps, ctx: dict[str, Any], row_id: uuid.UUID, error: str) -> Retry:
    """A transient failure: ``Retry`` with a growing delay, or the dead-letter state after
    ``INBOUND_MAX_TRIES`` failures of this row (counted apart from lock/limit deferrals)."""
    job_try = int(ctx.get("job_try", 1))
    key = inbound_failures_key(row_id)
    failures = int(await deps.redis.incr(key))
    await deps.redis.expire(key, 86_400)
    if failures >= deps.settings.inbound_max_tries:
        await _finish(deps, row_id, InboundState.dead, error)
        log.error("inbound_dead_letter", inbound_message_id=str(row_id), job_try=job_try, error=error)
        raise _Dead()
    await _set_pending(deps, row_id, error)
    defer_s = deps.settings.inbound_retry_defer_s * failures
    log.warning(
        "inbound_retry", inbound_message_id=str(row_id), job_try=job_try, defer_s=defer_s, error=error
    )
    return Retry(defer=defer_s)


class _Dead(Exception):
    """Internal: the row went to the dead-letter state; the job ends normally."""


async def _sliding_window(redis: ArqRedis, key: str, member: str, window_s: float) -> tuple[int, bool]:
    """Add ``member`` (once) to a time-scored set; returns (count in window, member was already there)."""
    now = time.time()
    pipe = redis.pipeline(transaction=True)
    pipe.zremrangebyscore(key, 0, now - window_s)
    pipe.zscore(key, member)
    pipe.zadd(key, {member: now}, nx=True)
    pipe.zcard(key)
    pipe.expire(key, int(window_s) + 1)
    _, existing, _, count, _ = await pipe.execute()
    return int(count), existing is not None


async def _tenant_allows(redis: ArqRedis, tenant_id: uuid.UUID, member: str, settings: Settings) -> bool:
    key = tenant_rate_key(tenant_id)
    now = time.time()
    await redis.zremrangebyscore(key, 0, now - settings.tenant_rate_window_s)
    if await redis.zscore(key, member) is not None:
        return True
    if int(await redis.zcard(key)) >= settings.tenant_rate_limit:
        return False
    await redis.zadd(key, {member: now}, nx=True)
    await redis.expire(key, int(settings.tenant_rate_window_s) + 1)
    return True


@dataclass
class _Claim:
    row: Message
    customer: Customer
    conversation: Conversation
    account: ChannelAccount
    acted_payloads: frozenset[str] = frozenset()
    """Lower-cased button payloads the tenant acts on without a turn (never coalesced with text)."""


async def _claim(deps: WorkerDeps, row_id: uuid.UUID) -> _Claim | None:
    """Step 1 (one transaction). ``None`` when the row is missing or already finished."""
    async with deps.resources.sessions() as session, session.begin():
        row = (await session.exec(select(Message).where(Message.id == row_id).with_for_update())).first()
        if row is None:
            log.warning("inbound_missing", inbound_message_id=str(row_id))
            return None
        if row.inbound_state in (InboundState.done.value, InboundState.dead.value):
            return None
        account = (
            await session.get(ChannelAccount, row.channel_account_id) if row.channel_account_id else None
        )
        if account is None:
            row.inbound_state = InboundState.dead.value
            row.last_error = "channel account removed"
            log.error("inbound_dead_letter", inbound_message_id=str(row_id), error=row.last_error)
            return None
        norm = _normalized(row)
        flags = norm.get("flags", {})
        customer = await resolve_customer(
            session,
            tenant_id=row.tenant_id,
            wa_id=flags.get("wa_id"),
            bsuid=flags.get("bsuid"),
            name=norm.get("sender_name") if row.direction == "inbound" else None,
        )
        conversation = await open_conversation(session, customer=customer, channel_account_id=account.id)
        row.conversation_id = conversation.id
        row.inbound_state = InboundState.processing.value
        row.processing_attempts += 1
        row.trace_id = row.trace_id or trace_id_for(conversation.id, row.id)
        if row.direction == "inbound" and row.kind != "system" and row.sent_at is not None:
            last = conversation.last_customer_message_at
            if last is None or row.sent_at > last:
                conversation.last_customer_message_at = row.sent_at
        session.add(conversation)
        session.add(row)
        return _Claim(row=row, customer=customer, conversation=conversation, account=account)


async def _record_only(deps: WorkerDeps, claim: _Claim) -> None:
    """Rows that never wake the agent: echoes flip to human mode; number changes re-key the customer."""
    row = claim.row
    flags = _normalized(row).get("flags", {})
    async with deps.resources.sessions() as session, session.begin():
        if flags.get("echo"):
            await session.execute(
                update(Conversation)
                .where(
                    Conversation.id == claim.conversation.id,
                    Conversation.status == ConversationStatus.ai.value,
                )
                .values(
                    status=ConversationStatus.human.value,
                    escalation_reason="a human replied from the WhatsApp Business app",
                )
            )
            log.info("whatsapp_business_app_echo", handoff="human")
        if (
            row.kind == "system"
            and flags.get("system_type") == "user_changed_number"
            and flags.get("new_wa_id")
        ):
            await rekey_phone(
                session,
                tenant_id=row.tenant_id,
                old_wa_id=flags.get("wa_id") or "",
                new_wa_id=flags["new_wa_id"],
            )
            log.info("whatsapp_customer_rekeyed")
        await session.execute(
            update(Message)
            .where(Message.id == row.id)
            .values(inbound_state=InboundState.done.value, processed_at=utcnow(), last_error=None)
        )


def _not_acted_button(claim: _Claim) -> Any:
    """Rows that are not buttons handled without a turn (a turn must never swallow one, nor wait for it)."""
    payload = Message.raw["normalized"]["payload"].astext  # type: ignore[index]
    if not claim.acted_payloads:
        return true()
    return or_(
        Message.kind.notin_(BUTTON_KINDS),  # type: ignore[attr-defined]
        payload.is_(None),
        func.lower(func.trim(payload)).notin_(sorted(claim.acted_payloads)),
    )


def _sender_match(row: Message, claim: _Claim) -> Any:
    ids = {row.sender_external_id, claim.customer.external_user_id, claim.customer.phone}
    ids |= {claim.customer.profile.get("whatsapp_bsuid")}
    ids.discard(None)
    return and_(
        Message.channel_account_id == row.channel_account_id,
        Message.direction == "inbound",
        or_(Message.conversation_id == claim.conversation.id, Message.sender_external_id.in_(ids)),  # type: ignore[attr-defined]
    )


async def _newer_waiting(deps: WorkerDeps, claim: _Claim) -> bool:
    """Is a newer message of this customer (one that wakes the agent) still waiting for its job?"""
    row = claim.row
    async with deps.resources.sessions() as session:
        found = (
            await session.exec(
                select(Message.id)
                .where(
                    _sender_match(row, claim),
                    Message.id != row.id,
                    Message.created_at > row.created_at,
                    Message.inbound_state.in_((InboundState.pending.value, InboundState.processing.value)),  # type: ignore[union-attr]
                    Message.raw["normalized"]["action"].astext == "process",  # type: ignore[index]
                    _not_acted_button(claim),
                )
                .limit(1)
            )
        ).first()
    return found is not None


async def _absorb_older(deps: WorkerDeps, claim: _Claim) -> int:
    """Attach older, not yet started messages of this customer to the conversation; this turn answers them."""
    row = claim.row
    async with deps.resources.sessions() as session, session.begin():
        result = await session.execute(
            update(Message)
            .where(
                _sender_match(row, claim),
                Message.id != row.id,
                Message.created_at < row.created_at,
                Message.inbound_state == InboundState.pending.value,
                _not_acted_button(claim),
            )
            .values(
                conversation_id=claim.conversation.id,
                inbound_state=InboundState.done.value,
                last_error=f"coalesced into {row.id}",
                processed_at=utcnow(),
            )
        )
        return int(result.rowcount or 0)


async def _acquire_lock(redis: ArqRedis, conversation_id: uuid.UUID, ttl_s: float) -> str | None:
    token = uuid.uuid4().hex
    ok = await redis.set(conversation_lock_key(conversation_id), token, nx=True, px=int(ttl_s * 1000))
    return token if ok else None


async def _release_lock(redis: ArqRedis, conversation_id: uuid.UUID, token: str) -> None:
    await redis.eval(_RELEASE_LOCK, 1, conversation_lock_key(conversation_id), token)


def _recipient(customer: Customer, row: Message) -> str:
    flags = _normalized(row).get("flags", {})
    return customer.phone or flags.get("wa_id") or flags.get("bsuid") or customer.external_user_id


async def _write_outbox(deps: WorkerDeps, claim: _Claim, parts: list[str], trace_id: str) -> None:
    async with deps.resources.sessions() as session, session.begin():
        await session.execute(_outbox_insert(claim, parts, trace_id))


def _outbox_insert(claim: _Claim, parts: list[str], trace_id: str) -> Any:
    rows = [
        {
            "id": uuid.uuid4(),
            "tenant_id": claim.row.tenant_id,
            "conversation_id": claim.conversation.id,
            "inbound_message_id": claim.row.id,
            "part_index": index,
            "channel": "whatsapp",
            "recipient": _recipient(claim.customer, claim.row),
            "payload": {"type": "text", "text": part},
            "status": OutboxStatus.pending.value,
            "attempts": 0,
            "trace_id": trace_id,
            "created_at": utcnow(),
            "updated_at": utcnow(),
        }  # fmt: skip
        for index, part in enumerate(parts)
    ]
    return (
        insert(Outbox.__table__)  # type: ignore[arg-type]
        .values(rows)
        .on_conflict_do_nothing(constraint="uq_outbox_inbound_part")
    )


async def send_outbox(deps: WorkerDeps, ctx: dict[str, Any], claim: _Claim) -> int:
    """Send the pending outbox parts of ``claim.row`` in order. Returns the number sent now.

    Outside the 24-hour window nothing is sent: the parts are marked failed with ``window_closed``.
    A permanent Graph error (131047, 131026, ...) fails this and the remaining parts, recorded on the
    conversation; a transient one raises ``Retry`` (the part stays pending and is re-sent next time).
    """
    row = claim.row
    async with deps.resources.sessions() as session:
        parts = list(
            (
                await session.exec(
                    select(Outbox)
                    .where(Outbox.inbound_message_id == row.id, Outbox.status == OutboxStatus.pending.value)
                    .order_by(Outbox.part_index)  # type: ignore[arg-type]
                )
            ).all()
        )
        conversation = await session.get(Conversation, claim.conversation.id)
    if not parts:
        return 0
    assert conversation is not None
    now = utcnow()
    if not within_service_window(conversation.last_customer_message_at, now):
        await _fail_parts(
            deps,
            parts,
            "window_closed",
            "outside the 24-hour customer-service window: needs a template",
            conversation.id,
            "whatsapp: outside the 24-hour window; needs a template message or a human",
        )
        log.warning(
            "whatsapp_reply_outside_window",
            last_customer_message_at=str(conversation.last_customer_message_at),
        )
        return 0
    ttl_ms = await deps.redis.pttl(whatsapp_throttle_key(claim.account.external_account_id))
    if ttl_ms and ttl_ms > 0:  # Meta reported a throughput limit: wait (not a failure of this message)
        await _set_pending(deps, row.id, "waiting: whatsapp throughput limit reported by Meta")
        log.warning("whatsapp_send_throttled", defer_ms=ttl_ms)
        raise Retry(defer=ttl_ms / 1000)
    token = access_token_of(claim.account, deps.cipher) or "sandbox-token"
    sent = 0
    for part in parts:
        try:
            wamid = await deps.graph.send_text(
                phone_number_id=claim.account.external_account_id, token=token, to=part.recipient,
                text=part.payload["text"], tracker=f"inbound={row.id};part={part.part_index}",
            )  # fmt: skip
        except GraphSendError as exc:
            async with deps.resources.sessions() as session, session.begin():
                await session.execute(
                    update(Outbox)
                    .where(Outbox.id == part.id)
                    .values(
                        attempts=Outbox.attempts + 1,
                        error_code=str(exc.code) if exc.code else None,
                        error_message=str(exc)[:500],
                        updated_at=utcnow(),
                    )
                )
            if exc.is_transient:
                raise await _retry_or_dead(deps, ctx, row.id, f"graph send failed: {exc}") from None
            remaining = [p for p in parts if p.part_index >= part.part_index]
            await _fail_parts(
                deps,
                remaining,
                str(exc.code),
                str(exc)[:500],
                conversation.id,
                conversation_block_reason(exc.code),
            )
            log.warning("whatsapp_send_failed", error_code=exc.code, http_status=exc.http_status)
            return sent
        async with deps.resources.sessions() as session, session.begin():
            await session.execute(
                update(Outbox)
                .where(Outbox.id == part.id)
                .values(
                    status=OutboxStatus.sent.value,
                    external_id=wamid,
                    attempts=Outbox.attempts + 1,
                    sent_at=utcnow(),
                    updated_at=utcnow(),
                    error_code=None,
                    error_message=None,
                )
            )
        sent += 1
        log.info("whatsapp_reply_sent", part_index=part.part_index, parts=len(parts))
    if sent and row.external_id:
        try:
            await deps.graph.mark_read(
                phone_number_id=claim.account.external_account_id, token=token, message_id=row.external_id
            )
        except GraphSendError as exc:
            log.warning("whatsapp_mark_read_failed", error_code=exc.code)
    return sent


async def _fail_parts(
    deps: WorkerDeps,
    parts: list[Outbox],
    code: str,
    message: str,
    conversation_id: uuid.UUID,
    reason: str | None,
) -> None:
    async with deps.resources.sessions() as session, session.begin():
        await session.execute(
            update(Outbox)
            .where(Outbox.id.in_([p.id for p in parts]), Outbox.status == OutboxStatus.pending.value)  # type: ignore[attr-defined]
            .values(
                status=OutboxStatus.failed.value,
                error_code=code[:32],
                error_message=message,
                updated_at=utcnow(),
            )
        )
        if reason:
            await session.execute(
                update(Conversation)
                .where(Conversation.id == conversation_id)
                .values(escalation_reason=reason)
            )


async def _send_slowdown(deps: WorkerDeps, ctx: dict[str, Any], claim: _Claim) -> None:
    await _write_outbox(deps, claim, [SLOWDOWN_TEXT], claim.row.trace_id or "")
    await send_outbox(deps, ctx, claim)


async def process_inbound(ctx: dict[str, Any], inbound_message_id: str) -> str:
    """ARQ job: handle one stored inbound row (see the module docstring). Returns what happened.

    Returns one of ``missing_or_finished``, ``recorded``, ``rate_limited``, ``slowdown_sent``,
    ``human_mode``, ``agent_command``, ``agent_command_rejected``, ``relayed_to_customer``,
    ``agent_no_conversation``, ``already_handled``, ``opted_out``, ``button_handoff``, ``coalesced``, ``empty``, ``silent``, ``replied``, ``contract_violation``, ``dead``.

    Raises:
        Retry: tenant limit reached, conversation busy, orchestrator or Graph API temporarily failing.
    """
    deps: WorkerDeps = ctx["deps"]
    row_id = uuid.UUID(inbound_message_id)
    if ctx.get("job_id"):
        # ARQ marks a running job "in progress" for the largest timeout of ANY function on the worker
        # (+10 s; arq #402), e.g. a 900 s ingestion job. Bound it to this job's own timeout so a killed
        # worker's message is picked up again within INBOUND_JOB_TIMEOUT_S + 10 s.
        await deps.redis.pexpire(
            in_progress_key_prefix + str(ctx["job_id"]),
            int((deps.settings.inbound_job_timeout_s + 10) * 1000),
        )
    try:
        return await _process(deps, ctx, row_id)
    except _Dead:
        return "dead"


async def _process(deps: WorkerDeps, ctx: dict[str, Any], row_id: uuid.UUID) -> str:
    settings = deps.settings
    try:
        claim = await _claim(deps, row_id)
    except OSError as exc:
        raise await _retry_or_dead(deps, ctx, row_id, f"database: {exc}") from None
    if claim is None:
        return "missing_or_finished"
    row, conversation = claim.row, claim.conversation
    with message_context(
        tenant_id=str(row.tenant_id), conversation_id=str(conversation.id), trace_id=row.trace_id
    ):
        log.info(
            "inbound_processing", inbound_message_id=str(row.id), job_try=ctx.get("job_try"), kind=row.kind
        )
        norm = _normalized(row)
        if norm.get("action") != "process" or row.direction != "inbound":
            await _record_only(deps, claim)
            return "recorded"

        agent = await agent_for_row(deps.resources.sessions, row)
        if agent is not None:  # a human agent's phone: a command or a reply to relay, never a customer
            outcome = await handle_agent_message(
                deps.resources.sessions, deps.gateway, row=row, agent=agent, console=conversation
            )
            # the agent's own rows first, oldest first (notices held back by their closed window, answers)
            await deliver_handoff_outbox(
                deps.resources.sessions,
                deps.graph,
                deps.cipher,
                tenant_id=row.tenant_id,
                recipient=agent.phone,
            )
            await deliver_handoff_outbox(
                deps.resources.sessions, deps.graph, deps.cipher, inbound_message_id=row.id
            )
            await _finish(deps, row.id, InboundState.done, None)
            return outcome

        count, seen = await _sliding_window(
            deps.redis,
            customer_rate_key(row.tenant_id, claim.customer.id),
            str(row.id),
            settings.customer_rate_window_s,
        )
        if count > settings.customer_rate_limit:
            notice = await deps.redis.set(
                customer_slowdown_key(row.tenant_id, claim.customer.id),
                str(row.id),
                nx=True,
                ex=int(settings.customer_rate_window_s),
            )
            owner = (
                notice
                or (await deps.redis.get(customer_slowdown_key(row.tenant_id, claim.customer.id)))
                == str(row.id).encode()
            )
            log.warning("customer_rate_limited", count=count, limit=settings.customer_rate_limit)
            if owner:
                await _send_slowdown(deps, ctx, claim)
                await _finish(deps, row.id, InboundState.done, "customer rate limit: slow-down reply sent")
                return "slowdown_sent"
            await _finish(deps, row.id, InboundState.done, "customer rate limit: not answered")
            return "rate_limited"

        if not await _tenant_allows(deps.redis, row.tenant_id, str(row.id), settings):
            await _set_pending(deps, row.id, "tenant rate limit")
            log.warning(
                "tenant_rate_limited", limit=settings.tenant_rate_limit, defer_s=settings.tenant_rate_defer_s
            )
            raise Retry(defer=settings.tenant_rate_defer_s)

        tenant_settings = await _tenant_settings(deps, row.tenant_id)
        claim.acted_payloads = _acted_payloads(tenant_settings)
        button = _button_action(row, tenant_settings)
        if button is not None and button[0] == "opt_out":
            return await _opt_out(deps, ctx, claim, button[1])
        if button is not None and (
            conversation.status != ConversationStatus.human.value
            or (row.raw or {}).get("button_action") == "handoff"  # a re-run of this row's own escalation
        ):
            return await _button_handoff(deps, ctx, claim, button[1])

        if conversation.status == ConversationStatus.human.value:
            relayed = await relay_customer_message(
                deps.resources.sessions, row=row, conversation=conversation, customer=claim.customer
            )
            await deliver_handoff_outbox(
                deps.resources.sessions, deps.graph, deps.cipher, inbound_message_id=row.id
            )
            await _finish(deps, row.id, InboundState.done, None)
            log.info("inbound_for_human", handoff="human", relay=relayed)
            return "human_mode"

        burst_key = f"burst:{conversation.id}"
        burst_start = await deps.redis.get(burst_key)
        burst_age_s = time.time() - float(burst_start) if burst_start else 0.0
        if await _newer_waiting(deps, claim) and burst_age_s < settings.inbound_max_wait_s:
            await deps.redis.set(burst_key, str(row.created_at.timestamp()), nx=True, ex=3600)
            await _finish(deps, row.id, InboundState.done, "coalesced into a newer message's turn")
            log.info("inbound_coalesced", inbound_message_id=str(row.id))
            return "coalesced"

        lock = await _acquire_lock(
            deps.redis, conversation.id, settings.inbound_job_timeout_s + LOCK_MARGIN_S
        )
        if lock is None:
            await _set_pending(deps, row.id, "conversation busy")
            raise Retry(defer=min(LOCK_RETRY_DEFER_S * int(ctx.get("job_try", 1)), LOCK_RETRY_MAX_DEFER_S))
        try:
            outcome = await _turn(deps, ctx, claim, burst_key)
        finally:
            await _release_lock(deps.redis, conversation.id, lock)
        # an escalation in this turn wrote the agent's notice: send it now (the sweep retries leftovers)
        await deliver_handoff_outbox(
            deps.resources.sessions, deps.graph, deps.cipher, conversation_id=conversation.id
        )
        return outcome


BUTTON_KINDS = ("button", "interactive")
"""Row kinds whose normalized ``payload`` is a button id (template quick reply, reply button, list row)."""


async def _tenant_settings(deps: WorkerDeps, tenant_id: uuid.UUID) -> TenantSettings:
    async with deps.resources.sessions() as session:
        tenant = await session.get(Tenant, tenant_id)
    return tenant_settings_from(tenant.settings_extensions if tenant else None, tenant_id=str(tenant_id))


def _acted_payloads(tenant_settings: TenantSettings) -> frozenset[str]:
    payloads = [*tenant_settings.whatsapp.opt_out_payloads, *tenant_settings.handoff.button_payloads]
    return frozenset(p.strip().lower() for p in payloads if p.strip())


def _button_action(row: Message, tenant_settings: TenantSettings) -> tuple[str, TenantSettings] | None:
    """``("opt_out" | "handoff", tenant settings)`` when the row's button payload is configured, else ``None``.

    Payloads compare case-insensitively (surrounding spaces ignored); opt-out wins over handoff.
    """
    payload = _normalized(row).get("payload")
    if row.kind not in BUTTON_KINDS or not isinstance(payload, str) or not payload.strip():
        return None
    key = payload.strip().lower()
    if key in {p.strip().lower() for p in tenant_settings.whatsapp.opt_out_payloads}:
        return "opt_out", tenant_settings
    if key in {p.strip().lower() for p in tenant_settings.handoff.button_payloads}:
        return "handoff", tenant_settings
    return None


async def _has_outbox(deps: WorkerDeps, row_id: uuid.UUID) -> bool:
    async with deps.resources.sessions() as session:
        found = (
            await session.exec(select(Outbox.id).where(Outbox.inbound_message_id == row_id).limit(1))
        ).first()
    return found is not None


async def _opt_out(
    deps: WorkerDeps, ctx: dict[str, Any], claim: _Claim, tenant_settings: TenantSettings
) -> str:
    """Record ``customers.profile["marketing_opt_out"]`` and send one confirmation (one transaction, so a
    re-run of the job only resumes sending). Ordinary messages are still answered afterwards."""
    row = claim.row
    payload = _normalized(row).get("payload")
    async with deps.resources.sessions() as session, session.begin():
        done = (
            await session.exec(select(Outbox.id).where(Outbox.inbound_message_id == row.id).limit(1))
        ).first()
        if done is None:
            customer = (
                await session.exec(select(Customer).where(Customer.id == claim.customer.id).with_for_update())
            ).one()
            customer.profile = {
                **(customer.profile or {}),
                "marketing_opt_out": {
                    "at": utcnow().isoformat(),
                    "source": {"channel": "whatsapp", "payload": payload, "message_id": row.external_id},
                },
            }
            customer.updated_at = utcnow()
            session.add(customer)
            await session.execute(
                _outbox_insert(claim, [tenant_settings.whatsapp.opt_out_reply], row.trace_id or "")
            )
            log.info("customer_opted_out", customer_id=str(customer.id), payload=payload)
    await send_outbox(deps, ctx, claim)
    await _finish(deps, row.id, InboundState.done, None)
    return "opted_out"


async def _button_handoff(
    deps: WorkerDeps, ctx: dict[str, Any], claim: _Claim, tenant_settings: TenantSettings
) -> str:
    """Escalate as ``escalate_to_human`` does (least-loaded online agent or the queue, agent notice with
    summary), then send the tenant's ``agent.handoff_reply`` (assigned) or ``handoff.queue_reply``.

    The row is marked (``raw.button_action``) before escalating, so a re-run still takes this path
    once the conversation is in human mode; once the customer's reply is in the outbox a re-run only
    resumes sending. A crash between the escalation and that write re-escalates (the agent keeps the
    conversation; the notice may be written twice).
    """
    row = claim.row
    if not await _has_outbox(deps, row.id):
        title = (row.text or "").strip() or str(_normalized(row).get("payload"))
        async with deps.resources.sessions() as session, session.begin():
            await session.execute(
                update(Message)
                .where(Message.id == row.id)
                .values(raw=Message.raw.op("||")({"button_action": "handoff"}))  # type: ignore[union-attr]
            )
        assignment = await escalate_and_notify(
            deps.resources.sessions,
            deps.gateway,
            tenant_id=row.tenant_id,
            conversation_id=claim.conversation.id,
            reason=f"customer pressed {title}",
            trace_id=row.trace_id or "",
        )
        queued = assignment.agent is None
        log.info(
            "conversation_escalated", source="button", payload=_normalized(row).get("payload"), queued=queued
        )
        reply = tenant_settings.handoff.queue_reply if queued else tenant_settings.agent.handoff_reply
        await _write_outbox(deps, claim, [reply], row.trace_id or "")
    await send_outbox(deps, ctx, claim)
    await deliver_handoff_outbox(
        deps.resources.sessions, deps.graph, deps.cipher, conversation_id=claim.conversation.id
    )
    await _finish(deps, row.id, InboundState.done, None)
    return "button_handoff"


async def _turn(deps: WorkerDeps, ctx: dict[str, Any], claim: _Claim, burst_key: str) -> str:
    row, settings = claim.row, deps.settings
    async with deps.resources.sessions() as session:
        state = (await session.exec(select(Message.inbound_state).where(Message.id == row.id))).first()
    if state in (InboundState.done.value, InboundState.dead.value):  # a duplicate job finished it meanwhile
        return "missing_or_finished"
    absorbed = await _absorb_older(deps, claim)
    if absorbed:
        log.info("inbound_absorbed_older", count=absorbed)
    async with deps.resources.sessions() as session:
        has_outbox = (
            await session.exec(select(Outbox.id).where(Outbox.inbound_message_id == row.id).limit(1))
        ).first()
    if has_outbox is None:
        text = (row.text or "").strip()
        if row.kind in MEDIA_KINDS and row.media and not (row.raw or {}).get("media_text"):
            token = access_token_of(claim.account, deps.cipher) or "sandbox-token"
            try:
                text = await media_to_text(
                    kind=row.kind, media=row.media, caption=text, graph=deps.graph, token=token,
                    http=deps.http, settings=settings,
                )  # fmt: skip
            except MediaUnavailable as exc:
                raise await _retry_or_dead(deps, ctx, row.id, str(exc)) from None
            async with deps.resources.sessions() as session, session.begin():
                await session.execute(
                    update(Message)
                    .where(Message.id == row.id)
                    .values(text=text, raw=Message.raw.op("||")({"media_text": True}))  # type: ignore[union-attr]
                )
            log.info("inbound_media_to_text", kind=row.kind, chars=len(text))
        if not text:
            await _finish(deps, row.id, InboundState.done, "nothing to answer (empty text)")
            return "empty"
        request = TurnRequest(
            tenant_id=row.tenant_id, conversation_id=claim.conversation.id, inbound_message_id=row.id,
            channel="whatsapp", customer_id=claim.customer.id, text=text[:100_000],
        )  # fmt: skip
        try:
            result = await request_turn(
                deps.http, base_url=settings.orchestrator_url, token=settings.resolved_service_token(),
                request=request, timeout_s=settings.orchestrator_timeout_s,
            )  # fmt: skip
        except OrchestratorUnavailable as exc:
            raise await _retry_or_dead(deps, ctx, row.id, str(exc)) from None
        except ContractViolation as exc:
            await deps.redis.incr(contract_violation_counter_key())
            bad_key = inbound_failures_key(row.id) + ":contract"
            bad_answers = int(await deps.redis.incr(bad_key))
            await deps.redis.expire(bad_key, 86_400)
            if bad_answers < CONTRACT_VIOLATION_MAX_TRIES:
                await _set_pending(deps, row.id, str(exc))
                log.warning(
                    "orchestrator_bad_answer",
                    bad_answers=bad_answers,
                    status_code=exc.status_code,
                    detail=exc.detail,
                )
                raise Retry(defer=settings.inbound_retry_defer_s) from None
            log.error(
                "contract_violation", tenant_id=str(row.tenant_id), conversation_id=str(claim.conversation.id),
                trace_id=row.trace_id, status_code=exc.status_code, detail=exc.detail,
            )  # fmt: skip
            await _finish(deps, row.id, InboundState.done, f"contract_violation: {exc.detail}")
            return "contract_violation"
        await deps.redis.delete(burst_key)
        if result.silent:
            await _finish(deps, row.id, InboundState.done, None)
            log.info("turn_silent", trace_id=result.trace_id)
            return "silent"
        assert result.reply is not None
        await _write_outbox(deps, claim, split_text(result.reply), result.trace_id)
    sent = await send_outbox(deps, ctx, claim)
    async with deps.resources.sessions() as session:
        failed = (
            await session.exec(
                select(Outbox.error_code)
                .where(Outbox.inbound_message_id == row.id, Outbox.status == OutboxStatus.failed.value)
                .limit(1)
            )
        ).first()
    await _finish(deps, row.id, InboundState.done, f"reply not sent: {failed}" if failed else None)
    return "replied" if sent or not failed else f"not_sent:{failed}"
