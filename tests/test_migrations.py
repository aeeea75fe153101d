"""Migrations: upgrade from empty, downgrade to base, upgrade again, on a fresh database."""

import asyncio
import uuid

import asyncpg
import pytest
import switchboard.db.models  # noqa: F401
from sqlalchemy import inspect, text
from sqlalchemy.engine import make_url
from sqlmodel import SQLModel
from switchboard.db.engine import create_engine
from switchboard.db.migrate import current_revision_sync, downgrade, head_revision, upgrade


@pytest.fixture
async def scratch_database_url(database_url):
    """A new, empty database on the same server, dropped afterwards."""
    url = make_url(database_url)
    name = f"sb_migrations_{uuid.uuid4().hex[:8]}"
    host = url.query.get("host") or url.host
    admin = await asyncpg.connect(
        user=url.username, password=url.password, host=host, port=url.port, database=url.database
    )
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
        yield url.set(database=name).render_as_string(hide_password=False)
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


async def _state(url):
    engine = create_engine(url, pool_size=1)
    try:
        async with engine.connect() as conn:
            tables = set(await conn.run_sync(lambda c: inspect(c).get_table_names()))
            revision = await conn.run_sync(current_revision_sync)
            indexes = (
                await conn.execute(
                    text(
                        "SELECT indexdef FROM pg_indexes WHERE indexname = 'ix_knowledge_documents_embedding_hnsw'"
                    )
                )
            ).scalar_one_or_none()
        return tables, revision, indexes
    finally:
        await engine.dispose()


async def test_upgrade_downgrade_upgrade(scratch_database_url):
    expected = set(SQLModel.metadata.tables)
    await asyncio.to_thread(upgrade, scratch_database_url)
    tables, revision, hnsw = await _state(scratch_database_url)
    assert expected <= tables
    assert revision == head_revision()
    assert "hnsw" in hnsw and "vector_cosine_ops" in hnsw

    await asyncio.to_thread(downgrade, scratch_database_url, "base")
    tables, revision, hnsw = await _state(scratch_database_url)
    assert tables & expected == set()
    assert revision is None
    assert hnsw is None

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
                    MigrationContext.configure(c, opts={"compare_type": True}), SQLModel.metadata
                )
            )
    finally:
        await engine.dispose()
    assert diff == []


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
                    if column["nullable"]:
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
