"""While a tenant's model is failing, people are told: the inbox marks the conversations whose question
waits for the model, the inbox shows a banner, and the Platform page lists the tenant. When the model
answers again and nothing waits, all of it is gone."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from switchboard.db.models import Message, Role
from switchboard.llm.health import mark_failing, mark_healthy

from tests.utils.agent import make_conversation
from tests.utils.console import log_in, new_user


async def test_a_failing_model_marks_the_inbox_shows_a_banner_and_lists_the_tenant_on_the_platform(
    console_client, sessions, make_tenant, arq_pool
):
    tenant = await make_tenant()
    waiting, answered = await make_conversation(sessions, tenant), await make_conversation(sessions, tenant)
    async with sessions() as session, session.begin():
        parked = Message(
            tenant_id=tenant.id,
            conversation_id=waiting.conversation.id,
            channel="whatsapp",
            direction="inbound",
            role="user",
            text="where is my order?",
            inbound_state="waiting_model",
            last_error="waiting for the model: every deployment failed",
            external_id=f"wamid.{uuid.uuid4().hex}",
        )
        session.add(parked)
    since = datetime(2026, 3, 2, 13, 55, tzinfo=UTC)
    await mark_failing(arq_pool, tenant.id, ["primary"], now=since.timestamp())
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id)
    platform = await new_user(sessions, role=Role.platform_admin, tenant_id=None)
    try:
        async with console_client() as client:
            await log_in(client, admin)
            page = (await client.get(f"/t/{tenant.slug}/inbox")).text
        assert (
            "Your model provider has been failing since 2026-03-02 13:55 UTC; 1 conversations are waiting for it."
            in page
        )
        marked = page.split(f'data-conversation="{waiting.conversation.id}"')[1].split("</tr>")[0]
        unmarked = page.split(f'data-conversation="{answered.conversation.id}"')[1].split("</tr>")[0]
        assert 'data-mark="ai-unavailable"' in marked and "AI unavailable" in marked
        assert "ai-unavailable" not in unmarked
        async with console_client() as client:
            await log_in(client, platform)
            platform_page = (await client.get("/platform")).text
        row = platform_page.split('id="platform-model-failing"')[1].split(f'data-tenant="{tenant.slug}"')[1]
        row = row.split("</tr>")[0]
        assert "primary" in row and "2026-03-02 13:55 UTC" in row and "<td>1</td>" in row

        # the provider answers again and the question was answered: nothing is shown any more
        await mark_healthy(arq_pool, tenant.id)
        async with sessions() as session, session.begin():
            (await session.get(Message, parked.id)).inbound_state = "done"
        async with console_client() as client:
            await log_in(client, admin)
            page = (await client.get(f"/t/{tenant.slug}/inbox")).text
        assert 'id="model-outage"' not in page and "ai-unavailable" not in page
        async with console_client() as client:
            await log_in(client, platform)
            platform_page = (await client.get("/platform")).text
        assert (
            f'data-tenant="{tenant.slug}"'
            not in platform_page.split('id="platform-model-failing"')[1].split("</table>")[0]
        )
    finally:
        await mark_healthy(arq_pool, tenant.id)
