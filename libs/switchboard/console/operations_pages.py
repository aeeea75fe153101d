"""Console: tools, channels and people of a tenant (admins).

* **Tools** (``/t/{slug}/tools``): the toolbox with enable/disable and per-tool configuration (JSON),
  through :mod:`switchboard.tools.toolbox` (``PUT /v1/admin/tenants/{slug}/tools/{name}`` is the same).
* **Channels** (``/t/{slug}/channels``): connected accounts per channel with their health: the last
  webhook (newest inbound message stored for the account), the last send error (newest outbox part
  with an error), the token state (credentials stored; a Gmail mailbox's ``needs_reauth``); and the
  connect flows, through the same library code as ``switchboard channel add-*``:
  a WhatsApp number / an Instagram account (``POST /t/{slug}/channels/{whatsapp|instagram}``:
  :func:`switchboard.channels.accounts.connect_channel_account`, the token write-only and encrypted),
  a Gmail mailbox with OAuth (``POST /t/{slug}/channels/gmail/authorize`` sends the browser to Google's
  consent page — the local Google sandbox when ``GMAIL_*`` URLs are unset — which comes back to
  ``GET /t/{slug}/channels/gmail/callback``: :mod:`switchboard.channels.gmail.mailboxes`, as the CLI
  and ``/v1/admin/tenants/{slug}/gmail/...``). The client secret travels only inside the encrypted
  ``state``; nothing secret is ever shown back.
* **People** (``/t/{slug}/people``): human agents with online state, current load and total
  (``GET /v1/admin/tenants/{slug}/agents``), and the tenant's console users.
"""

from __future__ import annotations

import json
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Form, HTTPException, Request, status
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from sqlalchemy import text
from sqlmodel import col, select

from switchboard.api.access import ADMIN_ROLES
from switchboard.api.deps import SessionDep, SessionsDep, SettingsDep
from switchboard.channels.accounts import (
    TOKEN_STATES_OK,
    AccountTaken,
    account_token_state,
    api_base_option,
    connect_channel_account,
    token_state_label,
)
from switchboard.channels.base import channel_class, channel_names
from switchboard.channels.gmail.client import GmailApiError, GmailClient, OAuthError
from switchboard.channels.gmail.mailboxes import (
    AuthorizationRefused,
    code_from_answer,
    finish_authorization,
    start_authorization,
)
from switchboard.channels.gmail.oauth import parse_client_secrets
from switchboard.console.app import register_nav, render
from switchboard.console.deps import PageContext, page_access
from switchboard.crypto import CredentialCipher
from switchboard.db.models import ConsoleUser, HumanAgent
from switchboard.i18n import N_
from switchboard.observability import get_logger
from switchboard.settings import Settings
from switchboard.tools.toolbox import UnknownTool, configure_tool, list_assignments, set_enabled

__all__ = ["operations_pages_router", "channel_health"]

log = get_logger(__name__)
operations_pages_router = APIRouter(include_in_schema=False)
AdminPage = Annotated[PageContext, Depends(page_access(ADMIN_ROLES))]
register_nav("tools", N_("Tools"), "/tools", ADMIN_ROLES)
register_nav("channels", N_("Channels"), "/channels", ADMIN_ROLES)
register_nav("people", N_("People"), "/people", ADMIN_ROLES)
_WORDS = (N_("online"), N_("offline"))  # token states: channels.accounts.TOKEN_STATE_LABELS
"""Token and agent states the templates translate."""


async def _tools_page(
    request: Request, page: PageContext, session: Any, *, error: str | None = None, code: int = 200
) -> Response:
    tools = await list_assignments(session, page.tenant.id)
    return render(
        request, "tools.html", status_code=code, tenant=page.tenant, tools=tools, error=error, active="tools"
    )


@operations_pages_router.get("/t/{slug}/tools", response_class=HTMLResponse)
async def tools_page(request: Request, page: AdminPage, session: SessionDep) -> Response:
    return await _tools_page(request, page, session)


@operations_pages_router.post("/t/{slug}/tools/{tool_name}", response_class=HTMLResponse)
async def tools_update(
    request: Request,
    tool_name: str,
    page: AdminPage,
    session: SessionDep,
    enabled: Annotated[str | None, Form()] = None,
    custom_config: Annotated[str | None, Form(max_length=20_000)] = None,
) -> Response:
    """Enable/disable (``enabled``: on/off) and/or replace the configuration (``custom_config``: a JSON object)."""
    actor = f"console:{page.user.email}"
    try:
        if custom_config is not None and custom_config.strip():
            try:
                config = json.loads(custom_config)
            except json.JSONDecodeError as exc:
                return await _tools_page(
                    request, page, session, error=f"{tool_name}: not JSON ({exc})", code=422
                )
            if not isinstance(config, dict):
                return await _tools_page(
                    request, page, session, error=f"{tool_name}: the configuration is a JSON object", code=422
                )
            await configure_tool(session, page.tenant.id, tool_name, config)
        if enabled in ("on", "off"):
            await set_enabled(session, page.tenant.id, tool_name, enabled=enabled == "on", actor=actor)
    except UnknownTool as exc:
        raise HTTPException(status.HTTP_404_NOT_FOUND, str(exc)) from None
    await session.commit()
    return await _tools_page(request, page, session)


