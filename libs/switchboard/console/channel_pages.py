"""Console: the channels of a tenant (admins), ``/t/{slug}/channels``.

Connected accounts per channel with their health (:func:`channel_health`): the last webhook (newest
inbound message stored for the account; a Gmail mailbox's last Pub/Sub push), the last send error
(newest outbox part with an error), the token state (credentials stored, ``invalid`` when Meta refused
the token on the last send, a Gmail mailbox's ``needs_reauth``), a Gmail mailbox's push or polling
state; for the Meta channels also what Meta's dashboard needs (the callback URL under
``PUBLIC_BASE_URL``, each account's own verify token, :mod:`switchboard.channels.handshakes`, whether
the app secret is set, the webhook fields) and when Meta last completed the handshake.

Connect flows, through the same library code as ``switchboard channel add-*``:

* a WhatsApp number / an Instagram account (``POST /t/{slug}/channels/{whatsapp|instagram}``): checked
  with Meta first (:mod:`switchboard.channels.meta_connect`: the token reads the number or account;
  for WhatsApp the app is subscribed to the WhatsApp Business Account with this number's callback and
  verify token, and Meta verifies the callback); a refusal is shown in words, in the page's language,
  and nothing is saved; then :func:`switchboard.channels.accounts.connect_channel_account` (the token
  write-only and encrypted). The same form with a new token rotates it.
* a Gmail mailbox with OAuth (``POST /t/{slug}/channels/gmail/authorize`` sends the browser to Google's
  consent page — the local Google sandbox when ``GMAIL_*`` URLs are unset — which comes back to
  ``GET /t/{slug}/channels/gmail/callback``: :mod:`switchboard.channels.gmail.mailboxes`, as the CLI
  and ``/v1/admin/tenants/{slug}/gmail/...``). The client secret travels only inside the encrypted
  ``state``; nothing secret is ever shown back.

The website chat (``web``) has no account to connect: ``POST /t/{slug}/channels/web/create`` makes a
widget (a public key for the script tag and a secret for the business's backend, shown once),
``.../web/{key}/rotate`` gives it a new secret (shown once), and ``.../web/settings`` saves the websites
it may run on and its look (tenant settings section ``web``, validated: an origin is scheme, host and
port). The page shows the snippet to copy.

``POST /t/{slug}/channels/{channel}/{account_id}/disconnect`` closes the account's open conversations,
deletes its token and switches it off (:func:`channels_disconnect`).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Form, HTTPException, Request, status
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from pydantic import ValidationError
from sqlalchemy import text
from sqlmodel import select

from switchboard.api.access import ADMIN_ROLES
from switchboard.api.deps import SessionDep, SessionsDep, SettingsDep
from switchboard.channels.accounts import (
    TOKEN_STATES_OK,
    AccountTaken,
    access_token_of,
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
from switchboard.channels.handshakes import account_verify_token, last_handshake
from switchboard.channels.meta_connect import (
    INSTAGRAM_WEBHOOK_FIELDS,
    WHATSAPP_WEBHOOK_FIELDS,
    ConnectRefused,
    check_instagram_account,
    check_whatsapp_number,
    subscribe_whatsapp_app,
)
from switchboard.channels.web.channel import public_url as web_public_url
from switchboard.channels.web.settings import WebSettings, normalize_origin
from switchboard.channels.web.widgets import create_widget, rotate_secret
from switchboard.console.actions import Actioner
from switchboard.console.actions import close as close_conversation_action
from switchboard.console.app import console_language, render
from switchboard.console.deps import PageContext, page_access
from switchboard.crypto import CredentialCipher
from switchboard.db.models import ChannelAccount, Conversation, ConversationStatus, Tenant
from switchboard.i18n import N_, gettext
from switchboard.observability import get_logger
from switchboard.settings import Settings
from switchboard.tenant_settings import set_section, tenant_settings_from

__all__ = ["channel_pages_router", "channel_health"]

log = get_logger(__name__)
channel_pages_router = APIRouter(include_in_schema=False)
AdminPage = Annotated[PageContext, Depends(page_access(ADMIN_ROLES))]


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
           (SELECT o.error_code FROM outbox o WHERE o.channel_account_id = a.id AND o.error_code IS NOT NULL
               ORDER BY o.updated_at DESC LIMIT 1) AS last_send_error_code,
           (SELECT g.status FROM gmail_mailboxes g WHERE g.channel_account_id = a.id LIMIT 1) AS mailbox_status,
           (SELECT g.watch_expiration_ms FROM gmail_mailboxes g WHERE g.channel_account_id = a.id LIMIT 1)
               AS watch_expiration_ms,
           (SELECT g.last_synced_at FROM gmail_mailboxes g WHERE g.channel_account_id = a.id LIMIT 1)
               AS last_synced_at,
           (SELECT max(p.created_at) FROM gmail_push_notifications p WHERE p.channel_account_id = a.id)
               AS last_push_at
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


_INVALID_TOKEN_CODES = frozenset({"190"})
"""Send error codes that mean the stored token no longer works (Graph 190: invalid or expired)."""
_TOKEN_WORDS = {"invalid": N_("invalid or expired: rotate it")}
"""Token states of this page beyond :data:`~switchboard.channels.accounts.TOKEN_STATE_LABELS`."""


def _sync_mode(watch_expiration_ms: int | None) -> tuple[str, datetime | None]:
    """A Gmail mailbox's sync: ``("push", until)`` while its ``users.watch`` lasts, else ``("polling", None)``."""
    if watch_expiration_ms:
        until = datetime.fromtimestamp(watch_expiration_ms / 1000, tz=UTC)
        if until > datetime.now(UTC):
            return "push", until
    return "polling", None


