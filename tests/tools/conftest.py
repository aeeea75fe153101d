"""Fixtures for the MCP tools: a demo shop tenant and the real tool server on a loopback port.

The server is the project's own ``create_tools_app`` served by uvicorn on 127.0.0.1 (a free port),
reached over Streamable HTTP. Two extra tools stand in for misbehaving outside systems: ``slow_echo``
hangs, ``broken_shape`` returns a result that does not match its declared shape.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass

import pytest
from pydantic import BaseModel
from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel.ext.asyncio.session import AsyncSession
from switchboard.db.models import Conversation, Customer, McpTenantTool
from switchboard.seed import seed_demo_business
from switchboard.tools.business import BUSINESS_TOOLS
from switchboard.tools.contracts import ToolContract, ToolPolicy
from switchboard.tools.server import ToolServer, create_tools_app

from tests.utils.model_fixtures import gateway, offline_model
from tests.utils.servers import serve_app

__all__ = ["gateway", "offline_model", "make_shop", "mcp_server"]


class EchoArgs(BaseModel):
    text: str


class EchoResult(BaseModel):
    echoed: str


class WrongShape(BaseModel):
    unexpected: int


async def _slow_echo(ctx, args: EchoArgs) -> EchoResult:
    await asyncio.sleep(float(ctx.tool_config.get("delay_s", 30)))
    return EchoResult(echoed=args.text)


async def _broken_shape(ctx, args: EchoArgs):  # returns another shape than it declares
    return {"unexpected": 1}


TEST_TOOLS = (
    ToolContract(
        name="slow_echo",
        version="0.1",
        description="Echo text after a while.",
        input_model=EchoArgs,
        result_model=EchoResult,
        policy=ToolPolicy(kind="read"),
        handler=_slow_echo,
    ),
    ToolContract(
        name="broken_shape",
        version="0.1",
        description="Returns something of the wrong shape.",
        input_model=EchoArgs,
        result_model=EchoResult,
        policy=ToolPolicy(kind="read"),
        handler=_broken_shape,
    ),
)


@dataclass
class Shop:
    tenant_id: uuid.UUID
    customer_id: uuid.UUID
    """Owner of orders A-1001 / A-1002 (the demo BSUID)."""
    other_customer_id: uuid.UUID
    """Owner of order A-1003 (phone 15550100098)."""
    conversation_id: uuid.UUID
    sessions: async_sessionmaker[AsyncSession]


@pytest.fixture
def make_shop(sessions, make_tenant):
    """A tenant with the demo catalog, orders, stores, slots, every tool enabled, two customers."""

    async def make(*, extra_tools: tuple[str, ...] = (), **settings_extensions: object) -> Shop:
        tenant = await make_tenant("Shop", **settings_extensions)
        async with sessions() as session, session.begin():
            await seed_demo_business(session, tenant.id)
            for name in extra_tools:
                session.add(McpTenantTool(tenant_id=tenant.id, tool_name=name, enabled=True))
            alice = Customer(
                tenant_id=tenant.id,
                channel="whatsapp",
                external_user_id="US.10000000000000000001",
                phone="15550100099",
            )
            bob = Customer(
                tenant_id=tenant.id, channel="whatsapp", external_user_id="US.2", phone="15550100098"
            )
            session.add_all([alice, bob])
            await session.flush()
            conversation = Conversation(tenant_id=tenant.id, customer_id=alice.id, channel="whatsapp")
            session.add(conversation)
        return Shop(tenant.id, alice.id, bob.id, conversation.id, sessions)

    return make


@pytest.fixture(scope="module")
async def mcp_server(settings):
    """``(url, ToolServer)`` of the real MCP service on a loopback port."""
    server = ToolServer([*BUSINESS_TOOLS, *TEST_TOOLS])
    async with serve_app(create_tools_app(settings, server=server)) as base_url:
        yield f"{base_url}/mcp", server
