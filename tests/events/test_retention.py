"""Event retention (``prune_events``): delivered events go after EVENT_RETENTION_DELIVERED_DAYS, events
with a failed delivery after the longer EVENT_RETENTION_FAILED_DAYS, pending or undispatched ones never;
deletion runs in batches and logs its counts."""

from __future__ import annotations

import uuid
from datetime import timedelta

from sqlalchemy import update
from sqlmodel import col, select
from switchboard.crypto import CredentialCipher
from switchboard.db.models import EventOutbox, WebhookDelivery, utcnow
from switchboard.egress import EgressPolicy
from switchboard.events import emit
from switchboard.events.endpoints import create_endpoint
from switchboard.events.retention import prune_events, run_event_retention

from tests.utils.outbox import captured_logs
from tests.utils.tenants import new_tenant


async def _endpoints(sessions, settings, tenant, n):  # type: ignore[no-untyped-def]
    cipher = CredentialCipher(settings.secret("encryption_key").encode())
    out = []
    async with sessions() as session, session.begin():
        for i in range(n):
            endpoint, _ = await create_endpoint(
                session,
                tenant_id=tenant.id,
                url=f"https://93.184.215.14/hook{i}",
                event_types=[],
                description="crm",
                cipher=cipher,
                egress=EgressPolicy(allow_loopback=False),
            )
            out.append(endpoint)
    return out


async def test_old_finished_events_are_pruned_in_batches_and_the_rest_is_kept(
    scratch_database, make_settings
) -> None:  # type: ignore[no-untyped-def]
    # the pruning reads every tenant's events: on a database of this test's own, it finds exactly these
    sessions = scratch_database.sessions
    settings = make_settings(
        database_url=scratch_database.url, event_retention_delivered_days=14, event_retention_failed_days=60
    )
    tenant = await new_tenant(sessions)
    first, second = await _endpoints(sessions, settings, tenant, 2)
    ids = {}
    for name, age, statuses, dispatched in [
        ("delivered_old", 20, [("delivered", first), ("delivered", second)], True),
        ("delivered_old_2", 15, [("delivered", first)], True),
        ("nobody_wanted_old", 20, [], True),
        ("delivered_recent", 5, [("delivered", first)], True),
        ("failed_20_days", 20, [("delivered", first), ("failed", second)], True),
        ("failed_70_days", 70, [("failed", first)], True),
        ("pending_70_days", 70, [("delivered", first), ("pending", second)], True),
        ("undispatched_70_days", 70, [], False),
    ]:
        ids[name] = await _one(sessions, tenant, age, statuses, dispatched)

    with captured_logs() as logs:
        report = await run_event_retention(sessions, settings, batch=2)
    assert (report.events, report.deliveries) == (4, 4)
    assert report.batches == 3  # delivered pass: 2 + 1 (a short batch ends it); failed pass: 1
    (line,) = [entry for entry in logs if entry["event"] == "events_pruned"]
    assert (line["events"], line["deliveries"], line["log_level"]) == (4, 4, "info")

    async with sessions() as session:
        left = set(
            (await session.exec(select(EventOutbox.id).where(EventOutbox.tenant_id == tenant.id))).all()
        )
        left_deliveries = (
            await session.exec(select(WebhookDelivery.event_id).where(WebhookDelivery.tenant_id == tenant.id))
        ).all()
    assert left == {
        ids[n] for n in ("delivered_recent", "failed_20_days", "pending_70_days", "undispatched_70_days")
    }
    assert sorted(map(str, left_deliveries)) == sorted(
        map(
            str,
            [
                ids["delivered_recent"],
                ids["failed_20_days"],
                ids["failed_20_days"],
                ids["pending_70_days"],
                ids["pending_70_days"],
            ],
        )
    )

    # a second run has nothing left to do and says so at debug level only
    with captured_logs() as logs:
        ctx = {
            "resources": type("R", (), {"sessions": sessions})(),
            "deps": type("D", (), {"settings": settings})(),
        }
        assert await prune_events(ctx) == {"events": 0, "deliveries": 0, "batches": 0}
    assert [(e["event"], e["log_level"]) for e in logs] == [("events_pruned", "debug")]


async def _one(sessions, tenant, age_days, statuses, dispatched):  # type: ignore[no-untyped-def]
    created = utcnow() - timedelta(days=age_days)
    async with sessions() as session, session.begin():
        await emit(
            session,
            tenant_id=tenant.id,
            event_type="conversation.closed",
            data={"conversation_id": uuid.uuid4(), "channel": "gmail", "actor_type": "ai"},
        )
        event = (
            await session.exec(
                select(EventOutbox)
                .where(EventOutbox.tenant_id == tenant.id, col(EventOutbox.dispatched_at).is_(None))
                .order_by(col(EventOutbox.created_at).desc())
                .limit(1)
            )
        ).one()
        event_id = event.id
    async with sessions() as session, session.begin():
        await session.execute(
            update(EventOutbox)
            .where(col(EventOutbox.id) == event_id)
            .values(created_at=created, dispatched_at=created if dispatched else None)
        )
        for status, endpoint in statuses:
            session.add(
                WebhookDelivery(
                    tenant_id=tenant.id,
                    event_id=event_id,
                    endpoint_id=endpoint.id,
                    event_type="conversation.closed",
                    status=status,
                    attempts=1,
                    log=[{"at": created.isoformat(), "status_code": 200}],
                    created_at=created,
                    updated_at=created,
                )
            )
    return event_id
