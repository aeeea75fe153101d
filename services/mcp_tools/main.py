"""mcp_tools service: Tenant business tools over MCP.

Run: `uvicorn services.mcp_tools.main:create_app --factory` (`switchboard run` does this).
Serves `GET /healthz` and the MCP Streamable HTTP endpoint at `/mcp` (bearer `MCP_SERVICE_TOKEN`).
"""

from fastapi import FastAPI
from switchboard.settings import Settings, load_settings
from switchboard.tools.server import create_tools_app


def create_app(settings: Settings | None = None) -> FastAPI:
    """Assemble the service; tests pass settings, production reads the environment."""
    return create_tools_app(settings or load_settings())
