"""The setup checklist of a tenant's home page: each step's state is read from the database."""

from __future__ import annotations

import re
import uuid

from sqlalchemy import text
from switchboard.db.models import KnowledgeSource, Role, Tenant, Turn
from switchboard.tenant_settings import tenant_settings_from

from tests.utils.console import log_in, new_user
from tests.utils.handoff import make_agent, make_customer_conversation

STEP = re.compile(r'data-step="(\w+)" data-done="(yes|no)"')


def _steps(page_text: str) -> dict[str, bool]:
    return {key: done == "yes" for key, done in STEP.findall(page_text)}


async def test_new_tenant_admin_lands_on_an_empty_checklist_and_the_inbox_points_to_it(
    console_client, sessions, make_tenant, console_settings
):
    tenant = await make_tenant("Fresh Shop")
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id)
    async with console_client() as client:
        await log_in(client, admin)
        first = await client.get("/", follow_redirects=False)
        assert first.headers["location"] == f"/t/{tenant.slug}/home"
        home = await client.get(first.headers["location"])
        assert home.status_code == 200
        assert _steps(home.text) == {
            "channel": False,
            "model": False,
            "knowledge": False,
            "people": False,
            "test": False,
        }
        assert "business hours" not in home.text.lower()  # no such feature yet: no step for it
        for path in ("/channels", "/settings", "/knowledge", "/people", "/inbox"):
            assert f'href="/t/{tenant.slug}{path}"' in home.text
        assert "docs/going-live.md" in home.text  # no documentation site configured
        inbox = await client.get(f"/t/{tenant.slug}/inbox")
        assert 'id="inbox-new-tenant"' in inbox.text and f'href="/t/{tenant.slug}/home"' in inbox.text


async def test_each_step_follows_what_the_database_holds(
    console_client, sessions, shop, make_settings, settings
):
    tenant = shop.tenant
    async with sessions() as session:
        stored = await session.get(Tenant, tenant.id)
        model_id = tenant_settings_from(stored.settings_extensions).llm.deployments[0].id
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id)
    async with console_client() as client:
        await log_in(client, admin)
        before = _steps((await client.get(f"/t/{tenant.slug}/home")).text)
        # connected but nothing received; the tenant's own model configured but it has not answered
        assert before == {
            "channel": False,
            "model": False,
            "knowledge": False,
            "people": False,
            "test": False,
        }
        page = (await client.get(f"/t/{tenant.slug}/home")).text
        assert "no message has arrived yet" in page and "Only the offline demo model is set up" in page
        # a model of a real provider (here served by the offline server: the checklist reads the setting)
        async with sessions() as session, session.begin():
            row = await session.get(Tenant, tenant.id)
            llm = dict(row.settings_extensions["llm"])
            llm["deployments"] = [{**d, "provider": "openai_compatible"} for d in llm["deployments"]]
            row.settings_extensions = {**row.settings_extensions, "llm": llm}
        page = (await client.get(f"/t/{tenant.slug}/home")).text
        assert "not answered with yet" in page and 'data-testing="yes"' not in page

        _customer, conversation = await make_customer_conversation(sessions, tenant)
        async with sessions() as session, session.begin():
            await session.execute(
                text("UPDATE messages SET channel_account_id = :a WHERE conversation_id = :c"),
                {"a": shop.account.id, "c": conversation.id},
            )
            session.add(
                KnowledgeSource(
                    tenant_id=tenant.id, filename="faq.md", content_hash=uuid.uuid4().hex, status="ready"
                )
            )
            session.add(
                Turn(
                    tenant_id=tenant.id,
                    conversation_id=conversation.id,
                    inbound_message_id=uuid.uuid4(),
                    trace_id=uuid.uuid4().hex,
                    status="done",
                    outcome="answered",
                    model=model_id,
                )
            )
        await make_agent(sessions, tenant, "Nia")
        after = (await client.get(f"/t/{tenant.slug}/home")).text
        assert _steps(after) == {
            "channel": True,
            "model": True,
            "knowledge": True,
            "people": True,
            "test": True,
        }
        assert "Every step is done." in after and f"{model_id} has answered" in after
        inbox = await client.get(f"/t/{tenant.slug}/inbox")
        assert 'id="inbox-new-tenant"' not in inbox.text


async def test_go_live_links_the_documentation_site_when_configured(
    make_settings, settings, sessions, make_tenant
):
    import httpx

    from services.console.main import create_app

    app = create_app(
        make_settings(
            orchestrator_port=settings.orchestrator_port, console_docs_url="https://docs.example.com/"
        )
    )
    tenant = await make_tenant()
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app, client=("10.9.8.5", 40000))
        async with httpx.AsyncClient(transport=transport, base_url="http://console.test") as client:
            await log_in(client, admin)
            home = await client.get(f"/t/{tenant.slug}/home")
    assert 'href="https://docs.example.com/going-live/"' in home.text
