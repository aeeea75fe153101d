"""instagram service: Instagram Messaging webhooks (verify, normalize, store, enqueue), the signed links
Meta fetches our media from, and the Instagram Graph sandbox when no real Graph URL is configured.

Run: `uvicorn services.instagram.main:create_app --factory` (`switchboard run` does this).
"""

from fastapi import FastAPI
from switchboard.channels.instagram.routes import webhook_router
from switchboard.media import MediaStore
from switchboard.media.links import media_router
from switchboard.service_app import create_service_app
from switchboard.settings import Settings, load_settings
from switchboard.standins.instagram import InstagramSandbox, instagram_sandbox_router


def create_app(settings: Settings | None = None) -> FastAPI:
    """Assemble the service; tests pass settings, production reads the environment."""
    settings = settings or load_settings()
    routers = [webhook_router(), media_router(settings, MediaStore.from_settings(settings))]
    if settings.instagram_sandbox_enabled:
        # for accounts connected with api_base_url "sandbox"; it echoes every send to this service, as Instagram does
        echo_to = (
            settings.service_url(settings.instagram_port) + "/webhooks/instagram",
            settings.secret("instagram_app_secret"),
        )
        routers.append(
            instagram_sandbox_router(
                InstagramSandbox(echo_to=echo_to), admin_token=settings.secret("admin_token")
            )
        )
    return create_service_app(
        "instagram",
        settings,
        routers=routers,
        description="Instagram Messaging webhooks (verify, normalize, store, enqueue) and media links.",
        db_pre_ping=False,  # a round trip per delivery; a stale connection means one 503, retried
        # the delivery's insert takes the driver pool's 20 kept connections (no greenlet per checkout,
        # switchboard.db.driver_pool); the engine's few serve account lookups, edits and revokes
        db_pool=(5, 0),
        db_driver_pool=20,
    )
