"""The console names channels the way their registered class declares (a fourth channel included)."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from datetime import date

import pytest
from switchboard.analytics.charts import line_chart
from switchboard.channels.base import register_channel, unregister_channel
from switchboard.conversations import Identity, resolve_customer, start_conversation
from switchboard.db.models import Conversation, Customer, Message, Role

from tests.channels.test_registry import SmsChannel
from tests.utils.console import log_in, new_user


@pytest.fixture
def sms() -> Iterator[type[SmsChannel]]:
    register_channel("sms", SmsChannel)
    try:
        yield SmsChannel
    finally:
        unregister_channel("sms")


async def test_the_console_labels_come_from_the_registered_class(
    sms: type[SmsChannel],
    console_client,
    sessions,
    make_tenant,
) -> None:  # type: ignore[no-untyped-def]
    tenant = await make_tenant()
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id)
    async with console_client() as client:
        await log_in(client, admin)
        inbox = await client.get(f"/t/{tenant.slug}/inbox?channel=sms")
        channels = await client.get(f"/t/{tenant.slug}/channels")
    assert inbox.status_code == 200
    assert '<option value="sms" selected>SMS Text</option>' in inbox.text
    assert '<option value="whatsapp" >WhatsApp</option>' in inbox.text
    assert channels.status_code == 200
    assert "<h2>SMS Text</h2>" in channels.text and 'data-channel="sms"' in channels.text


async def _web_conversation(sessions, tenant) -> tuple[Customer, Conversation]:  # type: ignore[no-untyped-def]
    async with sessions() as session, session.begin():
        customer = (
            await resolve_customer(
                session,
                tenant_id=tenant.id,
                identities=[Identity("web", "visitor", secrets.token_urlsafe(18))],
            )
        ).customer
        conversation = await start_conversation(session, customer=customer, channel_account_id=None)
        session.add(
            Message(
                tenant_id=tenant.id,
                conversation_id=conversation.id,
                channel="web",
                direction="inbound",
                role="user",
                text="Do you ship to Lisbon?",
            )
        )
    return customer, conversation


@pytest.mark.parametrize(("language", "label"), [("es", "Chat del sitio web"), ("en", "Website chat")])
async def test_the_website_chat_is_named_in_the_consoles_language_wherever_channels_show(
    console_client, sessions, make_tenant, language, label
) -> None:  # type: ignore[no-untyped-def]
    tenant = await make_tenant()
    customer, conversation = await _web_conversation(sessions, tenant)
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id)
    async with console_client(**{"Accept-Language": language}) as client:
        await log_in(client, admin)
        inbox = await client.get(f"/t/{tenant.slug}/inbox?channel=web")
        page = await client.get(f"/t/{tenant.slug}/conversations/{conversation.id}")
        person = await client.get(f"/t/{tenant.slug}/customers/{customer.id}")
        channels = await client.get(f"/t/{tenant.slug}/channels")
    assert f'<option value="web" selected>{label}</option>' in inbox.text
    badge = f'<span class="badge ch-web">{label}</span>'
    assert badge in inbox.text and f'<span class="badge ch-web" id="channel">{label}</span>' in page.text
    assert person.text.count(badge) == 2  # its identity and its conversation
    assert f"<h2>{label}</h2>" in channels.text
    assert '<option value="whatsapp" >WhatsApp</option>' in inbox.text  # a brand stays as it is


def test_an_analytics_legend_names_the_website_chat_in_the_pages_language() -> None:
    days = [date(2026, 12, 7), date(2026, 12, 8)]
    assert "● Chat del sitio web</text>" in line_chart("Mensajes", days, {"web": [1, 2]}, language="es")
    assert "● Website chat</text>" in line_chart("Messages", days, {"web": [1, 2]})
