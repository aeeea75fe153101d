"""Tenants for tests: each test makes its own (a unique slug), never shares one."""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel.ext.asyncio.session import AsyncSession
from switchboard.db.models import Tenant
from switchboard.tenants import create_tenant

GUARDRAILS_OFF = {"input": {"enabled": False}, "output": {"enabled": False}}
LEADS_HEURISTIC = {"intent_check": "heuristic"}
TEST_DEFAULTS = {"guardrails": GUARDRAILS_OFF, "leads": LEADS_HEURISTIC}
"""What :func:`new_tenant` stores unless a test gives the section (tests comparing stored overrides
leave these out with :func:`without_test_defaults`)."""


def without_test_defaults(sections: dict) -> dict:
    """``sections`` (stored settings overrides) without the sections :func:`new_tenant` adds itself."""
    return {name: value for name, value in (sections or {}).items() if TEST_DEFAULTS.get(name) != value}


async def new_tenant(
    sessions: async_sessionmaker[AsyncSession], name: str = "Test Shop", **settings_extensions: object
) -> Tenant:
    """Create and commit a tenant with a unique slug and these ``settings_extensions`` sections.

    The guardrails are off unless a ``guardrails`` section is given: the input check is one more model
    call, and the scripted model queues of most tests script the loop's calls only (the guardrail
    tests, ``tests/guardrails/test_guardrails.py``, turn them on). Likewise the lead intent check runs
    its offline heuristic unless a ``leads`` section is given.
    """
    async with sessions() as session, session.begin():
        # no default tools: each test enables what it exercises (create_tenant's default is tested on its own)
        tenant = await create_tenant(session, slug=f"t-{uuid.uuid4().hex[:12]}", name=name, default_tools=())
        settings_extensions.setdefault("guardrails", GUARDRAILS_OFF)
        # the lead intent check with a provider model is one more model call after each turn
        settings_extensions.setdefault("leads", LEADS_HEURISTIC)
        tenant.settings_extensions = dict(settings_extensions)
    return tenant


async def insert_raw_tenant(conn: Any, tenant_id: uuid.UUID, slug: str = "t") -> uuid.UUID:
    """A tenant (and its organization) written with plain SQL on ``conn`` (an ``AsyncConnection``), for a
    database migrated to an older revision, where the models of today do not fit. Returns the
    organization's id."""
    from sqlalchemy import text

    organization = uuid.uuid4()
    await conn.execute(text("INSERT INTO organizations (id, name) VALUES (:id, 'O')"), {"id": organization})
    await conn.execute(
        text(
            "INSERT INTO tenants (id, organization_id, slug, name, settings_extensions) "
            "VALUES (:id, :o, :slug, 'T', '{}')"
        ),
        {"id": tenant_id, "o": organization, "slug": slug},
    )
    return organization
