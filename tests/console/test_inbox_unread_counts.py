"""The inbox of a console user who has opened several conversations: each row counts only its own
customer messages since that user opened it, under every filter, and the navigation badge agrees."""

from __future__ import annotations

import re
import uuid

from switchboard.db.models import Conversation, Message, Role, Team

from tests.utils.console import log_in, new_user
from tests.utils.handoff import make_customer_conversation


def _unread_by_row(html: str) -> dict[uuid.UUID, int]:
    """Each listed conversation's unread count, read from the rows' badges (0 without a badge)."""
    counts: dict[uuid.UUID, int] = {}
    for row in html.split("<tr ")[1:]:
        found = re.search(r'data-conversation="([0-9a-f-]{36})"', row)
        if found is None:
            continue
        badge = re.search(r'data-unread="(\d+)"', row)
        counts[uuid.UUID(found.group(1))] = int(badge.group(1)) if badge else 0
    return counts


async def _customer_writes(sessions, conversation: Conversation, *texts: str) -> None:
    async with sessions() as session, session.begin():
        for text in texts:
            session.add(
                Message(
                    tenant_id=conversation.tenant_id,
                    conversation_id=conversation.id,
                    channel="whatsapp",
                    direction="inbound",
                    role="user",
                    text=text,
                )
            )


async def test_inbox_counts_each_rows_own_unread_messages_after_opening_three(
    console_client, sessions, make_tenant
):
    tenant = await make_tenant()
    _, mine = await make_customer_conversation(sessions, tenant, name="Ana Lima", texts=("parcel late",))
    _, teamed = await make_customer_conversation(sessions, tenant, name="Bruno Diaz", texts=("hours?",))
    _, quiet = await make_customer_conversation(sessions, tenant, name="Carla Ruiz", texts=("hello",))
    user = await new_user(sessions, role=Role.agent, tenant_id=tenant.id)
    async with sessions() as session, session.begin():
        team = Team(tenant_id=tenant.id, name="Billing")
        session.add(team)
        await session.flush()
        (await session.get(Conversation, mine.id)).assigned_user_id = user.id
        (await session.get(Conversation, teamed.id)).team_id = team.id
    async with console_client() as client:
        await log_in(client, user)
        for conversation in (mine, teamed, quiet):
            assert (await client.get(f"/t/{tenant.slug}/conversations/{conversation.id}")).status_code == 200
        await _customer_writes(sessions, mine, "still nothing", "any news?")
        await _customer_writes(sessions, teamed, "are you open on sunday?")
        inbox = await client.get(f"/t/{tenant.slug}/inbox")
        only_unread = await client.get(f"/t/{tenant.slug}/inbox", params={"unread": "true"})
        only_mine = await client.get(f"/t/{tenant.slug}/inbox", params={"assigned": "me"})
        unassigned = await client.get(f"/t/{tenant.slug}/inbox", params={"assigned": "none"})
        by_team = await client.get(f"/t/{tenant.slug}/inbox", params={"team": str(team.id)})
        badge = await client.get(f"/t/{tenant.slug}/unread")
    for page in (inbox, only_unread, only_mine, unassigned, by_team, badge):
        assert page.status_code == 200, page.text[:300]
    assert _unread_by_row(inbox.text) == {mine.id: 2, teamed.id: 1, quiet.id: 0}
    assert _unread_by_row(only_unread.text) == {mine.id: 2, teamed.id: 1}
    assert _unread_by_row(only_mine.text) == {mine.id: 2}
    assert _unread_by_row(unassigned.text) == {teamed.id: 1, quiet.id: 0}
    assert _unread_by_row(by_team.text) == {teamed.id: 1}
    assert 'data-count="2"' in badge.text
