"""Delivering events: the background job ``deliver_events`` (an ARQ cron job, every 5 s).

One run:

1. **Fan out**: each event not yet dispatched gets a ``webhook_deliveries`` row for every active
   endpoint of its tenant that wants its type (unique per event and endpoint, so a re-run adds none).
2. **Send** the deliveries that are due (``SKIP LOCKED``, leased for the attempt's timeout, so two
   workers never send one at once): ``POST`` of the envelope's raw JSON, signed
   (:mod:`switchboard.events.signing`), redirects not followed, through the outbound-address policy
   (:class:`~switchboard.egress.EgressTransport`: the URL is checked again and the connection pinned to
   the address checked, since a name can start resolving to a private address).
3. **Record**: a 2xx delivers it and resets the endpoint's failure count; anything else (status,
   timeout, refused URL) logs the attempt and schedules the next one with capped exponential back-off
   and full jitter (``WEBHOOK_BACKOFF_BASE_S`` doubling up to ``WEBHOOK_BACKOFF_MAX_S``, the outbox's
   :func:`~switchboard.outbox.policy.backoff_s`), ``failed`` after ``WEBHOOK_MAX_ATTEMPTS``. After
   ``WEBHOOK_DISABLE_AFTER_FAILURES`` consecutive failures the endpoint is disabled with an
   error-level alert (``webhook_endpoint_disabled``) shown in the admin API; its pending deliveries
   wait, and go out once it is enabled again.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import httpx
from sqlalchemy import or_
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from switchboard.crypto import CredentialCipher, CredentialDecryptError
from switchboard.db.models import DeliveryState, EventOutbox, WebhookDelivery, WebhookEndpoint, utcnow
from switchboard.egress import EgressPolicy, EgressRefused, guarded_client
from switchboard.events.endpoints import set_endpoint_active, signing_secrets
from switchboard.events.signing import signature_headers
from switchboard.observability import get_logger, metrics
from switchboard.outbox.policy import backoff_s
from switchboard.settings import Settings

__all__ = ["EventDeliveryReport", "deliver_events", "run_event_delivery"]

log = get_logger(__name__)

FAN_OUT_BATCH = 200
FAN_OUT_BATCHES = 10
SEND_BATCH = 50
LOG_KEEP = 20
"""Attempts kept in a delivery's ``log`` (the newest)."""
LEASE_MARGIN_S = 5.0


@dataclass
class EventDeliveryReport:
    """What one run did."""

    dispatched: int = 0
    delivered: int = 0
    retrying: int = 0
    failed: int = 0
    disabled_endpoints: int = 0


async def _fan_out(sessions: async_sessionmaker[AsyncSession]) -> int:
    """Dispatch waiting events, :data:`FAN_OUT_BATCH` per transaction, at most :data:`FAN_OUT_BATCHES`
    batches per run (a backlog drains at 2,000 events per run). Returns the events dispatched."""
    total = 0
    for _ in range(FAN_OUT_BATCHES):
        done = await _fan_out_batch(sessions)
        total += done
        if done < FAN_OUT_BATCH:
            break
    return total


async def _fan_out_batch(sessions: async_sessionmaker[AsyncSession]) -> int:
    async with sessions() as session, session.begin():
        events = list(
            (
                await session.exec(
                    select(EventOutbox)
                    .where(col(EventOutbox.dispatched_at).is_(None))
                    .order_by(col(EventOutbox.created_at))
                    .limit(FAN_OUT_BATCH)
                    .with_for_update(skip_locked=True)
                )
            ).all()
        )
        endpoints: dict[uuid.UUID, list[WebhookEndpoint]] = {}
        rows = []
        for event in events:
            if event.tenant_id not in endpoints:
                endpoints[event.tenant_id] = list(
                    (
                        await session.exec(
                            # a disabled endpoint gets its deliveries too: they wait (pending) until it is
                            # enabled again, so a receiver's outage that disabled it loses no event
                            select(WebhookEndpoint).where(WebhookEndpoint.tenant_id == event.tenant_id)
                        )
                    ).all()
                )
            for endpoint in endpoints[event.tenant_id]:
                if endpoint.event_types and event.event_type not in endpoint.event_types:
                    continue
                rows.append(
                    {
                        "id": uuid.uuid4(),
                        "tenant_id": event.tenant_id,
                        "event_id": event.id,
                        "endpoint_id": endpoint.id,
                        "event_type": event.event_type,
                        "status": DeliveryState.pending.value,
                        "attempts": 0,
                        "log": [],
                        "created_at": utcnow(),
                        "updated_at": utcnow(),
                    }
                )
            event.dispatched_at = utcnow()
            session.add(event)
        if rows:
            await session.execute(insert(WebhookDelivery.__table__).values(rows).on_conflict_do_nothing())  # type: ignore[arg-type]
    return len(events)


