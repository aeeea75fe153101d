"""whatsapp service: WhatsApp Cloud API webhooks (verify, normalize, enqueue).

Run: `uvicorn services.whatsapp.main:create_app --factory` (`switchboard run` does this).
"""

from fastapi import FastAPI
from switchboard.channels.whatsapp import webhook_router
from switchboard.service_app import create_service_app
from switchboard.settings import Settings, load_settings
from switchboard.standins.whatsapp import sandbox_handshaker, sandbox_router, sandbox_status_sender


def create_app(settings: Settings | None = None) -> FastAPI:
    """Assemble the service; tests pass settings, production reads the environment."""
    settings = settings or load_settings()
    routers = [webhook_router()]
    if settings.whatsapp_sandbox_enabled:
        # the Graph sandbox for numbers connected with api_base_url "sandbox" (a real number next to it
        # talks to graph.facebook.com); control endpoints need the admin token. Production turns it off.
        routers.append(
            sandbox_router(
                admin_token=settings.secret("admin_token"),
                status_sender=sandbox_status_sender(settings),
                handshaker=sandbox_handshaker(settings),
            )
        )
    return create_service_app(
        "whatsapp",
        settings,
        routers=routers,
        description="WhatsApp Cloud API webhooks (verify, normalize, enqueue).",
        db_pre_ping=False,  # a round trip per delivery; a stale connection means one 503, retried
        # the delivery's insert takes the driver pool's 20 kept connections (no greenlet per checkout,
        # switchboard.db.driver_pool); the engine's few serve account lookups, edits and revokes
        db_pool=(5, 0),
        db_driver_pool=20,
    )
