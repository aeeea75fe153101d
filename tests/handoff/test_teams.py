"""Teams: a conversation given to a team goes to its least-loaded online agent, never to an agent outside
it; it waits for one of its members; the tenant's default team; names unique per tenant."""

from __future__ import annotations

import uuid

import pytest
from pydantic import ValidationError
from switchboard.conversations import Actor
from switchboard.db.engine import session_scope
from switchboard.db.models import Conversation, HumanAgent, Tenant
from switchboard.handoff import escalate, set_status, tenant_handoff_lock
from switchboard.handoff.assignment import give_to_team
from switchboard.handoff.teams import (
    TeamExists,
    create_team,
    default_team_id,
    delete_team,
    list_teams,
    rename_team,
    set_member,
)
from switchboard.tenant_settings import load_tenant_settings, set_section

from tests.utils.handoff import make_agent, make_customer_conversation, reload


async def _team(sessions, tenant, name, *agents):  # type: ignore[no-untyped-def]
    async with session_scope(sessions) as session:
        team = await create_team(session, tenant_id=tenant.id, name=name)
        for agent in agents:
            await set_member(session, tenant_id=tenant.id, team_id=team.id, agent_id=agent.id, member=True)
    return team


async def _give(sessions, tenant, conversation, team):  # type: ignore[no-untyped-def]
    async with session_scope(sessions) as session:
        await tenant_handoff_lock(session, tenant.id)
        stored = await session.get(Conversation, conversation.id, with_for_update=True)
        return await give_to_team(
            session, stored, team=team, actor=Actor.api(), reason="given to the team Sales", trace_id="t"
        )


async def test_a_team_conversation_goes_to_its_least_loaded_online_agent_not_an_outsider(
    sessions, make_tenant
):
    tenant = await make_tenant()
    # the least-loaded agent of the tenant is outside the team: the team's own least-loaded one gets it
    outsider = await make_agent(sessions, tenant, "Idle Ivo", total=0, load=0)
    busy = await make_agent(sessions, tenant, "Busy Bea", total=9, load=3)
    light = await make_agent(sessions, tenant, "Light Leo", total=4, load=1)
    offline = await make_agent(sessions, tenant, "Offline Olga", online=False, total=0)
    team = await _team(sessions, tenant, "Sales", busy, light, offline)
    _, conversation = await make_customer_conversation(sessions, tenant)

    given = await _give(sessions, tenant, conversation, team)

    assert given is not None and given.id == light.id
    stored = await reload(sessions, Conversation, conversation.id)
    assert (stored.status, stored.assigned_agent_id, stored.team_id) == ("human", light.id, team.id)
    assert (await reload(sessions, HumanAgent, light.id)).current_load == 2
    assert (await reload(sessions, HumanAgent, outsider.id)).current_load == 0

    # a second escalation (the AI asks for a person again) keeps it with the team's agent
    async with session_scope(sessions) as session:
        again = await escalate(
            session, tenant_id=tenant.id, conversation_id=conversation.id, reason="again", actor=Actor.ai()
        )
    assert again.agent.id == light.id and not again.newly_assigned


async def test_with_no_member_online_it_waits_and_only_a_member_coming_online_takes_it(sessions, make_tenant):
    tenant = await make_tenant()
    member = await make_agent(sessions, tenant, "Mia Member", online=False)
    outsider_off = await make_agent(sessions, tenant, "Otto Outsider", online=False)
    team = await _team(sessions, tenant, "Billing", member)
    _, conversation = await make_customer_conversation(sessions, tenant)

    assert await _give(sessions, tenant, conversation, team) is None
    waiting = await reload(sessions, Conversation, conversation.id)
    assert (waiting.status, waiting.assigned_agent_id, waiting.team_id) == ("human", None, team.id)
    assert waiting.queued_at is not None

    # an agent outside the team comes online: the team's conversation keeps waiting
    await set_status(sessions, None, agent_id=outsider_off.id, online=True, trace_id="t1")
    assert (await reload(sessions, Conversation, conversation.id)).assigned_agent_id is None
    # a member comes online: it is theirs
    notices = await set_status(sessions, None, agent_id=member.id, online=True, trace_id="t2")
    assert (await reload(sessions, Conversation, conversation.id)).assigned_agent_id == member.id
    assert [n.conversation_id for n in notices] == [conversation.id]


