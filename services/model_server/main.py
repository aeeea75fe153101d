"""model_server service: the offline OpenAI-compatible model (demo stand-in when no provider key is set).

Run: `uvicorn services.model_server.main:create_app --factory` (`switchboard run` does this).
"""

from fastapi import FastAPI
from switchboard.llm.config import has_provider_key
from switchboard.observability import configure_logging, get_logger
from switchboard.observability.tracing import configure_tracing
from switchboard.settings import Settings, load_settings
from switchboard.standins.offline_server import ControlRefused, control_refusal, create_offline_app


def create_app(settings: Settings | None = None) -> FastAPI:
    """Assemble the service; it needs no database, Redis or key.

    Raises:
        ControlRefused: ``MODEL_SERVER_CONTROL`` is on while a provider key is set or ``HOST`` is not loopback.
    """
    settings = settings or load_settings()
    configure_logging(
        service="model_server",
        level=settings.log_level,
        fmt=settings.log_format,
        unmask_pii=settings.log_unmask_pii,
    )
    configure_tracing(service="model_server")
    if not settings.model_server_control:
        return create_offline_app()
    refusal = control_refusal(host=settings.host, has_provider_key=has_provider_key(settings))
    if refusal is not None:
        get_logger(__name__).error("model_server_control_refused", reason=refusal)
        raise ControlRefused(refusal)
    get_logger(__name__).warning("model_server_control_enabled", host=settings.host)
    return create_offline_app(enable_control=True, control_token=settings.secret("admin_token"))
