"""console service: the web console (inbox, conversation view, takeover and replies) for people.

Run: `uvicorn services.console.main:create_app --factory` (`switchboard run` does this).
Pages are server-rendered with htmx and live updates over server-sent events; every asset is served
from the repository (no CDN). The admin API's conversation routes are mounted here too, so a logged-in
browser can call them with its session.
"""

from fastapi import FastAPI
from switchboard import __version__
from switchboard.console import console_routers, install_console
from switchboard.public_api import install_problem_errors, mount_public_openapi
from switchboard.service_app import create_service_app
from switchboard.settings import Settings, load_settings


def create_app(settings: Settings | None = None) -> FastAPI:
    """Assemble the service; tests pass settings, production reads the environment."""
    app = create_service_app(
        "console",
        settings or load_settings(),
        routers=console_routers(),
        description="The web console: inbox, conversations, takeover and replies; the conversations "
        "admin API (session, API token or ADMIN_TOKEN); the public API (/api/v1, tenant API keys).",
    )
    install_console(app)
    install_problem_errors(app)  # after the console's handlers: /api/ errors are problems
    mount_public_openapi(app, version=__version__)
    return app