_HEALTH = text(
    """
    SELECT a.id, a.channel, a.external_account_id, a.display_name, a.is_active, a.api_base_url,
           a.credentials_encrypted IS NOT NULL AS has_credentials,
           (SELECT max(m.created_at) FROM messages m WHERE m.channel_account_id = a.id AND m.direction = 'inbound')
               AS last_webhook_at,
           (SELECT o.error_code || ': ' || coalesce(o.error_message, '') FROM outbox o
               WHERE o.channel_account_id = a.id AND o.error_code IS NOT NULL ORDER BY o.updated_at DESC LIMIT 1)
               AS last_send_error,
           (SELECT max(o.updated_at) FROM outbox o WHERE o.channel_account_id = a.id AND o.error_code IS NOT NULL)
               AS last_send_error_at,
           (SELECT g.status FROM gmail_mailboxes g WHERE g.channel_account_id = a.id LIMIT 1) AS mailbox_status
    FROM channel_accounts a WHERE a.tenant_id = :tenant ORDER BY a.channel, a.external_account_id
    """
)


def _token_state(row: dict[str, Any], settings: Settings | None) -> str:
    return account_token_state(
        is_active=bool(row.get("is_active")),
        has_credentials=bool(row.get("has_credentials")),
        mailbox_status=row.get("mailbox_status"),
        on_sandbox=settings is not None
        and settings.account_on_sandbox(row["channel"], row.get("api_base_url")),
    )


async def channel_health(
    session: Any, tenant_id: Any, *, settings: Settings | None = None
) -> dict[str, list[dict[str, Any]]]:
    """``{channel: [account health]}`` (see the module docstring); every channel key present.

    ``token_state`` is :func:`~switchboard.channels.accounts.account_token_state` (as ``channel list``
    shows it; ``settings`` tell a sandbox account, which needs no token), ``token_label`` its words,
    ``token_ok`` whether the account can send with it.
    """
    grouped: dict[str, list[dict[str, Any]]] = {name: [] for name in channel_names()}
    for row in (await session.execute(_HEALTH, {"tenant": tenant_id})).mappings():
        item = dict(row)
        item["token_state"] = _token_state(item, settings)
        item["token_label"] = token_state_label(item["token_state"])
        item["token_ok"] = item["token_state"] in TOKEN_STATES_OK
        grouped.setdefault(item["channel"], []).append(item)
    return grouped


async def _channels_page(
    request: Request, page: PageContext, session: Any, *, message: tuple[str, str] | None = None,
    error: str | None = None, code: int = 200,
) -> Response:  # fmt: skip
    health = await channel_health(session, page.tenant.id, settings=request.app.state.settings)
    return render(
        request, "channels.html", status_code=code, tenant=page.tenant, health=health, message=message,
        error=error, active="channels",
    )  # fmt: skip


@operations_pages_router.get("/t/{slug}/channels", response_class=HTMLResponse)
async def channels_page(request: Request, page: AdminPage, session: SessionDep) -> Response:
    """The Channels page; ``?flash=`` (set by a redirect here, e.g. a Gmail callback without ``state``)
    is shown as an alert."""
    flash = (request.query_params.get("flash") or "")[:300] or None
    return await _channels_page(request, page, session, error=flash)


@operations_pages_router.post("/t/{slug}/channels/{channel}", response_class=HTMLResponse)
async def channels_connect(
    request: Request,
    channel: str,
    page: AdminPage,
    session: SessionDep,
    settings: SettingsDep,
    account_id: Annotated[str, Form(max_length=64)],
    access_token: Annotated[str, Form(max_length=4000)] = "",
    display_name: Annotated[str, Form(max_length=200)] = "",
    api_base: Annotated[str, Form(max_length=300)] = "",
) -> Response:
    """Connect (or update) a WhatsApp number or an Instagram account: ``account_id`` (digits), the
    token (write-only; empty keeps the stored one, or means the sandbox for a new account), the name,
    ``api_base`` (``sandbox`` / ``real``; empty: real with a token, sandbox without). Any other API
    address is refused: it is the operator's setting (environment or CLI), never a tenant's."""
    # Channels connected with an account id and a token declare how their id is named in messages.
    label = getattr(channel_class(channel), "account_id_label", None)
    if label is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, "connect whatsapp or instagram here; gmail with OAuth")
    account_id, token = account_id.strip(), access_token.strip() or None
    try:
        if not account_id.isdigit():
            raise ValueError(f"The {label} is digits only.")
        if api_base.strip() not in ("", "sandbox", "real"):
            log.warning("channel_api_base_refused", tenant_id=str(page.tenant.id), channel=channel)
            raise ValueError(
                "Choose the sandbox or the real Graph API: another API address can only be set by the "
                "platform's operator."
            )
        base = api_base_option(api_base.strip() or None, has_token=token is not None)
        account, created = await connect_channel_account(
            session, tenant=page.tenant, channel=channel, external_account_id=account_id, access_token=token,
            display_name=display_name.strip() or None, cipher=CredentialCipher.from_settings(settings), api_base_url=base, label=label,
        )  # fmt: skip
        await session.commit()
    except (AccountTaken, ValueError) as exc:
        await session.rollback()
        return await _channels_page(request, page, session, error=str(exc), code=422)
    log.warning(
        "channel_account_connected", tenant_id=str(page.tenant.id), channel=channel, account_id=account_id,
        created=created, actor=f"console:{page.user.email}",
    )  # fmt: skip
    done = N_("Connected") if created else N_("Updated")
    return await _channels_page(
        request, page, session, message=(done, f"{channel} {account.external_account_id}")
    )


