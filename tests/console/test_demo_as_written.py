"""The demo works as the README writes it: the example customer owns the order it asks about, the
demo orders are dated around today, a simulated turn is not shown as a WhatsApp conversation, and the
Quick start ends with "Go live", pointing to the going-live guide."""

from __future__ import annotations

import csv
import io
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

from switchboard.agent.simulate import prepare_request
from switchboard.db.models import Role
from switchboard.seed import DEMO_CUSTOMER_BSUID, SIMULATED_CUSTOMER, demo_orders_csv

from tests.utils.console import log_in, new_user
from tests.utils.handoff import make_customer_conversation

README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_readme_example_asks_about_the_simulated_customers_own_order():
    readme = README.read_text(encoding="utf-8")
    asked = re.search(r'switchboard simulate "Where is my order (A-\d+)\?"', readme).group(1)
    orders = {row["order_number"]: row for row in csv.DictReader(io.StringIO(demo_orders_csv()))}
    assert orders[asked]["customer"] == SIMULATED_CUSTOMER == "simulate:demo-customer"
    assert orders["A-1001"]["customer"] == orders["A-1002"]["customer"] == DEMO_CUSTOMER_BSUID


def test_demo_orders_are_dated_around_today():
    now = datetime(2031, 3, 10, 8, 30, tzinfo=UTC)
    orders = {row["order_number"]: row for row in csv.DictReader(io.StringIO(demo_orders_csv(now)))}
    shipped = orders["A-1004"]
    assert shipped["status"] == "shipped" and shipped["estimated_delivery"] == "2031-03-12T18:00:00Z"
    assert shipped["placed_at"] == "2031-03-07T12:00:00Z"
    delivered = orders["A-1002"]
    assert delivered["status"] == "delivered" and delivered["estimated_delivery"] < now.strftime("%Y-%m-%d")
    today = demo_orders_csv()
    soon = (datetime.now(UTC) + timedelta(days=2)).strftime("%Y-%m-%d")
    assert f"{soon}T18:00:00Z" in today  # whenever the demo runs, the shipped orders arrive in two days


def test_the_quick_start_ends_with_go_live_pointing_to_the_guide():
    readme = README.read_text(encoding="utf-8")
    headings = re.findall(r"^## (.+)$", readme, re.M)
    assert headings[headings.index("Quick start") : headings.index("Go live") + 1] == [
        "Quick start",
        "A five-line demo",
        "Go live",
    ]
    section = readme.split("## Go live", 1)[1].split("\n## ", 1)[0]
    assert "[Going live](docs/going-live.md)" in section


async def test_a_simulated_turn_is_not_shown_as_a_whatsapp_conversation(
    console_client, sessions, make_tenant, settings, database_url
):
    tenant = await make_tenant()
    request = await prepare_request(
        settings,
        database_url,
        tenant=tenant.slug,
        customer="demo-customer",
        text="hola",
        new_conversation=True,
    )
    _, real = await make_customer_conversation(sessions, tenant, name="Ana Lima")
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id)
    async with console_client(**{"Accept-Language": "es"}) as client:
        await log_in(client, admin)
        inbox = (await client.get(f"/t/{tenant.slug}/inbox")).text
        simulated = (await client.get(f"/t/{tenant.slug}/conversations/{request.conversation_id}")).text
        whatsapp = (await client.get(f"/t/{tenant.slug}/conversations/{real.id}")).text
    assert '<span class="badge ch-simulated">simulado</span>' in inbox
    assert '<span class="badge ch-whatsapp">WhatsApp</span>' in inbox
    assert '<span class="badge ch-simulated" id="channel">simulado</span>' in simulated
    assert '<span class="badge ch-whatsapp" id="channel">WhatsApp</span>' in whatsapp
