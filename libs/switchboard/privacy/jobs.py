"""The privacy background jobs (declared in :mod:`switchboard.queue.jobs`): erase and export one customer."""

from __future__ import annotations

import uuid
from typing import Any

from switchboard.media.store import MediaStore
from switchboard.privacy.erase import CustomerNotFound, erase_customer
from switchboard.privacy.export import write_export

__all__ = ["erase_customer_job", "export_customer_job"]


def _store(deps: Any) -> MediaStore:
    if getattr(deps, "media_store", None) is None:
        deps.media_store = MediaStore.from_settings(deps.settings)
    store: MediaStore = deps.media_store
    return store


async def erase_customer_job(
    ctx: dict[str, Any], tenant_id: str, customer_id: str, actor: str
) -> dict[str, Any]:
    """ARQ job: :func:`~switchboard.privacy.erase.erase_customer`; a run the worker lost is run again by
    ARQ and completes. Returns ``{"already_erased", "media_files", "rows"}`` (``{"missing": True}`` for a
    customer that does not exist)."""
    deps = ctx["deps"]
    try:
        report = await erase_customer(
            deps.resources.sessions,
            tenant_id=uuid.UUID(tenant_id),
            customer_id=uuid.UUID(customer_id),
            actor=actor,
            store=_store(deps),
            redis=deps.resources.redis,
        )
    except CustomerNotFound:
        return {"missing": True}
    return {
        "already_erased": report.already_erased,
        "media_files": report.media_files,
        "rows": sum(report.counts.values()),
    }


async def export_customer_job(
    ctx: dict[str, Any], tenant_id: str, customer_id: str, export_id: str, actor: str
) -> dict[str, Any]:
    """ARQ job: :func:`~switchboard.privacy.export.write_export`. Returns ``{"key"}`` (``{"missing": True}``
    for a customer that does not exist)."""
    deps = ctx["deps"]
    try:
        key = await write_export(
            deps.resources.sessions,
            _store(deps),
            tenant_id=uuid.UUID(tenant_id),
            customer_id=uuid.UUID(customer_id),
            export_id=export_id,
            actor=actor,
        )
    except CustomerNotFound:
        return {"missing": True}
    return {"key": key}
