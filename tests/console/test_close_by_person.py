"""A person of the team closes the conversation they handle from the console: one "Closed by" entry in
its history, no hand-back (neither a line nor a note for the AI), and it keeps who handled it."""

from __future__ import annotations

import re

from sqlmodel import select
from switchboard.db.models import Conversation, ConversationEvent, Message, Role

from tests.utils.console import log_in, new_user
from tests.utils.handoff import make_customer_conversation, reload
from tests.utils.workers import run_worker_burst


def _history(html: str) -> list[str]:
    """The History list's lines, without their times."""
    block = html.split('class="plain history">', 1)[1].split("</ul>", 1)[0]
    return [
        re.sub(r"<small>.*?</small>", "", li).strip() for li in re.findall(r"<li>(.*?)</li>", block, re.S)
    ]


async def test_closing_a_conversation_a_person_handles_reads_as_closed_by_them(
    console_client, console_settings, sessions, make_tenant
):
    tenant = await make_tenant()
    _, conversation = await make_customer_conversation(sessions, tenant, texts=("I want a refund",))
    pat = await new_user(sessions, role=Role.agent, tenant_id=tenant.id, name="Pat")
    base = f"/t/{tenant.slug}/conversations/{conversation.id}"
    async with console_client() as client:
        me = await log_in(client, pat)
        assert (await me.post_form(f"{base}/takeover")).status_code == 303
        assert (await me.post_form(f"{base}/close")).status_code == 303
        page = await client.get(base)
        mine = await client.get(f"/t/{tenant.slug}/inbox", params={"assigned": "me"})
        mine_closed = await client.get(f"/t/{tenant.slug}/inbox", params={"assigned": "me", "mode": "closed"})
    await run_worker_burst(console_settings)  # the rating question goes out
    assert page.status_code == 200
    assert _history(page.text) == ["Conversation started", "Pat took over", "Closed by Pat"]
    assert re.search(r'<p id="assigned">\s*Pat\s*</p>', page.text)
    # no longer Pat's work, but found among Pat's closed ones
    assert str(conversation.id) not in mine.text and str(conversation.id) in mine_closed.text
    closed = await reload(sessions, Conversation, conversation.id)
    assert (closed.status, closed.assigned_user_id, closed.queued_at) == ("closed", pat.id, None)
    async with sessions() as session:
        steps = (
            await session.exec(
                select(ConversationEvent.from_status, ConversationEvent.to_status)
                .where(ConversationEvent.conversation_id == conversation.id)
                .order_by(ConversationEvent.created_at)
            )
        ).all()
        notes = (
            await session.exec(
                select(Message.text).where(
                    Message.conversation_id == conversation.id, Message.kind == "system"
                )
            )
        ).all()
    assert [tuple(step) for step in steps] == [(None, "ai"), ("ai", "human"), ("human", "closed")]
    assert notes == []  # nothing tells the AI it was handed back
