"""The console service's building blocks: templates, navigation, static files, error pages.

Pages are server-rendered (Jinja2, ``templates/``), partial updates use htmx (vendored in ``static/``),
live updates arrive as server-sent events (:mod:`switchboard.console.live`). Every page route depends on
:func:`switchboard.console.deps.page_access` (role and tenant checked) and every form carries the
session's CSRF token.

Other page packages add themselves with :func:`register_nav` (a nav entry) and by appending routers
to the list :func:`console_routers` returns (or including their own in ``services/console/main.py``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import jinja2
from fastapi import FastAPI, Request
from fastapi.exception_handlers import request_validation_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates
from starlette.exceptions import HTTPException as StarletteHTTPException
from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

from switchboard.channels.base import channel_label
from switchboard.console.deps import LoginRequired
from switchboard.console.form_words import option_words, value_words
from switchboard.db.models import Role
from switchboard.i18n import SUPPORTED_LANGUAGES, gettext, negotiate_language, normalize_language
from switchboard.i18n.jinja import current_language, install_i18n, use_language
from switchboard.i18n.validation import localized
from switchboard.users import CSRF_FIELD, CSRF_HEADER, ROLE_WORDS

__all__ = [
    "TEMPLATES_DIR",
    "STATIC_DIR",
    "HTMX_FILE",
    "NavItem",
    "NAV",
    "register_nav",
    "templates",
    "render",
    "install_console",
    "console_language",
    "LANGUAGE_COOKIE",
]

TEMPLATES_DIR = Path(__file__).parent / "templates"
STATIC_DIR = Path(__file__).parent / "static"
HTMX_FILE = "htmx-2.0.11.min.js"
"""The vendored htmx build (``static/README.md``: origin, version, licence)."""


@dataclass(frozen=True)
class NavItem:
    """One entry of the console's navigation bar.

    Attributes:
        key: stable id (``inbox``); the page passes it as ``active`` to highlight the entry.
        label: the text shown (English source string; translated by the i18n layer).
        path: under ``/t/{slug}`` for tenant pages (``/inbox``), or absolute for platform pages
            (``platform=True``).
        roles: who sees the entry (the route still checks on its own).
    """

    key: str
    label: str
    path: str
    roles: frozenset[Role]
    platform: bool = False

    def href(self, slug: str | None) -> str | None:
        if self.platform:
            return self.path
        return f"/t/{slug}{self.path}" if slug else None


NAV: list[NavItem] = []
"""The navigation, in order. The console core registers the inbox; page packages add theirs."""


def register_nav(key: str, label: str, path: str, roles: Iterable[Role], *, platform: bool = False) -> None:
    """Add (or replace, by ``key``) a navigation entry."""
    item = NavItem(key=key, label=label, path=path, roles=frozenset(roles), platform=platform)
    for index, existing in enumerate(NAV):
        if existing.key == key:
            NAV[index] = item
            return
    NAV.append(item)


register_nav("inbox", "Inbox", "/inbox", (Role.platform_admin, Role.tenant_admin, Role.agent))

templates = Jinja2Templates(
    env=install_i18n(jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES_DIR), autoescape=True))
)
# gettext follows the language of the request being rendered (:func:`render` sets it).


def _time_words(at: datetime | None, lang: str, *, ago: bool) -> str:
    """``at`` as people say it, in ``lang``: "3 minutes ago" / "hace 3 minutos" (``ago``), or the time
    since then: "12 minutes" (a wait)."""
    from babel.dates import format_timedelta

    if at is None:
        return ""
    delta = datetime.now(UTC) - at
    if delta.total_seconds() < 45:
        delta = timedelta(seconds=max(delta.total_seconds(), 1))  # "1 second ago", never "in 2 seconds"
    return format_timedelta(
        -delta if ago else delta, locale=lang or "en", add_direction=ago, threshold=0.9, format="long"
    )


@jinja2.pass_context
def _ago(context: Any, at: datetime | None) -> str:
    return _time_words(at, context.get("lang") or "en", ago=True)


@jinja2.pass_context
def _waited(context: Any, at: datetime | None) -> str:
    return _time_words(at, context.get("lang") or "en", ago=False)


def _exact(at: datetime | None) -> str:
    """The exact time shown on hover: ``YYYY-MM-DD HH:MM:SS UTC``."""
    return at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC") if at else ""


@jinja2.pass_context
def _history_words(context: Any, line: Any) -> str:
    """A :class:`~switchboard.console.inbox.HistoryLine` in the page's language."""
    lang = context.get("lang") or "en"
    names = {k: gettext(lang, v) if k in line.translated else v for k, v in line.names.items()}
    return str(gettext(lang, line.words) % names)


def _channel_label(name: str) -> str:
    """Channel ``name`` as people name it, in the page's language (``web`` → ``Chat del sitio web``)."""
    return gettext(current_language.get(), channel_label(name))


templates.env.filters.update(ago=_ago, waited=_waited, exact=_exact, history_words=_history_words)
templates.env.globals.update(
    HTMX_FILE=HTMX_FILE,
    CSRF_FIELD=CSRF_FIELD,
    CSRF_HEADER=CSRF_HEADER,
    LANGUAGES=SUPPORTED_LANGUAGES,
    channel_label=_channel_label,
    words=value_words,
    option_words=option_words,
)
LANGUAGE_COOKIE = "sb_lang"
"""The user's own choice of console language (``en`` / ``es``), set by ``POST /language``; it wins over
the tenant's ``locale.language`` and the browser's ``Accept-Language``."""


