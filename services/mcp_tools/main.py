"""mcp_tools service: Tenant business tools over MCP.

Run: `uvicorn services.mcp_tools.main:create_app --factory` (`switchboard run` does this).
"""

from fastapi import FastAPI
from switchboard.service_app import create_service_app
from switchboard.settings import Settings, load_settings


def create_app(settings: Settings | None = None) -> FastAPI:
    """Assemble the service; tests pass settings, production reads the environment."""
    return create_service_app(
        "mcp_tools", settings or load_settings(), description="Tenant business tools over MCP."
    )
