"""web service: the website chat widget's script, visitor messages and files, the visitors' reply streams
(Server-Sent Events), and the signed links of the files in them.

Run: `uvicorn services.web.main:create_app --factory` (`switchboard run` does this).
"""

from fastapi import APIRouter, FastAPI
from switchboard.channels.web.channel import WEB_PREFIX
from switchboard.channels.web.routes import web_router
from switchboard.handoff.hours import availability
from switchboard.media import MediaStore
from switchboard.media.links import media_router
from switchboard.service_app import create_service_app
from switchboard.settings import Settings, load_settings


def create_app(settings: Settings | None = None) -> FastAPI:
    """Assemble the service; tests pass settings, production reads the environment."""
    settings = settings or load_settings()
    # everything under /web: one path prefix the edge (Caddy, the load balancer) forwards as it is
    routes = APIRouter(prefix=WEB_PREFIX)
    routes.include_router(web_router(settings, availability=availability))
    routes.include_router(media_router(settings, MediaStore.from_settings(settings)))
    return create_service_app(
        "web",
        settings,
        routers=[routes],
        description="Website chat: the widget, visitor messages and files, reply streams (Server-Sent Events).",
        db_driver_pool=5,
    )
