"""A message sent through the public API is signed in the console with the API key's name (or "API"),
never as an unnamed person, in a real headless Chromium."""

from __future__ import annotations

import httpx
import pytest
from switchboard.console.inbox import sender_of
from switchboard.db.models import Message, Role
from switchboard.users import create_tenant_key

from tests.utils.console import logged_in_page, new_user
from tests.utils.outbox import new_scene
from tests.utils.whatsapp import connect_whatsapp


@pytest.mark.parametrize(("key_name", "shown"), [("Shop backend", "Shop backend"), ("", "API")])
async def test_a_message_sent_through_the_api_is_signed_with_the_keys_name(
    browser, console_url, console_settings, sessions, make_tenant, key_name, shown, stops_at_the_queue
):  # type: ignore[no-untyped-def]
    tenant = await make_tenant()
    account = await connect_whatsapp(sessions, tenant, console_settings)
    conversation = (await new_scene(sessions, tenant, account)).conversation
    async with sessions() as session, session.begin():
        token, _ = await create_tenant_key(
            session, tenant_id=tenant.id, scopes=["messages:write"], name=key_name
        )
    async with httpx.AsyncClient(base_url=console_url, headers={"Authorization": f"Bearer {token}"}) as api:
        sent = await api.post(
            f"/api/v1/conversations/{conversation.id}/messages", json={"text": "Your parcel left today."}
        )
    assert sent.status_code == 202, sent.text

    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id)
    page = await logged_in_page(browser, console_url, admin)
    await page.goto(f"{console_url}/t/{tenant.slug}/conversations/{conversation.id}")
    message = page.locator("article.msg", has_text="Your parcel left today.")
    assert await message.get_attribute("data-sender") == "human"
    assert await message.locator("strong").first.inner_text() == shown
    assert "person" not in await message.inner_text()


def test_a_message_from_the_command_line_is_signed_cli():
    row = Message(role="human_agent", text="hi", proxy_metadata={"sender": "cli", "relayed_to": "+34600"})
    assert sender_of(row) == ("human", "CLI")
