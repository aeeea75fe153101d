"""Analytics (figures per day and channel, SVG charts) and the platform console (tenants, queues, dead letters)."""

from __future__ import annotations

import re
import uuid
from contextlib import asynccontextmanager
from datetime import timedelta
from urllib.parse import urlencode

import httpx
from sqlalchemy import update
from switchboard.analytics import tenant_analytics
from switchboard.db.models import Message, Outbox, Role, Tenant, ToolReceipt, Turn, utcnow

from services.orchestrator.main import create_app as create_orchestrator
from tests.utils.agent import make_conversation
from tests.utils.console import log_in, new_user
from tests.utils.outbox import dead_letter_parts, new_scene, set_row


async def _traffic(sessions, tenant):  # type: ignore[no-untyped-def]
    """Two conversations today: one answered by the AI in 4 s (a fallback fired, one tool error), one handed off."""
    conv = await make_conversation(sessions, tenant)
    now = utcnow()
    async with sessions() as session, session.begin():
        # the reply after a tool call: the call and its result are history rows, not messages out, nor is
        # the hand-back note to the AI (kind system)
        for offset, direction, role, kind in (
            (0, "inbound", "user", "text"),
            (2, "outbound", "assistant", "tool_call"),
            (3, "outbound", "tool", "tool_result"),
            (4, "outbound", "assistant", "text"),
            (5, "outbound", "human_agent", "system"),
        ):
            session.add(
                Message(
                    tenant_id=tenant.id,
                    conversation_id=conv.conversation.id,
                    channel="whatsapp",
                    direction=direction,
                    role=role,
                    kind=kind,
                    text="hi",
                    created_at=now + timedelta(seconds=offset),
                )
            )
        session.add(
            Turn(
                tenant_id=tenant.id,
                conversation_id=conv.conversation.id,
                inbound_message_id=uuid.uuid4(),
                trace_id="t1",
                fallback_used=True,
                usage={"total_tokens": 120},
                cost_usd=0.0125,
            )
        )
        for outcome in ("ok", "error"):
            session.add(
                ToolReceipt(
                    tenant_id=tenant.id,
                    conversation_id=conv.conversation.id,
                    tool_name="lookup",
                    args_hash="0" * 64,
                    outcome=outcome,
                )
            )
    return conv


async def test_analytics_counts_per_day_and_channel(sessions, make_tenant):
    tenant = await make_tenant()
    await _traffic(sessions, tenant)
    async with sessions() as session:
        data = await tenant_analytics(session, tenant.id, days=7)
    assert data.channels == ["whatsapp"] and len(data.days) == 7
    (row,) = data.rows
    assert row.day == data.days[-1]
    values = row.values
    assert (values["conversations"], values["messages_in"], values["messages_out"]) == (1, 1, 1)
    assert values["first_response_p50_s"] == 4.0 and values["first_response_p95_s"] == 4.0
    assert (values["turns"], values["fallback_rate"], values["tokens"]) == (1, 1.0, 120)
    assert values["cost_usd"] == 0.0125 and data.totals["cost_usd"] == 0.0125
    assert (values["tool_calls"], values["tool_error_rate"]) == (2, 0.5)
    assert data.series("conversations") == {"whatsapp": [0] * 6 + [1]}  # a quiet day counts 0
    assert data.series("fallback_rate") == {"whatsapp": [None] * 6 + [1.0]}  # a rate has nothing to say


async def test_analytics_page_draws_svg_charts_for_admins_only(console_client, sessions, make_tenant):
    tenant = await make_tenant()
    await _traffic(sessions, tenant)
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id)
    agent = await new_user(sessions, role=Role.agent, tenant_id=tenant.id)
    async with console_client() as client:
        await log_in(client, admin)
        page = await client.get(f"/t/{tenant.slug}/analytics")
        assert page.status_code == 200
        assert page.text.count("<svg") == 7 and 'id="chart-first_response_p50_s"' in page.text
        assert re.search(r'<strong id="kpi-conversations">1</strong>', page.text)
        assert '<strong id="kpi-cost_usd">0.0125</strong>' in page.text and 'id="chart-cost_usd"' in page.text
        assert 'data-channel="whatsapp" data-value="1.0"' in page.text  # the fallback rate point
        assert "cdn" not in page.text.lower()
        api = await client.get(
            f"/v1/admin/tenants/{tenant.slug}/analytics", headers={"Accept": "application/json"}
        )
        assert api.status_code == 200 and api.json()["totals"]["tool_error_rate"] == 0.5
    async with console_client() as client:
        await log_in(client, agent)
        assert (await client.get(f"/t/{tenant.slug}/analytics")).status_code == 403


