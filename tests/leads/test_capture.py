"""Lead capture after each turn: the offline heuristic (and its mark on the lead), once per conversation
however many turns show intent, ``lead.created`` in the same transaction, the check inside the turn's
transaction failing alone (savepoint), the model check's strict
schema, the admin API and the CLI."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
from sqlmodel import select
from switchboard.conversations import append_message
from switchboard.db.engine import session_scope
from switchboard.db.models import Customer, EventOutbox, Lead
from switchboard.leads import OFFLINE_HEURISTIC, capture_lead, capture_lead_in, heuristic_intent
from switchboard.leads.intent import parse_model_verdict

from tests.utils.agent import answer_with_script, make_conversation, text


async def _leads(sessions, tenant_id):  # type: ignore[no-untyped-def]
    async with sessions() as session:
        return list((await session.exec(select(Lead).where(Lead.tenant_id == tenant_id))).all())


async def test_buying_intent_records_one_lead_with_the_offline_heuristic_and_tells_the_tenant(
    sessions, make_tenant, orchestrator, offline_model
) -> None:  # type: ignore[no-untyped-def]
    tenant = await make_tenant()
    script = await answer_with_script(sessions, tenant.id, offline_model)
    handle = await make_conversation(sessions, tenant)
    script.push(text("Hello! How can I help?"))
    await orchestrator.handle_turn(handle.request("hi there"))
    assert await _leads(sessions, tenant.id) == []  # no intent yet
    script.default = text("It is 129 EUR.")
    await orchestrator.handle_turn(handle.request("I want to buy the DN50 valve, please call me"))
    await orchestrator.handle_turn(handle.request("and I'd like a quote for 10"))
    (lead,) = await _leads(sessions, tenant.id)
    assert (lead.source, lead.detected_by, lead.consent, lead.conversation_id) == (
        "intent",
        OFFLINE_HEURISTIC,
        "granted",
        handle.conversation.id,
    )
    assert lead.summary == "Customer asked: I want to buy the DN50 valve, please call me"
    assert lead.notes == "Detected by a keyword heuristic: no provider model is configured (offline model)."
    assert len(script.requests) == 3  # the heuristic spent no model call
    async with sessions() as session:
        events = (
            await session.exec(
                select(EventOutbox).where(
                    EventOutbox.tenant_id == tenant.id, EventOutbox.event_type == "lead.created"
                )
            )
        ).all()
    assert [e.payload["data"]["lead_id"] for e in events] == [str(lead.id)]


async def test_concurrent_checks_record_the_lead_once(
    sessions, make_tenant, orchestrator, offline_model
) -> None:  # type: ignore[no-untyped-def]
    tenant = await make_tenant()
    await answer_with_script(sessions, tenant.id, offline_model)
    handle = await make_conversation(sessions, tenant)
    await orchestrator.handle_turn(handle.request("how much is it? is it in stock?"))
    async with sessions() as session, session.begin():
        for lead in (await session.exec(select(Lead).where(Lead.tenant_id == tenant.id))).all():
            await session.delete(lead)
    results = await asyncio.gather(
        *(
            capture_lead(
                sessions,
                tenant_id=tenant.id,
                conversation_id=handle.conversation.id,
                customer_id=handle.customer.id,
                window_messages=8,
                model_check=None,
                trace_id="t",
            )
            for _ in range(4)
        )
    )
    assert sum(r is not None for r in results) == 1
    assert len(await _leads(sessions, tenant.id)) == 1


async def test_an_opted_out_customer_is_recorded_with_consent_denied(
    sessions, make_tenant, orchestrator, offline_model
) -> None:  # type: ignore[no-untyped-def]
    tenant = await make_tenant()
    await answer_with_script(sessions, tenant.id, offline_model)
    handle = await make_conversation(sessions, tenant)
    async with sessions() as session, session.begin():
        customer = await session.get(Customer, handle.customer.id)
        customer.profile = {"marketing_opt_out": {"at": "2026-12-01T00:00:00+00:00"}}
        session.add(customer)
    await orchestrator.handle_turn(handle.request("Quiero comprar dos, llámame"))
    (lead,) = await _leads(sessions, tenant.id)
    assert lead.consent == "denied"


async def test_the_lead_check_in_the_turns_transaction_fails_alone_in_its_savepoint(
    sessions, make_tenant, orchestrator, offline_model
) -> None:  # type: ignore[no-untyped-def]
    tenant = await make_tenant()
    await answer_with_script(sessions, tenant.id, offline_model)
    handle = await make_conversation(sessions, tenant)
    await orchestrator.handle_turn(handle.request("hello"))
    ids = {
        "tenant_id": tenant.id,
        "conversation_id": handle.conversation.id,
        "customer_id": handle.customer.id,
    }
    async with session_scope(sessions) as session:
        customer = await session.get(Customer, handle.customer.id)
        customer.profile = {"written": "before the lead check"}
        session.add(customer)
        # LIMIT -1: PostgreSQL refuses the window's query, inside the savepoint
        assert await capture_lead_in(session, **ids, window_messages=-1, trace_id="t") is None
        customer.profile = {"written": "before and after the failed lead check"}
        session.add(customer)
    async with sessions() as session:
        assert (await session.get(Customer, handle.customer.id)).profile == {
            "written": "before and after the failed lead check"
        }
    assert await _leads(sessions, tenant.id) == []
    # the same call with a valid window stages the lead and its event in the caller's transaction
    async with session_scope(sessions) as session:
        append_message(
            session,
            conversation=handle.conversation,
            role="user",
            direction="inbound",
            text="I want to buy the DN50 valve",
        )
        lead = await capture_lead_in(session, **ids, window_messages=8, trace_id="t")
        assert lead is not None and lead.detected_by == OFFLINE_HEURISTIC
        assert await _leads(sessions, tenant.id) == []  # not committed yet: another session sees nothing
    (stored,) = await _leads(sessions, tenant.id)
    assert (stored.id, stored.summary, stored.interest) == (lead.id, lead.summary, lead.interest)
    async with sessions() as session:
        events = (
            await session.exec(
                select(EventOutbox).where(
                    EventOutbox.tenant_id == tenant.id, EventOutbox.event_type == "lead.created"
                )
            )
        ).all()
    assert [e.payload["data"]["lead_id"] for e in events] == [str(lead.id)]


def test_heuristic_reads_the_chosen_option_as_the_product() -> None:
    verdict = heuristic_intent(
        [
            {"role": "assistant", "content": "Which size?"},
            {"role": "user", "content": "Large [chose option id: size_l]"},
            {"role": "user", "content": "I'll take it"},
        ],
        opted_out=False,
    )
    assert (verdict.buying_intent, verdict.product, verdict.consent) == (True, "Large", "unknown")
    assert not heuristic_intent(
        [{"role": "user", "content": "what are your opening hours?"}], opted_out=False
    ).buying_intent


@pytest.mark.parametrize(
    "text",
    [
        "how much is shipping to Canada?",
        "How much does delivery cost to Lyon?",
        "¿Cuánto cuesta el envío a Canadá?",
        "what's the postage price for 2 kg?",
    ],
)
def test_a_shipping_or_delivery_cost_question_is_not_buying_intent(text: str) -> None:
    assert not heuristic_intent([{"role": "user", "content": text}], opted_out=False).buying_intent


@pytest.mark.parametrize(
    "text",
    [
        "how much is the X-200, and is it in stock?",
        "I want to buy two, how much is shipping to Canada?",
        "¿Cuánto cuesta el X-200? ¿Está disponible?",
        "is the blue one in stock? any discount with delivery to Canada?",
    ],
)
def test_a_price_or_stock_question_about_the_product_is_still_buying_intent(text: str) -> None:
    assert heuristic_intent([{"role": "user", "content": text}], opted_out=False).buying_intent


def test_the_model_verdict_must_match_the_schema() -> None:
    ok = parse_model_verdict(
        '```json\n{"buying_intent": true, "product": "DN50", "summary": "wants 3", "consent": "unknown"}\n```'
    )
    assert ok is not None and ok.product == "DN50"
    assert parse_model_verdict('{"buying_intent": "yes"}') is None
    assert parse_model_verdict('{"buying_intent": true, "extra": 1}') is None
    assert parse_model_verdict("no json here") is None


async def test_leads_are_listed_by_the_admin_api_and_the_cli(
    sessions, make_tenant, orchestrator, offline_model, orchestrator_url, settings, cli
) -> None:  # type: ignore[no-untyped-def]
    tenant = await make_tenant()
    await answer_with_script(sessions, tenant.id, offline_model)
    handle = await make_conversation(sessions, tenant)
    await orchestrator.handle_turn(handle.request("can I order one? send me a quote"))
    headers = {"Authorization": f"Bearer {settings.secret('admin_token')}"}
    async with httpx.AsyncClient(base_url=orchestrator_url) as client:
        listed = (await client.get(f"/v1/admin/tenants/{tenant.slug}/leads", headers=headers)).json()
        unauthorized = await client.get(f"/v1/admin/tenants/{tenant.slug}/leads")
        openapi = (await client.get("/openapi.json")).json()
    assert unauthorized.status_code == 401
    assert [(lead["source"], lead["detected_by"]) for lead in listed] == [("intent", OFFLINE_HEURISTIC)]
    assert "lead.created" in openapi["webhooks"]
    result = await cli.arun("leads", "list", "--tenant", tenant.slug, "--json")
    assert result.exit_code == 0, result.output
    (row,) = [json.loads(line) for line in result.output.splitlines()]
    assert row["id"] == listed[0]["id"] and row["consent"] == "unknown"


async def test_webhooks_admin_api_refuses_private_urls_and_shows_the_secret_once(
    make_tenant, orchestrator_url, settings
) -> None:  # type: ignore[no-untyped-def]
    tenant = await make_tenant()
    headers = {"Authorization": f"Bearer {settings.secret('admin_token')}"}
    base = f"/v1/admin/tenants/{tenant.slug}/webhooks"
    async with httpx.AsyncClient(base_url=orchestrator_url) as client:
        refused = await client.post(base, json={"url": "https://192.168.1.10/hook"}, headers=headers)
        created = await client.post(
            base, json={"url": "https://93.184.215.14/hook", "event_types": ["lead.created"]}, headers=headers
        )
        listed = (await client.get(base, headers=headers)).json()
        disabled = await client.patch(
            f"{base}/{created.json()['id']}", json={"is_active": False}, headers=headers
        )
        log = await client.get(f"{base}/{created.json()['id']}/deliveries", headers=headers)
    assert (
        refused.status_code == 422
        and "address policy refused 192.168.1.10: it is a private address" in refused.json()["detail"]
    )
    assert created.status_code == 201 and created.json()["secret"].startswith("whsec_")
    assert "secret" not in listed[0] and listed[0]["event_types"] == ["lead.created"]
    assert (
        disabled.json()["is_active"] is False and disabled.json()["disabled_reason"] == "disabled by an admin"
    )
    assert log.status_code == 200 and log.json() == []


async def test_a_turn_without_intent_reads_nothing_for_the_lead_check_and_one_with_intent_still_records(
    sessions, engine, make_tenant, orchestrator, offline_model
) -> None:  # type: ignore[no-untyped-def]
    """The heuristic runs first on the rows the turn holds (history, inbound row, its own replies): no
    intent, or a lead already there at the claim, and the persist transaction opens no savepoint for the
    lead check; intent, and the check runs in the database as before (one savepoint, one lead)."""
    from sqlalchemy import event

    statements: list[str] = []

    def seen(conn, cursor, statement, parameters, context, executemany) -> None:  # type: ignore[no-untyped-def]
        statements.append(statement)

    tenant = await make_tenant()
    script = await answer_with_script(sessions, tenant.id, offline_model)
    script.default = text("Sure, happy to help.")
    handle = await make_conversation(sessions, tenant)
    event.listen(engine.sync_engine, "before_cursor_execute", seen)
    try:

        async def savepoints_of(words: str) -> int:
            statements.clear()
            await orchestrator.handle_turn(handle.request(words))
            return sum(s.lstrip().upper().startswith("SAVEPOINT") for s in statements)

        assert await savepoints_of("hi, what are your opening hours?") == 0
        assert await _leads(sessions, tenant.id) == []
        assert await savepoints_of("I want to buy the DN50 valve, please call me") == 1
        (lead,) = await _leads(sessions, tenant.id)
        assert lead.summary == "Customer asked: I want to buy the DN50 valve, please call me"
        # the conversation has its lead: a turn with intent again costs the lead check nothing
        assert await savepoints_of("and I'd like a quote for 10") == 0
    finally:
        event.remove(engine.sync_engine, "before_cursor_execute", seen)
    assert [row.id for row in await _leads(sessions, tenant.id)] == [lead.id]
