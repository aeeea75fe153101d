"""Spanish covers the words the console builds at run time: every label and section title of the agent
settings form and every inbox mode (``make i18n`` only extracts literal strings; the rest are listed in
:mod:`switchboard.console.form_words`), and the settings page shows them in Spanish; so are validation
messages (pydantic's, our validators', FastAPI's form errors), the inbox's "Me" and turn outcomes."""

from __future__ import annotations

import re
import uuid

from switchboard.console.inbox import Mode
from switchboard.db.models import Message, Role, Turn
from switchboard.i18n import gettext

from tests.utils.agent import make_conversation
from tests.utils.console import log_in, new_user
from tests.utils.html_forms import form_values


def test_every_inbox_mode_has_a_spanish_text():
    untranslated = sorted(mode.value for mode in Mode if gettext("es", mode.value) == mode.value)
    assert untranslated == [], "add them to switchboard/console/form_words.py, run `make i18n`, translate"
    assert gettext("es", "waiting") == "esperando"


async def test_the_settings_page_and_inbox_filter_speak_spanish(console_client, sessions, make_tenant):
    tenant = await make_tenant()
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id)
    async with console_client(**{"Accept-Language": "es"}) as client:
        await log_in(client, admin)
        settings = await client.get(f"/t/{tenant.slug}/settings")
        assert settings.status_code == 200
        assert "Instrucciones" in settings.text and "Prompt de sistema completo" in settings.text
        assert "Rondas de herramientas por respuesta" in settings.text
        assert "Full system prompt" not in settings.text and "max tool iterations" not in settings.text
        assert "<small>(Administrador)</small>" in settings.text  # the top bar names the role in words
        assert "(tenant_admin)" not in settings.text
        inbox = await client.get(f"/t/{tenant.slug}/inbox")
        assert '<option value="waiting" >Esperando a una persona</option>' in inbox.text


async def test_form_errors_me_and_outcomes_are_spanish_in_the_spanish_console(
    console_client, sessions, make_tenant
):
    tenant = await make_tenant()
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id)
    conv = await make_conversation(sessions, tenant)
    async with sessions() as session, session.begin():
        session.add(
            Message(
                tenant_id=tenant.id,
                conversation_id=conv.conversation.id,
                channel="whatsapp",
                direction="outbound",
                role="assistant",
                text="Hola",
                trace_id="trace-es",
            )
        )
        session.add(
            Turn(
                tenant_id=tenant.id,
                conversation_id=conv.conversation.id,
                inbound_message_id=uuid.uuid4(),
                trace_id="trace-es",
                outcome="answered",
            )
        )
    async with console_client(**{"Accept-Language": "es"}) as client:
        await log_in(client, admin)
        page = await client.get(f"/t/{tenant.slug}/settings")
        values = form_values(page.text, f"/t/{tenant.slug}/settings")
        values.update({"loop.max_tool_iterations": "500", "locale.timezone": "Mars/Base"})
        refused = await client.post(f"/t/{tenant.slug}/settings", data=values)
        assert refused.status_code == 422
        problems = re.search(
            r'<div class="error" role="alert" id="settings-problems">.*?</div>', refused.text, re.S
        )
        assert "Debe ser menor o igual que " in problems.group(0)  # pydantic's less_than_equal
        assert "zona horaria desconocida &#39;Mars/Base&#39;" in problems.group(0)  # our validator
        assert "Input should" not in refused.text and "unknown time zone" not in refused.text
        inbox = await client.get(f"/t/{tenant.slug}/inbox")
        assert '<option value="me" >Yo</option>' in inbox.text or ">Yo</option>" in inbox.text
        assert ">Me</option>" not in inbox.text
        conversation = await client.get(f"/t/{tenant.slug}/conversations/{conv.conversation.id}")
        assert "<dd>respondido" in conversation.text and "<dd>answered" not in conversation.text
    async with console_client(**{"Accept-Language": "es"}) as client:  # a FastAPI form error
        platform = await new_user(sessions, role=Role.platform_admin, tenant_id=None)
        me = await log_in(client, platform)
        refused = await client.post(
            "/platform/tenants",
            data={"csrf_token": me.csrf, "slug": "x" * 65, "name": "Tienda"},
            headers={"Accept": "text/html"},
        )
        assert refused.status_code == 422
        assert "slug: El texto debe tener como máximo 64 caracteres" in refused.text
