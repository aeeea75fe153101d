"""Offline model server, gateway and the real MCP tool server for the evaluation harness."""

from __future__ import annotations

import pytest
from switchboard.tools.business import BUSINESS_TOOLS
from switchboard.tools.server import ToolServer, create_tools_app

from tests.utils.model_fixtures import gateway, offline_model
from tests.utils.servers import serve_app

__all__ = ["gateway", "offline_model", "mcp_url"]


@pytest.fixture(scope="module")
async def mcp_url(settings):
    """The MCP endpoint of the real tool server (the business tools) on a loopback port."""
    async with serve_app(create_tools_app(settings, server=ToolServer(list(BUSINESS_TOOLS)))) as base_url:
        yield f"{base_url}/mcp"
