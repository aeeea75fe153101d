"""The tool server trusts nothing: only the stored tool configuration counts, and every
call needs the per-turn capability the orchestrator signs; the service token alone reads nothing."""

from __future__ import annotations

import uuid

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from sqlmodel import select
from switchboard.db.models import Lead, PendingAction, SecurityAlert
from switchboard.tools.capability import CapabilityRejected, sign_capability, verify_capability
from switchboard.tools.toolbox import configure_tool

KEY = "k" * 32


def _sign(**overrides):  # type: ignore[no-untyped-def]
    values = dict(
        tenant_id=uuid.uuid4(),
        customer_id=uuid.uuid4(),
        conversation_id=uuid.uuid4(),
        trace_id="t1",
        tools=["lookup_product"],
    )
    values.update(overrides)
    return values, sign_capability(KEY, **values)


def test_a_capability_round_trips_and_says_what_it_covers():
    values, token = _sign()
    capability = verify_capability(KEY, token)
    assert (
        capability.tenant_id,
        capability.customer_id,
        capability.conversation_id,
        capability.trace_id,
    ) == (
        values["tenant_id"],
        values["customer_id"],
        values["conversation_id"],
        "t1",
    )
    assert capability.tools == frozenset({"lookup_product"})


@pytest.mark.parametrize(
    ("token", "reason"),
    [
        (None, "missing"),
        ("", "missing"),
        (
            sign_capability(
                "another key",
                tenant_id=uuid.uuid4(),
                customer_id=None,
                conversation_id=None,
                trace_id=None,
                tools=[],
            ),
            "bad_signature",
        ),
        (
            sign_capability(
                KEY,
                tenant_id=uuid.uuid4(),
                customer_id=None,
                conversation_id=None,
                trace_id=None,
                tools=[],
                ttl_s=1,
                now=1_000.0,
            ),
            "expired",
        ),
    ],
    ids=["none", "empty", "forged", "expired"],
)
def test_missing_forged_and_expired_capabilities_are_rejected(token, reason):
    with pytest.raises(CapabilityRejected) as caught:
        verify_capability(KEY, token)
    assert caught.value.reason == reason


def test_an_edited_capability_does_not_verify():
    _, token = _sign()
    payload, signature = token.rsplit(".", 1)
    with pytest.raises(CapabilityRejected, match="bad_signature"):
        verify_capability(KEY, payload[:-2] + "xx." + signature)


# --- through the running tool server (Streamable HTTP) ------------------------------------------


async def _call(url, settings, name, arguments):  # type: ignore[no-untyped-def]
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {settings.secret('mcp_service_token')}"})
    async with Client(streamable_http_client(url, http_client=http)) as client:
        return await client.call_tool(name, arguments)


def _ids(shop, trace="a" * 32):  # type: ignore[no-untyped-def]
    return {
        "tenant_id": str(shop.tenant_id),
        "customer_id": str(shop.customer_id),
        "conversation_id": str(shop.conversation_id),
        "trace_id": trace,
    }


def _capability(settings, shop, tools, trace="a" * 32, **overrides):  # type: ignore[no-untyped-def]
    values = dict(
        tenant_id=shop.tenant_id,
        customer_id=shop.customer_id,
        conversation_id=shop.conversation_id,
        trace_id=trace,
        tools=tools,
    )
    values.update(overrides)
    return sign_capability(settings.secret("tool_capability_key"), **values)


async def _alerts(sessions, tenant_id):  # type: ignore[no-untyped-def]
    async with sessions() as session:
        rows = await session.exec(select(SecurityAlert).where(SecurityAlert.tenant_id == tenant_id))
        return [(a.kind, a.details.get("reason")) for a in rows.all()]


async def test_the_service_token_alone_reads_nothing(mcp_server, settings, sessions, make_shop):
    url, _ = mcp_server
    shop = await make_shop()
    result = await _call(url, settings, "check_order_status", {"order_number": "A-1001", **_ids(shop)})
    assert result.is_error and result.content[0].text.endswith("[forbidden] Forbidden")
    assert await _alerts(sessions, shop.tenant_id) == [("capability_rejected", "missing")]


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"tools": ["lookup_product"]}, "tool_not_granted"),
        ({"customer_id": "other"}, "customer_mismatch"),
        ({"conversation_id": None}, "conversation_mismatch"),
        ({"trace_id": "b" * 32}, "trace_mismatch"),
        ({"tenant_id": "other"}, "tenant_mismatch"),
    ],
    ids=["ungranted-tool", "other-customer", "other-conversation", "other-trace", "other-tenant"],
)
async def test_a_capability_that_does_not_cover_the_call_is_refused(
    mcp_server, settings, sessions, make_shop, change, reason
):
    url, _ = mcp_server
    shop, other = await make_shop(), await make_shop()
    overrides = dict(change)
    if overrides.get("customer_id") == "other":
        overrides["customer_id"] = shop.other_customer_id
    if overrides.get("tenant_id") == "other":
        overrides["tenant_id"] = other.tenant_id
    tools = overrides.pop("tools", ["check_order_status"])
    capability = _capability(settings, shop, tools, **overrides)
    result = await _call(
        url,
        settings,
        "check_order_status",
        {"order_number": "A-1001", **_ids(shop), "capability": capability},
    )
    assert result.is_error and result.content[0].text.endswith("[forbidden] Forbidden")
    assert await _alerts(sessions, shop.tenant_id) == [("capability_rejected", reason)]


async def test_a_covering_capability_is_served(mcp_server, settings, sessions, make_shop):
    url, _ = mcp_server
    shop = await make_shop()
    capability = _capability(settings, shop, ["check_order_status"])
    result = await _call(
        url,
        settings,
        "check_order_status",
        {"order_number": "A-1001", **_ids(shop), "capability": capability},
    )
    assert not result.is_error and result.structured_content["status"] == "shipped"


@pytest.mark.parametrize("sent_config", [{}, {"needs_approval": False}], ids=["empty", "approval-off"])
async def test_a_caller_sent_tool_config_never_replaces_the_stored_one(
    mcp_server, settings, sessions, make_shop, sent_config
):
    url, _ = mcp_server
    shop = await make_shop()
    async with sessions() as session, session.begin():
        await configure_tool(session, shop.tenant_id, "create_lead", {"needs_approval": True})
    arguments = {
        "interest": "bulk order",
        **_ids(shop),
        "idempotency_key": f"k-{uuid.uuid4()}",
        "tool_config": sent_config,
        "capability": _capability(settings, shop, ["create_lead"]),
    }
    result = await _call(url, settings, "create_lead", arguments)
    assert not result.is_error and result.structured_content["status"] == "pending_approval"
    async with sessions() as session:
        leads = (await session.exec(select(Lead).where(Lead.tenant_id == shop.tenant_id))).all()
        pending = (
            await session.exec(select(PendingAction).where(PendingAction.tenant_id == shop.tenant_id))
        ).all()
    assert leads == [] and [p.tool_name for p in pending] == ["create_lead"]
