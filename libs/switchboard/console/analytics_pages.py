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
    ("conversations", N_("Conversations"), ""),
    ("ai_resolved", N_("Resolved by the AI"), ""),
    ("handed_off", N_("Handed to a person"), ""),
    ("messages_in", N_("Messages in"), ""),
    ("messages_out", N_("Messages out"), ""),
    ("first_response_p50_s", N_("First response p50"), "s"),
    ("first_response_p95_s", N_("First response p95"), "s"),
    ("fallback_rate", N_("Fallback rate"), "%"),
    ("tool_error_rate", N_("Tool error rate"), "%"),
    ("tokens", N_("Tokens"), ""),
    ("cost_usd", N_("Estimated cost (USD)"), "$"),
)
"""(metric, title, unit) of each chart, in page order; 👍/👎 is added when feedback exists."""


@analytics_pages_router.get("/t/{slug}/analytics", response_class=HTMLResponse)
async def analytics_page(
    request: Request, page: AdminPage, session: SessionDep, days: Annotated[int, Query(ge=1, le=366)] = 14
) -> Response:
    timezone = tenant_settings_from(page.tenant.settings_extensions).locale.timezone
    data = await tenant_analytics(session, page.tenant.id, days=days, timezone=timezone)
    language = console_language(request, page.tenant)  # charts are drawn before rendering: titles here
    charts = [
        line_chart(
            gettext(language, title), data.days, data.series(metric), unit=unit, chart_id=f"chart-{metric}"
        )
        for metric, title, unit in CHARTS
    ]
    if data.has_feedback:
        charts.append(line_chart("👍", data.days, data.series("feedback_up"), chart_id="chart-feedback_up"))
        charts.append(
            line_chart("👎", data.days, data.series("feedback_down"), chart_id="chart-feedback_down")
        )
    return render(
        request, "analytics.html", tenant=page.tenant, data=data, charts=charts, days=days, active="analytics"
    )
