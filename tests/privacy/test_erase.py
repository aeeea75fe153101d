"""Erasing one customer: nothing that names them or holds their words is left anywhere in the database
or the media storage; other customers keep everything; an erase that died halfway completes when run again."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from obstore.store import LocalStore
from redis.asyncio import Redis
from sqlalchemy import text
from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel.ext.asyncio.session import AsyncSession
from switchboard.conversations.identities import Identity, resolve_customer
from switchboard.media.store import MediaCopyFailed, MediaStore
from switchboard.privacy import CustomerNotFound, erase_customer, find_customer
from switchboard.queue.keys import profile_cache_key

from tests.conftest import ScratchDatabase
from tests.privacy.seed import Seeded, seed_customer
from tests.utils.tenants import new_tenant


async def leftovers(sessions: async_sessionmaker[AsyncSession], needles: list[str]) -> list[str]:
    """``table.column`` of every text, varchar, json and jsonb column of every table (from the catalogue)
    holding one of ``needles``, with the needle."""
    found: list[str] = []
    async with sessions() as session:
        conn = await session.connection()
        columns = (
            await conn.execute(
                text(
                    "SELECT c.table_name, c.column_name FROM information_schema.columns c "
                    "JOIN information_schema.tables t ON t.table_schema = c.table_schema "
                    "AND t.table_name = c.table_name WHERE c.table_schema = 'public' "
                    "AND t.table_type = 'BASE TABLE' "
                    "AND c.data_type IN ('text', 'character varying', 'character', 'json', 'jsonb', 'ARRAY')"
                )
            )
        ).all()
        assert len(columns) > 100  # the catalogue was read, not an empty schema
        for table, column in columns:
            for needle in needles:
                hit = (
                    await conn.execute(
                        text(f'SELECT 1 FROM "{table}" WHERE strpos("{column}"::text, :n) > 0 LIMIT 1'),
                        {"n": needle},
                    )
                ).first()
                if hit is not None:
                    found.append(f"{table}.{column}: {needle}")
    return found


def media_files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def everything_of(s: Seeded) -> list[str]:
    return [*s.identifiers, *s.texts]


@pytest.fixture
def store(tmp_path: Path) -> MediaStore:
    return MediaStore(LocalStore(tmp_path, mkdir=True), max_bytes=1_000_000)


async def test_an_erased_customer_is_nowhere_and_the_others_keep_everything(
    scratch_database: ScratchDatabase, store: MediaStore, tmp_path: Path, redis_url: str
) -> None:
    sessions = scratch_database.sessions
    tenant = await new_tenant(sessions, "Erase Shop")
    other_tenant = await new_tenant(sessions, "Other Shop")
    ana = await seed_customer(sessions, tenant.id, store, "ana")
    bea = await seed_customer(sessions, tenant.id, store, "bea")
    cris = await seed_customer(sessions, other_tenant.id, store, "cris")
    assert set(await leftovers(sessions, [ana.phone, ana.email])) >= {
        f"customers.phone: {ana.phone}",
        f"messages.raw: {ana.phone}",
        f"user_memories.summary: {ana.email}",
        f"webhook_deliveries.log: {ana.email}",
        f"audit_logs.details: {ana.phone}",
        f"leads.notes: {ana.phone}",
    }  # the search sees what the seed wrote
    files_before = media_files(tmp_path)
    redis = Redis.from_url(redis_url)
    cached = {who.phone: profile_cache_key("whatsapp", uuid.uuid4(), who.phone) for who in (ana, bea)}
    for phone, key in cached.items():
        await redis.set(key, f'{{"name": "{phone}"}}', ex=60)

    report = await erase_customer(
        sessions,
        tenant_id=tenant.id,
        customer_id=ana.customer_id,
        actor="console_user:admin",
        store=store,
        redis=redis,
    )

    assert await leftovers(sessions, everything_of(ana)) == []
    assert report.media_files == 1 and report.counts["messages"] == 4
    assert (await redis.exists(cached[ana.phone]), await redis.exists(cached[bea.phone])) == (0, 1)
    await redis.aclose()
    with pytest.raises(MediaCopyFailed):
        await store.get(ana.media_refs[0])
    files_after = media_files(tmp_path)
    assert len(files_after) == len(files_before) - 1
    assert not any(ana.name.encode() in data for data in files_after.values())
    for other in (bea, cris):  # every identifier, text and file of the others is still there
        found = await leftovers(sessions, everything_of(other))
        assert {f.split(": ", 1)[1] for f in found} == set(everything_of(other))
        assert await store.get(other.media_refs[0])
    async with sessions() as session:
        conn = await session.connection()
        audit = (
            await conn.execute(
                text(
                    "SELECT actor, action, details::text FROM audit_logs WHERE target_id = :c ORDER BY created_at"
                ),
                {"c": str(ana.customer_id)},
            )
        ).all()
        counts = (
            await conn.execute(
                text("SELECT count(*) FROM messages WHERE conversation_id = ANY(:cs)"),
                {"cs": ana.conversation_ids},
            )
        ).scalar_one()
        tokens = (
            await conn.execute(
                text("SELECT sum((usage->>'total_tokens')::int) FROM turns WHERE conversation_id = ANY(:cs)"),
                {"cs": ana.conversation_ids},
            )
        ).scalar_one()
    assert [(a, b) for a, b, _ in audit] == [
        ("console_user:admin", "customer_erase_started"),
        ("console_user:admin", "customer_erased"),
    ]
    assert counts == 4 and tokens == 240  # the analytics' counts stay, without the words

    async with sessions() as session, session.begin():  # the same phone writes again: a new customer
        resolved = await resolve_customer(
            session, tenant_id=tenant.id, identities=[Identity("whatsapp", "wa_id", ana.phone)]
        )
    assert resolved.created and resolved.customer.id != ana.customer_id

    again = await erase_customer(sessions, tenant_id=tenant.id, customer_id=ana.customer_id, actor="cli")
    assert again.already_erased
    with pytest.raises(CustomerNotFound):
        await erase_customer(sessions, tenant_id=other_tenant.id, customer_id=ana.customer_id, actor="cli")


class Killed(Exception):
    pass


@pytest.mark.parametrize("kill_at", [1, 3, 9, 14])
async def test_an_erase_killed_halfway_completes_when_run_again(
    scratch_database: ScratchDatabase, store: MediaStore, kill_at: int
) -> None:
    sessions = scratch_database.sessions
    tenant = await new_tenant(sessions, "Erase Shop")
    ana = await seed_customer(sessions, tenant.id, store, "ana")
    bea = await seed_customer(sessions, tenant.id, store, "bea")
    batches = 0

    async def die(step: str, rows: int) -> None:
        nonlocal batches
        batches += 1
        if batches == kill_at:
            raise Killed(step)

    with pytest.raises(Killed):
        await erase_customer(
            sessions,
            tenant_id=tenant.id,
            customer_id=ana.customer_id,
            actor="cli",
            store=store,
            batch=1,
            on_batch=die,
        )
    assert await leftovers(sessions, [ana.email]) != []  # halfway: something is left

    report = await erase_customer(
        sessions, tenant_id=tenant.id, customer_id=ana.customer_id, actor="cli", store=store, batch=1
    )

    assert not report.already_erased
    assert await leftovers(sessions, everything_of(ana)) == []
    assert len(await leftovers(sessions, everything_of(bea))) > 0
    async with sessions() as session:
        found = await find_customer(session, tenant.id, "+" + bea.phone)
        assert found is not None and found.id == bea.customer_id
        assert await find_customer(session, tenant.id, ana.phone) is None
