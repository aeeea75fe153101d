"""Cursor pagination: a walk over 1,000 conversations, with new ones arriving between pages, sees each
existing one exactly once; a cursor the API did not make is a 400 problem, never a 500."""

from __future__ import annotations

import uuid
from datetime import timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from switchboard.db.models import Conversation, Customer, utcnow
from switchboard.public_api import decode_cursor, encode_cursor

from tests.utils.agent import make_conversation


async def _many_conversations(sessions, tenant, count: int) -> set[str]:  # type: ignore[no-untyped-def]
    """``count`` conversations: half with the same created_at (ties broken by id), half a millisecond apart."""
    now = utcnow() - timedelta(hours=1)
    async with sessions() as session, session.begin():
        customer = Customer(
            tenant_id=tenant.id, channel="whatsapp", external_user_id=f"u-{uuid.uuid4().hex[:10]}"
        )
        session.add(customer)
        await session.flush()
        rows = [
            Conversation(
                tenant_id=tenant.id,
                customer_id=customer.id,
                channel="whatsapp",
                status="closed",
                created_at=now if i % 2 else now - timedelta(milliseconds=i),
            )
            for i in range(count)
        ]
        session.add_all(rows)
    return {str(row.id) for row in rows}


async def test_a_walk_over_1000_conversations_has_no_duplicates_or_gaps(
    make_tenant, sessions, api, make_key
) -> None:
    shop = await make_tenant("Busy Paging Shop")
    existing = await _many_conversations(sessions, shop, 1000)
    key = await make_key(shop, scopes=["conversations:read"])
    seen: list[str] = []
    arrived: set[str] = set()
    pages = 0
    cursor = None
    async with api(key) as client:
        while True:
            params = {"limit": 37, **({"cursor": cursor} if cursor else {})}
            response = await client.get("/api/v1/conversations", params=params)
            assert response.status_code == 200, response.text
            body = response.json()
            seen += [item["id"] for item in body["items"]]
            pages += 1
            # new conversations arrive while the client walks
            arrived.add(str((await make_conversation(sessions, shop)).conversation.id))
            cursor = body["next_cursor"]
            if cursor is None:
                break
    assert len(seen) == len(set(seen)), "a conversation came twice"
    assert existing <= set(seen), f"{len(existing - set(seen))} conversations were skipped"
    assert set(seen) - existing <= arrived
    assert pages == 28  # ceil(1001 / 37): the first arrival is newer than page one, the rest newer still


async def test_a_fresh_walk_sees_the_new_ones_first(make_tenant, sessions, api, make_key) -> None:
    shop = await make_tenant("Fresh Walk Shop")
    await _many_conversations(sessions, shop, 5)
    newest = (await make_conversation(sessions, shop)).conversation
    key = await make_key(shop, scopes=["conversations:read"])
    async with api(key) as client:
        first = (await client.get("/api/v1/conversations", params={"limit": 2})).json()
        rest = (
            await client.get("/api/v1/conversations", params={"limit": 10, "cursor": first["next_cursor"]})
        ).json()
    assert first["items"][0]["id"] == str(newest.id)
    assert len(first["items"]) + len(rest["items"]) == 6 and rest["next_cursor"] is None


def test_a_cursor_round_trips() -> None:
    at, row_id = utcnow(), uuid.uuid4()
    assert decode_cursor(encode_cursor(at, row_id)) == (at, row_id)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cursor=st.text(min_size=1, max_size=120))
async def test_any_other_cursor_is_a_400_problem(cursor: str, api_app, world_key) -> None:
    import httpx

    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=api_app),
        base_url="http://t",
        headers={"Authorization": f"Bearer {world_key}"},
    ) as client:
        response = await client.get("/api/v1/conversations", params={"cursor": cursor})
    assert response.status_code in (200, 400, 422), response.text
    if response.status_code != 200:
        assert response.json()["code"] in ("invalid_cursor", "invalid_request")
