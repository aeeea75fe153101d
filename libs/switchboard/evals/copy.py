"""A throwaway copy of a tenant for an evaluation run: its settings and business data, no customers.

The copy is a new tenant (slug ``eval-<slug>-<hex>``, same organization) with the source's
``settings_extensions`` (optionally restricted to one deployment group), and copies of the rows the
agent's tools read: the catalog, orders, stores, meeting slots, tool assignments and the knowledge base
(sources and chunks with their embeddings). Not copied: channel accounts (so nothing the copy writes
can be delivered: a reply of a turn goes to the outbox only through the worker, which the harness
does not run, and an escalation finds no human agent to notify), customers, conversations, agents,
memories. Orders keep ``customer_ref`` (the external id they were imported with) but not
``customer_id``: the eval customer with that external id owns them in the copy.

:func:`drop_copy` deletes the copy; every tenant-owned row goes with it (``ON DELETE CASCADE``).
"""

from __future__ import annotations

import secrets
import uuid
from typing import Any

from sqlalchemy import text
from sqlmodel.ext.asyncio.session import AsyncSession

from switchboard.db.models import Tenant
from switchboard.llm.config import LLMSettings, default_deployments
from switchboard.llm.costs import only_group
from switchboard.observability import get_logger
from switchboard.settings import Settings
from switchboard.tenants import get_tenant

__all__ = ["COPIED_TABLES", "copy_tenant", "drop_copy"]

log = get_logger(__name__)

COPIED_TABLES = ("products", "orders", "stores", "meeting_slots", "mcp_tenant_tools")
"""Tables copied row by row with new ids (plus the knowledge base, which keeps its source links)."""
_NULLED = {"orders": {"customer_id"}, "meeting_slots": set()}
"""Columns set to NULL in the copy (they point at rows that are not copied)."""


async def _columns(session: AsyncSession, table: str) -> list[str]:
    rows = await (await session.connection()).execute(
        text(
            "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() "
            "AND table_name = :t AND is_generated = 'NEVER' AND column_name NOT IN ('id', 'tenant_id') "
            "ORDER BY ordinal_position"
        ),
        {"t": table},
    )
    return [r[0] for r in rows]


async def copy_tenant(
    session: AsyncSession, settings: Settings, *, source: str, model_group: str | None = None
) -> Tenant:
    """Copy tenant ``source`` (slug or id) in the caller's transaction (module docstring).

    Args:
        model_group: restrict the copy to this deployment group (``p1``, ``p2``...) of the tenant's
            deployments (the process defaults when it has none).

    Raises:
        TenantNotFound: no such tenant.
        ValueError: ``model_group`` is not one of the tenant's groups.
    """
    original = await get_tenant(session, source)
    extensions: dict[str, Any] = dict(original.settings_extensions or {})
    if model_group is not None:
        llm = LLMSettings.model_validate(extensions.get("llm") or {})
        deployments = llm.deployments or default_deployments(settings)
        extensions["llm"] = only_group(llm, deployments, model_group).model_dump(mode="json")
    copy = Tenant(
        organization_id=original.organization_id,
        slug=f"eval-{original.slug[:40]}-{secrets.token_hex(4)}",
        name=f"{original.name} (evaluation copy)",
        settings_extensions=extensions,
    )
    session.add(copy)
    await session.flush()
    ids = {"src": original.id, "dst": copy.id}
    for table in COPIED_TABLES:
        columns = await _columns(session, table)
        nulled = _NULLED.get(table, set())
        select_list = ", ".join("NULL" if c in nulled else f'"{c}"' for c in columns)
        names = ", ".join(f'"{c}"' for c in columns)
        await (await session.connection()).execute(
            text(
                f'INSERT INTO "{table}" (id, tenant_id, {names}) '
                f'SELECT gen_random_uuid(), :dst, {select_list} FROM "{table}" WHERE tenant_id = :src'
            ),
            ids,
        )
    # knowledge: new source ids, chunks re-pointed at them (the chunk ids are a sequence)
    mapping = [
        (row[0], uuid.uuid4())
        for row in await (await session.connection()).execute(
            text("SELECT id FROM knowledge_sources WHERE tenant_id = :src"), ids
        )
    ]
    source_columns = await _columns(session, "knowledge_sources")
    chunk_columns = [c for c in await _columns(session, "knowledge_documents") if c != "source_id"]
    for old, new in mapping:
        names = ", ".join(f'"{c}"' for c in source_columns)
        await (await session.connection()).execute(
            text(
                f"INSERT INTO knowledge_sources (id, tenant_id, {names}) "
                f"SELECT :new, :dst, {names} FROM knowledge_sources WHERE id = :old"
            ),
            {**ids, "old": old, "new": new},
        )
        names = ", ".join(f'"{c}"' for c in chunk_columns)
        await (await session.connection()).execute(
            text(
                f"INSERT INTO knowledge_documents (tenant_id, source_id, {names}) "
                f"SELECT :dst, :new, {names} FROM knowledge_documents WHERE source_id = :old"
            ),
            {**ids, "old": old, "new": new},
        )
    log.info(
        "eval_tenant_copied",
        tenant_id=str(original.id),
        copy_tenant_id=str(copy.id),
        copy_slug=copy.slug,
        knowledge_sources=len(mapping),
        model_group=model_group,
    )
    return copy


async def drop_copy(session: AsyncSession, tenant_id: uuid.UUID) -> None:
    """Delete an evaluation copy (refuses a tenant whose slug does not start with ``eval-``).

    Raises:
        ValueError: ``tenant_id`` is not an evaluation copy.
    """
    tenant = await session.get(Tenant, tenant_id)
    if tenant is None:
        return
    if not tenant.slug.startswith("eval-"):
        raise ValueError(f"tenant {tenant.slug!r} is not an evaluation copy")
    await (await session.connection()).execute(text("DELETE FROM tenants WHERE id = :id"), {"id": tenant_id})
    log.info("eval_tenant_dropped", copy_tenant_id=str(tenant_id))
