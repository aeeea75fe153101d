"""Console: analytics (``/t/{slug}/analytics``): the figures of :mod:`switchboard.analytics` as SVG charts
drawn on the server (``GET /v1/admin/tenants/{slug}/analytics`` is the same data as JSON)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import HTMLResponse, Response

from switchboard.analytics import tenant_analytics
from switchboard.analytics.charts import line_chart
from switchboard.api.access import ADMIN_ROLES
from switchboard.api.deps import SessionDep
from switchboard.console.app import console_language, register_nav, render
from switchboard.console.deps import PageContext, page_access
from switchboard.i18n import N_, gettext
from switchboard.tenant_settings import tenant_settings_from

__all__ = ["analytics_pages_router", "CHARTS"]

analytics_pages_router = APIRouter(include_in_schema=False)
AdminPage = Annotated[PageContext, Depends(page_access(ADMIN_ROLES))]
register_nav("analytics", N_("Analytics"), "/analytics", ADMIN_ROLES)

CHARTS: tuple[tuple[str, str, str], ...] = (
    ("conversations", N_("Conversations started"), ""),
    ("ai_resolved", N_("Resolved by the AI"), ""),
    ("handed_off", N_("Handed to a person"), ""),
    ("first_response_p50_s", N_("First response of the AI (median)"), "s"),
    ("human_first_response_p50_s", N_("First response of a person after a hand-over (median)"), "s"),
    ("fallback_rate", N_("Turns on a fallback model or with failed model calls"), "%"),
    ("cost_usd", N_("Estimated model cost (USD)"), "$"),
)
"""(metric, question, unit) of each chart, in page order: one chart per question, a line per channel.
The other figures are in the numbers above the charts."""


@analytics_pages_router.get("/t/{slug}/analytics", response_class=HTMLResponse)
async def analytics_page(
    request: Request, page: AdminPage, session: SessionDep, days: Annotated[int, Query(ge=1, le=366)] = 14
) -> Response:
    tenant_settings = tenant_settings_from(page.tenant.settings_extensions)
    data = await tenant_analytics(
        session,
        page.tenant.id,
        days=days,
        timezone=tenant_settings.locale.timezone,
        idle_close_s=tenant_settings.memory.inactivity_close_s,
    )
    language = console_language(request, page.tenant)  # charts are drawn before rendering: titles here
    charts = [
        line_chart(
            gettext(language, title),
            data.days,
            data.series(metric),
            unit=unit,
            chart_id=f"chart-{metric}",
            language=language,
        )
        for metric, title, unit in CHARTS
    ]
    return render(
        request, "analytics.html", tenant=page.tenant, data=data, charts=charts, days=days, active="analytics"
    )
