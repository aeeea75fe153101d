"""Every console page in Spanish shows no English: each text a page shows (and each placeholder, title
and button label) is checked against the catalogue (an English msgid shown as it is was not
translated) and against the raw values the code stores (roles, delivery states, modes, senders).
A provider's own diagnostic, shown as it came, is marked ``lang="en"`` and not counted."""

from __future__ import annotations

import re
import uuid
from html.parser import HTMLParser
from pathlib import Path

from babel.messages.pofile import read_po
from sqlmodel import select
from switchboard.db.models import ConversationEvent, Message, Outbox, Role, Tenant, Turn

from tests.utils.console import log_in, new_user
from tests.utils.handoff import make_customer_conversation

CATALOGUE = Path(__file__).resolve().parents[2] / "libs/switchboard/i18n/locale/es/LC_MESSAGES/messages.po"
RAW_WORDS = {
    "customer",
    "assistant",
    "person",
    "system",
    "tenant_admin",
    "platform_admin",
    "agent",
    "pending",
    "sending",
    "sent",
    "delivered",
    "read",
    "played",
    "failed",
    "ai",
    "human",
    "waiting",
    "closed",
    "open",
    "ready",
    "processing",
    "Me",
    "Save",
    "Search",
    "Cancel",
    "Delete",
    "yes",
    "show",
    "hide",
}
ENGLISH = re.compile(
    r"\b(the|your|you|and|with|is|are|this|that|from|has|have|will|not|was|been|here|there|when)\b", re.I
)
"""Words of English that Spanish never uses: a text holding one was not translated (a hard-coded string)."""
"""Values the code stores, and short English words, that must never reach a Spanish page as they are."""


class _Texts(HTMLParser):
    SKIP = {"script", "style", "code", "pre", "textarea", "time", "option"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.texts: list[str] = []
        self._skipping = 0
        self._skipped: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self.SKIP or ("lang", "en") in attrs:
            self._skipping += 1
            self._skipped.append(tag)
        for name, value in attrs:
            if name in ("placeholder", "title", "aria-label") and value:
                self.texts.append(value)

    def handle_endtag(self, tag: str) -> None:
        if self._skipped and self._skipped[-1] == tag:
            self._skipped.pop()
            self._skipping -= 1

    def handle_data(self, data: str) -> None:
        if not self._skipping:
            text = re.sub(r"\s+", " ", data).strip(" :·,.()")
            if text:
                self.texts.append(text)


def english_on(page: str, msgids: set[str]) -> list[str]:
    """The texts of ``page`` that are an English msgid with a different Spanish text, or a raw value."""
    reader = _Texts()
    reader.feed(page)
    return sorted({t for t in reader.texts if t in msgids or t in RAW_WORDS or ENGLISH.search(t)})


def _translated_msgids() -> set[str]:
    catalogue = read_po(CATALOGUE.open("rb"))
    ids = set()
    for message in catalogue:
        if message.id and isinstance(message.id, str) and message.string and message.string != message.id:
            ids.add(message.id.strip(" :·,.()"))
    return ids


async def test_every_console_page_in_spanish_shows_no_english(console_client, sessions, shop):
    tenant = shop.tenant
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id)
    customer, conversation = await make_customer_conversation(
        sessions, tenant, texts=("¿Dónde está mi pedido?",)
    )
    trace = uuid.uuid4().hex
    async with sessions() as session, session.begin():
        session.add(
            Message(
                tenant_id=tenant.id,
                conversation_id=conversation.id,
                channel="whatsapp",
                direction="outbound",
                role="assistant",
                text="Su pedido llega mañana.",
                trace_id=trace,
            )
        )
        session.add(
            Outbox(
                tenant_id=tenant.id,
                conversation_id=conversation.id,
                channel="whatsapp",
                recipient="34600000000",
                payload={"type": "text", "text": "Su pedido llega mañana.", "audience": "customer"},
                status="delivered",
                trace_id=trace,
            )
        )
        session.add(
            Turn(
                tenant_id=tenant.id,
                conversation_id=conversation.id,
                inbound_message_id=uuid.uuid4(),
                trace_id=trace,
                outcome="answered",
                model="offline-demo",
            )
        )
        session.add(
            Message(
                tenant_id=tenant.id,
                conversation_id=conversation.id,
                channel="whatsapp",
                direction="outbound",
                role="human_agent",
                text="Hola, soy Pat.",
                proxy_metadata={"agent_name": "Pat"},
            )
        )
        session.add(
            ConversationEvent(
                tenant_id=tenant.id,
                conversation_id=conversation.id,
                from_status="ai",
                to_status="human",
                actor_type="console_user",
            )
        )
    msgids = _translated_msgids()
    pages = [
        f"/t/{tenant.slug}/home",
        f"/t/{tenant.slug}/inbox",
        f"/t/{tenant.slug}/conversations/{conversation.id}",
        f"/t/{tenant.slug}/settings",
        f"/t/{tenant.slug}/knowledge",
        f"/t/{tenant.slug}/channels",
        f"/t/{tenant.slug}/people",
        f"/t/{tenant.slug}/analytics",
        f"/t/{tenant.slug}/tools",
        "/account",
    ]
    found = {}
    async with console_client(**{"Accept-Language": "es"}) as client:
        login = await client.get("/login")
        found["/login"] = english_on(login.text, msgids)
        await log_in(client, admin)
        for path in pages:
            page = await client.get(path)
            assert page.status_code == 200, path
            found[path] = english_on(page.text, msgids)
            if "/conversations/" in path:
                conversation_page = page.text
    async with console_client(**{"Accept-Language": "es"}) as client:
        await log_in(client, await new_user(sessions, role=Role.platform_admin, tenant_id=None))
        # the Platform page lists every tenant of the test database: their names are data, not the console's words
        async with sessions() as session:
            names = set((await session.exec(select(Tenant.name))).all())
        found["/platform"] = [
            w for w in english_on((await client.get("/platform")).text, msgids) if w not in names
        ]
    assert {path: words for path, words in found.items() if words} == {}
    assert ">entregado</span>" in conversation_page
    assert "Asignada a una persona" in conversation_page  # the history in words, in Spanish