async def test_giving_to_a_team_moves_it_off_an_agent_outside_the_team(sessions, make_tenant):
    tenant = await make_tenant()
    outsider = await make_agent(sessions, tenant, "Otto Outsider")
    _, conversation = await make_customer_conversation(sessions, tenant)
    async with session_scope(sessions) as session:
        first = await escalate(
            session, tenant_id=tenant.id, conversation_id=conversation.id, reason="x", actor=Actor.ai()
        )
    assert first.agent.id == outsider.id
    member = await make_agent(sessions, tenant, "Mia Member", total=50, load=4)
    team = await _team(sessions, tenant, "Support", member)

    given = await _give(sessions, tenant, conversation, team)

    assert given.id == member.id
    assert (await reload(sessions, Conversation, conversation.id)).assigned_agent_id == member.id
    assert (await reload(sessions, HumanAgent, outsider.id)).current_load == 0
    # given to the same team again: the member keeps it (nobody is told twice)
    assert await _give(sessions, tenant, conversation, team) is None
    assert (await reload(sessions, HumanAgent, member.id)).current_load == 5


async def test_the_default_team_routes_a_handoff_nobody_gave_a_team(sessions, make_tenant):
    tenant = await make_tenant()
    await make_agent(sessions, tenant, "Idle Ivo", total=0)
    member = await make_agent(sessions, tenant, "Mia Member", total=7)
    team = await _team(sessions, tenant, "Front Desk", member)
    async with session_scope(sessions) as session:
        stored = await session.get(Tenant, tenant.id)
        set_section(stored, "handoff", default_team="  front   desk ")  # any case, any spacing
        session.add(stored)
    _, conversation = await make_customer_conversation(sessions, tenant)

    async with session_scope(sessions) as session:
        assignment = await escalate(
            session, tenant_id=tenant.id, conversation_id=conversation.id, reason="x", actor=Actor.ai()
        )
    assert assignment.agent.id == member.id
    assert (await reload(sessions, Conversation, conversation.id)).team_id == team.id
    async with sessions() as session:
        assert await default_team_id(session, tenant.id) == team.id


async def test_team_names_are_unique_per_tenant_and_deleting_frees_its_conversations(sessions, make_tenant):
    tenant, other = await make_tenant(), await make_tenant()
    member = await make_agent(sessions, tenant, "Mia Member", online=False)
    team = await _team(sessions, tenant, "Sales", member)
    await _team(sessions, other, "Sales")  # another tenant may use the name
    with pytest.raises(TeamExists):
        await _team(sessions, tenant, "sales")
    with pytest.raises(ValueError):
        await _team(sessions, tenant, "   ")
    async with session_scope(sessions) as session:
        await rename_team(session, tenant_id=tenant.id, team_id=team.id, name="Sales EMEA")
        views = await list_teams(session, tenant_id=tenant.id)
    assert [(v.team.name, [a.name for a in v.members]) for v in views] == [("Sales EMEA", ["Mia Member"])]

    _, conversation = await make_customer_conversation(sessions, tenant)
    await _give(sessions, tenant, conversation, team)
    async with session_scope(sessions) as session:
        await delete_team(session, tenant_id=tenant.id, team_id=team.id)
    assert (await reload(sessions, Conversation, conversation.id)).team_id is None
    async with sessions() as session:
        assert await list_teams(session, tenant_id=tenant.id) == []


async def test_a_channels_team_comes_before_the_default_team(sessions, make_tenant):
    tenant = await make_tenant()
    wa_member = await make_agent(sessions, tenant, "Wanda WhatsApp", total=9)
    other_member = await make_agent(sessions, tenant, "Otto Other", total=0)
    wa_team = await _team(sessions, tenant, "WhatsApp Desk", wa_member)
    await _team(sessions, tenant, "Everyone Else", other_member)
    async with session_scope(sessions) as session:
        stored = await session.get(Tenant, tenant.id)
        set_section(
            stored, "handoff", default_team="Everyone Else", channel_teams=["WhatsApp =  whatsapp   desk"]
        )
        session.add(stored)
    _, conversation = await make_customer_conversation(sessions, tenant)  # a WhatsApp customer
    assert conversation.channel == "whatsapp"

    async with session_scope(sessions) as session:
        assignment = await escalate(
            session, tenant_id=tenant.id, conversation_id=conversation.id, reason="x", actor=Actor.ai()
        )
    assert assignment.agent.id == wa_member.id
    assert (await reload(sessions, Conversation, conversation.id)).team_id == wa_team.id
    async with sessions() as session:
        assert (await load_tenant_settings(session, tenant.id)).handoff.channel_teams == [
            "whatsapp = whatsapp desk"  # read tidied
        ]
        assert await default_team_id(session, tenant.id, "instagram") != wa_team.id  # the default team


@pytest.mark.parametrize("line", ["telegram = Billing", "whatsapp Billing", "whatsapp =  "])
def test_a_channel_team_line_names_a_known_channel_and_a_team(line):
    tenant = Tenant(name="x", slug="x", organization_id=uuid.uuid4())
    with pytest.raises(ValidationError) as info:
        set_section(tenant, "handoff", channel_teams=[line])
    assert info.value.errors()[0]["type"] == "channel_team"
