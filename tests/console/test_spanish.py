"""Spanish covers the words the console builds at run time: every label and section title of the agent
settings form and every inbox mode (``make i18n`` only extracts literal strings; the rest are listed in
:mod:`switchboard.console.form_words`), and the settings page shows them in Spanish."""

from __future__ import annotations

from switchboard.console.inbox import Mode
from switchboard.db.models import Role
from switchboard.i18n import gettext
from switchboard.tenant_config.form import FormField, form_sections

from tests.utils.console import log_in, new_user


def _labels(fields: list[FormField]) -> set[str]:
    out: set[str] = set()
    for field in fields:
        out.add(field.label)
        for row in field.rows:
            out |= _labels(row)
    return out


def test_every_settings_label_and_inbox_mode_has_a_spanish_text():
    words = {section.title for section in form_sections({}, {})}
    for section in form_sections({}, {}):
        words |= _labels(section.fields)
    words |= {mode.value for mode in Mode}
    untranslated = sorted(
        w
        for w in words
        if gettext("es", w) == w and w not in {"id", "gmail", "instagram", "whatsapp", "leads"}
    )
    assert untranslated == [], "add them to switchboard/console/form_words.py, run `make i18n`, translate"
    assert gettext("es", "system prompt") == "prompt de sistema" and gettext("es", "waiting") == "esperando"


async def test_the_settings_page_and_inbox_filter_speak_spanish(console_client, sessions, make_tenant):
    tenant = await make_tenant()
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id)
    async with console_client(**{"Accept-Language": "es"}) as client:
        await log_in(client, admin)
        settings = await client.get(f"/t/{tenant.slug}/settings")
        assert settings.status_code == 200
        assert "instrucciones" in settings.text and "prompt de sistema" in settings.text
        assert ">system prompt<" not in settings.text and "max tool iterations" not in settings.text
        inbox = await client.get(f"/t/{tenant.slug}/inbox")
        assert (
            '<option value="waiting" >esperando</option>' in inbox.text or ">esperando</option>" in inbox.text
        )
