"""The console pages in a real headless Chromium (console-core's ``browser``, ``console_url`` and
``screenshot`` fixtures): upload documents and watch them ingest, change a setting and see the next turn
use it, and a screenshot of each page (``tests/output/browser``)."""

from __future__ import annotations

from typing import Any

from switchboard.agent import Orchestrator
from switchboard.crypto import CredentialCipher
from switchboard.db.models import Role
from switchboard.llm.router import ModelGateway
from switchboard.queue import Queue
from switchboard.standins.offline_server import ScriptedResponse

from tests.utils import workers
from tests.utils.agent import answer_with_script, make_conversation
from tests.utils.console import PASSWORD, new_user
from tests.utils.documents import RETURNS_POLICY, SHIPPING, make_pdf


async def _logged_in_page(browser: Any, console_url: str, user: Any) -> Any:
    """A page of a new browser context (its own cookies) logged in as ``user`` (closed with the browser)."""
    context = await browser.new_context(viewport={"width": 1280, "height": 900}, locale="en-US")
    context.set_default_timeout(15_000)
    page = await context.new_page()
    await page.goto(f"{console_url}/login")
    await page.fill("input[name=email]", user.email)
    await page.fill("input[name=password]", PASSWORD)
    await page.click("button[type=submit]")
    await page.wait_for_load_state("networkidle")
    return page


async def test_upload_two_documents_and_watch_them_ingest(
    browser, console_url, screenshot, sessions, make_tenant, settings, tmp_path
):
    tenant = await make_tenant(name="Browser Shop")
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id, name="Ada")
    (tmp_path / "faq.pdf").write_bytes(make_pdf([RETURNS_POLICY, SHIPPING]))
    (tmp_path / "hours.txt").write_text("We open at 9:00 and close at 18:00 on weekdays.")
    page = await _logged_in_page(browser, console_url, admin)
    await page.goto(f"{console_url}/t/{tenant.slug}/knowledge")
    await page.set_input_files("input[name=files]", [str(tmp_path / "faq.pdf"), str(tmp_path / "hours.txt")])
    await page.click("#kb-upload button[type=submit]")
    # the upload parses each file before storing it (a refused file stores nothing): slow on a busy machine
    await page.wait_for_selector('tr[data-document="faq.pdf"][data-status="pending"]', timeout=60_000)
    await page.wait_for_selector('tr[data-document="hours.txt"]')
    assert await page.get_attribute('tr[data-document="faq.pdf"] progress', "value") == "0"

    await workers.run_worker_burst(settings, Queue.background, poll_delay_s=0.05)  # the background worker

    # the table polls every 2 s while something is ingesting: both bars reach 100 % without a reload
    await page.wait_for_selector('tr[data-document="faq.pdf"][data-status="ready"]', timeout=60_000)
    await page.wait_for_selector('tr[data-document="hours.txt"][data-status="ready"]', timeout=60_000)
    assert await page.get_attribute('tr[data-document="faq.pdf"] progress', "value") == "100"

    await page.fill("input[name=q]", "How long does standard delivery take?")
    await page.click("#kb-hits >> xpath=preceding-sibling::form[1] >> button")
    await page.wait_for_selector("#kb-hits table")
    assert "faq.pdf" in await page.inner_text("#kb-hits")
    await screenshot(page, "knowledge")


