"""Migration 0009_channel_core on rows the old senders wrote: backfill up, and back down."""

from __future__ import annotations

import asyncio
import json
import uuid

import asyncpg
from sqlalchemy.engine import make_url
from switchboard.db.migrate import downgrade, upgrade

BEFORE = "0007_handoff"
AFTER = "0009_channel_core"


def _connect_kwargs(url: str) -> dict[str, object]:
    parsed = make_url(url)
    host = parsed.query.get("host") or parsed.host
    return dict(
        user=parsed.username, password=parsed.password, host=host, port=parsed.port, database=parsed.database
    )


async def _seed_old_rows(url: str) -> dict[str, uuid.UUID]:
    """A tenant, account, conversation, one inbound message and the outbox rows both old senders wrote."""
    ids = {name: uuid.uuid4() for name in ("org", "tenant", "account", "customer", "conversation", "inbound")}
    conn = await asyncpg.connect(**_connect_kwargs(url))
    try:
        await conn.execute("INSERT INTO organizations (id, name) VALUES ($1, 'Mig org')", ids["org"])
        await conn.execute(
            "INSERT INTO tenants (id, organization_id, slug, name) VALUES ($1, $2, 'mig', 'Mig')",
            ids["tenant"],
            ids["org"],
        )
        await conn.execute(
            "INSERT INTO channel_accounts (id, tenant_id, channel, external_account_id, is_active, created_at, updated_at)"
            " VALUES ($1, $2, 'whatsapp', '106000000000009', true, now(), now())",
            ids["account"],
            ids["tenant"],
        )
        await conn.execute(
            "INSERT INTO customers (id, tenant_id, channel, external_user_id, profile, created_at, updated_at)"
            " VALUES ($1, $2, 'whatsapp', '15550100099', '{}', now(), now())",
            ids["customer"],
            ids["tenant"],
        )
        await conn.execute(
            "INSERT INTO conversations (id, tenant_id, customer_id, channel_account_id, channel, status, created_at,"
            " updated_at) VALUES ($1, $2, $3, $4, 'whatsapp', 'human', now(), now())",
            ids["conversation"],
            ids["tenant"],
            ids["customer"],
            ids["account"],
        )
        await conn.execute(
            "INSERT INTO messages (id, tenant_id, conversation_id, channel, channel_account_id, direction, role, kind,"
            " media, processing_attempts, created_at) VALUES ($1, $2, $3, 'whatsapp', $4, 'inbound', 'user', 'text',"
            " '[]', 0, now())",
            ids["inbound"],
            ids["tenant"],
            ids["conversation"],
            ids["account"],
        )
        rows = [  # (name, inbound?, part_index, payload)
            ("reply0", True, 0, {"type": "text", "text": "a"}),
            ("reply1", True, 1, {"type": "text", "text": "b"}),
            (
                "relay",
                True,
                100,
                {
                    "type": "text",
                    "text": "[Ana] hi",
                    "audience": "agent",
                    "handoff": True,
                    "proxy": {"sender": "customer"},
                },
            ),
            (
                "human",
                True,
                101,
                {
                    "type": "text",
                    "text": "hello",
                    "audience": "customer",
                    "handoff": True,
                    "proxy": {"sender": "human_agent"},
                },
            ),
            (
                "notice",
                False,
                0,
                {"type": "text", "text": "New conversation", "audience": "agent", "handoff": True},
            ),
        ]
        for name, keyed, part_index, payload in rows:
            ids[name] = uuid.uuid4()
            await conn.execute(
                "INSERT INTO outbox (id, tenant_id, conversation_id, inbound_message_id, part_index, channel, recipient,"
                " payload, status, attempts, created_at, updated_at)"
                " VALUES ($1, $2, $3, $4, $5, 'whatsapp', '15550100099', $6::jsonb, 'pending', 0, now(), now())",
                ids[name],
                ids["tenant"],
                ids["conversation"],
                ids["inbound"] if keyed else None,
                part_index,
                json.dumps(payload),
            )
    finally:
        await conn.close()
    return ids


async def _outbox(url: str) -> dict[uuid.UUID, asyncpg.Record]:
    conn = await asyncpg.connect(**_connect_kwargs(url))
    try:
        return {r["id"]: r for r in await conn.fetch("SELECT * FROM outbox")}
    finally:
        await conn.close()


async def test_backfill_up_and_restore_down(scratch_database_url) -> None:  # type: ignore[no-untyped-def]
    url = scratch_database_url
    await asyncio.to_thread(upgrade, url, BEFORE)
    ids = await _seed_old_rows(url)

    await asyncio.to_thread(upgrade, url, AFTER)
    up = await _outbox(url)
    assert {
        name: (up[ids[name]]["purpose"], up[ids[name]]["part_index"])
        for name in ("reply0", "reply1", "relay", "human", "notice")
    } == {
        "reply0": ("reply", 0),
        "reply1": ("reply", 1),
        "relay": ("relay", 0),
        "human": ("human_reply", 1),
        "notice": ("notice", 0),
    }
    assert {r["correlation_id"] for r in up.values()} == {f"sb:{i.hex}" for i in up}
    assert {r["channel_account_id"] for r in up.values()} == {ids["account"]}
    assert {(r["next_attempt_at"], r["sending_at"]) for r in up.values()} == {(None, None)}

    conn = await asyncpg.connect(**_connect_kwargs(url))
    try:
        await conn.execute("UPDATE outbox SET status = 'sending' WHERE id = $1", ids["reply1"])
        await conn.execute("UPDATE outbox SET status = 'played' WHERE id = $1", ids["reply0"])
    finally:
        await conn.close()
    await asyncio.to_thread(downgrade, url, BEFORE)
    down = await _outbox(url)
    assert {
        name: (down[ids[name]]["part_index"], down[ids[name]]["status"])
        for name in ("reply0", "reply1", "relay", "human", "notice")
    } == {
        "reply0": (0, "read"),
        "reply1": (1, "pending"),
        "relay": (100, "pending"),
        "human": (101, "pending"),
        "notice": (0, "pending"),
    }
    assert "purpose" not in down[ids["reply0"]].keys()
    assert all(json.loads(down[ids[n]]["payload"])["handoff"] is True for n in ("relay", "human", "notice"))
    await asyncio.to_thread(upgrade, url, AFTER)
