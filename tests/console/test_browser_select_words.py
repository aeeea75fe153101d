"""Every select of the console shows words, never the values it stores (``mon``, ``ai``, ``allow``,
``en``, ``7``), in English and in Spanish, in a real headless Chromium: Agent settings, the inbox,
Analytics, People, API keys, Channels, Knowledge and the Platform page; so do the inbox's Mode badges,
the conversation's header and the customer's list of conversations."""

from __future__ import annotations

import pytest
from switchboard.console.form_words import OPTION_WORDS, option_words
from switchboard.db.models import Conversation, Role
from switchboard.i18n import gettext
from switchboard.tenant_config.form import form_sections

from tests.utils.console import logged_in_page, new_user
from tests.utils.handoff import make_customer_conversation

MODE_BADGES_JS = """() => Object.fromEntries([...document.querySelectorAll('.badge[class*="mode-"]')].map(b =>
    [[...b.classList].find(c => c.startsWith('mode-')).slice(5), b.textContent.trim()]))"""

OPTIONS_JS = """() => [...document.querySelectorAll('select')].flatMap(s =>
    [...s.options].map(o => [s.name, o.value, o.textContent.trim()]))"""


def _select_names() -> dict[str, list[str]]:
    """Every select of the settings form (its form name) and its choices."""
    out = {}
    stack = [f for section in form_sections({}, {}) for f in section.fields]
    while stack:
        field = stack.pop()
        if field.kind == "select":
            out[field.name] = field.options
        stack += field.children + [cell for row in field.rows for cell in row]
    return out


def test_every_choice_of_every_settings_select_has_words_in_english_and_spanish():
    selects = _select_names()
    assert {"hours.schedule.0.day", "hours.outside_hours", "guardrails.input.on_error"} <= set(selects)
    for name, options in selects.items():
        for value in options:
            words = option_words(name, value)
            assert words != value, f"{name}={value} has no words in form_words.OPTION_WORDS"
            assert gettext("es", words) != words or name.endswith(".provider"), f"no Spanish for {words!r}"
    assert all(words for choices in OPTION_WORDS.values() for words in choices.values())


@pytest.mark.parametrize(
    ("locale", "expected"),
    [
        ("en-US", {("hours.schedule.0.day", "mon"): "Monday", ("inbox:mode", "ai"): "The AI is answering"}),
        ("es-ES", {("hours.schedule.0.day", "mon"): "lunes", ("inbox:mode", "ai"): "Responde la IA"}),
    ],
)
async def test_no_select_of_settings_or_the_inbox_shows_a_raw_value(
    browser, console_url, sessions, make_tenant, locale, expected
):  # type: ignore[no-untyped-def]
    tenant = await make_tenant()
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id)
    page = await logged_in_page(browser, console_url, admin, language=locale[:2])
    seen: dict[tuple[str, str], str] = {}
    await page.goto(f"{console_url}/t/{tenant.slug}/settings")
    for name, value, text in await page.evaluate(OPTIONS_JS):
        seen[(name, value)] = text
    await page.goto(f"{console_url}/t/{tenant.slug}/inbox")
    for name, value, text in await page.evaluate(OPTIONS_JS):
        seen[(f"inbox:{name}", value)] = text
    for other in ("analytics", "people", "api-keys", "channels", "knowledge"):
        await page.goto(f"{console_url}/t/{tenant.slug}/{other}")
        for name, value, text in await page.evaluate(OPTIONS_JS):
            seen[(f"{other}:{name}", value)] = text
    assert ("analytics:days", "7") in seen and ("api-keys:expires_in_days", "30") in seen
    settings_selects = {n for n, _ in seen if ":" not in n}
    assert set(_select_names()) <= settings_selects, "every select of the settings form was rendered"
    raw = {key: text for key, text in seen.items() if text == key[1]}
    assert raw == {}
    for key, text in expected.items():
        assert seen[key] == text
    if locale.startswith("es"):
        assert seen[("hours.outside_hours", "person")] == gettext("es", "The customer waits for a person")
        assert seen[("hours.outside_hours", "person")] != "The customer waits for a person"


@pytest.mark.parametrize(
    ("locale", "expected"),
    [
        ("en-US", {"ai": "The AI is answering", "human": "With a person", "closed": "Closed"}),
        ("es-ES", {"ai": "Responde la IA", "human": "Con una persona", "closed": "Cerrada"}),
    ],
)
async def test_mode_badges_of_the_inbox_and_the_conversation_are_words(
    browser, console_url, sessions, make_tenant, locale, expected
):  # type: ignore[no-untyped-def]
    tenant = await make_tenant()
    customer, answered = await make_customer_conversation(sessions, tenant, name="Ana Lima")
    _, with_person = await make_customer_conversation(sessions, tenant, name="Bruno Diaz")
    _, closed = await make_customer_conversation(sessions, tenant, name="Carla Ruiz")
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id)
    async with sessions() as session, session.begin():
        taken = await session.get(Conversation, with_person.id)
        taken.status, taken.assigned_user_id = "human", admin.id
        (await session.get(Conversation, closed.id)).status = "closed"
    page = await logged_in_page(browser, console_url, admin, language=locale[:2])
    await page.goto(f"{console_url}/t/{tenant.slug}/inbox")
    assert await page.evaluate(MODE_BADGES_JS) == expected
    for conversation, mode in ((answered, "ai"), (with_person, "human"), (closed, "closed")):
        await page.goto(f"{console_url}/t/{tenant.slug}/conversations/{conversation.id}")
        assert (await page.locator("#mode").text_content()).strip() == expected[mode]
    await page.goto(f"{console_url}/t/{tenant.slug}/customers/{customer.id}")
    cells = [text.strip() for text in await page.locator("td").all_text_contents()]
    assert expected["ai"] in cells and "ai" not in cells


async def test_the_platform_pages_tenant_filter_names_each_tenant(
    browser, console_url, sessions, make_tenant
):  # type: ignore[no-untyped-def]
    tenant = await make_tenant(name="Corner Bakery")
    ops = await new_user(sessions, role=Role.platform_admin, tenant_id=None)
    page = await logged_in_page(browser, console_url, ops)
    await page.goto(f"{console_url}/platform")
    options = {value: text for _name, value, text in await page.evaluate(OPTIONS_JS)}
    assert options[tenant.slug] == f"Corner Bakery ({tenant.slug})"
    assert all(text != value for value, text in options.items())
