"""The website chat in a real headless Chromium: the widget on a local sample page of the business, the web
service, the real worker and orchestrator (the offline model answers), and the console an agent uses."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime
from typing import Any

import httpx
from sqlmodel import select
from switchboard.channels.base import ChannelDeps, OutboundPart, build_channels
from switchboard.channels.web.channel import public_url
from switchboard.channels.web.widgets import user_hash
from switchboard.crypto import CredentialCipher
from switchboard.db.models import Conversation, Customer, CustomerIdentity, Message, Outbox, Role, Tenant
from switchboard.handoff import hours
from switchboard.standins.offline_server import ScriptedResponse
from switchboard.tenant_settings import set_section

from tests.utils.agent import answer_with_script, call, text, tool_calls
from tests.utils.console import PASSWORD, new_user
from tests.utils.net import free_port
from tests.utils.servers import serve_app
from tests.utils.waiting import eventually
from tests.utils.web import connect_web, sample_site
from tests.utils.workers import run_worker_burst

WIDGET = "#switchboard-chat"


def _web(settings: Any) -> serve_app:
    from services.web.main import create_app

    return serve_app(create_app(settings), port=settings.web_port)


async def _new_page(browser: Any, locale: str = "en-US") -> Any:
    context = await browser.new_context(viewport={"width": 1200, "height": 860}, locale=locale)
    context.set_default_timeout(15_000)
    return await context.new_page()


async def _stored(sessions, tenant_id, count: int) -> None:  # type: ignore[no-untyped-def]
    async def enough() -> bool:
        async with sessions() as session:
            rows = (
                await session.exec(
                    select(Message.id).where(Message.tenant_id == tenant_id, Message.direction == "inbound")
                )
            ).all()
        return len(rows) >= count

    await eventually(enough)


async def _write(page: Any, text: str) -> None:
    await page.locator(f"{WIDGET} textarea").fill(text)
    await page.locator(f"{WIDGET} textarea").press("Enter")


async def test_a_visitor_writes_the_ai_answers_and_an_agents_reply_appears_live(
    browser,
    console_url,
    console_settings,
    sessions,
    make_tenant,
    offline_model,
    screenshot,
    stops_at_the_queue,
) -> None:  # type: ignore[no-untyped-def]
    settings = console_settings
    tenant = await make_tenant(name="Tienda Sol")
    script = await answer_with_script(sessions, tenant.id, offline_model)
    script.push(ScriptedResponse(content="¡Hola! Abrimos a las nueve."))
    site_port = free_port()
    account, _ = await connect_web(sessions, tenant, settings, origins=(f"http://127.0.0.1:{site_port}",))
    web_url = public_url(settings)
    site = sample_site(web_url, account.external_account_id, lang="es")
    page = await _new_page(browser, "es-ES")
    async with _web(settings), serve_app(site, port=site_port) as site_url:
        await page.goto(site_url)
        launcher = page.locator(f"{WIDGET} button.launcher")
        assert await launcher.get_attribute("aria-label") == "Abrir el chat"
        await launcher.click()
        assert await page.locator(f"{WIDGET} [role=dialog]").get_attribute("aria-label") == "Tienda Sol"
        await page.locator(f"{WIDGET} .msg.them", has_text="¡Hola! ¿En qué podemos ayudarle?").wait_for()
        await _write(page, "¿A qué hora abren?")
        await page.locator(f"{WIDGET} .msg.me .state", has_text="Enviado").wait_for()
        await _stored(sessions, tenant.id, 1)
        await run_worker_burst(settings)
        await page.locator(f"{WIDGET} .msg.them[data-id]", has_text="¡Hola! Abrimos a las nueve.").wait_for()
        await page.locator(f"{WIDGET} .msg.me .state", has_text="Leído").wait_for()
        await screenshot(page, "web-chat-widget")

        # a person takes the conversation over in the console and answers: it appears in the widget live
        agent = await new_user(sessions, role=Role.agent, tenant_id=tenant.id, name="Pat Agent")
        console = await _new_page(browser)
        await console.goto(f"{console_url}/login")
        await console.get_by_label("E-mail").fill(agent.email)
        await console.get_by_label("Password").fill(PASSWORD)
        await console.get_by_role("button", name="Log in").click()
        await console.wait_for_url(re.compile(rf"/t/{tenant.slug}/inbox$"))
        row = console.locator("#inbox-rows tr", has_text="¡Hola! Abrimos a las nueve.")
        await row.wait_for()
        async with sessions() as session:
            conversation = (
                await session.exec(select(Conversation).where(Conversation.tenant_id == tenant.id))
            ).one()
        await console.goto(f"{console_url}/t/{tenant.slug}/conversations/{conversation.id}")
        await console.get_by_role("button", name="Take over").click()
        await console.wait_for_selector("#mode.mode-human")
        await console.get_by_placeholder("Write to the customer").fill("Soy Pat: le ayudo yo.")
        await console.get_by_role("button", name="Send").click()
        await console.wait_for_selector("article.msg.human")
        await run_worker_burst(settings)  # the delivery job appends it to the visitor's stream
        await page.locator(f"{WIDGET} .msg.them[data-id]", has_text="Soy Pat: le ayudo yo.").wait_for()

        async def reported_read() -> (
            bool
        ):  # the widget reports delivered and read; the chat worker applies them
            await run_worker_burst(settings)
            async with sessions() as session:
                states = (
                    await session.exec(
                        select(Outbox.status).where(
                            Outbox.tenant_id == tenant.id, Outbox.purpose == "human_reply"
                        )
                    )
                ).all()
            return states == ["read"]

        await eventually(reported_read)
        await console.locator("article.msg.human .delivery", has_text="read").wait_for()
    texts = await page.locator(f"{WIDGET} .msg[data-id]").all_inner_texts()
    assert [t.split("\n")[0] for t in texts] == [
        "¿A qué hora abren?",
        "¡Hola! Abrimos a las nueve.",
        "Soy Pat: le ayudo yo.",
    ]


async def test_the_stream_reconnects_after_the_service_restarts_with_nothing_lost_or_doubled(
    browser, make_settings, sessions, make_tenant, stops_at_the_queue
) -> None:  # type: ignore[no-untyped-def]
    settings = make_settings(web_stream_poll_s=1.0)
    tenant = await make_tenant(name="Shop")
    site_port = free_port()
    account, _ = await connect_web(sessions, tenant, settings, origins=(f"http://127.0.0.1:{site_port}",))
    channel = build_channels(
        ChannelDeps(
            settings=settings,
            cipher=CredentialCipher.from_settings(settings),
            http=httpx.AsyncClient(),
            sessions=sessions,
        )
    )["web"]
    site = sample_site(public_url(settings), account.external_account_id)
    page = await _new_page(browser)
    async with serve_app(site, port=site_port) as site_url:
        async with _web(settings):
            await page.goto(site_url)
            await page.locator(f"{WIDGET} button.launcher").click()
            await _write(page, "hello")
            await page.locator(f"{WIDGET} .msg.me .state", has_text="Sent").wait_for()
            async with sessions() as session:
                visitor = (
                    await session.exec(
                        select(Message.sender_external_id).where(Message.tenant_id == tenant.id)
                    )
                ).one()
            await channel.send(account, visitor, OutboundPart(text="first"), correlation_id="r1")
            await page.locator(f"{WIDGET} .msg.them[data-id]", has_text="first").wait_for()
        # the service is down: two replies are written meanwhile (one of them twice)
        await channel.send(account, visitor, OutboundPart(text="second"), correlation_id="r2")
        await channel.send(account, visitor, OutboundPart(text="third"), correlation_id="r3")
        await channel.send(account, visitor, OutboundPart(text="third"), correlation_id="r3")
        async with _web(settings):
            await page.locator(f"{WIDGET} .msg.them[data-id]", has_text="third").wait_for(timeout=30_000)
            await channel.send(account, visitor, OutboundPart(text="fourth"), correlation_id="r4")
            await page.locator(f"{WIDGET} .msg.them[data-id]", has_text="fourth").wait_for()
    await channel.aclose()
    texts = await page.locator(f"{WIDGET} .msg[data-id]").all_inner_texts()
    assert [t.split("\n")[0] for t in texts] == ["hello", "first", "second", "third", "fourth"]


async def test_a_signed_user_links_a_forged_one_does_not_and_another_website_is_refused(
    browser, console_settings, sessions, make_tenant, offline_model, stops_at_the_queue
) -> None:  # type: ignore[no-untyped-def]
    settings = console_settings
    tenant = await make_tenant(name="Shop")
    await answer_with_script(sessions, tenant.id, offline_model)
    site_port, other_port = free_port(), free_port()
    account, secret = await connect_web(
        sessions, tenant, settings, origins=(f"http://127.0.0.1:{site_port}",)
    )
    async with sessions() as session, session.begin():  # the customer the business already knows as user 42
        known = Customer(tenant_id=tenant.id, channel="web", external_user_id="user:42", display_name="Ana")
        session.add(known)
        await session.flush()
        session.add(
            CustomerIdentity(
                tenant_id=tenant.id, customer_id=known.id, channel="web", kind="web_user", value="42"
            )
        )
    web_url, key = public_url(settings), account.external_account_id
    signed = sample_site(web_url, key, user_id="42", user_hash=user_hash(secret, "42"))
    forged = sample_site(web_url, key, user_id="42", user_hash=user_hash("guessed-secret", "42"))
    elsewhere = sample_site(web_url, key)
    async with _web(settings):
        for app, text in ((signed, "signed in"), (forged, "pretending")):
            page = await _new_page(browser)
            async with serve_app(app, port=site_port) as site_url:
                await page.goto(site_url)
                await page.locator(f"{WIDGET} button.launcher").click()
                await _write(page, text)
                await page.locator(f"{WIDGET} .msg.me .state", has_text="Sent").wait_for()
            await page.context.close()
        await _stored(sessions, tenant.id, 2)
        await run_worker_burst(settings)
        page = await _new_page(browser)
        async with serve_app(elsewhere, port=other_port) as other_url:
            asked: list[str] = []
            page.on("request", lambda request: asked.append(request.url))
            await page.goto(other_url)
            await page.wait_for_load_state("networkidle")
            assert any("/v1/config" in url for url in asked)  # the widget asked, and was refused
            assert await page.locator(f"{WIDGET} button.launcher").count() == 0
    async with sessions() as session:
        rows = (
            await session.exec(
                select(Message).where(Message.tenant_id == tenant.id, Message.direction == "inbound")
            )
        ).all()
        owners = {}
        for row in rows:
            conversation = await session.get(Conversation, row.conversation_id)
            owners[row.text] = conversation.customer_id if conversation else None
        holders = (
            await session.exec(
                select(CustomerIdentity.customer_id).where(
                    CustomerIdentity.tenant_id == tenant.id, CustomerIdentity.kind == "web_user"
                )
            )
        ).all()
    assert owners["signed in"] == known.id
    assert owners["pretending"] not in (None, known.id)
    assert holders == [known.id]
    assert uuid.UUID(str(known.id))


async def test_the_ais_buttons_are_native_buttons_and_a_tap_reaches_the_next_turn(
    browser, console_settings, sessions, make_tenant, offline_model, stops_at_the_queue
) -> None:  # type: ignore[no-untyped-def]
    settings = console_settings
    tenant = await make_tenant(name="Valves")
    script = await answer_with_script(sessions, tenant.id, offline_model)
    sizes = [{"id": "size_s", "title": "Small"}, {"id": "size_l", "title": "Large"}]
    script.push(
        tool_calls(call("offer_options", {"style": "buttons", "prompt": "Which size?", "options": sizes}))
    )
    script.push(text("Great choice, the valve comes in two sizes."))
    script.push(text("Large it is."))
    site_port = free_port()
    account, _ = await connect_web(sessions, tenant, settings, origins=(f"http://127.0.0.1:{site_port}",))
    page = await _new_page(browser)
    async with (
        _web(settings),
        serve_app(sample_site(public_url(settings), account.external_account_id), port=site_port) as site_url,
    ):
        await page.goto(site_url)
        await page.locator(f"{WIDGET} button.launcher").click()
        await _write(page, "I want a valve")
        await _stored(sessions, tenant.id, 1)
        await run_worker_burst(settings)
        large = page.get_by_role("button", name="Large")
        await large.wait_for()
        assert await page.locator(f"{WIDGET} .choices[role=list] button").all_inner_texts() == [
            "Small",
            "Large",
        ]
        await large.focus()
        await page.keyboard.press("Enter")  # keyboard, as a visitor without a mouse
        await _stored(sessions, tenant.id, 2)
        await run_worker_burst(settings)
        await page.locator(f"{WIDGET} .msg.them[data-id]", has_text="Large it is.").wait_for()
    assert script.requests[-1]["messages"][-1] == {
        "role": "user",
        "content": "Large [chose option id: size_l]",
    }


async def test_out_of_hours_the_panel_says_when_the_team_opens_in_the_pages_language(
    browser, make_settings, sessions, make_tenant, monkeypatch, screenshot, stops_at_the_queue
) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(
        hours, "utcnow", lambda: datetime(2026, 12, 12, 11, 0, tzinfo=UTC)
    )  # Sat 12:00 Madrid
    settings = make_settings()
    tenant = await make_tenant(name="Tienda Sol")
    site_port = free_port()
    account, _ = await connect_web(sessions, tenant, settings, origins=(f"http://127.0.0.1:{site_port}",))
    async with sessions() as session, session.begin():
        row = await session.get(Tenant, tenant.id)
        set_section(
            row,
            "hours",
            enabled=True,
            timezone="Europe/Madrid",
            schedule=[
                {"day": d, "opens": "09:00", "closes": "18:00"} for d in ("mon", "tue", "wed", "thu", "fri")
            ],
        )
        session.add(row)
    notices = {}
    async with _web(settings):
        for lang, locale in (("es", "es-ES"), ("en", "en-US")):
            site = sample_site(public_url(settings), account.external_account_id, lang=lang)
            page = await _new_page(browser, locale)
            async with serve_app(site, port=site_port) as site_url:
                await page.goto(site_url)
                await page.locator(f"{WIDGET} button.launcher").click()
                notice = page.locator(f"{WIDGET} [role=dialog] .hours[role=status]")
                notices[lang] = await notice.inner_text()
                if lang == "en":
                    await screenshot(page, "web-chat-closed")
                    await _write(page, "Is the valve in stock?")  # a message can still be left
                    await page.locator(f"{WIDGET} .msg.me .state", has_text="Sent").wait_for()
            await page.context.close()
        await _stored(sessions, tenant.id, 1)
    assert notices == {
        "es": "Ahora estamos cerrados; abrimos el lunes 14 de diciembre a las 09:00. "
        "Deje un mensaje y le responderemos.",
        "en": "We're closed now; we open on Monday 14 December at 09:00. Leave a message and we'll reply.",
    }


async def test_in_hours_the_panel_shows_no_notice(
    browser, make_settings, sessions, make_tenant, monkeypatch, stops_at_the_queue
) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(hours, "utcnow", lambda: datetime(2026, 12, 14, 9, 0, tzinfo=UTC))  # Mon 10:00 Madrid
    settings = make_settings()
    tenant = await make_tenant(name="Tienda Sol")
    site_port = free_port()
    account, _ = await connect_web(sessions, tenant, settings, origins=(f"http://127.0.0.1:{site_port}",))
    async with sessions() as session, session.begin():
        row = await session.get(Tenant, tenant.id)
        set_section(
            row,
            "hours",
            enabled=True,
            timezone="Europe/Madrid",
            schedule=[{"day": "mon", "opens": "09:00", "closes": "18:00"}],
        )
        session.add(row)
    page = await _new_page(browser)
    async with (
        _web(settings),
        serve_app(sample_site(public_url(settings), account.external_account_id), port=site_port) as site_url,
    ):
        await page.goto(site_url)
        await page.locator(f"{WIDGET} button.launcher").click()
        await page.locator(f"{WIDGET} [role=dialog] textarea").wait_for()
        assert await page.locator(f"{WIDGET} .hours").count() == 0