async def channel_health(
    session: Any, tenant_id: Any, *, settings: Settings | None = None
) -> dict[str, list[dict[str, Any]]]:
    """``{channel: [account health]}`` (see the module docstring); every channel key present.

    ``token_state`` is :func:`~switchboard.channels.accounts.account_token_state` (as ``channel list``
    shows it; ``settings`` tell a sandbox account, which needs no token), or ``invalid`` when the newest
    send error is Meta's 190; ``token_label`` its words, ``token_ok`` whether the account can send with
    it. A Gmail mailbox also has ``sync_mode`` (``push`` while its watch lasts, until ``push_until``;
    else ``polling``), ``last_synced_at``, and its last Pub/Sub push as ``last_webhook_at``.
    """
    grouped: dict[str, list[dict[str, Any]]] = {name: [] for name in channel_names()}
    for row in (await session.execute(_HEALTH, {"tenant": tenant_id})).mappings():
        item = dict(row)
        item["token_state"] = _token_state(item, settings)
        if item["token_state"] == "stored" and item.get("last_send_error_code") in _INVALID_TOKEN_CODES:
            item["token_state"] = "invalid"  # the newest send error says Meta refuses the token now
        if item["channel"] == "gmail":
            item["sync_mode"], item["push_until"] = _sync_mode(item.get("watch_expiration_ms"))
            item["last_webhook_at"] = item.get("last_push_at") or item["last_webhook_at"]
        item["token_label"] = _TOKEN_WORDS.get(item["token_state"]) or token_state_label(item["token_state"])
        item["token_ok"] = item["token_state"] in TOKEN_STATES_OK
        grouped.setdefault(item["channel"], []).append(item)
    return grouped


_META_CHANNELS = ("whatsapp", "instagram")


async def _meta_setup(
    request: Request, settings: Settings, health: dict[str, list[dict[str, Any]]]
) -> dict[str, Any]:
    """What Meta's dashboard needs, per Meta channel: the callback URL, whether the app secret is set,
    and each account's own verify token and last completed handshake (added to its health row)."""
    resources = getattr(request.app.state, "resources", None)
    redis = getattr(resources, "redis", None)
    secret = settings.secret("meta_verify_token")
    for channel in _META_CHANNELS:
        for account in health.get(channel, []):
            account_id = account["external_account_id"]
            account["verify_token"] = account_verify_token(secret, channel, account_id)
            account["last_handshake_at"] = await last_handshake(redis, channel, account_id)
    app_secret = {"whatsapp": settings.meta_app_secret, "instagram": settings.instagram_app_secret}
    return {
        channel: {
            "callback_url": settings.callback_url(channel),
            "app_secret_set": app_secret[channel] is not None,
            "fields": WHATSAPP_WEBHOOK_FIELDS if channel == "whatsapp" else INSTAGRAM_WEBHOOK_FIELDS,
        }
        for channel in _META_CHANNELS
    }


