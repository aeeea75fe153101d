"""The MCP server over real Streamable HTTP on a loopback port, driven by the orchestrator's tool source."""

from __future__ import annotations

import asyncio
import uuid

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from sqlmodel import select
from switchboard.db.models import Lead, SecurityAlert, ToolReceipt
from switchboard.tools.capability import sign_capability
from switchboard.tools.context import ToolContext
from switchboard.tools.contracts import INJECTED_PARAMS
from switchboard.tools.mcp_client import McpToolError, McpToolSource
from switchboard.tools.receipts import args_hash
from switchboard.tools.server import ToolServer, create_tools_app
from switchboard.tools.toolbox import set_enabled

from tests.utils.net import free_port
from tests.utils.servers import serve_app


def source(url, settings, sessions, **kwargs) -> McpToolSource:
    return McpToolSource(
        url=url,
        token=settings.secret("mcp_service_token"),
        capability_key=settings.secret("tool_capability_key"),
        sessions=sessions,
        **kwargs,
    )


def turn(
    shop, *, trace: str | None = None, untrusted: bool = False, channel: str = "whatsapp"
) -> ToolContext:
    return ToolContext(
        tenant_id=shop.tenant_id,
        customer_id=shop.customer_id,
        conversation_id=shop.conversation_id,
        trace_id=trace or uuid.uuid4().hex,
        sessions=shop.sessions,
        has_untrusted_content=untrusted,
        channel=channel,
    )


async def receipts(sessions, trace_id) -> list[ToolReceipt]:
    async with sessions() as session:
        rows = (await session.exec(select(ToolReceipt).where(ToolReceipt.trace_id == trace_id))).all()
    return sorted(rows, key=lambda r: r.created_at)


async def test_requests_without_the_bearer_token_get_401(mcp_server):
    url, _ = mcp_server
    async with httpx.AsyncClient() as http:
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
        missing = await http.post(url, json=body)
        wrong = await http.post(url, json=body, headers={"Authorization": "Bearer nope"})
        health = await http.get(url.removesuffix("/mcp") + "/healthz")
    assert missing.status_code == 401 and wrong.status_code == 401
    assert missing.headers["www-authenticate"] == "Bearer"
    assert health.status_code == 200
    assert health.json()["service"] == "mcp_tools" and health.json()["checks"] == {"database": "ok"}


async def test_legacy_sse_transport_is_served_behind_the_token(mcp_server, settings, make_shop):
    from mcp import ClientSession
    from mcp.client.sse import sse_client

    url, _ = mcp_server
    shop = await make_shop()
    sse_url = url.removesuffix("/mcp") + "/sse"
    async with httpx.AsyncClient() as http:
        assert (await http.get(sse_url)).status_code == 401
    headers = {"Authorization": f"Bearer {settings.secret('mcp_service_token')}"}
    async with (
        sse_client(sse_url, headers=headers, timeout=5) as (read, write),
        ClientSession(read, write) as mcp,
    ):
        await mcp.initialize()
        names = {tool.name for tool in (await mcp.list_tools()).tools}
        capability = sign_capability(
            settings.secret("tool_capability_key"),
            tenant_id=shop.tenant_id,
            customer_id=None,
            conversation_id=None,
            trace_id=None,
            tools=["lookup_product"],
        )
        result = await mcp.call_tool(
            "lookup_product",
            {"sku_or_name": "FVAM-2050-C", "tenant_id": str(shop.tenant_id), "capability": capability},
        )
    assert {"lookup_product", "create_lead"} <= names
    assert result.is_error is False and result.structured_content["products"][0]["sku"] == "FVAM-2050-C"


async def test_direct_call_without_tenant_is_refused_with_a_clear_error(mcp_server, settings):
    url, _ = mcp_server
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {settings.secret('mcp_service_token')}"})
    async with Client(streamable_http_client(url, http_client=http)) as client:
        result = await client.call_tool("lookup_product", {"sku_or_name": "FVAM-2050-B"})
    assert result.is_error is True
    assert result.content[0].text == (
        "Error executing tool lookup_product: "
        "[missing_tenant] tenant_id is required; this server never assumes a tenant"
    )


