"""Admin API: ``GET /v1/admin/tenants/{slug}/analytics`` (tenant and platform admins)."""

from __future__ import annotations

from typing import Any

from fastapi import Query

from switchboard.analytics import tenant_analytics
from switchboard.api.deps import SessionDep, TenantDep
from switchboard.api.routers import tenant_admin_router
from switchboard.tenant_settings import tenant_settings_from

__all__ = ["analytics_admin_router"]

analytics_admin_router = tenant_admin_router("/analytics", tags=["analytics"])


@analytics_admin_router.get(
    "",
    summary="Per-day, per-channel figures",
    description="Conversations, resolved by the AI (closed or idle past ``memory.inactivity_close_s`` with no "
    "message from a person) vs handed off, messages in/out, first-response p50/p95 (s), a person's first "
    "response p50 (s) after a hand-over, turns, fallback rate (turns answered by a fallback or whose model "
    "calls failed), tokens, tool calls and tool error rate, and 👍/👎 when feedback is recorded; days in "
    "the tenant's ``locale.timezone``. ``rows``: one per day and channel with data; ``totals`` for the period.",
)
async def get_analytics(
    tenant: TenantDep,
    session: SessionDep,
    days: int = Query(14, ge=1, le=366, description="Days back, today included."),
) -> dict[str, Any]:
    tenant_settings = tenant_settings_from(tenant.settings_extensions)
    data = await tenant_analytics(
        session,
        tenant.id,
        days=days,
        timezone=tenant_settings.locale.timezone,
        idle_close_s=tenant_settings.memory.inactivity_close_s,
    )
    return data.to_json_dict()
