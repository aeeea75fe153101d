"""What the delivery loop may send, and when to try again: decisions that write nothing.

* :func:`may_send`: the service window of the row's audience (the conversation's customer, or the
  agent's own window), and the tenant's ``handoff.agent_template_name`` template for an agent outside it;
  on a channel with a human-agent extension (Instagram) a person's reply past the window, within the
  extension, goes out with the channel's tag (``HUMAN_AGENT``), and nothing else does.
* :func:`backoff_s`: capped exponential back-off with full jitter.
* :func:`throttle_hold_s`, :func:`throttle_release`: how long a sending account waits after a
  throughput limit (growing, jittered, capped: :class:`~switchboard.queue.jobs.Backoff`), and when each
  part that waited goes once it ends (spread out, not all at once).
* :func:`outcome_unknown`: whether a failed call may still have been accepted by the provider.
* :func:`conversation_reason`: the text a customer's conversation records when a provider refuses.
* :func:`tenant_settings_of`: the one place the loop reads tenant settings.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

import httpx
from sqlmodel import select
from sqlmodel.ext.asyncio.session import AsyncSession

from switchboard.channels.base import Channel, OutboundPart, SendError, SendErrorKind, within_window
from switchboard.db.models import Conversation, HumanAgent, Outbox, OutboxPurpose, Tenant
from switchboard.observability import get_logger
from switchboard.queue.jobs import Backoff
from switchboard.tenant_settings import TenantSettings, tenant_settings_from

__all__ = [
    "Refusal",
    "agent_of",
    "audience_of",
    "backoff_s",
    "conversation_reason",
    "may_send",
    "never_sent",
    "outcome_unknown",
    "tenant_settings_of",
    "throttle_hold_s",
    "throttle_release",
    "window_hours",
]

log = get_logger(__name__)


def backoff_s(
    attempt: int, *, base_s: float, max_s: float, rng: Callable[[], float] = random.random
) -> float:
    """Wait before attempt ``attempt + 1``: full jitter, uniform in ``[0, min(max_s, base_s * 2**(attempt-1)))``.

    Args:
        attempt: provider calls made so far (>= 1).
        base_s: first cap (``DELIVERY_BACKOFF_BASE_S``).
        max_s: largest cap (``DELIVERY_BACKOFF_MAX_S``).
    """
    cap = min(max_s, base_s * 2 ** max(attempt - 1, 0))
    return cap * rng()


def throttle_hold_s(
    throttles: int,
    *,
    retry_after_s: float | None,
    base_s: float,
    cap_s: float,
    rng: Callable[[], float] = random.random,
) -> float:
    """How long an account's sends wait after its ``throttles``-th throughput limit in a row (>= 1):
    :class:`~switchboard.queue.jobs.Backoff` (``base_s`` doubled per limit, at most ``cap_s``, in
    ``[d / 2, d]``), at least the provider's ``retry_after_s``. Seconds."""
    hold_s = Backoff(base_s, cap_s).delay_s(throttles, rand=rng)
    return max(hold_s, retry_after_s or 0.0)


def throttle_release(
    expiry: datetime, *, spread_s: float, rng: Callable[[], float] = random.random
) -> datetime:
    """When a part that waited for an account's throughput hold (ending at ``expiry``) is due: at a
    random moment within ``spread_s`` seconds after it, so the waiting parts do not all go at once."""
    return expiry + timedelta(seconds=spread_s * rng())


def tenant_settings_of(tenant: Tenant | None) -> TenantSettings:
    """A tenant's settings as the delivery loop reads them (the one call of the settings loader)."""
    return tenant_settings_from(
        tenant.settings_extensions if tenant else None, tenant_id=str(tenant.id) if tenant else None
    )


def audience_of(row: Outbox) -> str:
    """``customer`` or ``agent`` (``payload.audience``; rows without one are for the customer)."""
    return str((row.payload or {}).get("audience") or "customer")


@dataclass(frozen=True)
class Refusal:
    """Why a row may not be sent now (it is failed with these)."""

    code: str
    """``outbox.error_code``: ``window_closed`` or ``agent_window_closed``."""
    message: str
    """``outbox.error_message``."""
    conversation_reason: str | None = None
    """Recorded on a customer's conversation (``escalation_reason``)."""