def console_language(request: Request, tenant: Any = None) -> str:
    """The language a console page is rendered in: the user's choice (cookie), else the tenant's
    ``locale.language``, else the best match of ``Accept-Language`` (else English)."""
    chosen = normalize_language(request.cookies.get(LANGUAGE_COOKIE))
    if chosen:
        return chosen
    if tenant is not None and isinstance(getattr(tenant, "settings_extensions", None), dict):
        stored = normalize_language(((tenant.settings_extensions or {}).get("locale") or {}).get("language"))
        if stored:
            return stored
    return negotiate_language(request.headers.get("accept-language"))


def _nav_for(request: Request, role: str | None, slug: str | None) -> list[dict[str, Any]]:
    if role is None:
        return []
    out = []
    for item in NAV:
        if Role(role) not in item.roles:
            continue
        href = item.href(slug)
        if href:
            out.append({"key": item.key, "label": item.label, "href": href})
    return out


def render(
    request: Request,
    template: str,
    *,
    status_code: int = 200,
    headers: dict[str, str] | None = None,
    **context: Any,
) -> HTMLResponse:
    """Render ``template`` with the viewer (``request.state.console``), the nav and ``context``.

    The context always has ``user``, ``role``, ``csrf_token``, ``nav``, ``tenant`` (when given) and
    ``active`` (the nav key to highlight).
    """
    info = getattr(request.state, "console", None)
    tenant = context.get("tenant")
    user = info.user if info else None
    base = {
        "request": request,
        "user": user,
        "role": user.role if user else None,
        "role_words": ROLE_WORDS,
        "csrf_token": info.csrf_token if info else "",
        "nav": _nav_for(request, user.role if user else None, tenant.slug if tenant else None),
        "active": context.pop("active", None),
    }
    language = console_language(request, tenant)
    with use_language(language):  # the response renders now, inside the block
        return templates.TemplateResponse(
            request, template, {**base, "lang": language, **context}, status_code=status_code, headers=headers
        )


def _wants_html(request: Request) -> bool:
    return "text/html" in request.headers.get("accept", "") and not request.url.path.startswith("/v1/")


def install_console(app: FastAPI) -> None:
    """Static files under ``/static`` and the console's error answers (login redirect, error pages; a
    refused form field's message in the page's language, :mod:`switchboard.i18n.validation`), and the
    client's own address from a trusted proxy's ``X-Forwarded-For`` (setting ``forwarded_allow_ips``;
    from any other peer the header is ignored), which the login limits count by."""
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="console-static")

    @app.get("/favicon.ico", include_in_schema=False)
    async def favicon() -> Response:
        """The icon every browser asks for at the root (cached for a day)."""
        return FileResponse(
            STATIC_DIR / "favicon.ico",
            media_type="image/x-icon",
            headers={"Cache-Control": "public, max-age=86400"},
        )

    settings = getattr(app.state, "settings", None)
    trusted = settings.forwarded_allow_ips if settings is not None else "127.0.0.1"
    app.add_middleware(ProxyHeadersMiddleware, trusted_hosts=trusted)

    @app.post("/language", include_in_schema=False)
    async def set_language(request: Request) -> Response:
        """The user's console language (form ``language``: en/es), kept in a cookie for a year; back to
        the page it was chosen on. Needs no session: the login page offers it too."""
        form = await request.form()
        chosen = normalize_language(str(form.get("language") or ""))
        back = str(form.get("next") or "/")
        if not back.startswith("/") or back.startswith("//"):
            back = "/"
        response = RedirectResponse(back, status_code=303)
        if chosen:
            response.set_cookie(
                LANGUAGE_COOKIE, chosen, max_age=365 * 86_400, httponly=True, samesite="lax", path="/"
            )
        return response

    @app.exception_handler(LoginRequired)
    async def login_required(request: Request, exc: LoginRequired) -> Response:
        target = "/login?next=" + request.url.path
        if request.headers.get("HX-Request"):
            return Response(status_code=401, headers={"HX-Redirect": target})
        if request.method == "GET" and _wants_html(request):
            return RedirectResponse(target, status_code=303)
        return JSONResponse({"detail": "log in first"}, status_code=401)

    @app.exception_handler(RequestValidationError)
    async def invalid_form(request: Request, exc: RequestValidationError) -> Response:
        """A form or query field FastAPI refused: the error page lists each, in the page's language."""
        if not _wants_html(request) or request.headers.get("HX-Request"):
            return await request_validation_exception_handler(request, exc)
        language = console_language(request)
        detail = "; ".join(
            f"{'.'.join(str(p) for p in error.get('loc', ())[1:]) or '-'}: {localized(error, language)}"
            for error in exc.errors()
        )
        return render(request, "error.html", status_code=422, code=422, detail=detail)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        if _wants_html(request) and not request.headers.get("HX-Request"):
            return render(
                request, "error.html", status_code=exc.status_code, code=exc.status_code, detail=exc.detail
            )
        return JSONResponse({"detail": exc.detail}, status_code=exc.status_code, headers=exc.headers)