async def test_platform_console_creates_suspends_and_retries_a_dead_letter(
    console_client, sessions, make_tenant, arq_pool, stops_at_the_queue
):
    tenant = await make_tenant()
    conv = await make_conversation(sessions, tenant)
    async with sessions() as session, session.begin():
        dead = Message(
            tenant_id=tenant.id,
            conversation_id=conv.conversation.id,
            channel="whatsapp",
            direction="inbound",
            role="user",
            text="lost?",
            inbound_state="dead",
            last_error="dead letter after 3 sweeps",
            external_id=f"wamid.dead.{uuid.uuid4().hex}",
        )
        session.add(dead)
    platform = await new_user(sessions, role=Role.platform_admin, tenant_id=None)
    tenant_admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id)
    slug = f"new-{uuid.uuid4().hex[:8]}"
    async with console_client() as client:
        me = await log_in(client, platform)
        page = await client.get("/platform")
        assert page.status_code == 200 and f'data-message="{dead.id}"' in page.text
        assert 'data-queue="chat"' in page.text
        created = await me.post_form("/platform/tenants", {"slug": slug, "name": "New Shop"})
        assert created.status_code == 200 and f'data-tenant="{slug}"' in created.text
        assert (await me.post_form(f"/platform/tenants/{tenant.slug}/suspend")).status_code == 303
        retried = await me.post_form(f"/platform/dead-letters/{dead.id}/retry")
        assert retried.status_code == 303
    async with sessions() as session:
        assert (await session.get(Tenant, tenant.id)).suspended_at is not None
        row = await session.get(Message, dead.id)
        assert (row.inbound_state, row.last_error) == ("pending", None)
    assert await arq_pool.keys(f"arq:job:inbound:{dead.id}:retry:*")  # a fresh job (ids are unique per retry)
    async with console_client() as client:
        await log_in(client, tenant_admin)
        assert (await client.get("/platform")).status_code == 403
    async with sessions() as session, session.begin():
        await session.execute(update(Tenant).where(Tenant.id == tenant.id).values(suspended_at=None))


async def test_platform_console_and_api_retry_a_failed_reply_once(
    console_client, console_settings, sessions, shop, arq_pool, stops_at_the_queue
):
    scene = await new_scene(sessions, shop.tenant, shop.account)
    rows = await dead_letter_parts(sessions, scene, ["part one", "part two"])
    platform = await new_user(sessions, role=Role.platform_admin, tenant_id=None)
    async with console_client() as client:
        me = await log_in(client, platform)
        page = await client.get("/platform", params={"tenant": shop.tenant.slug})
        assert page.status_code == 200
        assert [f'data-outbox="{r.id}"' in page.text for r in rows] == [True, True]
        assert page.text.count('action="/platform/outbox/') == 2
        retried = await me.post_form(f"/platform/outbox/{rows[1].id}/retry", {"tenant": shop.tenant.slug})
        assert retried.status_code == 303
        assert retried.headers["location"] == "/platform?" + urlencode(
            {
                "flash": "Requeued 2 parts of the reply: the delivery loop sends them now, in order.",
                "tenant": shop.tenant.slug,
            }
        )
        again = await me.post_form(f"/platform/outbox/{rows[0].id}/retry")
        assert again.status_code == 409  # the reply is pending already: never queued twice
        assert "Not retried: It is not a failed outbox part: unknown, or retried already" in again.text
        after = await client.get("/platform", params={"tenant": shop.tenant.slug})
        assert "data-outbox=" not in after.text
    async with sessions() as session:
        states = [
            (r.status, r.attempts, r.error_code) for r in [await session.get(Outbox, r.id) for r in rows]
        ]
    assert states == [("pending", 0, None), ("pending", 0, None)]
    assert len(await arq_pool.keys("arq:job:deliver:retry:*")) == 1  # one delivery job for the retry

    await set_row(sessions, rows[0].id, status="failed", error_code="dead_letter")
    async with _admin_api(console_settings) as api:
        listed = await api.get("/v1/admin/platform/queues", params={"tenant": shop.tenant.slug})
        assert [(d["id"], d["retryable"]) for d in listed.json()["dead_letters"]["outbox"]] == [
            (str(rows[0].id), True)
        ]
        done = await api.post(f"/v1/admin/platform/outbox/{rows[0].id}/retry")
        assert done.status_code == 200 and done.json()["requeued"] == [str(rows[0].id)]
        twice = await api.post(f"/v1/admin/platform/outbox/{rows[0].id}/retry")
        assert twice.status_code == 409 and twice.json()["detail"].startswith(
            "It is not a failed outbox part"
        )
        assert (await api.get("/v1/admin/platform/queues", params={"tenant": "nope-x"})).status_code == 404