async def test_schemas_shown_to_the_model_have_no_injected_parameters(
    mcp_server, settings, sessions, make_shop
):
    url, _ = mcp_server
    shop = await make_shop()
    definitions = await source(url, settings, sessions).definitions(turn(shop))
    names = sorted(d["function"]["name"] for d in definitions)
    assert names == sorted(
        [
            "search_knowledge_base",
            "explore_knowledge_graph",
            "lookup_product",
            "check_order_status",
            "find_store",
            "schedule_meeting",
            "create_lead",
        ]
    )
    for definition in definitions:
        params = definition["function"]["parameters"]
        assert not set(INJECTED_PARAMS) & set(params["properties"]), definition
        assert not set(INJECTED_PARAMS) & set(params.get("required", []))
    lookup = next(d for d in definitions if d["function"]["name"] == "lookup_product")["function"]
    assert lookup["parameters"]["required"] == ["sku_or_name"]


async def test_model_supplied_tenant_id_is_overwritten(mcp_server, settings, sessions, make_shop):
    """A model passing another tenant's id (as a prompt injection might ask) reads its own tenant only."""
    url, _ = mcp_server
    mine, victim = await make_shop(), await make_shop()
    tools = source(url, settings, sessions)
    output = await tools.call(
        "check_order_status",
        {
            "order_number": "A-1003",
            "tenant_id": str(victim.tenant_id),
            "customer_id": str(victim.other_customer_id),
        },
        turn(mine),
    )
    assert output.content["found"] is False  # A-1003 is Bob's; the turn's customer is Alice
    own = await tools.call(
        "check_order_status", {"order_number": "A-1001", "tenant_id": str(victim.tenant_id)}, turn(mine)
    )
    assert own.content["found"] is True and own.content["status"] == "shipped"


async def test_forbidden_tool_is_not_listed_and_fails_closed_with_an_alert(
    mcp_server, settings, sessions, make_shop
):
    url, _ = mcp_server
    shop = await make_shop()
    async with sessions() as session, session.begin():
        await set_enabled(session, shop.tenant_id, "create_lead", enabled=False)
    tools = source(url, settings, sessions)
    ctx = turn(shop)
    assert "create_lead" not in [d["function"]["name"] for d in await tools.definitions(ctx)]
    with pytest.raises(McpToolError) as denied:
        await tools.call("create_lead", {"interest": "x"}, ctx)
    assert str(denied.value) == "Forbidden" and denied.value.error_type == "forbidden"
    assert denied.value.retryable is False
    async with sessions() as session:
        alert = (
            await session.exec(select(SecurityAlert).where(SecurityAlert.tenant_id == shop.tenant_id))
        ).one()
        leads = (await session.exec(select(Lead).where(Lead.tenant_id == shop.tenant_id))).all()
    assert alert.kind == "tool_forbidden" and alert.trace_id == ctx.trace_id
    assert alert.details["tool_name"] == "create_lead" and leads == []
    [receipt] = await receipts(sessions, ctx.trace_id)
    assert (
        receipt.outcome == "rejected"
        and receipt.rejection_reason == "Forbidden"
        and receipt.error_type == "forbidden"
    )


async def test_invalid_arguments_give_diagnostics_then_the_corrected_call_succeeds(
    mcp_server, settings, sessions, make_shop
):
    url, _ = mcp_server
    shop = await make_shop()
    tools, ctx = source(url, settings, sessions), turn(shop)
    with pytest.raises(McpToolError) as bad:
        await tools.call("lookup_product", {"sku": "FVAM-2050-B"}, ctx)
    assert bad.value.error_type == "invalid_arguments"
    problems = " ".join(d["problem"] for d in bad.value.diagnostics)
    assert "'sku_or_name' is a required property" in problems and "'sku'" in problems
    fixed = await tools.call("lookup_product", {"sku_or_name": "FVAM-2050-B"}, ctx)
    assert [p["sku"] for p in fixed.content["products"]] == ["FVAM-2050-B"]

    first, second = await receipts(sessions, ctx.trace_id)
    assert (first.outcome, first.error_type, first.args_hash) == (
        "rejected",
        "invalid_arguments",
        args_hash({"sku": "FVAM-2050-B"}),
    )
    assert second.outcome == "ok" and second.tool_name == "lookup_product" and second.tool_version == "1.0"
    assert second.duration_ms > 0 and second.idempotency_key is None


