"""Small things a new user trips on, in a real headless Chromium: the icon, the Platform form, notices,
the top bar, knowledge uploads, media in the thread; and the sandbox's sample image."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
from switchboard.channels.whatsapp.cli import sample_media_of
from switchboard.cli.channel_common import SAMPLE_MEDIA
from switchboard.db.models import Message, Role
from switchboard.media.sniff import sniff_mime
from switchboard.queue import Queue

from tests.utils import workers
from tests.utils.console import PASSWORD, new_user
from tests.utils.documents import WARRANTY, corrupt, make_pdf
from tests.utils.handoff import make_customer_conversation
from tests.utils.whatsapp import connect_whatsapp, load_payload, new_media_id


async def _logged_in_page(browser: Any, console_url: str, user: Any) -> Any:
    context = await browser.new_context(viewport={"width": 1366, "height": 900}, locale="en-US")
    context.set_default_timeout(15_000)
    page = await context.new_page()
    await page.goto(f"{console_url}/login")
    await page.fill("input[name=email]", user.email)
    await page.fill("input[name=password]", PASSWORD)
    await page.click("button[type=submit]")
    await page.wait_for_load_state("networkidle")
    return page


async def test_every_page_has_an_icon_and_no_request_fails(browser, console_url, sessions, make_tenant):  # type: ignore[no-untyped-def]
    tenant = await make_tenant()
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id)
    page = await _logged_in_page(browser, console_url, admin)
    failed: list[str] = []
    page.on("response", lambda r: failed.append(r.url) if r.status >= 400 else None)
    await page.goto(f"{console_url}/t/{tenant.slug}/inbox")
    async with httpx.AsyncClient() as http:
        icon = await http.get(f"{console_url}/favicon.ico")
    assert icon.status_code == 200 and icon.headers["content-type"] == "image/x-icon"
    assert icon.content[:4] == b"\x00\x00\x01\x00"  # an ICO file
    assert failed == []


async def test_the_slug_pattern_works_in_chromium_and_a_refused_form_keeps_what_was_typed(
    browser, console_url, sessions, make_tenant
):  # type: ignore[no-untyped-def]
    taken = await make_tenant()
    ops = await new_user(sessions, role=Role.platform_admin, tenant_id=None)
    page = await _logged_in_page(browser, console_url, ops)
    await page.goto(f"{console_url}/platform")
    slug = page.locator("input[name=slug]")
    await slug.fill("Bad Slug")
    # with a pattern Chromium cannot compile (the "v" flag), it checks nothing and this is valid
    assert await slug.evaluate("el => el.checkValidity()") is False
    await slug.fill("good-slug-2")
    assert await slug.evaluate("el => el.checkValidity()") is True
    await slug.fill(taken.slug)  # valid to the browser, refused by the server: the slug exists
    await page.fill("input[name=name]", "Second Shop")
    await page.fill("input[name=organization]", "Acme")
    await page.click("form[action='/platform/tenants'] button[type=submit]")
    await page.wait_for_load_state("networkidle")
    assert await page.locator(".error").count() >= 1
    assert await page.input_value("input[name=slug]") == taken.slug
    assert await page.input_value("input[name=name]") == "Second Shop"
    assert await page.input_value("input[name=organization]") == "Acme"


async def test_success_notices_are_green_and_the_tenant_name_is_no_button(
    browser, console_url, sessions, make_tenant
):  # type: ignore[no-untyped-def]
    tenant = await make_tenant(name="Green Shop")
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id)
    page = await _logged_in_page(browser, console_url, admin)
    await page.goto(f"{console_url}/t/{tenant.slug}/settings")
    await page.click("#save-settings")
    await page.wait_for_selector("#settings-saved")
    colour = await page.eval_on_selector("#settings-saved", "el => getComputedStyle(el).backgroundColor")
    assert colour == "rgb(231, 245, 236)"  # the success style, not amber (255, 244, 224)
    name = page.locator(".topbar .tenant")
    assert await name.inner_text() == "Green Shop"
    style = await name.evaluate(
        "el => { const s = getComputedStyle(el); return [s.borderTopStyle, s.cursor, el.tagName] }"
    )
    assert style == ["none", "default", "SPAN"]


async def test_a_refused_upload_says_why_in_plain_words_and_the_input_is_cleared(
    browser, console_url, sessions, make_tenant, tmp_path, settings
):  # type: ignore[no-untyped-def]
    tenant = await make_tenant()
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id)
    (tmp_path / "broken.pdf").write_bytes(corrupt(make_pdf([WARRANTY])))
    (tmp_path / "hours.txt").write_text("We open at 9:00 and close at 18:00 on weekdays.")
    page = await _logged_in_page(browser, console_url, admin)
    await page.goto(f"{console_url}/t/{tenant.slug}/knowledge")
    released = asyncio.Event()

    async def slow(route: Any) -> None:  # hold the upload until the page was looked at
        await released.wait()
        await route.continue_()

    await page.route("**/knowledge/upload", slow)
    await page.set_input_files(
        "input[name=files]", [str(tmp_path / "broken.pdf"), str(tmp_path / "hours.txt")]
    )
    await page.click("#kb-upload button[type=submit]")
    await page.wait_for_selector("#kb-upload .uploading:not([hidden])")  # from the first moment
    assert await page.is_disabled("#kb-upload button[type=submit]")
    released.set()
    await page.wait_for_selector("ul.uploads li.error")
    refused = await page.inner_text("ul.uploads li.error")
    assert refused == (
        "broken.pdf: The file is damaged and cannot be opened. Save or export it again and upload the new copy."
    )
    assert "Error" not in refused and "corrupt" not in refused
    assert await page.is_hidden("#kb-upload .uploading")
    assert await page.eval_on_selector("input[name=files]", "el => el.files.length") == 0
    await workers.run_worker_burst(settings, Queue.background, poll_delay_s=0.05)  # hours.txt ingests


async def test_a_caption_shows_once_and_audio_loads_its_duration(
    browser, console_url, sessions, make_tenant, settings, graph_sandbox
):  # type: ignore[no-untyped-def]
    tenant = await make_tenant()
    account = await connect_whatsapp(sessions, tenant, settings)
    _, conversation = await make_customer_conversation(sessions, tenant, texts=())
    image_id, audio_id = new_media_id(), new_media_id()
    async with httpx.AsyncClient() as http:
        await http.put(
            f"{graph_sandbox[0]}/_control/media/{image_id}",
            content=SAMPLE_MEDIA["image"],
            headers={"content-type": "image/jpeg"},
        )
        await http.put(
            f"{graph_sandbox[0]}/_control/media/{audio_id}",
            content=SAMPLE_MEDIA["audio"],
            headers={"content-type": "audio/mp4"},
        )
    async with sessions() as session, session.begin():
        for kind, ref, mime, caption, text in (
            (
                "image",
                image_id,
                "image/jpeg",
                "Is the blue one back?",
                "Is the blue one back?\n[image: a blue sneaker]",
            ),
            ("audio", audio_id, "audio/mp4", None, "[voice note]"),
        ):
            session.add(
                Message(
                    tenant_id=tenant.id,
                    conversation_id=conversation.id,
                    channel="whatsapp",
                    channel_account_id=account.id,
                    direction="inbound",
                    role="user",
                    kind=kind,
                    text=text,
                    media=[{"ref": ref, "mime": mime, **({"caption": caption} if caption else {})}],
                )
            )
    agent = await new_user(sessions, role=Role.agent, tenant_id=tenant.id)
    page = await _logged_in_page(browser, console_url, agent)
    await page.goto(f"{console_url}/t/{tenant.slug}/conversations/{conversation.id}")
    thread = await page.inner_text(".thread")
    assert thread.count("Is the blue one back?") == 1
    await page.wait_for_function("document.querySelector('.thread img').naturalWidth === 96")  # a real JPEG
    assert await page.get_attribute(".thread audio", "preload") == "metadata"


def test_the_sandbox_sample_image_is_a_real_jpeg_served_as_one():
    body = load_payload("image_with_caption.json", phone_number_id="100000000000001")
    body["entry"][0]["changes"][0]["value"]["messages"][0]["image"].pop("mime_type", None)
    ((_, data, mime),) = sample_media_of(body)
    assert sniff_mime(data) == "image/jpeg" and mime == "image/jpeg"
    assert data[:3] == b"\xff\xd8\xff" and data[-2:] == b"\xff\xd9"
