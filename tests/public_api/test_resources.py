"""What the resources do, through HTTP with a key: customers' attributes (merged, removed, refused with
the field named), conversation actions (assign, hand back, close; a closed one refuses with 409), the
thread's messages (without the model's tool calls), an upload refused in words, and a conversation
given to a team found in the teams list (listed and filtered by its ``team_id``)."""

from __future__ import annotations

import uuid

from switchboard.conversations import append_message
from switchboard.db.models import Conversation, MessageRole
from switchboard.handoff.teams import create_team, set_member

from tests.utils.handoff import make_agent


async def test_customer_attributes_are_merged_removed_and_checked(world, api, make_key) -> None:
    key = await make_key(world.tenant, scopes=["customers:read", "customers:write"])
    path = f"/api/v1/customers/{world.ids['customer_id']}"
    async with api(key) as client:
        first = await client.patch(
            path, json={"display_name": "Ana García", "attributes": {"crm_id": "C-1", "tier": "gold"}}
        )
        second = await client.patch(path, json={"attributes": {"tier": None, "city": "Sevilla"}})
        refused = await client.patch(path, json={"attributes": {"bad key!": "x", "note": "a\x00b"}})
        read = await client.get(path)
        found = await client.get(
            "/api/v1/customers", params={"external_user_id": read.json()["external_user_id"]}
        )
    assert first.status_code == 200 and first.json()["display_name"] == "Ana García"
    assert second.json()["attributes"] == {"crm_id": "C-1", "city": "Sevilla"}
    assert refused.status_code == 422 and refused.json()["code"] == "invalid_request"
    assert {e["field"] for e in refused.json()["errors"]} == {"attributes.bad key!", "attributes.note"}
    assert read.json()["attributes"] == {"crm_id": "C-1", "city": "Sevilla"}  # nothing of the refused change
    assert [c["id"] for c in found.json()["items"]] == [world.ids["customer_id"]]


async def test_conversation_actions_and_messages(world, api, make_key, sessions) -> None:
    key = await make_key(world.tenant, scopes=["conversations:read", "conversations:write"])
    base = f"/api/v1/conversations/{world.ids['conversation_id']}"
    async with sessions() as session, session.begin():  # a turn's tool call and its result: history rows
        conversation = await session.get(Conversation, uuid.UUID(world.ids["conversation_id"]))
        assert conversation is not None
        call = {"id": "call_1", "type": "function", "function": {"name": "lookup_order", "arguments": "{}"}}
        append_message(
            session,
            conversation=conversation,
            role=MessageRole.assistant,
            text=None,
            kind="tool_call",
            tool_calls=[call],
        )
        append_message(
            session,
            conversation=conversation,
            role=MessageRole.tool,
            text="{}",
            kind="tool_result",
            tool_call_id="call_1",
        )
    async with api(key) as client:
        assigned = await client.post(f"{base}/assign", json={"to": f"user:{world.user_id}"})
        back = await client.post(f"{base}/handback")
        again = await client.post(f"{base}/handback")
        closed = await client.post(f"{base}/close")
        refused = await client.post(f"{base}/assign", json={"to": f"user:{world.user_id}"})
        messages = await client.get(f"{base}/messages", params={"limit": 2})
        bad_target = await client.post(f"{base}/assign", json={"to": "someone"})
    assert (assigned.json()["mode"], assigned.json()["assigned_user_id"]) == ("human", str(world.user_id))
    assert back.json()["mode"] == "ai"
    assert again.status_code == 409 and again.json()["code"] == "conflict"
    assert closed.json()["status"] == "closed" and closed.json()["closed_at"]
    assert refused.status_code == 409 and "closed" in refused.json()["detail"]
    # a full page of messages: the tool call is neither shown nor taking a place
    assert [(m["sender"], m["kind"], m["text"]) for m in messages.json()["items"]] == [
        ("ai", "text", "We open at 9."),
        ("customer", "text", "hello?"),
    ]
    assert bad_target.status_code == 422 and bad_target.json()["errors"][0]["field"] == "to"


async def test_an_unreadable_upload_is_refused_in_words(world, api, make_key) -> None:
    key = await make_key(world.tenant, scopes=["knowledge:write"])
    async with api(key) as client:
        empty = await client.post(
            "/api/v1/knowledge/documents", files={"file": ("empty.txt", b"", "text/plain")}
        )
        no_file = await client.post(
            "/api/v1/knowledge/documents", files={"other": ("a.txt", b"x", "text/plain")}
        )
    assert empty.status_code == 422 and empty.json()["code"] == "invalid_request", empty.text
    assert no_file.status_code == 422 and "file" in no_file.json()["detail"]


async def test_created_after_filters_with_or_without_a_time_zone(world, api, make_key) -> None:
    key = await make_key(world.tenant, scopes=["conversations:read"])
    async with api(key) as client:
        before = await client.get("/api/v1/conversations", params={"created_after": "2000-01-01T00:00:00"})
        after = await client.get(
            "/api/v1/conversations", params={"created_after": "2999-01-01T00:00:00+02:00"}
        )
        wrong = await client.get("/api/v1/conversations", params={"created_after": "yesterday"})
    assert [c["id"] for c in before.json()["items"]] == [world.ids["conversation_id"]]
    assert after.json()["items"] == []
    assert wrong.status_code == 422 and wrong.json()["errors"][0]["field"] == "created_after"


async def test_a_conversation_given_to_a_team_goes_to_its_agent_and_lists_its_team(
    world, api, make_key, sessions
) -> None:
    await make_agent(sessions, world.tenant, "Idle Ivo", total=0)
    member = await make_agent(sessions, world.tenant, "Mia Member", total=9)
    async with sessions() as session, session.begin():
        team = await create_team(session, tenant_id=world.tenant.id, name="Billing")
        await set_member(session, tenant_id=world.tenant.id, team_id=team.id, agent_id=member.id, member=True)
        await create_team(session, tenant_id=world.tenant.id, name="Afternoons")
    key = await make_key(world.tenant, scopes=["conversations:read", "conversations:write"])
    conversation_id = world.ids["conversation_id"]
    async with api(key) as client:
        teams = await client.get("/api/v1/teams")
        (billing,) = [t for t in teams.json()["items"] if t["name"] == "Billing"]
        given = await client.post(
            f"/api/v1/conversations/{conversation_id}/assign", json={"to": f"team:{billing['id']}"}
        )
        of_team = await client.get("/api/v1/conversations", params={"team_id": str(team.id)})
        unknown = await client.post(
            f"/api/v1/conversations/{conversation_id}/assign", json={"to": f"team:{member.id}"}
        )
    assert teams.status_code == 200
    assert [(t["name"], [m["name"] for m in t["members"]]) for t in teams.json()["items"]] == [
        ("Afternoons", []),
        ("Billing", ["Mia Member"]),
    ]
    assert billing["id"] == str(team.id) and billing["members"][0]["id"] == str(member.id)
    assert given.status_code == 200
    assert (given.json()["assigned_agent_id"], given.json()["team_id"]) == (str(member.id), str(team.id))
    assert [c["id"] for c in of_team.json()["items"]] == [conversation_id]
    assert unknown.status_code == 409 and unknown.json()["detail"] == "No such team in this business."
