"""Sending through the Graph API (sandbox), splitting, the 24-hour window, statuses → outbox."""

from __future__ import annotations

import uuid

import httpx
import pytest
from sqlmodel import select
from switchboard.channels.whatsapp.send import GraphClient, GraphSendError
from switchboard.db.models import Conversation, Customer, Outbox

from tests.utils.whatsapp import channel_service, load_payload
from tests.utils.workers import run_worker_burst

OUT_01 = "wamid.HBgLMTU1NTAxMDAwOTkVAgARGBI0RUZBMDAwMDAwMDAwMDAwMDEA"
OUT_03 = "wamid.HBgLMTU1NTAxMDAwOTkVAgARGBI0RUZBMDAwMDAwMDAwMDAwMDMA"
OUT_08 = "wamid.HBgLMTU1NTAxMDAwOTkVAgARGBI0RUZBMDAwMDAwMDAwMDAwMDgA"


async def test_graph_client_against_sandbox(graph_sandbox) -> None:  # type: ignore[no-untyped-def]
    base, sandbox = graph_sandbox
    client = GraphClient(base, "v23.0")
    to = "1555" + uuid.uuid4().hex[:8]
    try:
        wamid = await client.send_text(
            phone_number_id="106000000000777", token="t", to=to, text="héllo 🌵", reply_to="wamid.X"
        )
        assert wamid.startswith("wamid.SANDBOX")
        recorded = [m for m in sandbox.sent if m["to"] == to]
        assert [(m["text"], m["reply_to"], m["body"]["messaging_product"]) for m in recorded] == [
            ("héllo 🌵", "wamid.X", "whatsapp")
        ]
        async with httpx.AsyncClient() as http:
            for code, status in ((131047, 400), (131026, 400), (131000, 500), (130429, 400)):
                await http.post(
                    f"{base}/_control/failures", json={"to": to, "code": code, "http_status": status}
                )
        outcomes = []
        for _ in range(4):
            with pytest.raises(GraphSendError) as info:
                await client.send_text(phone_number_id="106000000000777", token="t", to=to, text="again")
            outcomes.append((info.value.code, info.value.is_transient))
        assert outcomes == [(131047, False), (131026, False), (131000, True), (130429, True)]
    finally:
        await client.aclose()


async def test_graph_client_network_error_is_transient() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    client = GraphClient("https://graph.example", "v23.0", transport=httpx.MockTransport(refuse))
    with pytest.raises(GraphSendError) as info:
        await client.send_text(phone_number_id="1", token="t", to="2", text="x")
    await client.aclose()
    assert info.value.is_transient and info.value.code is None


async def test_statuses_update_outbox_monotonically(make_settings, wa_tenant, sessions) -> None:  # type: ignore[no-untyped-def]
    tenant_id = wa_tenant.tenant.id
    async with sessions() as session, session.begin():
        customer = Customer(
            tenant_id=tenant_id, channel="whatsapp", external_user_id="15550100099", phone="15550100099"
        )
        session.add(customer)
        await session.flush()
        conversation = Conversation(tenant_id=tenant_id, customer_id=customer.id, channel="whatsapp")
        session.add(conversation)
        await session.flush()
        for index, wamid in enumerate((OUT_01, OUT_03, OUT_08)):
            session.add(
                Outbox(
                    tenant_id=tenant_id,
                    conversation_id=conversation.id,
                    part_index=index,
                    channel="whatsapp",
                    recipient="15550100099",
                    payload={"type": "text", "text": "hi"},
                    status="pending",
                    external_id=wamid,
                )
            )
    settings = make_settings()
    pid = wa_tenant.phone_number_id
    async with channel_service(settings) as svc:
        for name in (
            "status_sent.json",
            "status_read.json",
            "status_delivered.json",
            "batch_multiple_messages_and_status.json",
            "status_failed_131047_reengagement.json",
            "status_sent_with_biz_opaque_callback_data.json",
        ):
            assert (await svc.post(load_payload(name, phone_number_id=pid))).status_code == 200
            await run_worker_burst(settings)
    async with sessions() as session:
        rows = {
            o.external_id: o
            for o in (await session.exec(select(Outbox).where(Outbox.tenant_id == tenant_id))).all()
        }
        conversation = await session.get(Conversation, conversation.id)
    assert rows[OUT_01].status == "read"  # a late "delivered" never undoes "read"
    assert (rows[OUT_03].status, rows[OUT_03].error_code) == ("failed", "131047")
    assert rows[OUT_08].status == "sent"
    assert conversation.escalation_reason.startswith("whatsapp 131047")