async def test_change_a_setting_and_the_next_turn_uses_it(
    browser, console_url, screenshot, sessions, make_tenant, settings, offline_model
):
    tenant = await make_tenant(name="Pirate Shop")
    script = await answer_with_script(sessions, tenant.id, offline_model)
    script.push(ScriptedResponse(content="Ahoy! How can I help?"))
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id)
    page = await _logged_in_page(browser, console_url, admin)
    await page.goto(f"{console_url}/t/{tenant.slug}/settings")
    # the model row shows only what the chosen provider needs
    row = '.deployment[data-row="0"]'
    provider = await page.input_value(f'{row} select[name="llm.deployments.0.provider"]')
    await page.select_option(f'{row} select[name="llm.deployments.0.provider"]', "openai")
    assert not await page.is_visible(f'{row} input[name="llm.deployments.0.api_base"]')  # OpenAI: none
    await page.select_option(f'{row} select[name="llm.deployments.0.provider"]', "ollama")
    assert await page.is_visible(f'{row} input[name="llm.deployments.0.api_base"]')
    assert not await page.is_visible(f'{row} input[name="llm.deployments.0.api_key"]')  # Ollama: no key
    await page.select_option(f'{row} select[name="llm.deployments.0.provider"]', provider)
    assert not await page.is_visible('textarea[name="agent.instructions"]')
    await page.click("#advanced > summary")  # everything but the model is under "Advanced"
    await page.fill('textarea[name="agent.instructions"]', "Always greet the customer with AHOY-7.")
    await page.fill('input[name="agent.name"]', "Captain")
    await page.click("#save-settings")
    await page.wait_for_selector("#settings-saved")
    assert "Settings saved: Instructions, Agent's name" in await page.inner_text("#settings-saved")
    assert "console:" in await page.inner_text("#settings-history")
    await screenshot(page, "settings")

    conversation = await make_conversation(sessions, tenant)
    gateway = ModelGateway(
        settings=settings, cipher=CredentialCipher(settings.secret("encryption_key").encode())
    )
    result = await Orchestrator(sessions=sessions, gateway=gateway).handle_turn(conversation.request("hello"))
    assert result.reply == "Ahoy! How can I help?"
    system_prompt = script.requests[0]["messages"][0]["content"]
    assert "Always greet the customer with AHOY-7." in system_prompt and "Captain" in system_prompt


async def test_screenshots_of_every_page_in_both_languages(
    browser, console_url, screenshot, sessions, make_tenant
):
    tenant = await make_tenant(name="Tienda Demo", locale={"language": "es"})
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id)
    page = await _logged_in_page(browser, console_url, admin)
    for name in ("analytics", "tools", "channels", "people"):
        response = await page.goto(f"{console_url}/t/{tenant.slug}/{name}")
        assert response.status == 200, name
        title = await page.title()  # the page's name, never a block of the page
        assert title.endswith(" · Switchboard") and len(title) < 60, (name, title)
        await screenshot(page, name)
    assert "Analítica" in await page.inner_text("header nav")  # the tenant's language
    # the user's own choice wins over the tenant's
    await page.select_option("form.lang-switch select", "en")
    await page.wait_for_load_state("networkidle")
    assert "Analytics" in await page.inner_text("header nav")

    platform = await new_user(sessions, role=Role.platform_admin, tenant_id=None)
    page = await _logged_in_page(browser, console_url, platform)
    response = await page.goto(f"{console_url}/platform")
    assert response.status == 200 and await page.is_visible("#platform-tenants")
    await screenshot(page, "platform")


async def test_the_spanish_top_bar_keeps_every_entry_on_one_line_at_1366_px(
    browser, console_url, screenshot, sessions, make_tenant
):
    tenant = await make_tenant(name="Tienda de Demostración", locale={"language": "es"})
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id, name="Administradora")
    context = await browser.new_context(viewport={"width": 1366, "height": 800}, locale="es-ES")
    context.set_default_timeout(15_000)
    page = await context.new_page()
    await page.goto(f"{console_url}/login")
    await page.fill("input[name=email]", admin.email)
    await page.fill("input[name=password]", PASSWORD)
    await page.click("button[type=submit]")
    await page.wait_for_load_state("networkidle")
    await page.goto(f"{console_url}/t/{tenant.slug}/inbox")
    assert "Bandeja" in await page.inner_text("header nav")
    # every entry is one line of text: no label breaks inside ("Bandeja / de / entrada")
    heights = await page.eval_on_selector_all(
        "header.topbar nav a, header.topbar .who a, header.topbar .tenant",
        "els => els.map(e => [e.innerText, e.getBoundingClientRect().height,"
        " parseFloat(getComputedStyle(e).lineHeight) || 20])",
    )
    broken = [text for text, height, line in heights if height > 1.6 * line]
    assert broken == []
    bar = await page.eval_on_selector("header.topbar", "e => e.getBoundingClientRect().height")
    assert bar < 80  # one row of entries
    await screenshot(page, "topbar-es")
    await context.close()
