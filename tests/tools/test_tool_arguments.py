"""Tool arguments holding text the database cannot store (NUL, unpaired surrogates) are an
``invalid_arguments`` error naming the field, before any query: never "the database is unavailable"."""

from __future__ import annotations

import json
import uuid

import httpx2
import pytest
from hypothesis import given
from hypothesis import strategies as st
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from sqlmodel import select
from switchboard.db.models import Lead, ToolReceipt
from switchboard.tools.capability import sign_capability
from switchboard.tools.context import ToolContext
from switchboard.tools.contracts import UNSTORABLE_PROBLEM, unstorable_field
from switchboard.tools.mcp_client import McpToolError, McpToolSource
from switchboard.validation import has_unstorable_chars

UNSTORABLE = ["\x00", "\ud800", "\udfff"]
"""A NUL, a lone high and a lone low surrogate."""


def source(url, settings, sessions) -> McpToolSource:
    return McpToolSource(
        url=url,
        token=settings.secret("mcp_service_token"),
        capability_key=settings.secret("tool_capability_key"),
        sessions=sessions,
    )


def turn(shop) -> ToolContext:
    return ToolContext(
        tenant_id=shop.tenant_id,
        customer_id=shop.customer_id,
        conversation_id=shop.conversation_id,
        trace_id=uuid.uuid4().hex,
        sessions=shop.sessions,
        channel="whatsapp",
    )


@pytest.mark.parametrize("bad", UNSTORABLE)
async def test_the_orchestrators_tool_source_refuses_unstorable_text_naming_the_field(
    mcp_server, settings, sessions, make_shop, bad
):
    url, _ = mcp_server
    shop = await make_shop()
    tools, ctx = source(url, settings, sessions), turn(shop)
    with pytest.raises(McpToolError) as refused:
        await tools.call("create_lead", {"interest": "pumps", "notes": f"budget{bad}10k"}, ctx)
    assert refused.value.error_type == "invalid_arguments"
    assert {"field": "notes", "problem": UNSTORABLE_PROBLEM} in refused.value.diagnostics
    async with sessions() as session:
        [receipt] = (
            await session.exec(select(ToolReceipt).where(ToolReceipt.trace_id == ctx.trace_id))
        ).all()
        leads = (await session.exec(select(Lead).where(Lead.tenant_id == shop.tenant_id))).all()
    assert (receipt.outcome, receipt.error_type) == ("rejected", "invalid_arguments")
    assert leads == []
    fixed = await tools.call("lookup_product", {"sku_or_name": "FVAM-2050-B"}, ctx)
    assert [p["sku"] for p in fixed.content["products"]] == ["FVAM-2050-B"]


@pytest.mark.parametrize(
    ("tool", "arguments", "field"),
    [
        ("lookup_product", {"sku_or_name": "FVAM\x00-2050"}, "sku_or_name"),
        ("check_order_status", {"order_number": "A-1001\x00"}, "order_number"),
        ("search_knowledge_base", {"query": "\x00warranty"}, "query"),
        ("create_lead", {"interest": "pumps", "notes": "call\x00me"}, "notes"),
    ],
)
async def test_a_direct_mcp_call_with_a_nul_is_an_invalid_argument_not_a_database_outage(
    mcp_server, settings, make_shop, tool, arguments, field
):
    """Straight to the tool server with a valid capability, past the orchestrator's own check."""
    url, _ = mcp_server
    shop = await make_shop()
    trace_id = uuid.uuid4().hex
    injected = {
        "tenant_id": str(shop.tenant_id),
        "customer_id": str(shop.customer_id),
        "conversation_id": str(shop.conversation_id),
        "trace_id": trace_id,
        "idempotency_key": uuid.uuid4().hex if tool == "create_lead" else None,
        "capability": sign_capability(
            settings.secret("tool_capability_key"),
            tenant_id=shop.tenant_id,
            customer_id=shop.customer_id,
            conversation_id=shop.conversation_id,
            trace_id=trace_id,
            tools=[tool],
        ),
    }
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {settings.secret('mcp_service_token')}"})
    async with Client(streamable_http_client(url, http_client=http)) as client:
        result = await client.call_tool(tool, {**arguments, **injected})
    assert result.is_error is True
    assert (
        result.content[0].text
        == f"Error executing tool {tool}: [invalid_arguments] {field}: {UNSTORABLE_PROBLEM}"
    )


_ANY_CHAR = st.characters(exclude_categories=[]) | st.sampled_from(UNSTORABLE)  # surrogates included
_KEY = st.text(st.characters(exclude_categories=[], exclude_characters="."), max_size=8)


@given(
    st.recursive(
        st.text(_ANY_CHAR, max_size=20) | st.integers() | st.none(),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_KEY, inner, max_size=4),
        max_leaves=12,
    )
)
def test_unstorable_field_finds_exactly_the_arguments_postgres_cannot_store(arguments):
    """Whatever the JSON shape: a path is named exactly when some string (value or key) holds a NUL or
    an unpaired surrogate, and the path leads to such a string."""
    text = json.dumps(arguments, ensure_ascii=True)
    has_bad = any(has_unstorable_chars(s) for s in _strings(arguments))
    found = unstorable_field(arguments)
    assert (found is not None) == has_bad, text
    if found is not None and found != "(arguments)":
        node = arguments
        for step in found.split("."):
            if isinstance(node, list):
                node = node[int(step)]
            elif step in node:
                node = node[step]
            else:  # the key itself could not be named
                break
        else:
            assert isinstance(node, str) and has_unstorable_chars(node)


def _strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


@pytest.mark.parametrize("slot", ["9999-12-31T23:00:00-14:00", "0001-01-01T00:00:00+14:00"])
async def test_a_date_whose_utc_time_leaves_the_calendar_is_an_invalid_argument(
    mcp_server, settings, sessions, make_shop, slot
):
    """Python holds no UTC time past year 9999: the slot is refused by name, not as a database outage."""
    url, _ = mcp_server
    shop = await make_shop()
    tools, ctx = source(url, settings, sessions), turn(shop)
    with pytest.raises(McpToolError) as refused:
        await tools.call("schedule_meeting", {"slot": slot, "topic": "pumps"}, ctx)
    assert refused.value.error_type == "invalid_arguments"
    assert "slot: is out of range" in str(refused.value)