async def test_result_of_the_wrong_shape_becomes_a_controlled_error(
    mcp_server, settings, sessions, make_shop
):
    url, _ = mcp_server
    shop = await make_shop(extra_tools=("broken_shape",))
    tools, ctx = source(url, settings, sessions), turn(shop)
    with pytest.raises(McpToolError) as broken:
        await tools.call("broken_shape", {"text": "hi"}, ctx)
    assert broken.value.error_type == "invalid_result" and broken.value.retryable is False
    assert str(broken.value) == "the tool returned an unexpected result"
    [receipt] = await receipts(sessions, ctx.trace_id)
    assert receipt.outcome == "error"


async def test_a_hanging_tool_times_out_as_a_tool_result(mcp_server, settings, sessions, make_shop):
    """The source's timeout; and, shorter, the tenant's loop timeout (the source fires just before it)."""
    from switchboard.db.models import Tenant

    url, _ = mcp_server
    shop = await make_shop(extra_tools=("slow_echo",))
    tools, ctx = source(url, settings, sessions, call_timeout_s=0.5), turn(shop)
    with pytest.raises(McpToolError) as slow:
        await tools.call("slow_echo", {"text": "hi"}, ctx)
    assert slow.value.error_type == "timeout" and slow.value.retryable is True
    [receipt] = await receipts(sessions, ctx.trace_id)
    assert receipt.outcome == "timeout" and 400 < receipt.duration_ms < 5000

    async with sessions() as session, session.begin():
        (await session.get(Tenant, shop.tenant_id)).settings_extensions = {"loop": {"tool_timeout_s": 0.6}}
    ctx = turn(shop)
    with pytest.raises(McpToolError) as tenant_bound:
        await source(url, settings, sessions).call("slow_echo", {"text": "hi"}, ctx)
    assert str(tenant_bound.value) == "the tool did not answer within 0.57 s"


async def test_second_write_in_a_turn_hits_the_budget_and_a_retried_write_runs_once(
    mcp_server, settings, sessions, make_shop
):
    url, _ = mcp_server
    shop = await make_shop()
    tools, ctx = source(url, settings, sessions), turn(shop)
    first = await tools.call("create_lead", {"interest": "office fans"}, ctx)
    replay = await tools.call("create_lead", {"interest": "office fans"}, ctx)  # same message, same write
    assert first.content["status"] == "done" and replay.content["lead_id"] == first.content["lead_id"]
    assert replay.content["replayed"] is True
    with pytest.raises(McpToolError) as budget:
        await tools.call("create_lead", {"interest": "something else"}, ctx)
    assert budget.value.error_type == "budget_exhausted" and "person must review" in str(budget.value)
    async with sessions() as session:
        leads = (await session.exec(select(Lead).where(Lead.tenant_id == shop.tenant_id))).all()
    assert [lead.interest for lead in leads] == ["office fans"]
    outcomes = [(r.outcome, r.error_type) for r in await receipts(sessions, ctx.trace_id)]
    assert outcomes == [("ok", None), ("ok", None), ("rejected", "budget_exhausted")]


async def test_parallel_writes_in_one_turn_cannot_both_pass_the_budget(
    mcp_server, settings, sessions, make_shop
):
    url, _ = mcp_server
    shop = await make_shop()
    tools, ctx = source(url, settings, sessions), turn(shop)
    results = await asyncio.gather(
        tools.call("create_lead", {"interest": "fans"}, ctx),
        tools.call("create_lead", {"interest": "filters"}, ctx),
        return_exceptions=True,
    )
    failures = [r for r in results if isinstance(r, McpToolError)]
    assert len(failures) == 1 and failures[0].error_type == "budget_exhausted"
    async with sessions() as session:
        leads = (await session.exec(select(Lead).where(Lead.tenant_id == shop.tenant_id))).all()
    assert len(leads) == 1


