"""Retention per tenant: the run removes exactly what is older than each setting, the preview counts what
the run removes, the platform maximum caps every tenant."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import text
from switchboard.db.models import utcnow
from switchboard.media.store import MediaCopyFailed, MediaStore
from switchboard.privacy.retention import apply_retention, prune_exports, retention_preview
from switchboard.tenant_settings import RetentionSettings

from tests.privacy.seed import seed_customer

DAYS = {
    "messages_days": 30,
    "memory_days": 30,
    "traces_days": 30,
    "leads_days": 30,
    "event_deliveries_days": 30,
}


async def _texts(sessions, tenant_id) -> set[str]:
    async with sessions() as session:
        rows = await session.exec(
            text("SELECT text FROM messages WHERE tenant_id = :t AND text IS NOT NULL"),
            params={"t": tenant_id},
        )
        return {r[0] for r in rows}


async def test_retention_removes_exactly_what_is_older_and_the_preview_says_so(
    sessions, make_tenant, settings
):
    store = MediaStore.from_settings(settings)
    tenant = await make_tenant(retention=DAYS)
    now = utcnow()
    old = await seed_customer(sessions, tenant.id, store, "old", at=now - timedelta(days=30, minutes=1))
    young = await seed_customer(
        sessions, tenant.id, store, "young", at=now - timedelta(days=30) + timedelta(minutes=1)
    )

    async with sessions() as session:
        preview = await retention_preview(await session.connection(), tenant, settings, now=now)
    assert preview == {
        "messages": 4,
        "outbox": 2,
        "memory": 1,
        "traces": 2,
        "tool_receipts": 2,
        "security_alerts": 2,
        "leads": 1,
        "event_deliveries": 2,
    }

    report = await apply_retention(sessions, settings, store=store, now=now, batch=3, tenant_ids=[tenant.id])

    assert report == {str(tenant.id): preview}
    assert await _texts(sessions, tenant.id) == set(young.texts)
    with pytest.raises(MediaCopyFailed):
        await store.get(old.media_refs[0])
    assert await store.get(young.media_refs[0])
    async with sessions() as session:
        conn = await session.connection()
        left = {
            table: (
                await conn.execute(
                    text(f"SELECT count(*) FROM {table} WHERE tenant_id = :t"), {"t": tenant.id}
                )
            ).scalar_one()
            for table in (
                "messages",
                "user_memories",
                "leads",
                "event_outbox",
                "webhook_deliveries",
                "security_alerts",
                "turns",
            )
        }
        after = await retention_preview(conn, tenant, settings, now=now)
    assert left == {
        "messages": 8,
        "user_memories": 1,
        "leads": 1,
        "event_outbox": 2,
        "webhook_deliveries": 2,
        "security_alerts": 2,
        "turns": 4,
    }
    assert set(after.values()) == {0}
    assert await apply_retention(sessions, settings, store=store, now=now, tenant_ids=[tenant.id]) == {}


async def test_the_platform_maximum_caps_a_tenant_that_keeps_for_ever(sessions, make_tenant, settings):
    store = MediaStore.from_settings(settings)
    tenant = await make_tenant()
    now = utcnow()
    await seed_customer(sessions, tenant.id, store, "old", at=now - timedelta(days=11))
    async with sessions() as session:
        conn = await session.connection()
        assert set((await retention_preview(conn, tenant, settings, now=now)).values()) == {None}
        capped = await retention_preview(
            conn, tenant, settings.model_copy(update={"retention_max_days": 10}), now=now
        )
    assert capped["messages"] == 4 and capped["leads"] == 1
    assert RetentionSettings(messages_days=400).messages_days == 400


async def test_expired_exports_are_deleted(settings):
    store = MediaStore.from_settings(settings)
    await store.write("exports/t/" + "a" * 32 + ".zip", b"zip")
    later = utcnow() + timedelta(seconds=settings.customer_export_link_ttl_s + 5)
    assert await prune_exports(store, settings, now=utcnow()) == 0
    assert await prune_exports(store, settings, now=later) >= 1
    assert not await store.exists("exports/t/" + "a" * 32 + ".zip")
