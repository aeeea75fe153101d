"""Migrations: upgrade from empty, downgrade to base, upgrade again, on a fresh database."""

import asyncio
import uuid

import switchboard.db.models  # noqa: F401
from sqlalchemy import inspect, text
from sqlmodel import SQLModel
from switchboard.db.engine import create_engine
from switchboard.db.migrate import current_revision_sync, downgrade, head_revision, include_object, upgrade

from tests.utils.tenants import insert_raw_tenant


async def _state(url):
    engine = create_engine(url, pool_size=1)
    try:
        async with engine.connect() as conn:
            tables = set(await conn.run_sync(lambda c: inspect(c).get_table_names()))
            revision = await conn.run_sync(current_revision_sync)
            rows = await conn.execute(
                text(
                    "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'knowledge_documents'"
                    " AND indexdef LIKE '%USING hnsw%'"
                )
            )
            indexes = {row.indexname: row.indexdef for row in rows}
        return tables, revision, indexes
    finally:
        await engine.dispose()


async def test_upgrade_downgrade_upgrade(scratch_database_url):
    expected = set(SQLModel.metadata.tables)
    await asyncio.to_thread(upgrade, scratch_database_url)
    tables, revision, hnsw = await _state(scratch_database_url)
    assert expected <= tables
    assert revision == head_revision()
    assert hnsw == {}  # 0025_tenant_hnsw_indexes: no global HNSW index, tenants get theirs at run time

    # a tenant's index as the background job makes it; going below 0025 drops it, the global one returns
    tenant = uuid.uuid4()
    engine = create_engine(scratch_database_url, pool_size=1)
    try:
        async with engine.begin() as conn:
            await conn.execute(
                text(
                    f"CREATE INDEX ix_knowledge_documents_hnsw_{tenant.hex} ON knowledge_documents "
                    f"USING hnsw (embedding vector_cosine_ops) WHERE tenant_id = '{tenant}'::uuid"
                )
            )
    finally:
        await engine.dispose()
    await asyncio.to_thread(downgrade, scratch_database_url, "0024_chunk_vectors")
    _, revision, hnsw = await _state(scratch_database_url)
    assert revision == "0024_chunk_vectors"
    assert list(hnsw) == ["ix_knowledge_documents_embedding_hnsw"]
    assert "vector_cosine_ops" in hnsw["ix_knowledge_documents_embedding_hnsw"]
    assert "WHERE" not in hnsw["ix_knowledge_documents_embedding_hnsw"]

    await asyncio.to_thread(downgrade, scratch_database_url, "base")
    tables, revision, hnsw = await _state(scratch_database_url)
    assert tables & expected == set()
    assert revision is None
    assert hnsw == {}

    await asyncio.to_thread(upgrade, scratch_database_url)
    tables, revision, _ = await _state(scratch_database_url)
    assert expected <= tables
    assert revision == head_revision()


async def test_models_match_migrations(database_url):
    """Autogenerate finds nothing to change: the models and the migration files agree."""
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    engine = create_engine(database_url, pool_size=1)
    try:
        async with engine.connect() as conn:
            diff = await conn.run_sync(
                lambda c: compare_metadata(
                    MigrationContext.configure(
                        c, opts={"compare_type": True, "include_object": include_object}
                    ),
                    SQLModel.metadata,
                )
            )
    finally:
        await engine.dispose()
    assert diff == []


NULLABLE_TENANT = {
    "console_users": "a platform admin belongs to no tenant (checked by ck_console_users_tenant_by_role)"
}


async def test_tenant_owned_tables_have_non_null_indexed_tenant_id(database_url):
    engine = create_engine(database_url, pool_size=1)
    try:
        async with engine.connect() as conn:

            def check(c):
                insp = inspect(c)
                problems = []
                for table in SQLModel.metadata.tables.values():
                    if "tenant_id" not in table.c or table.name == "tenants":
                        continue
                    column = next(col for col in insp.get_columns(table.name) if col["name"] == "tenant_id")
                    if column["nullable"] and table.name not in NULLABLE_TENANT:
                        problems.append(f"{table.name}.tenant_id nullable")
                    indexed = any(
                        idx["column_names"][:1] == ["tenant_id"] for idx in insp.get_indexes(table.name)
                    )
                    if not indexed:
                        problems.append(f"{table.name}.tenant_id not indexed")
                return problems

            assert await conn.run_sync(check) == []
    finally:
        await engine.dispose()