@asynccontextmanager
async def _admin_api(settings):  # type: ignore[no-untyped-def]
    """A client of the orchestrator's admin API (``/v1/admin/...``) with the admin token, in process."""
    orchestrator = create_orchestrator(settings)
    token = {"Authorization": f"Bearer {settings.secret('admin_token')}"}
    async with (
        orchestrator.router.lifespan_context(orchestrator),
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=orchestrator), base_url="http://o.test", headers=token
        ) as api,
    ):
        yield api


async def _one_failed_part(sessions, shop, text):  # type: ignore[no-untyped-def]
    scene = await new_scene(sessions, shop.tenant, shop.account)
    (row,) = [
        r
        for r in await dead_letter_parts(sessions, scene, [text])
        if r.conversation_id == scene.conversation.id
    ]
    return row


WINDOW_REASON = (
    "The 24-hour customer-service window had closed: a free-form reply can no longer be sent. "
    "Answer with a template, or wait for the customer to write again."
)


async def test_a_reply_refused_outside_the_window_is_not_offered_for_retry_and_the_api_says_why(
    console_client, console_settings, sessions, shop, arq_pool, stops_at_the_queue
):
    ours, provider = [await _one_failed_part(sessions, shop, text) for text in ("our check", "WhatsApp's")]
    await set_row(sessions, ours.id, error_code="window_closed", error_message="outside the 24-hour window")
    await set_row(sessions, provider.id, error_code="131047", error_message="(#131047) Re-engagement message")
    platform = await new_user(sessions, role=Role.platform_admin, tenant_id=None)
    async with console_client() as client:
        me = await log_in(client, platform)
        page = await client.get("/platform", params={"tenant": shop.tenant.slug})
        for row in (ours, provider):
            cell = re.search(rf'<tr data-outbox="{row.id}">.*?</tr>', page.text, re.S).group(0)
            assert "/retry" not in cell and WINDOW_REASON in cell
        refused = await me.post_form(f"/platform/outbox/{ours.id}/retry")
        assert refused.status_code == 409 and f"Not retried: {WINDOW_REASON}" in refused.text
        spanish = await client.get(
            "/platform", params={"tenant": shop.tenant.slug}, headers={"Accept-Language": "es"}
        )
        assert "La ventana de atención al cliente de 24 horas se había cerrado" in spanish.text
    async with _admin_api(console_settings) as api:
        listed = await api.get("/v1/admin/platform/queues", params={"tenant": shop.tenant.slug})
        parts = {d["id"]: d for d in listed.json()["dead_letters"]["outbox"]}
        for row in (ours, provider):
            assert (parts[str(row.id)]["retryable"], parts[str(row.id)]["not_retryable_reason"]) == (
                False,
                WINDOW_REASON,
            )
            answer = await api.post(f"/v1/admin/platform/outbox/{row.id}/retry")
            assert (answer.status_code, answer.json()["detail"]) == (409, WINDOW_REASON)
        described = (await api.get("/openapi.json")).json()["paths"][
            "/v1/admin/platform/outbox/{outbox_id}/retry"
        ]["post"]
        assert "window had closed" in described["description"]
    async with sessions() as session:
        assert [(await session.get(Outbox, r.id)).status for r in (ours, provider)] == ["failed", "failed"]


async def test_queue_counts_are_the_jobs_waiting_not_running_or_deferred(console_settings, arq_pool):
    import time

    from switchboard.queue.queues import Queue

    now_ms = int(time.time() * 1000)
    running, later, ready = (f"{n}-{uuid.uuid4().hex[:8]}" for n in ("running", "later", "ready"))
    await arq_pool.zadd(Queue.chat.value, {running: now_ms - 1_000, later: now_ms + 600_000})
    await arq_pool.set(f"arq:in-progress:{running}", b"1", px=60_000)  # a worker runs its sweep
    try:
        async with _admin_api(console_settings) as api:
            idle = (await api.get("/v1/admin/platform/queues")).json()["depths"]
            await arq_pool.zadd(Queue.background.value, {ready: now_ms - 10})
            waiting = (await api.get("/v1/admin/platform/queues")).json()["depths"]
        assert idle == {"chat": 0, "background": 0}
        assert waiting == {"chat": 0, "background": 1}
    finally:
        await arq_pool.zrem(Queue.chat.value, running, later)
        await arq_pool.zrem(Queue.background.value, ready)
        await arq_pool.delete(f"arq:in-progress:{running}")