async def _channels_page(
    request: Request,
    page: PageContext,
    session: Any,
    *,
    message: tuple[str, str] | None = None,
    error: str | None = None,
    code: int = 200,
    web_secret: tuple[str, str] | None = None,
) -> Response:
    settings = request.app.state.settings
    health = await channel_health(session, page.tenant.id, settings=settings)
    meta = await _meta_setup(request, settings, health)
    tenant = await session.get(Tenant, page.tenant.id)
    section = tenant_settings_from(tenant.settings_extensions if tenant else None).channel(WebSettings)
    web = {"url": web_public_url(settings), "look": section, "secret": web_secret}
    return render(
        request,
        "channels.html",
        status_code=code,
        tenant=page.tenant,
        health=health,
        meta=meta,
        message=message,
        error=error,
        active="channels",
        templates=await _templates(session, page.tenant.id),
        web=web,
    )


async def _templates(session: Any, tenant_id: Any) -> dict[str, dict[str, Any]]:
    """Per WhatsApp account id (``channel_accounts.id`` as text): its stored templates as
    :func:`~switchboard.channels.whatsapp.templates.template_summary` gives them, and its business
    account id."""
    from switchboard.channels.whatsapp.templates import list_templates, template_summary

    out: dict[str, dict[str, Any]] = {}
    for row in await list_templates(session, tenant_id=tenant_id):
        entry = out.setdefault(str(row.channel_account_id), {"waba_id": row.waba_id, "items": []})
        entry["items"].append(template_summary(row))
    return out


@channel_pages_router.post(
    "/t/{slug}/channels/whatsapp/{account_id}/templates/refresh", response_class=HTMLResponse
)
async def channels_templates_refresh(
    request: Request,
    account_id: str,
    page: AdminPage,
    session: SessionDep,
    settings: SettingsDep,
    waba_id: Annotated[str, Form(max_length=64)] = "",
) -> Response:
    """List one WhatsApp number's templates from Meta again (:func:`refresh_account_templates`); a
    refusal is said in plain words (422). 404: not this tenant's number."""
    from switchboard.channels.whatsapp.send import GraphSendError
    from switchboard.channels.whatsapp.templates import TemplateRefused, refresh_account_templates, refusal_of

    account = await _existing(session, "whatsapp", account_id)
    if account is None or account.tenant_id != page.tenant.id:
        raise HTTPException(status.HTTP_404_NOT_FOUND, "no such account")
    language = console_language(request, page.tenant)
    try:
        rows = await refresh_account_templates(
            session, settings, account=account, waba_id=waba_id.strip() or None
        )
    except TemplateRefused:
        await session.rollback()
        return await _channels_page(
            request,
            page,
            session,
            code=422,
            error=gettext(
                language, N_("Give the WhatsApp Business Account id (digits) this number belongs to.")
            ),
        )
    except GraphSendError as exc:
        await session.rollback()
        log.warning("templates_refresh_refused", tenant_id=str(page.tenant.id), code=exc.code)
        return await _channels_page(
            request,
            page,
            session,
            code=422,
            error=gettext(language, N_("WhatsApp did not list the templates: %(why)s"))
            % {"why": refusal_of(exc)},
        )
    await session.commit()
    approved = sum(r.status.upper() == "APPROVED" for r in rows)
    return await _channels_page(
        request,
        page,
        session,
        message=(
            N_("Templates refreshed"),
            f"whatsapp {account_id}: "
            + gettext(language, N_("%(count)s template(s), %(approved)s approved"))
            % {"count": len(rows), "approved": approved},
        ),
    )


@channel_pages_router.post("/t/{slug}/channels/web/create", response_class=HTMLResponse)
async def channels_web_create(
    request: Request, page: AdminPage, session: SessionDep, settings: SettingsDep
) -> Response:
    """A new website chat widget of this tenant; its secret is shown this once."""
    tenant = await session.get(Tenant, page.tenant.id)
    assert tenant is not None
    account, secret = await create_widget(
        session, tenant=tenant, cipher=CredentialCipher.from_settings(settings)
    )
    key = account.external_account_id
    await session.commit()
    log.info("web_widget_created", tenant_id=str(tenant.id), widget=key, actor=f"console:{page.user.email}")
    return await _channels_page(
        request, page, session, message=(N_("Widget created"), key), web_secret=(key, secret)
    )


