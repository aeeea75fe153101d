"""Helpers for knowledge-base tests: ingest a generated file for a fresh tenant, in-process."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest
from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel.ext.asyncio.session import AsyncSession
from switchboard.db.models import Tenant
from switchboard.knowledge import IngestReport, ingest_source, register_upload
from switchboard.settings import Settings

Ingest = Callable[[Tenant, str, bytes], Awaitable[IngestReport]]


@pytest.fixture
def ingest(sessions: async_sessionmaker[AsyncSession], settings: Settings) -> Ingest:
    """``report = await ingest(tenant, "faq.pdf", data)``: register the upload and run ingestion."""

    async def run(
        tenant: Tenant, filename: str, data: bytes, *, settings_: Settings | None = None
    ) -> IngestReport:
        used = settings_ or settings
        async with sessions() as session, session.begin():
            outcome = await register_upload(session, used, tenant_id=tenant.id, filename=filename, data=data)
        return await ingest_source(
            sessions,
            used,
            tenant_id=tenant.id,
            source_id=outcome.source.id,
            content_hash=outcome.source.content_hash,
        )

    return run