async def test_only_read_tools_while_untrusted_text_is_in_context(mcp_server, settings, sessions, make_shop):
    url, _ = mcp_server
    shop = await make_shop()
    tools, ctx = source(url, settings, sessions), turn(shop, untrusted=True)
    names = {d["function"]["name"] for d in await tools.definitions(ctx)}
    assert "create_lead" not in names and "schedule_meeting" not in names and "lookup_product" in names
    with pytest.raises(McpToolError) as refused:
        await tools.call("create_lead", {"interest": "x"}, ctx)
    assert refused.value.error_type == "untrusted_context"


async def test_email_turns_are_read_only_and_the_budget_is_a_tenant_setting(
    mcp_server, settings, sessions, make_shop
):
    from switchboard.db.models import Tenant

    url, _ = mcp_server
    shop = await make_shop()
    tools = source(url, settings, sessions)
    from switchboard.channels.base import channel_capabilities

    gmail = channel_capabilities("gmail")
    assert gmail is not None and gmail.untrusted_inbound  # what the orchestrator sets on every Gmail turn
    email_turn = turn(shop, channel="gmail", untrusted=gmail.untrusted_inbound)
    email_names = {d["function"]["name"] for d in await tools.definitions(email_turn)}
    assert email_names == {
        "search_knowledge_base",
        "explore_knowledge_graph",
        "lookup_product",
        "check_order_status",
        "find_store",
    }

    async with sessions() as session, session.begin():
        tenant = await session.get(Tenant, shop.tenant_id)
        tenant.settings_extensions = {"tools": {"mutation_budget": 0}}
    with pytest.raises(McpToolError) as none_allowed:
        await tools.call("create_lead", {"interest": "x"}, turn(shop))
    assert none_allowed.value.error_type == "budget_exhausted"

    ctx = turn(shop)
    for _ in range(3):
        await tools.call("find_store", {"city_or_coordinates": "Chicago"}, ctx)
    with pytest.raises(McpToolError) as capped:
        await tools.call("find_store", {"city_or_coordinates": "Chicago"}, ctx)
    assert capped.value.error_type == "call_limit"


async def test_discovery_failure_leaves_built_ins_only_and_recovers(settings, sessions, make_shop, caplog):
    """Down server: no MCP tools and a warning; a server killed mid-conversation: calls fail as retryable."""
    shop = await make_shop()
    port = free_port()
    down = source(
        f"http://127.0.0.1:{port}/mcp", settings, sessions, discovery_timeout_s=2.0, retry_after_failure_s=0
    )
    assert await down.definitions(turn(shop)) == []

    async with serve_app(create_tools_app(settings, server=ToolServer()), port=port):
        assert len(await down.definitions(turn(shop))) == 7  # recovered on the next discovery
        ctx = turn(shop)
        assert (await down.call("find_store", {"city_or_coordinates": "Chicago"}, ctx)).content["stores"]
    with pytest.raises(McpToolError) as gone:
        await down.call("find_store", {"city_or_coordinates": "Chicago"}, ctx)
    assert gone.value.error_type == "unavailable" and gone.value.retryable is True
    assert await down.definitions(turn(shop)) == []


async def test_slow_discovery_times_out_to_no_tools(settings, sessions, make_shop):
    """A server that accepts connections but never answers: discovery gives up within its budget."""
    shop = await make_shop()
    port = free_port()
    release = asyncio.Event()

    async def never_answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await release.wait()
        writer.close()

    silent = await asyncio.start_server(never_answer, "127.0.0.1", port)
    try:
        tools = source(f"http://127.0.0.1:{port}/mcp", settings, sessions, discovery_timeout_s=0.5)
        started = asyncio.get_running_loop().time()
        assert await tools.definitions(turn(shop)) == []
        assert asyncio.get_running_loop().time() - started < 3
    finally:
        release.set()
        silent.close()
        await silent.wait_closed()