@channel_pages_router.post("/t/{slug}/channels/web/settings", response_class=HTMLResponse)
async def channels_web_settings(
    request: Request,
    page: AdminPage,
    session: SessionDep,
    allowed_origins: Annotated[str, Form(max_length=5000)] = "",
    colour: Annotated[str, Form(max_length=7)] = "#1f6feb",
    greeting_en: Annotated[str, Form(max_length=300)] = "",
    greeting_es: Annotated[str, Form(max_length=300)] = "",
    title: Annotated[str, Form(max_length=80)] = "",
) -> Response:
    """Save the websites the widget may run on (one origin a line) and its look; a value that is not
    valid is named in the page's language (422) and nothing is saved."""
    tenant = await session.get(Tenant, page.tenant.id)
    assert tenant is not None
    language = console_language(request, page.tenant)
    try:
        # stored as browsers send them (the web service's preflight looks the stored value up)
        origins = [normalize_origin(line) for line in allowed_origins.splitlines() if line.strip()]
        set_section(
            tenant,
            "web",
            allowed_origins=origins,
            colour=colour.strip(),
            greeting_en=greeting_en.strip() or None,
            greeting_es=greeting_es.strip() or None,
            title=title.strip(),
        )
    except (ValidationError, ValueError) as exc:
        first = exc.errors()[0] if isinstance(exc, ValidationError) else {"loc": ("allowed_origins",)}
        field = str(first["loc"][0]) if first.get("loc") else ""
        words = {
            "allowed_origins": N_(
                "Each website is scheme, host and port only, one a line, like https://shop.example.com."
            ),
            "colour": N_("The colour is #rrggbb, like #1f6feb."),
        }.get(field, N_("A value is not valid."))
        await session.rollback()
        return await _channels_page(request, page, session, error=gettext(language, words), code=422)
    session.add(tenant)
    await session.commit()
    log.info(
        "web_widget_settings_saved",
        tenant_id=str(tenant.id),
        origins=len(origins),
        actor=f"console:{page.user.email}",
    )
    return await _channels_page(
        request, page, session, message=(N_("Saved"), gettext(language, N_("Website chat")))
    )


@channel_pages_router.post("/t/{slug}/channels/web/{key}/rotate", response_class=HTMLResponse)
async def channels_web_rotate(
    request: Request, key: str, page: AdminPage, session: SessionDep, settings: SettingsDep
) -> Response:
    """A new secret for this tenant's widget ``key`` (the old one stops verifying users at once),
    shown this once. 404: not this tenant's widget."""
    account = await _existing(session, "web", key)
    if account is None or account.tenant_id != page.tenant.id or not account.is_active:
        raise HTTPException(status.HTTP_404_NOT_FOUND, "no such widget")
    secret = await rotate_secret(session, account, CredentialCipher.from_settings(settings))
    await session.commit()
    log.warning(
        "web_widget_secret_rotated",
        tenant_id=str(page.tenant.id),
        widget=key,
        actor=f"console:{page.user.email}",
    )
    return await _channels_page(
        request, page, session, message=(N_("New secret"), key), web_secret=(key, secret)
    )


@channel_pages_router.get("/t/{slug}/channels", response_class=HTMLResponse)
async def channels_page(request: Request, page: AdminPage, session: SessionDep) -> Response:
    """The Channels page; ``?flash=`` (set by a redirect here, e.g. a Gmail callback without ``state``)
    is shown as an alert."""
    flash = (request.query_params.get("flash") or "")[:300] or None
    return await _channels_page(request, page, session, error=flash)


async def _existing(session: Any, channel: str, account_id: str) -> ChannelAccount | None:
    return (
        await session.exec(
            select(ChannelAccount).where(
                ChannelAccount.channel == channel, ChannelAccount.external_account_id == account_id
            )
        )
    ).first()


async def _check_with_meta(
    settings: Settings,
    *,
    channel: str,
    account_id: str,
    token: str,
    base: str | None,
    waba_id: str,
    language: str,
) -> tuple[str, str]:
    """The Graph checks of connecting ``account_id`` (:mod:`switchboard.channels.meta_connect`) against
    the API root it will use; returns ``(the name Meta gives it, what to add to the notice)``.

    Raises:
        ConnectRefused: Meta refused, in plain words.
    """
    root = settings.channel_api_base_url(channel, base)
    if channel == "instagram":
        found = await check_instagram_account(
            root,
            settings.instagram_api_version,
            token,
            account_id,
            timeout_s=settings.instagram_send_timeout_s,
        )
        return found.name or found.username, f"@{found.username}"  # a handle: the same in every language
    number = await check_whatsapp_number(
        root, settings.whatsapp_api_version, token, account_id, timeout_s=settings.whatsapp_send_timeout_s
    )
    words = gettext(language, N_("%(name)s %(phone)s, quality %(quality)s")) % {
        "name": number.display_name,
        "phone": number.phone_number,
        "quality": number.quality_rating,
    }
    if waba_id:
        await subscribe_whatsapp_app(
            root,
            settings.whatsapp_api_version,
            token,
            waba_id,
            callback_url=settings.callback_url(channel),
            verify_token=account_verify_token(settings.secret("meta_verify_token"), channel, account_id),
        )
        words += "; " + gettext(language, N_("app subscribed to the business account %(waba)s")) % {
            "waba": waba_id
        }
    return number.display_name, words