async def test_0008_backfills_identities_and_gives_every_human_mode_conversation_an_owner(
    scratch_database_url,
):
    """Customers written before identities existed get theirs; an orphaned human-mode conversation joins
    the queue, an agent's console is marked; downgrade and upgrade again."""
    await asyncio.to_thread(upgrade, scratch_database_url, "0007_handoff")
    engine = create_engine(scratch_database_url, pool_size=1)
    ids = {
        name: uuid.uuid4()
        for name in ("tenant", "ana", "bo", "moved", "twin", "ig", "mail", "echo", "console")
    }
    try:
        async with engine.begin() as conn:
            await insert_raw_tenant(conn, ids["tenant"])
            customers = [
                # (name, channel, external_user_id, phone, profile)
                ("ana", "whatsapp", "15550000001", "15550000001", "{}"),
                ("bo", "whatsapp", "US.42", "15550000002", '{"whatsapp_bsuid": "US.42"}'),
                ("moved", "whatsapp", "15550000003", "15550000004", '{"previous_phones": ["15550000003"]}'),
                ("twin", "whatsapp", "US.43", "15550000001", "{}"),  # Ana's number, seen later
                ("ig", "instagram", "1789", None, "{}"),
                ("mail", "gmail", "Ana@Example.com", None, "{}"),
            ]
            for offset, (name, channel, external, phone, profile) in enumerate(customers):
                await conn.execute(
                    text(
                        "INSERT INTO customers (id, tenant_id, channel, external_user_id, phone, profile, "
                        "created_at, updated_at) VALUES (:id, :t, :channel, :external, :phone, "
                        "CAST(:profile AS jsonb), now() + make_interval(secs => :offset), now())"
                    ),
                    dict(
                        id=ids[name],
                        t=ids["tenant"],
                        channel=channel,
                        external=external,
                        phone=phone,
                        profile=profile,
                        offset=offset,
                    ),
                )
            for name, customer, reason in (
                ("echo", "ana", "a human replied from the WhatsApp Business app"),
                (
                    "console",
                    "bo",
                    "human agent console: messages from this number are handled by the handoff",
                ),
            ):
                await conn.execute(
                    text(
                        "INSERT INTO conversations (id, tenant_id, customer_id, channel, status, escalation_reason, "
                        "created_at, updated_at) VALUES (:id, :t, :c, 'whatsapp', 'human', :reason, now(), now())"
                    ),
                    {"id": ids[name], "t": ids["tenant"], "c": ids[customer], "reason": reason},
                )
        await asyncio.to_thread(upgrade, scratch_database_url)
        async with engine.connect() as conn:
            names = {v: k for k, v in ids.items()}
            identities = sorted(
                (names[row.customer_id], row.kind, row.value, row.retired_at is None)
                for row in (
                    await conn.execute(
                        text("SELECT customer_id, kind, value, retired_at FROM customer_identities")
                    )
                ).all()
            )
            conversations = {
                names[row.id]: (row.status, row.queued_at is not None, row.is_agent_console)
                for row in (
                    await conn.execute(
                        text("SELECT id, status, queued_at, is_agent_console FROM conversations")
                    )
                ).all()
            }
    finally:
        await engine.dispose()
    assert identities == [
        ("ana", "wa_id", "15550000001", True),
        ("bo", "bsuid", "US.42", True),
        ("bo", "wa_id", "15550000002", True),
        ("ig", "igsid", "1789", True),
        ("mail", "email", "ana@example.com", True),
        ("moved", "wa_id", "15550000003", False),  # the number they left: history, not a way to reach them
        ("moved", "wa_id", "15550000004", True),
        ("twin", "bsuid", "US.43", True),
        ("twin", "wa_id", "15550000001", False),  # the oldest customer keeps a number both claimed
    ]
    assert conversations == {"echo": ("human", True, False), "console": ("human", False, True)}
    await asyncio.to_thread(downgrade, scratch_database_url, "0007_handoff")
    await asyncio.to_thread(upgrade, scratch_database_url)
    tables, revision, _ = await _state(scratch_database_url)
    assert "customer_identities" in tables and revision == head_revision()
