"""Teams in a real headless Chromium: an admin creates a team on the People page and adds an agent; a
waiting conversation is given to the team from the inbox and goes to the team's online agent (not the
least-loaded agent outside it), who is told on WhatsApp; the inbox filters by team."""

from __future__ import annotations

import os
import re

from switchboard.db.models import Conversation, HumanAgent, Role, utcnow
from switchboard.handoff.teams import list_teams

from tests.console.test_browser import _log_in
from tests.console.test_browser_people import DOCS_IMG
from tests.console.test_browser_workspace import _waiting
from tests.utils.console import new_user
from tests.utils.handoff import make_agent, make_customer_conversation, reload
from tests.utils.waiting import eventually
from tests.utils.whatsapp import sent_to
from tests.utils.workers import run_worker_burst


async def test_team_created_on_people_page_routes_and_filters_the_inbox_in_a_browser(
    console_url, page, console_settings, shop, sessions, graph_sandbox, screenshot
):
    tenant = shop.tenant
    outsider = await make_agent(sessions, tenant, "Idle Ivo", total=0, load=0)
    member = await make_agent(sessions, tenant, "Nia Costa", total=30, load=2)
    _, waiting = await make_customer_conversation(
        sessions, tenant, name="Wanda Waits", texts=("billing help",)
    )
    _, other = await make_customer_conversation(sessions, tenant, name="Otto Other", texts=("hours?",))
    async with sessions() as session, session.begin():
        (await session.get(Conversation, waiting.id)).channel_account_id = shop.account.id
        for agent in (outsider, member):
            (await session.get(HumanAgent, agent.id)).status = "offline"
    await _waiting(sessions, tenant, waiting.id, minutes=2)
    async with sessions() as session, session.begin():
        for agent in (outsider, member):
            stored = await session.get(HumanAgent, agent.id)
            stored.status, stored.last_inbound_at = "online", utcnow()  # her window is open
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id, name="Ada Admin")

    await _log_in(page, console_url, admin.email)
    await page.goto(f"{console_url}/t/{tenant.slug}/people")
    await page.fill("#team-form input[name=name]", "Billing")
    await page.get_by_role("button", name="Create team").click()
    await page.get_by_role("status").filter(has_text="The team Billing was created.").wait_for()
    row = page.locator('#teams tr[data-team="Billing"]')
    await row.get_by_label("Agent to add to Billing").select_option(label="Nia Costa")
    await row.get_by_role("button", name="Add to the team").click()
    await page.get_by_role("status").filter(has_text="Nia Costa is in the team Billing now.").wait_for()
    members = page.locator('#teams tr[data-team="Billing"] li[data-member]')
    assert [await m.get_attribute("data-member") for m in await members.all()] == ["Nia Costa"]
    await screenshot(page, "people-teams")
    if os.environ.get("UPDATE_DOCS_SCREENSHOTS"):  # docs/contributing.md: refresh the docs' pictures
        await page.locator("#teams").screenshot(path=str(DOCS_IMG / "people-teams.png"))
    async with sessions() as session:
        views = await list_teams(session, tenant_id=tenant.id)
    assert [(v.team.name, [a.id for a in v.members]) for v in views] == [("Billing", [member.id])]
    team_id = views[0].team.id

    # give the waiting conversation to the team from the inbox
    await page.goto(f"{console_url}/t/{tenant.slug}/inbox")
    inbox_row = page.locator("#inbox-rows tbody tr", has_text="Wanda Waits")
    await inbox_row.get_by_label(re.compile("Assign .* to")).select_option(label="Team: Billing")
    await inbox_row.get_by_role("button", name="Assign").click()
    await (
        page.get_by_role("status").filter(has_text="Given to the team Billing: Nia Costa has it.").wait_for()
    )
    given = await reload(sessions, Conversation, waiting.id)
    assert (given.status, given.assigned_agent_id, given.team_id) == ("human", member.id, team_id)
    assert (await reload(sessions, HumanAgent, outsider.id)).current_load == 0

    # the inbox's team filter shows the team's conversation only
    await page.locator("#inbox-filters select[name=team]").select_option(label="Billing")
    await page.wait_for_url(re.compile(rf"team={team_id}"))
    rows = page.locator("#inbox-rows tbody tr")
    await page.wait_for_function("document.querySelectorAll('#inbox-rows tbody tr').length === 1")
    assert "Wanda Waits" in await rows.nth(0).inner_text()
    assert await rows.nth(0).locator(".badge.team").inner_text() == "Billing"
    await screenshot(page, "inbox-team-filter")
    assert other.id  # Otto Other's conversation has no team: filtered out

    # the team's agent is told on WhatsApp
    await run_worker_burst(console_settings)

    def to_member() -> list[str]:
        sent = sent_to(graph_sandbox[1], shop.phone_number_id)
        return [m["text"] for m in sent if m["to"] == member.phone]

    await eventually(lambda: len(to_member()) == 1)
    assert to_member()[0].startswith("Assigned to you by Ada Admin.")
    assert not [m for m in sent_to(graph_sandbox[1], shop.phone_number_id) if m["to"] == outsider.phone]

    # the conversation page names the team
    await page.goto(f"{console_url}/t/{tenant.slug}/conversations/{waiting.id}")
    assert await page.locator("#team").inner_text() == "Team: Billing"
