"""``/docs`` (Swagger UI) from vendored files, so every service's API documentation works offline."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

__all__ = ["mount_local_docs", "STATIC_DIR", "STATIC_PREFIX", "SWAGGER_UI_VERSION"]

STATIC_DIR = Path(__file__).parent / "static"
"""Vendored assets shared by every service (``static/README.md`` lists versions and licences)."""
SWAGGER_UI_VERSION = "5.35.0"
"""npm ``swagger-ui-dist`` version vendored in ``static/swagger-ui-<version>/``."""
STATIC_PREFIX = "/_static"


def mount_local_docs(app: FastAPI) -> None:
    """Serve ``/docs`` with the vendored Swagger UI (``/_static/swagger-ui-<v>/``) instead of a CDN.

    The app must be created with ``docs_url=None`` (FastAPI's own ``/docs`` points at jsDelivr).
    """
    app.mount(STATIC_PREFIX, StaticFiles(directory=STATIC_DIR), name="shared-static")
    base = f"{STATIC_PREFIX}/swagger-ui-{SWAGGER_UI_VERSION}"

    @app.get("/docs", include_in_schema=False)
    async def swagger_ui() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=app.openapi_url or "/openapi.json",
            title=f"{app.title} - API docs",
            swagger_js_url=f"{base}/swagger-ui-bundle.js",
            swagger_css_url=f"{base}/swagger-ui.css",
            swagger_favicon_url=f"{base}/favicon-32x32.png",
        )
