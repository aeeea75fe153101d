"""Analytics that tell the truth: figures of a seeded history checked against answers known in advance,
through the admin API and the console page (one chart per question, every day of the range drawn)."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import update
from switchboard.db.models import Conversation, ConversationEvent, Message, Role, Turn, utcnow

from tests.utils.agent import make_conversation
from tests.utils.console import PASSWORD, log_in, new_user


async def _conversation(
    sessions,
    tenant,
    *,
    started: datetime,
    messages: list[tuple[float, str, str]],
    status: str = "ai",
    closed: bool = False,
    handed_at_s: float | None = None,
    channel: str = "whatsapp",
) -> uuid.UUID:  # type: ignore[no-untyped-def]
    """A conversation started at ``started`` with ``messages`` (seconds after the start, role, kind)."""
    handle = await make_conversation(sessions, tenant)
    cid = handle.conversation.id
    async with sessions() as session, session.begin():
        await session.exec(
            update(Conversation)
            .where(Conversation.id == cid)
            .values(
                created_at=started,
                status=status,
                channel=channel,
                closed_at=started + timedelta(hours=1) if closed else None,
                queued_at=started if status == "human" else None,
            )
        )
        for offset, role, kind in messages:
            session.add(
                Message(
                    tenant_id=tenant.id,
                    conversation_id=cid,
                    channel=channel,
                    text="hi",
                    kind=kind,
                    role=role,
                    direction="inbound" if role == "user" else "outbound",
                    created_at=started + timedelta(seconds=offset),
                )
            )
        if handed_at_s is not None:
            session.add(
                ConversationEvent(
                    tenant_id=tenant.id,
                    conversation_id=cid,
                    from_status="ai",
                    to_status="human",
                    actor_type="ai",
                    created_at=started + timedelta(seconds=handed_at_s),
                )
            )
    return cid


AI_ANSWERED = [(0, "user", "text"), (3, "assistant", "text")]


async def _history(sessions, tenant) -> None:  # type: ignore[no-untyped-def]
    now = utcnow()
    three_days, two_days = now - timedelta(days=3), now - timedelta(days=2)
    # resolved by the AI: closed; idle for two days; closed on Instagram
    a = await _conversation(sessions, tenant, started=three_days, messages=AI_ANSWERED, closed=True)
    await _conversation(sessions, tenant, started=three_days, messages=AI_ANSWERED)
    await _conversation(
        sessions,
        tenant,
        started=now - timedelta(hours=2),
        messages=AI_ANSWERED,
        closed=True,
        channel="instagram",
    )
    # still going (an hour old): not resolved yet
    await _conversation(sessions, tenant, started=now - timedelta(hours=1), messages=AI_ANSWERED)
    # handed to a person who answered after 60 s and 180 s (then handed back with a note, closed)
    for wait_s in (60, 180):
        await _conversation(
            sessions,
            tenant,
            started=two_days,
            closed=True,
            handed_at_s=10,
            messages=[
                *AI_ANSWERED,
                (10 + wait_s, "human_agent", "text"),
                (10 + wait_s + 5, "human_agent", "system"),
            ],
        )
    # handed to a person, still waiting, nobody answered
    await _conversation(
        sessions, tenant, started=two_days, messages=[(0, "user", "text")], status="human", handed_at_s=1
    )
    # four turns: one answered by the first model, one by a fallback, one whose model failed mid-turn,
    # one where every deployment failed
    async with sessions() as session, session.begin():
        for fallback, outcome, error, flags in (
            (False, "answered", None, []),
            (True, "answered", None, []),
            (False, "degraded", "model_failed: APIConnectionError", []),
            (False, "degraded", "model_failed: every deployment failed", ["model_unavailable"]),
        ):
            session.add(
                Turn(
                    tenant_id=tenant.id,
                    conversation_id=a,
                    inbound_message_id=uuid.uuid4(),
                    trace_id="t",
                    fallback_used=fallback,
                    outcome=outcome,
                    error=error,
                    result={"flags": flags},
                    created_at=three_days,
                )
            )


async def test_the_figures_of_a_known_history(console_client, sessions, make_tenant):  # type: ignore[no-untyped-def]
    tenant = await make_tenant()
    await _history(sessions, tenant)
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id)
    async with console_client() as client:
        await log_in(client, admin)
        api = await client.get(f"/v1/admin/tenants/{tenant.slug}/analytics?days=14")
        assert api.status_code == 200
        data = api.json()
        page = await client.get(f"/t/{tenant.slug}/analytics?days=14")
    totals = data["totals"]
    assert totals["conversations"] == 7
    assert totals["ai_resolved"] == 3  # closed, idle past 24 h, closed on Instagram; never the running one
    assert totals["handed_off"] == 3
    assert totals["human_first_response_p50_s"] == 120.0  # median of 60 s and 180 s; the waiting one has none
    assert totals["first_response_p50_s"] == 3.0
    assert totals["fallback_rate"] == 0.75  # fallback, failed mid-turn, every deployment failed: 3 of 4
    assert len(data["days"]) == 14
    assert sorted(data["channels"]) == ["instagram", "whatsapp"]

    assert page.status_code == 200
    assert page.text.count("<svg") == 7  # one chart per question
    chart = page.text.split('id="chart-conversations"', 1)[1].split("</svg>", 1)[0]
    assert chart.count('data-channel="whatsapp"') == 14 and chart.count('data-channel="instagram"') == 14
    assert '<strong id="kpi-ai_resolved">3</strong>' in page.text
    assert '<strong id="kpi-human_first_response_p50_s">2 min</strong>' in page.text
    assert '<strong id="kpi-fallback_rate">75%</strong>' in page.text


async def _logged_in_page(browser: Any, console_url: str, user: Any) -> Any:
    context = await browser.new_context(viewport={"width": 1366, "height": 900}, locale="en-US")
    context.set_default_timeout(15_000)
    page = await context.new_page()
    await page.goto(f"{console_url}/login")
    await page.fill("input[name=email]", user.email)
    await page.fill("input[name=password]", PASSWORD)
    await page.click("button[type=submit]")
    await page.wait_for_load_state("networkidle")
    return page


_OVERFLOWS = """() => {
    const bad = [];
    for (const svg of document.querySelectorAll('svg.chart')) {
        const [, , w, h] = svg.getAttribute('viewBox').split(' ').map(Number);
        const boxes = [];
        for (const t of svg.querySelectorAll('text')) {
            const b = t.getBBox();
            if (b.x < 0 || b.y < 0 || b.x + b.width > w + 0.5 || b.y + b.height > h + 0.5)
                bad.push(svg.id + ': cut: ' + t.textContent);
            for (const o of boxes)
                if (b.x < o.x + o.width && o.x < b.x + b.width && b.y < o.y + o.height && o.y < b.y + b.height)
                    bad.push(svg.id + ': overlaps: ' + t.textContent + ' / ' + o.text);
            boxes.push({x: b.x, y: b.y, width: b.width, height: b.height, text: t.textContent});
        }
    }
    return bad;
}"""


async def test_chart_labels_fit_and_never_overlap_in_a_browser(
    browser, console_url, screenshot, sessions, make_tenant
):  # type: ignore[no-untyped-def]
    tenant = await make_tenant()
    await _history(sessions, tenant)
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id)
    page = await _logged_in_page(browser, console_url, admin)
    for days in (7, 14, 90):
        await page.goto(f"{console_url}/t/{tenant.slug}/analytics?days={days}")
        assert await page.evaluate(_OVERFLOWS) == [], days
    await screenshot(page, "analytics")
    feedback = await page.locator("#kpis").inner_text()
    assert "👍" not in feedback or "Helpful" in feedback
