"""Each business tool against the real Postgres, through the server's contract enforcement (no HTTP)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from mcp.server.mcpserver.exceptions import ToolError
from sqlmodel import select
from switchboard.db.models import AuditLog, Lead, Meeting, MeetingSlot, PendingAction, SecurityAlert
from switchboard.tools.business import BUSINESS_TOOLS, haversine_km
from switchboard.tools.capability import sign_capability
from switchboard.tools.server import ToolServer
from switchboard.tools.toolbox import configure_tool, set_enabled

CONTRACTS = {c.name: c for c in BUSINESS_TOOLS}


@pytest.fixture
def server(sessions, settings):
    server = ToolServer()
    server.sessions, server.settings = sessions, settings
    return server


_UNSET = object()
_CAPABILITY_KEY: list[str] = []


@pytest.fixture(autouse=True)
def _capability_key(settings) -> None:  # type: ignore[no-untyped-def]
    """The key the server verifies with (``server.settings`` is the session's settings)."""
    _CAPABILITY_KEY[:] = [settings.secret("tool_capability_key")]


def injected(
    shop,
    *,
    key: str | None = None,
    trace: str = "t" * 32,
    customer=True,
    tenant_id=_UNSET,
    customer_id=_UNSET,
) -> dict:  # type: ignore[no-untyped-def]
    """What the orchestrator injects for ``shop``'s conversation (or the ids given), with a capability
    signed for those ids granting every tool."""
    tenant = shop.tenant_id if tenant_id is _UNSET else tenant_id
    customer_ref = (shop.customer_id if customer else None) if customer_id is _UNSET else customer_id
    return {
        "tenant_id": str(tenant) if tenant else None,
        "customer_id": str(customer_ref) if customer_ref else None,
        "conversation_id": str(shop.conversation_id),
        "trace_id": trace,
        "idempotency_key": key,
        "tool_config": None,
        "capability": sign_capability(
            _CAPABILITY_KEY[0],
            tenant_id=tenant or shop.tenant_id,
            customer_id=customer_ref,
            conversation_id=shop.conversation_id,
            trace_id=trace,
            tools=CONTRACTS,
        ),
    }


async def run(server, name, args, inj):
    return await server.run(CONTRACTS[name], args, inj)


async def test_lookup_product_exact_sku_never_returns_near_neighbour(server, make_shop):
    shop = await make_shop()
    result = await run(server, "lookup_product", {"sku_or_name": "fvam-2050-b"}, injected(shop))
    assert result.match == "exact_sku"
    assert [p.sku for p in result.products] == ["FVAM-2050-B"]
    assert result.products[0].price == Decimal("89.90") and result.products[0].in_stock is True

    chrome = await run(server, "lookup_product", {"sku_or_name": "FVAM-2050-C"}, injected(shop))
    assert [p.sku for p in chrome.products] == ["FVAM-2050-C"] and chrome.products[0].in_stock is False

    missing = await run(server, "lookup_product", {"sku_or_name": "FVAM-2050-D"}, injected(shop))
    assert missing.match == "none" and missing.products == []

    by_name = await run(server, "lookup_product", {"sku_or_name": "humidifier"}, injected(shop))
    assert by_name.match == "name" and [p.sku for p in by_name.products] == ["HMD-100"]


async def test_lookup_product_is_tenant_scoped(server, make_shop, make_tenant, sessions):
    shop = await make_shop()
    other = await make_tenant("Empty")
    async with sessions() as session, session.begin():
        await set_enabled(session, other.id, "lookup_product", enabled=True)
    inj = injected(shop, tenant_id=other.id)
    result = await run(server, "lookup_product", {"sku_or_name": "FVAM-2050-B"}, inj)
    assert result.match == "none" and result.products == []


async def test_check_order_status_never_reveals_another_customers_order(server, make_shop):
    shop = await make_shop()
    mine = await run(server, "check_order_status", {"order_number": "#a-1001"}, injected(shop))
    assert mine.found is True and mine.status == "shipped" and mine.tracking_number == "1Z999AA10123456784"

    theirs = await run(server, "check_order_status", {"order_number": "A-1003"}, injected(shop))
    nonexistent = await run(server, "check_order_status", {"order_number": "A-9999"}, injected(shop))
    assert theirs.found is False and theirs.status is None and theirs.total is None
    assert theirs.model_dump(exclude={"order_number"}) == nonexistent.model_dump(exclude={"order_number"})

    bob = injected(shop, customer_id=shop.other_customer_id)
    assert (await run(server, "check_order_status", {"order_number": "A-1003"}, bob)).status == "paid"

    with pytest.raises(ToolError, match=r"^\[missing_customer\]"):
        await run(server, "check_order_status", {"order_number": "A-1001"}, injected(shop, customer=False))


async def test_find_store_by_city_and_by_coordinates(server, make_shop):
    shop = await make_shop()
    city = await run(server, "find_store", {"city_or_coordinates": "springfield"}, injected(shop))
    assert [s.name for s in city.stores] == ["Demo Shop Downtown", "Demo Shop Riverside"]
    assert city.stores[0].opening_hours["sun"] == "closed"

    near = await run(server, "find_store", {"city_or_coordinates": "41.88,-87.63"}, injected(shop))
    assert near.stores[0].name == "Demo Shop Lakeside"
    assert near.stores[0].distance_km == pytest.approx(
        round(haversine_km(41.88, -87.63, 41.8781, -87.6298), 1)
    )
    assert [s.distance_km for s in near.stores] == sorted(s.distance_km for s in near.stores)

    with pytest.raises(ToolError, match=r"^\[invalid_arguments\]"):
        await run(server, "find_store", {"city_or_coordinates": "95,10"}, injected(shop))


async def _free_slot(sessions, tenant_id) -> MeetingSlot:
    async with sessions() as session:
        slots = (
            await session.exec(
                select(MeetingSlot).where(MeetingSlot.tenant_id == tenant_id, MeetingSlot.is_booked == False)  # noqa: E712
            )
        ).all()
    return min(slots, key=lambda s: s.starts_at)


async def test_schedule_meeting_is_idempotent_and_audited(server, make_shop, sessions):
    shop = await make_shop()
    slot = await _free_slot(sessions, shop.tenant_id)
    args = {"slot": slot.starts_at.isoformat(), "topic": "fan installation"}
    first = await run(server, "schedule_meeting", args, injected(shop, key="k-meeting-1"))
    again = await run(server, "schedule_meeting", args, injected(shop, key="k-meeting-1"))
    assert first.status == "done" and first.meeting_id and first.replayed is False
    assert again.meeting_id == first.meeting_id and again.replayed is True

    async with sessions() as session:
        meetings = (await session.exec(select(Meeting).where(Meeting.tenant_id == shop.tenant_id))).all()
        audits = (
            await session.exec(
                select(AuditLog).where(
                    AuditLog.tenant_id == shop.tenant_id, AuditLog.action == "schedule_meeting"
                )
            )
        ).all()
        booked = await session.get(MeetingSlot, slot.id)
    assert [m.customer_id for m in meetings] == [shop.customer_id]
    assert len(audits) == 1 and audits[0].details["after"]["meeting_id"] == first.meeting_id
    assert audits[0].details["before"] == {"is_booked": False} and booked.is_booked is True

    taken = await run(server, "schedule_meeting", args, injected(shop, key="k-meeting-2"))
    assert taken.meeting_id is None and taken.free_slots and slot.starts_at not in taken.free_slots


async def test_create_lead_writes_audit_row_in_the_same_transaction(server, make_shop, sessions):
    shop = await make_shop()
    result = await run(
        server, "create_lead", {"interest": "10 fans for an office"}, injected(shop, key="k-lead")
    )
    assert result.status == "done"
    async with sessions() as session:
        lead = await session.get(Lead, uuid.UUID(result.lead_id))
        audit = (await session.exec(select(AuditLog).where(AuditLog.target_id == result.lead_id))).one()
    assert lead.interest == "10 fans for an office" and lead.customer_id == shop.customer_id
    assert audit.actor == "model" and audit.action == "create_lead" and audit.trace_id == "t" * 32


async def test_mutation_and_audit_roll_back_together(server, make_shop, sessions):
    """The audit row cannot be stored (trace id too long for its column): the lead is not stored either."""
    shop = await make_shop()
    with pytest.raises(ToolError, match=r"^\[unavailable\]"):
        await run(server, "create_lead", {"interest": "x"}, injected(shop, key="k-rollback", trace="x" * 200))
    async with sessions() as session:
        leads = (await session.exec(select(Lead).where(Lead.tenant_id == shop.tenant_id))).all()
        audits = (
            await session.exec(
                select(AuditLog).where(AuditLog.tenant_id == shop.tenant_id, AuditLog.actor == "model")
            )
        ).all()
    assert leads == [] and audits == []


async def test_write_needing_approval_creates_pending_action_instead(server, make_shop, sessions):
    shop = await make_shop()
    async with sessions() as session, session.begin():
        await configure_tool(session, shop.tenant_id, "create_lead", {"needs_approval": True})
    inj = {**injected(shop, key="k-approve"), "tool_config": {"needs_approval": True}}
    result = await run(server, "create_lead", {"interest": "bulk order"}, inj)
    assert result.status == "pending_approval" and result.lead_id is None
    async with sessions() as session:
        action = await session.get(PendingAction, uuid.UUID(result.pending_action_id))
        leads = (await session.exec(select(Lead).where(Lead.tenant_id == shop.tenant_id))).all()
    assert action.tool_name == "create_lead" and action.arguments["interest"] == "bulk order"
    assert action.status == "pending" and leads == []


async def test_refuses_without_tenant_and_fails_closed_for_disabled_tool(server, make_shop, sessions):
    shop = await make_shop()
    no_tenant = {**injected(shop), "tenant_id": None}
    with pytest.raises(ToolError, match=r"^\[missing_tenant\] tenant_id is required"):
        await run(server, "lookup_product", {"sku_or_name": "FVAM-2050-B"}, no_tenant)
    with pytest.raises(ToolError, match=r"^\[missing_tenant\]"):
        await run(server, "lookup_product", {"sku_or_name": "x"}, injected(shop, tenant_id=uuid.uuid4()))

    async with sessions() as session, session.begin():
        await set_enabled(session, shop.tenant_id, "find_store", enabled=False)
    with pytest.raises(ToolError, match=r"^\[forbidden\] Forbidden$"):
        # invalid arguments too: a forbidden tool answers Forbidden before anything else
        await run(server, "find_store", {"bogus": 1}, injected(shop, trace="f" * 32))
    async with sessions() as session:
        alert = (
            await session.exec(select(SecurityAlert).where(SecurityAlert.tenant_id == shop.tenant_id))
        ).one()
    assert alert.kind == "tool_forbidden" and alert.details["tool_name"] == "find_store"
    assert alert.trace_id == "f" * 32

    with pytest.raises(ToolError, match=r"^\[missing_idempotency_key\]"):
        await run(server, "create_lead", {"interest": "x"}, injected(shop, key=None))


async def test_search_knowledge_base_full_text_is_tenant_and_active_filtered(
    server, make_shop, make_tenant, sessions
):
    from switchboard.db.models import KnowledgeDocument, KnowledgeSource

    shop = await make_shop()
    other = await make_tenant()
    async with sessions() as session, session.begin():
        for tenant_id, filename, text, active in (
            (shop.tenant_id, "faq.txt", "Returns are accepted within 30 days with the receipt.", True),
            (shop.tenant_id, "old-faq.txt", "Old policy: returns within 14 days.", False),
            (other.id, "faq.txt", "Other tenant: returns within 90 days.", True),
        ):
            source = KnowledgeSource(tenant_id=tenant_id, filename=filename, content_hash="h", status="ready")
            session.add(source)
            await session.flush()
            session.add(
                KnowledgeDocument(
                    tenant_id=tenant_id, source_id=source.id, text=text, content_hash="c", is_active=active
                )
            )
    result = await run(
        server, "search_knowledge_base", {"query": "how many days for returns?"}, injected(shop)
    )
    assert [p.text for p in result.passages] == ["Returns are accepted within 30 days with the receipt."]
    exact = await run(server, "search_knowledge_base", {"query": "30 days", "mode": "exact"}, injected(shop))
    assert len(exact.passages) == 1 and exact.passages[0].document == "faq.txt"
    nothing = await run(server, "search_knowledge_base", {"query": "warranty"}, injected(shop))
    assert nothing.passages == []


async def test_slot_in_the_past_window_lists_free_slots(server, make_shop):
    shop = await make_shop()
    args = {"slot": (datetime.now(UTC) - timedelta(days=3)).isoformat(), "topic": "x"}
    result = await run(server, "schedule_meeting", args, injected(shop, key="k-past"))
    assert result.meeting_id is None and len(result.free_slots) == 5
    assert all(s > datetime.now(UTC) for s in result.free_slots)


async def test_two_customers_racing_for_one_slot_book_it_once(server, make_shop, sessions):
    import asyncio

    shop = await make_shop()
    slot = await _free_slot(sessions, shop.tenant_id)
    args = {"slot": slot.starts_at.isoformat(), "topic": "demo"}
    bob = injected(shop, key="k-bob", customer_id=shop.other_customer_id)
    results = await asyncio.gather(
        run(server, "schedule_meeting", args, injected(shop, key="k-alice")),
        run(server, "schedule_meeting", args, bob),
        return_exceptions=True,
    )
    booked = [r for r in results if not isinstance(r, BaseException) and r.meeting_id]
    refused = [r for r in results if r not in booked]
    assert len(booked) == 1 and len(refused) == 1
    loser = refused[0]  # skipped the locked slot ("not free"), or lost the insert race ("[conflict]")
    if isinstance(loser, ToolError):
        assert str(loser).startswith("[conflict]")
    else:
        assert loser.meeting_id is None and loser.message.startswith("that slot is not free")
    async with sessions() as session:
        meetings = (await session.exec(select(Meeting).where(Meeting.slot_id == slot.id))).all()
    assert len(meetings) == 1