def window_hours(channel: Channel) -> int:
    """The channel's service window in whole hours (0 without one), for texts people read."""
    window = channel.capabilities.service_window
    return int(window.total_seconds() // 3600) if window else 0


async def may_send(
    session: AsyncSession, row: Outbox, channel: Channel, part: OutboundPart, now: datetime
) -> tuple[OutboundPart, bool] | Refusal:
    """What may be sent now: ``(part, via_template)`` or why nothing may."""
    caps = channel.capabilities
    if caps.service_window is None or part.type in caps.outside_window:
        return part, False
    hours = window_hours(channel)
    if audience_of(row) == "agent":
        agent = await agent_of(session, row)
        if agent is not None and within_window(caps, agent.last_inbound_at, now):
            return part, False
        handoff = tenant_settings_of(await session.get(Tenant, row.tenant_id)).handoff
        if handoff.agent_template_name and "template" in caps.outside_window:
            template = {"name": handoff.agent_template_name, "language": handoff.agent_template_language}
            log.info("delivery_agent_template", template=handoff.agent_template_name)
            return OutboundPart(type="template", template=template), True
        why = (
            "no handoff.agent_template_name is configured"
            if not handoff.agent_template_name
            else f"{channel.name} sends no templates outside the window"
        )
        return Refusal(
            "agent_window_closed",
            f"the agent has not written to the business number in {hours} hours and {why}",
        )
    conversation = await session.get(Conversation, row.conversation_id)
    last = conversation.last_customer_message_at if conversation is not None else None
    if conversation is not None and within_window(caps, last, now):
        return part, False
    if caps.human_agent_window is not None and caps.human_agent_tag:
        return _human_agent_tag(row, channel, part, last, now)
    return Refusal(
        "window_closed",
        f"outside the {hours}-hour customer-service window: needs a template",
        f"{channel.name}: outside the {hours}-hour window; needs a template message or a human",
    )


def _human_agent_tag(
    row: Outbox, channel: Channel, part: OutboundPart, last: datetime | None, now: datetime
) -> tuple[OutboundPart, bool] | Refusal:
    """Past the standard window on a channel with a human-agent extension (Instagram: 7 days,
    ``HUMAN_AGENT``, Meta's human-agent policy): a person's reply goes out tagged; the AI's replies and
    automatic notices never do."""
    caps = channel.capabilities
    assert caps.human_agent_window is not None
    hours, days = window_hours(channel), int(caps.human_agent_window.total_seconds() // 86_400)
    if row.purpose != OutboxPurpose.human_reply.value:
        return Refusal(
            "window_closed",
            f"outside the {hours}-hour window: only a person may answer now (up to {days} days after "
            "the customer's last message)",
            f"{channel.name}: outside the {hours}-hour window; only a person may answer, within {days} days",
        )
    if last is not None and now - last < caps.human_agent_window:
        log.info("delivery_human_agent_tag", tag=caps.human_agent_tag)
        return replace(part, tag=caps.human_agent_tag), False
    return Refusal(
        "window_closed",
        f"more than {days} days since the customer's last message: {channel.name} accepts no reply, "
        "not even a person's, until the customer writes again",
        f"{channel.name}: more than {days} days since the customer wrote; wait for them to write again",
    )


async def agent_of(session: AsyncSession, row: Outbox) -> HumanAgent | None:
    """The tenant's agent a row is for: ``payload.agent_id``, else the agent whose phone it goes to."""
    agent_id = (row.payload or {}).get("agent_id")
    if agent_id:
        try:
            agent = await session.get(HumanAgent, uuid.UUID(str(agent_id)))
        except ValueError:
            agent = None
        return agent if agent is not None and agent.tenant_id == row.tenant_id else None
    return (
        await session.exec(
            select(HumanAgent).where(HumanAgent.tenant_id == row.tenant_id, HumanAgent.phone == row.recipient)
        )
    ).first()


# httpx failures before the request left this host (no connection made, none free in the pool):
# the provider cannot have seen the message, so it is sent again with back-off, not reconciled.
_NEVER_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)


def never_sent(exc: BaseException) -> bool:
    """Whether ``exc`` (or an error it was raised from) says the request never reached the provider:
    a refused or timed-out connect, or no pooled connection (httpx's ``ConnectError``,
    ``ConnectTimeout``, ``PoolTimeout``). A read timeout or a dropped answer is not: it may have
    been accepted."""
    seen: BaseException | None = exc
    for _ in range(8):  # the channel's error, the client's, the transport's: a short chain
        if seen is None:
            return False
        if isinstance(seen, _NEVER_SENT):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def outcome_unknown(exc: SendError) -> bool:
    """The provider may have accepted the message: no answer at all, or a 5xx that is not the
    provider's own error (a provider error body carries a code, so it was refused). A connection
    that was never made (:func:`never_sent`) is known: not accepted."""
    return (
        exc.kind is SendErrorKind.transient
        and exc.code is None
        and (exc.http_status is None or exc.http_status >= 500)
        and not never_sent(exc)
    )


def conversation_reason(channel: Channel, exc: SendError, code: str) -> str:
    """What a customer's conversation records when the provider refuses a part for good
    (``whatsapp 131047: outside the 24-hour window; ...``)."""
    if exc.kind is SendErrorKind.window_closed:
        return f"{channel.name} {code}: outside the {window_hours(channel)}-hour window; needs a template message or a human"
    return f"{channel.name} {code}: message undeliverable to this customer: {exc}"