@channel_pages_router.post("/t/{slug}/channels/{channel}", response_class=HTMLResponse)
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
    waba_id: Annotated[str, Form(max_length=64)] = "",
) -> Response:
    """Connect (or update) a WhatsApp number or an Instagram account: ``account_id`` (digits), the
    token (write-only; empty keeps the stored one, or means the sandbox for a new account), the name,
    ``api_base`` (``sandbox`` / ``real``; empty: real with a token, sandbox without), and for WhatsApp
    ``waba_id``, the WhatsApp Business Account to subscribe the app to. Any other API address is
    refused: it is the operator's setting (environment or CLI), never a tenant's.

    Before anything is saved the token is checked with Meta (:func:`_check_with_meta`); a refusal (an
    invalid token, a missing permission, an account of another tenant) is shown in plain words (422)."""
    # Channels connected with an account id and a token declare how their id is named in messages.
    label = getattr(channel_class(channel), "account_id_label", None)
    if label is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, "connect whatsapp or instagram here; gmail with OAuth")
    account_id, token, waba_id = account_id.strip(), access_token.strip() or None, waba_id.strip()
    try:
        if not account_id.isdigit():
            raise ConnectRefused(N_("The %(label)s is digits only."), {"label": label})
        if waba_id and not waba_id.isdigit():
            raise ConnectRefused(N_("The WhatsApp Business Account id is digits only."))
        if api_base.strip() not in ("", "sandbox", "real"):
            log.warning("channel_api_base_refused", tenant_id=str(page.tenant.id), channel=channel)
            raise ConnectRefused(
                N_(
                    "Choose the sandbox or the real Graph API: another API address can only be set by the "
                    "platform's operator."
                )
            )
        cipher = CredentialCipher.from_settings(settings)
        existing = await _existing(session, channel, account_id)
        if existing is not None and existing.tenant_id != page.tenant.id:
            raise ConnectRefused(
                N_(
                    "This number is already connected to another business on this platform; it must be disconnected there first."
                )
                if channel == "whatsapp"
                else N_(
                    "This account is already connected to another business on this platform; it must be disconnected there first."
                )
            )
        if existing is not None and not api_base.strip():  # an update (a new token, a name): same API
            base, check_base = None, existing.api_base_url
        else:
            base = check_base = api_base_option(api_base.strip() or None, has_token=token is not None)
        check_token = token or (existing and access_token_of(existing, cipher))
        if not check_token and settings.account_on_sandbox(channel, check_base):
            check_token = "sandbox-token"
        if not check_token:
            raise ConnectRefused(
                N_(
                    "An account on the real Graph API needs its access token; without one, choose the sandbox."
                )
            )
        meta_name, checked = await _check_with_meta(
            settings,
            channel=channel,
            account_id=account_id,
            token=check_token,
            base=check_base,
            waba_id=waba_id,
            language=console_language(request, page.tenant),
        )
        account, created = await connect_channel_account(
            session,
            tenant=page.tenant,
            channel=channel,
            external_account_id=account_id,
            access_token=token,
            display_name=display_name.strip() or meta_name or None,
            cipher=cipher,
            api_base_url=base,
            label=label,
        )
        await session.commit()
    except (AccountTaken, ConnectRefused, ValueError) as exc:
        await session.rollback()
        log.warning(
            "channel_account_refused",
            tenant_id=str(page.tenant.id),
            channel=channel,
            account_id=account_id,
            reason=type(exc).__name__,
            code=getattr(exc, "code", None),
        )
        error = str(exc)
        if isinstance(exc, ConnectRefused):  # in the page's language
            error = gettext(console_language(request, page.tenant), exc.words) % exc.params
        return await _channels_page(request, page, session, error=error, code=422)
    log.warning(
        "channel_account_connected",
        tenant_id=str(page.tenant.id),
        channel=channel,
        account_id=account_id,
        created=created,
        actor=f"console:{page.user.email}",
    )
    done = N_("Connected") if created else N_("Updated")
    return await _channels_page(
        request, page, session, message=(done, f"{channel} {account.external_account_id}: {checked}")
    )


