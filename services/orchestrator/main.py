"""orchestrator service: The agent: bounded tool loop through the LLM Router; admin API.

Run: `uvicorn services.orchestrator.main:create_app --factory` (`switchboard run` does this).
"""

from fastapi import FastAPI
from switchboard.agent import turns_router
from switchboard.analytics.routes import analytics_admin_router
from switchboard.channels.gmail.routes import gmail_admin_router
from switchboard.console.api import conversations_admin_router
from switchboard.events.routes import event_webhooks_router, webhooks_router
from switchboard.feedback.routes import feedback_admin_router, feedback_router
from switchboard.handoff.routes import agents_router
from switchboard.knowledge.routes import knowledge_admin_router
from switchboard.leads.routes import leads_router
from switchboard.llm import start_litellm_import
from switchboard.platform_routes import platform_admin_router
from switchboard.service_app import create_service_app
from switchboard.settings import Settings, load_settings
from switchboard.tenant_config.routes import settings_admin_router
from switchboard.tools.mcp_client import start_mcp_import
from switchboard.tools.routes import admin_tools_router


def create_app(settings: Settings | None = None) -> FastAPI:
    """Assemble the service; tests pass settings, production reads the environment."""
    app = create_service_app(
        "orchestrator",
        settings or load_settings(),
        routers=[
            turns_router,
            admin_tools_router,
            knowledge_admin_router,
            agents_router,
            gmail_admin_router,
            settings_admin_router,
            analytics_admin_router,
            platform_admin_router,
            conversations_admin_router,
            feedback_router,
            feedback_admin_router,
            webhooks_router,
            leads_router,
        ],
        description="The agent: bounded tool loop through the LLM Router; admin API.",
        # the one service that calls models: LiteLLM (~4 s of CPU) and the MCP client (~1 s) load in
        # threads once it is up, /healthz says "warming" meanwhile and requests await them off the loop
        # (not before /healthz: it was the last service up by 7-17 s; not on the loop: a first turn
        # waiting there on the import lock blocked in-process tests past the worker's timeout)
        warm_ups={"litellm": start_litellm_import, "mcp": start_mcp_import},
    )
    app.webhooks.include_router(event_webhooks_router)  # OpenAPI: what tenants' endpoints receive
    return app
