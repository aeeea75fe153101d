"""Admin API: ``GET /v1/admin/tenants/{slug}/leads``, the tenant's sales leads."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated

from fastapi import Query
from pydantic import BaseModel, Field

from switchboard.api.deps import SessionDep, TenantDep
from switchboard.api.routers import tenant_admin_router
from switchboard.db.models import Lead
from switchboard.leads.capture import list_leads

__all__ = ["LeadPublic", "leads_router"]

leads_router = tenant_admin_router("/leads", tags=["leads"])


class LeadPublic(BaseModel):
    """A sales lead (from the intent check, ``source=intent``, or the ``create_lead`` tool)."""

    id: uuid.UUID
    conversation_id: uuid.UUID | None
    customer_id: uuid.UUID | None
    interest: str
    summary: str
    consent: str = Field(description="granted, denied (opted out) or unknown")
    source: str
    detected_by: str | None = Field(description="model:<deployment> or offline_heuristic")
    notes: str
    status: str
    created_at: datetime


@leads_router.get("", response_model=list[LeadPublic], summary="List the tenant's leads, newest first")
async def get_leads(
    tenant: TenantDep,
    session: SessionDep,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    source: Annotated[str | None, Query(pattern="^(tool|intent)$")] = None,
) -> list[LeadPublic]:
    leads: list[Lead] = await list_leads(session, tenant_id=tenant.id, limit=limit, source=source)
    return [LeadPublic.model_validate(lead, from_attributes=True) for lead in leads]