@channel_pages_router.post(
    "/t/{slug}/channels/{channel}/{account_id}/disconnect", response_class=HTMLResponse
)
async def channels_disconnect(
    request: Request,
    channel: str,
    account_id: str,
    page: AdminPage,
    session: SessionDep,
    sessions: SessionsDep,
) -> Response:
    """Disconnect one account of this tenant: each of its open conversations is closed (one in human
    mode is handed back first, as the Close button does: :func:`switchboard.console.actions.close`),
    its stored token is deleted and it is switched off, so webhooks for it are no longer taken in
    (once the channel service's cached lookup expires: :data:`~switchboard.channels.accounts.CACHE_TTL_S`).
    History stays; connecting it again later makes it active again. 404: not this tenant's account."""
    account = await _existing(session, channel, account_id)
    if account is None or account.tenant_id != page.tenant.id:
        raise HTTPException(status.HTTP_404_NOT_FOUND, "no such account")
    open_ids = (
        await session.exec(
            select(Conversation.id).where(
                Conversation.tenant_id == page.tenant.id,
                Conversation.channel_account_id == account.id,
                Conversation.status != ConversationStatus.closed.value,
                Conversation.is_agent_console.is_(False),  # type: ignore[attr-defined]
            )
        )
    ).all()
    await session.rollback()  # the closes run in their own transactions
    who = Actioner(tenant_id=page.tenant.id, user=page.user)
    redis = getattr(getattr(request.app.state, "resources", None), "redis", None)
    for conversation_id in open_ids:
        await close_conversation_action(
            sessions, redis, who=who, conversation_id=conversation_id, quietly=True
        )
    account = await _existing(session, channel, account_id)
    assert account is not None
    account.is_active, account.credentials_encrypted = False, None
    session.add(account)
    await session.commit()
    log.warning(
        "channel_account_disconnected",
        tenant_id=str(page.tenant.id),
        channel=channel,
        account_id=account_id,
        closed_conversations=len(open_ids),
        actor=f"console:{page.user.email}",
    )
    return await _channels_page(
        request,
        page,
        session,
        message=(
            N_("Disconnected"),
            f"{channel} {account_id}: "
            + gettext(console_language(request, page.tenant), N_("%(count)s open conversation(s) closed"))
            % {"count": len(open_ids)},
        ),
    )


@channel_pages_router.post("/t/{slug}/channels/gmail/authorize")
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
        cipher=CredentialCipher.from_settings(settings),
        auth_url=settings.resolved_gmail_auth_url,
        scopes=settings.gmail_oauth_scopes,
        tenant_id=page.tenant.id,
        secrets=secrets,
        redirect_uri=callback,
        login_hint=login_hint.strip() or None,
    )
    return RedirectResponse(auth.url, status_code=303)


@channel_pages_router.get("/t/{slug}/channels/gmail/callback", response_class=HTMLResponse)
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
    client = GmailClient(
        settings.resolved_gmail_api_base_url,
        settings.resolved_gmail_token_url,
        timeout_s=settings.gmail_timeout_s,
    )
    try:
        code = code_from_answer(str(request.url), state=state)
        connected = await finish_authorization(
            sessions=sessions,
            cipher=CredentialCipher.from_settings(settings),
            client=client,
            tenant_id=page.tenant.id,
            state=state,
            code=code,
        )
    except (AuthorizationRefused, OAuthError, GmailApiError, ValueError) as exc:
        log.warning("console_gmail_connect_failed", tenant_id=str(page.tenant.id), error=str(exc))
        return await _channels_page(request, page, session, error=f"Gmail: {exc}", code=422)
    finally:
        await client.aclose()
    log.warning(
        "channel_account_connected",
        tenant_id=str(page.tenant.id),
        channel="gmail",
        account_id=connected.email,
        created=not connected.reconnected,
        actor=f"console:{page.user.email}",
    )
    done = N_("Reconnected") if connected.reconnected else N_("Connected")
    return await _channels_page(request, page, session, message=(done, f"gmail {connected.email}"))