@dataclass
class _Attempt:
    delivery_id: uuid.UUID
    endpoint_id: uuid.UUID
    url: str
    secret: list[str] | None
    """The secrets that sign (current first); ``None``: unreadable."""
    body: bytes
    event_id: str
    event_type: str
    tenant_id: uuid.UUID
    scheme: str = "switchboard"


async def _claim(
    sessions: async_sessionmaker[AsyncSession], settings: Settings, cipher: CredentialCipher
) -> list[_Attempt]:
    now = utcnow()
    async with sessions() as session, session.begin():
        due = list(
            (
                await session.exec(
                    select(WebhookDelivery, WebhookEndpoint, EventOutbox)
                    .join(WebhookEndpoint, col(WebhookEndpoint.id) == WebhookDelivery.endpoint_id)
                    .join(EventOutbox, col(EventOutbox.id) == WebhookDelivery.event_id)
                    .where(
                        WebhookDelivery.status == DeliveryState.pending.value,
                        col(WebhookEndpoint.is_active),
                        or_(
                            col(WebhookDelivery.next_attempt_at).is_(None),
                            col(WebhookDelivery.next_attempt_at) <= now,
                        ),
                    )
                    .order_by(col(WebhookDelivery.created_at))
                    .limit(SEND_BATCH)
                    .with_for_update(of=WebhookDelivery, skip_locked=True)  # type: ignore[arg-type]
                )
            ).all()
        )
        attempts = []
        for delivery, endpoint, event in due:
            delivery.next_attempt_at = now + timedelta(seconds=settings.webhook_timeout_s + LEASE_MARGIN_S)
            session.add(delivery)
            try:
                secret: list[str] | None = signing_secrets(endpoint, cipher, now=now)
            except CredentialDecryptError:
                secret = None
            body = json.dumps(event.payload, ensure_ascii=False, separators=(",", ":")).encode()
            attempts.append(
                _Attempt(
                    delivery.id,
                    endpoint.id,
                    endpoint.url,
                    secret,
                    body,
                    str(event.id),
                    event.event_type,
                    delivery.tenant_id,
                    endpoint.signature_scheme,
                )
            )
    return attempts


async def _send(
    http: httpx.AsyncClient, settings: Settings, attempt: _Attempt
) -> tuple[int | None, str | None, float]:
    """``(status_code, error, duration_ms)`` of one attempt; never raises."""
    started = time.perf_counter()
    if attempt.secret is None:
        return None, "secret unreadable (ENCRYPTION_KEY changed?)", 0.0
    timestamp = int(time.time())
    headers = {
        "Content-Type": "application/json",
        "User-Agent": "Switchboard-Webhooks/1",
        **signature_headers(
            attempt.scheme,
            attempt.secret,
            event_id=attempt.event_id,
            event_type=attempt.event_type,
            timestamp=timestamp,
            body=attempt.body,
        ),
    }
    try:
        response = await http.post(
            attempt.url, content=attempt.body, headers=headers, timeout=settings.webhook_timeout_s
        )
    except EgressRefused as exc:
        return None, f"refused: {exc}", 0.0
    except httpx.TimeoutException:
        return None, f"timeout after {settings.webhook_timeout_s:g} s", (time.perf_counter() - started) * 1000
    except httpx.HTTPError as exc:
        return None, f"network error: {type(exc).__name__}", (time.perf_counter() - started) * 1000
    duration_ms = (time.perf_counter() - started) * 1000
    if 200 <= response.status_code < 300:
        return response.status_code, None, duration_ms
    return response.status_code, f"HTTP {response.status_code}", duration_ms


