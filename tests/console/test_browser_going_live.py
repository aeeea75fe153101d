"""The whole going-live path on a fresh system, in a real headless Chromium: a platform admin creates a
tenant and invites its admin; the admin chooses a password, connects a WhatsApp sandbox number from the
Channels page (the sandbox completes the callback handshake), sets an OpenAI-compatible model pointed
at the offline model server and tests it, uploads a document and invites an agent; a customer writes
and the answer quotes the document; the agent accepts the invitation, takes over and replies.

Each step's screenshot goes to ``tests/output/browser/going-live-*.png`` and, with
``UPDATE_DOCS_SCREENSHOTS=1``, to ``docs/img`` for docs/going-live.md."""

from __future__ import annotations

import os
import re
import shutil
import uuid
from pathlib import Path

import httpx
from switchboard.db.models import Role
from switchboard.queue import Queue

from tests.console.test_browser_people import _accept_invitation, _new_page
from tests.utils.console import PASSWORD, new_user
from tests.utils.servers import serve_app
from tests.utils.waiting import eventually
from tests.utils.whatsapp import channel_service, new_phone_number_id, text_body
from tests.utils.workers import run_worker_burst

DOCS_IMG = Path(__file__).resolve().parents[2] / "docs" / "img"
DOCUMENT = (
    b"Corner Bakery opening hours: we bake from 06:30 and the shop is open Monday to Saturday "
    b"07:00-15:00. Sourdough loaves come out of the oven at 08:00 every morning.\n"
)


