"""model_server service: the offline OpenAI-compatible model (demo stand-in when no provider key is set).

Run: `uvicorn services.model_server.main:create_app --factory` (`switchboard run` does this).
"""

from fastapi import FastAPI
from switchboard.llm.offline_server import create_offline_app
from switchboard.observability import configure_logging
from switchboard.settings import Settings, load_settings


def create_app(settings: Settings | None = None) -> FastAPI:
    """Assemble the service; it needs no database, Redis or key."""
    settings = settings or load_settings()
    configure_logging(service="model_server", level=settings.log_level, fmt=settings.log_format)
    return create_offline_app()