async def _record(
    sessions: async_sessionmaker[AsyncSession],
    settings: Settings,
    attempt: _Attempt,
    outcome: tuple[int | None, str | None, float],
    report: EventDeliveryReport,
) -> None:
    status_code, error, duration_ms = outcome
    now = utcnow()
    async with sessions() as session, session.begin():
        delivery = await session.get(WebhookDelivery, attempt.delivery_id, with_for_update=True)
        endpoint = await session.get(WebhookEndpoint, attempt.endpoint_id, with_for_update=True)
        if delivery is None or endpoint is None:
            return
        delivery.attempts += 1
        delivery.last_status_code, delivery.last_error = status_code, error
        entry = {
            "at": now.isoformat(),
            "status_code": status_code,
            "error": error,
            "duration_ms": round(duration_ms, 1),
        }
        delivery.log = [*delivery.log, entry][-LOG_KEEP:]
        delivery.updated_at = now
        fields = {
            "tenant_id": str(attempt.tenant_id),
            "endpoint_id": str(endpoint.id),
            "event_id": attempt.event_id,
            "event_type": attempt.event_type,
            "attempt": delivery.attempts,
        }
        if error is None:
            delivery.status, delivery.delivered_at, delivery.next_attempt_at = (
                DeliveryState.delivered.value,
                now,
                None,
            )
            endpoint.consecutive_failures = 0
            report.delivered += 1
            metrics.EVENT_DELIVERIES.labels("delivered").inc()
            log.info(
                "webhook_delivered", status_code=status_code, duration_ms=round(duration_ms, 1), **fields
            )
        else:
            endpoint.consecutive_failures += 1
            if delivery.attempts >= settings.webhook_max_attempts:
                delivery.status, delivery.next_attempt_at = DeliveryState.failed.value, None
                report.failed += 1
                metrics.EVENT_DELIVERIES.labels("failed").inc()
                log.warning("webhook_delivery_failed", error=error, **fields)
            else:
                wait_s = backoff_s(
                    delivery.attempts,
                    base_s=settings.webhook_backoff_base_s,
                    max_s=settings.webhook_backoff_max_s,
                )
                delivery.next_attempt_at = now + timedelta(seconds=wait_s)
                report.retrying += 1
                log.info("webhook_delivery_retry", error=error, retry_in_s=round(wait_s, 1), **fields)
            if (
                endpoint.is_active
                and endpoint.consecutive_failures >= settings.webhook_disable_after_failures
            ):
                set_endpoint_active(
                    endpoint,
                    False,
                    reason=f"{endpoint.consecutive_failures} consecutive failed deliveries; last: {error}"[
                        :500
                    ],
                )
                report.disabled_endpoints += 1
                log.error(
                    "webhook_endpoint_disabled", failures=endpoint.consecutive_failures, error=error, **fields
                )
        session.add(delivery)
        session.add(endpoint)


async def run_event_delivery(
    sessions: async_sessionmaker[AsyncSession],
    settings: Settings,
    *,
    cipher: CredentialCipher,
    http: httpx.AsyncClient | None = None,
) -> EventDeliveryReport:
    """One fan-out and one batch of attempts (the module docstring).

    Args:
        http: the client to send with; default: one through the outbound-address policy of
            ``settings`` (:func:`switchboard.egress.guarded_client`), closed at the end.
    """
    report = EventDeliveryReport(dispatched=await _fan_out(sessions))
    attempts = await _claim(sessions, settings, cipher)
    if not attempts:
        return report
    own = http is None
    client = http or guarded_client(EgressPolicy.from_settings(settings), follow_redirects=False)
    try:
        outcomes = await asyncio.gather(*(_send(client, settings, a) for a in attempts))
    finally:
        if own:
            await client.aclose()
    for attempt, outcome in zip(attempts, outcomes, strict=True):  # one endpoint's failures count in order
        await _record(sessions, settings, attempt, outcome, report)
    return report


async def deliver_events(ctx: dict[str, Any]) -> dict[str, int]:
    """ARQ cron job (background queue): :func:`run_event_delivery` with the worker's resources."""
    deps = ctx["deps"]
    report = await run_event_delivery(ctx["resources"].sessions, deps.settings, cipher=deps.cipher)
    return {
        "dispatched": report.dispatched,
        "delivered": report.delivered,
        "retrying": report.retrying,
        "failed": report.failed,
        "disabled_endpoints": report.disabled_endpoints,
    }
