"""whatsapp service: WhatsApp Cloud API webhooks (verify, normalize, enqueue).

Run: `uvicorn services.whatsapp.main:create_app --factory` (`switchboard run` does this).
"""

from fastapi import FastAPI
from switchboard.channels.whatsapp import sandbox_router, sandbox_status_sender, webhook_router
from switchboard.service_app import create_service_app
from switchboard.settings import Settings, load_settings


def create_app(settings: Settings | None = None) -> FastAPI:
    """Assemble the service; tests pass settings, production reads the environment."""
    settings = settings or load_settings()
    routers = [webhook_router()]
    if settings.whatsapp_sandbox_enabled:
        # the Graph sandbox for numbers connected with api_base_url "sandbox" (a real number next to it
        # talks to graph.facebook.com); control endpoints need the admin token. Production turns it off.
        routers.append(
            sandbox_router(
                admin_token=settings.secret("admin_token"), status_sender=sandbox_status_sender(settings)
            )
        )
    return create_service_app(
        "whatsapp",
        settings,
        routers=routers,
        description="WhatsApp Cloud API webhooks (verify, normalize, enqueue).",
        db_pre_ping=False,  # a round trip per delivery; a stale connection means one 503, retried
        db_pool=(20, 0),  # the same 20 at most, kept: overflow ones were opened and closed per delivery
    )