async def test_a_business_goes_live_from_the_console(
    browser, console_url, console_settings, screenshot, sessions, offline_model
):
    from switchboard.tools.server import ToolServer, create_tools_app

    from services.whatsapp.main import create_app as whatsapp_app

    _, model_server = offline_model
    slug = f"corner-{uuid.uuid4().hex[:6]}"
    owner_email, agent_email = (
        f"olga-{uuid.uuid4().hex[:6]}@example.com",
        f"pat-{uuid.uuid4().hex[:6]}@example.com",
    )
    number, waba, customer = (
        new_phone_number_id(),
        new_phone_number_id(),
        f"1555{uuid.uuid4().int % 10**7:07d}",
    )
    shots: dict[str, Path] = {}
    platform = await new_user(sessions, role=Role.platform_admin, tenant_id=None)
    whatsapp = whatsapp_app(console_settings.model_copy(update={"whatsapp_sandbox_enabled": True}))
    tools = create_tools_app(console_settings, server=ToolServer())  # search_knowledge_base lives there
    async with (
        serve_app(whatsapp, port=console_settings.whatsapp_port),
        serve_app(tools, port=console_settings.mcp_tools_port),
    ):
        # 1. the platform admin creates the tenant and its admin's invitation
        admin = await _new_page(browser)
        await admin.goto(f"{console_url}/login")
        await admin.fill("input[name=email]", platform.email)
        await admin.fill("input[name=password]", PASSWORD)
        await admin.click("button[type=submit]")
        await admin.goto(f"{console_url}/platform")
        await admin.fill("input[name=slug]", slug)
        await admin.fill("input[name=name]", "Corner Bakery")
        await admin.fill("input[name=admin_email]", owner_email)
        await admin.fill("input[name=admin_name]", "Olga")
        await admin.click("text=Create tenant")
        await admin.wait_for_selector(f'tr[data-tenant="{slug}"]')
        owner_link = await admin.input_value("#invite-link")
        shots["tenant"] = await screenshot(admin, "going-live-1-tenant")

        # 2. the admin chooses a password and lands on the setup checklist
        owner = await _new_page(browser)
        await _accept_invitation(owner, owner_link, "crusty loaf at dawn", f"/t/{slug}/home")
        await owner.wait_for_selector('#checklist li[data-step="channel"][data-done="no"]')

        # 3. WhatsApp: the sandbox checks the number and completes the callback handshake
        await owner.goto(f"{console_url}/t/{slug}/channels")
        form = "#connect-whatsapp form"
        await owner.fill(f"{form} input[name=account_id]", number)
        await owner.fill(f"{form} input[name=waba_id]", waba)
        await owner.select_option(f"{form} select[name=api_base]", "sandbox")
        await owner.click(f"{form} button[type=submit]")
        await owner.wait_for_selector("#channel-notice")
        assert (await owner.inner_text(f'tr[data-account="{number}"] td.handshake')).startswith("20")
        shots["channel"] = await screenshot(owner, "going-live-2-channel")

        # 4. the model: an OpenAI-compatible server (the offline model server), tested before saving
        await owner.goto(f"{console_url}/t/{slug}/settings")
        row = '.deployment[data-row="0"]'
        await owner.select_option(f'{row} select[name="llm.deployments.0.provider"]', "openai_compatible")
        await owner.fill(f'{row} input[name="llm.deployments.0.id"]', "bakery-model")
        await owner.fill(f'{row} input[name="llm.deployments.0.model"]', f"bakery-{uuid.uuid4().hex[:6]}")
        await owner.fill(f'{row} input[name="llm.deployments.0.api_base"]', f"{model_server}/v1")
        await owner.click(f"{row} button:has-text('Test this model')")
        await owner.wait_for_selector("#probe-0 .probe-ok")
        await owner.click("#save-settings")
        await owner.wait_for_selector("#settings-saved")
        assert "Settings saved: Models." in await owner.inner_text("#settings-saved")
        assert "Answering now:" in await owner.inner_text("#answering-now")
        assert "via bakery-model" in await owner.inner_text("#answering-now")
        shots["model"] = await screenshot(owner, "going-live-3-model")

        # 5. a document, ingested by the background worker
        await owner.goto(f"{console_url}/t/{slug}/knowledge")
        await owner.set_input_files(
            "#kb-upload input[type=file]",
            files=[{"name": "bakery.txt", "mimeType": "text/plain", "buffer": DOCUMENT}],
        )
        await owner.click("#kb-upload button[type=submit]")
        await owner.wait_for_selector('[data-document="bakery.txt"]')
        await run_worker_burst(console_settings, Queue.background, poll_delay_s=0.05)
        await owner.goto(f"{console_url}/t/{slug}/knowledge")
        await owner.wait_for_selector('[data-document="bakery.txt"][data-status="ready"]')
        shots["knowledge"] = await screenshot(owner, "going-live-4-knowledge")

        # 6. an agent is invited
        await owner.goto(f"{console_url}/t/{slug}/people")
        await owner.fill("#invite-form input[name=email]", agent_email)
        await owner.fill("#invite-form input[name=name]", "Pat")
        await owner.select_option("#invite-form select[name=role]", "agent")
        await owner.click("#invite-form button[type=submit]")
        await owner.wait_for_selector(f'tr[data-invite="{agent_email}"]')
        agent_link = await owner.input_value("#invite-link")
        shots["people"] = await screenshot(owner, "going-live-5-people")

        # 7. a customer writes on WhatsApp: the answer quotes the document
        async with channel_service(console_settings) as channel:
            body = text_body(
                phone_number_id=number,
                wamid=f"wamid.{uuid.uuid4().hex}",
                text="When do the sourdough loaves come out of the oven?",
                wa_id=customer,
                name="Ana",
            )
            assert (await channel.post(body)).status_code == 200
        await run_worker_burst(console_settings)

        async def to_customer() -> list[str]:  # what the WhatsApp service's own sandbox sent the customer
            async with httpx.AsyncClient() as http:
                sent = await http.get(
                    f"{console_settings.whatsapp_sandbox_url}/_control/sent",
                    params={"phone_number_id": number},
                    headers={"Authorization": f"Bearer {console_settings.secret('admin_token')}"},
                )
            return [m.get("text") for m in sent.json()["messages"] if m.get("to") == customer]

        async def replies(count: int) -> bool:
            return len(await to_customer()) == count

        await eventually(lambda: replies(1))
        [answer] = await to_customer()
        assert "Sourdough loaves come out of the oven at 08:00 every morning." in answer, answer

        # 8. the agent accepts the invitation, takes over and replies
        agent = await _new_page(browser)
        await _accept_invitation(agent, agent_link, "sourdough every morning", f"/t/{slug}/inbox")
        await agent.locator("#inbox-rows tr", has_text="Ana").get_by_role("link").first.click()
        await agent.wait_for_selector("article.msg.ai")
        await agent.get_by_role("button", name="Take over").click()
        await agent.wait_for_selector("#mode.mode-human")
        await agent.get_by_placeholder("Write to the customer").fill("Hi Ana, Pat here: we keep one for you.")
        await agent.get_by_role("button", name="Send").click()
        await agent.wait_for_selector("article.msg.human")
        await run_worker_burst(console_settings)
        await eventually(lambda: replies(2))
        assert (await to_customer())[1] == "Hi Ana, Pat here: we keep one for you."
        await run_worker_burst(console_settings, Queue.background, poll_delay_s=0.05)  # the lead check
        shots["takeover"] = await screenshot(agent, "going-live-6-takeover")

        await owner.goto(f"{console_url}/t/{slug}/home")
        await screenshot(owner, "going-live-7-checklist")
        for page in (admin, owner, agent):
            await page.context.close()
    if os.environ.get("UPDATE_DOCS_SCREENSHOTS"):  # docs/contributing.md: refresh the docs' pictures
        DOCS_IMG.mkdir(parents=True, exist_ok=True)
        for name, path in shots.items():
            shutil.copyfile(path, DOCS_IMG / f"going-live-{name}.png")
    assert re.fullmatch(r"corner-[0-9a-f]{6}", slug)
