"""The setup checklist does not count a stand-in as done: a channel on this deployment's sandbox and the
offline demo model (set up, or answering as the platform's default when no model was added) show
"Testing only" with a link to the real step, in a real headless Chromium."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import text
from switchboard.crypto import CredentialCipher
from switchboard.db.models import Role, Tenant, Turn
from switchboard.i18n import gettext
from switchboard.llm.config import default_deployments
from switchboard.tenants import add_channel_account

from tests.utils.agent import deployment, llm_settings
from tests.utils.console import logged_in_page, new_user
from tests.utils.handoff import make_customer_conversation
from tests.utils.whatsapp import new_phone_number_id


async def test_the_sandbox_and_the_offline_model_are_testing_only(
    browser, console_url, console_settings, sessions, make_tenant
):  # type: ignore[no-untyped-def]
    tenant = await make_tenant("Sandbox Shop")
    async with sessions() as session, session.begin():
        account = await add_channel_account(
            session,
            tenant=tenant,
            channel="whatsapp",
            external_account_id=new_phone_number_id(),
            cipher=CredentialCipher(console_settings.secret("encryption_key").encode()),
            api_base_url="sandbox",
        )
        row = await session.get(Tenant, tenant.id)
        row.settings_extensions = {
            **row.settings_extensions,
            "llm": llm_settings(deployment("http://127.0.0.1:9", "offline-demo")),
        }
    # the sandbox received a message and the offline model answered it
    _customer, conversation = await make_customer_conversation(sessions, tenant)
    async with sessions() as session, session.begin():
        await session.execute(
            text("UPDATE messages SET channel_account_id = :a WHERE conversation_id = :c"),
            {"a": account.id, "c": conversation.id},
        )
        session.add(
            Turn(
                tenant_id=tenant.id,
                conversation_id=conversation.id,
                inbound_message_id=uuid.uuid4(),
                trace_id=uuid.uuid4().hex,
                status="done",
                outcome="answered",
                model="offline-demo",
            )
        )
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id)
    page = await logged_in_page(browser, console_url, admin)
    await page.goto(f"{console_url}/t/{tenant.slug}/home")

    for step, words, path in (
        ("channel", "Connect a real channel", "/channels"),
        ("model", "Add a real model", "/settings"),
    ):
        line = page.locator(f'li[data-step="{step}"]')
        assert await line.get_attribute("data-done") == "no"
        assert await line.locator(".badge").inner_text() == "Testing only"
        link = line.locator("a.real-step")
        assert await link.inner_text() == words
        assert await link.get_attribute("href") == f"/t/{tenant.slug}{path}"
    assert await page.locator('li[data-step="test"]').get_attribute("data-done") == "yes"
    assert await page.locator("#go-live").inner_text() and "Every step is done." not in await page.content()
    await page.locator('li[data-step="channel"] a.real-step').click()
    await page.wait_for_url(f"{console_url}/t/{tenant.slug}/channels")


@pytest.mark.parametrize(
    ("language", "badge", "real_step"),
    [("en", "Testing only", "Add a real model"), ("es", "Solo para pruebas", "Añadir un modelo real")],
)
async def test_no_model_added_on_the_offline_default_is_testing_only(
    browser, console_url, console_settings, sessions, make_tenant, language, badge, real_step
):  # type: ignore[no-untyped-def]
    assert [d.provider for d in default_deployments(console_settings)] == ["offline"]
    tenant = await make_tenant("No Model Shop")
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id)
    page = await logged_in_page(browser, console_url, admin, language=language)
    await page.goto(f"{console_url}/t/{tenant.slug}/home")
    line = page.locator('li[data-step="model"]')
    assert await line.get_attribute("data-done") == "no"
    assert await line.get_attribute("data-testing") == "yes"
    assert await line.locator(".badge").inner_text() == badge
    assert await line.locator("a.real-step").inner_text() == real_step
    state = await line.locator("small").inner_text()
    expected = (
        "No model added: the offline demo model answers for now. It is for testing, it does not "
        "understand customers."
    )
    assert state == gettext(language, expected)
    assert "default model" not in state and "predeterminado" not in state