@operations_pages_router.post("/t/{slug}/channels/gmail/authorize")
async def channels_gmail_authorize(
    request: Request,
    page: AdminPage,
    session: SessionDep,
    settings: SettingsDep,
    client_secrets: Annotated[str, Form(max_length=20_000)],
    login_hint: Annotated[str, Form(max_length=320)] = "",
) -> Response:
    """Start connecting a Gmail mailbox: the OAuth client JSON (write-only) and the mailbox address;
    the browser goes to the consent page and comes back to the callback below."""
    try:
        secrets = parse_client_secrets(json.loads(client_secrets))
    except (json.JSONDecodeError, ValueError) as exc:
        return await _channels_page(request, page, session, error=f"OAuth client JSON: {exc}", code=422)
    callback = str(request.url_for("channels_gmail_callback", slug=page.tenant.slug))
    auth = start_authorization(
        cipher=CredentialCipher.from_settings(settings), auth_url=settings.resolved_gmail_auth_url, scopes=settings.gmail_oauth_scopes,
        tenant_id=page.tenant.id, secrets=secrets, redirect_uri=callback, login_hint=login_hint.strip() or None,
    )  # fmt: skip
    return RedirectResponse(auth.url, status_code=303)


@operations_pages_router.get("/t/{slug}/channels/gmail/callback", response_class=HTMLResponse)
async def channels_gmail_callback(
    request: Request, page: AdminPage, session: SessionDep, sessions: SessionsDep, settings: SettingsDep
) -> Response:
    """Google's redirect after consent (``?code=&state=``, or ``?error=``): store the mailbox's tokens
    encrypted and start its sync (:func:`~switchboard.channels.gmail.mailboxes.finish_authorization`)."""
    state = request.query_params.get("state") or ""
    if not state:  # a bookmarked, replayed or hand-typed callback: back to the Channels page, saying why
        log.warning("console_gmail_callback_without_state", tenant_id=str(page.tenant.id))
        flash = "Gmail: the answer from Google carried no state; connect the mailbox again from this page."
        return RedirectResponse(
            f"/t/{page.tenant.slug}/channels?" + urlencode({"flash": flash}),
            status_code=status.HTTP_303_SEE_OTHER,
        )
    client = GmailClient(settings.resolved_gmail_api_base_url, settings.resolved_gmail_token_url,
                         timeout_s=settings.gmail_timeout_s)  # fmt: skip
    try:
        code = code_from_answer(str(request.url), state=state)
        connected = await finish_authorization(sessions=sessions, cipher=CredentialCipher.from_settings(settings), client=client,
                                               tenant_id=page.tenant.id, state=state, code=code)  # fmt: skip
    except (AuthorizationRefused, OAuthError, GmailApiError, ValueError) as exc:
        log.warning("console_gmail_connect_failed", tenant_id=str(page.tenant.id), error=str(exc))
        return await _channels_page(request, page, session, error=f"Gmail: {exc}", code=422)
    finally:
        await client.aclose()
    log.warning(
        "channel_account_connected", tenant_id=str(page.tenant.id), channel="gmail", account_id=connected.email,
        created=not connected.reconnected, actor=f"console:{page.user.email}",
    )  # fmt: skip
    done = N_("Reconnected") if connected.reconnected else N_("Connected")
    return await _channels_page(request, page, session, message=(done, f"gmail {connected.email}"))


@operations_pages_router.get("/t/{slug}/people", response_class=HTMLResponse)
async def people_page(request: Request, page: AdminPage, session: SessionDep) -> Response:
    agents = (
        await session.exec(
            select(HumanAgent)
            .where(col(HumanAgent.tenant_id) == page.tenant.id)
            .order_by(col(HumanAgent.name))
        )
    ).all()
    users = (
        await session.exec(
            select(ConsoleUser)
            .where(col(ConsoleUser.tenant_id) == page.tenant.id)
            .order_by(col(ConsoleUser.email))
        )
    ).all()
    return render(request, "people.html", tenant=page.tenant, agents=agents, users=users, active="people")
