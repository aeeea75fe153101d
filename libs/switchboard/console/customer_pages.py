"""The customer page (``/t/{slug}/customers/{id}``): who the customer is across channels, their
conversations, memory, leads and opt-out state; editing their name and attributes; and, for tenant
admins, exporting everything stored about them and erasing them (confirmed by typing an identity).

Export and erase run as background jobs (:mod:`switchboard.privacy`); the page says how far they got
(the export card polls itself until its download link is ready).
An export is downloaded from ``/t/{slug}/customers/exports/{id}.zip`` behind a signed link that expires
(``CUSTOMER_EXPORT_LINK_TTL_S``), and only by a signed-in admin of the tenant.
"""

from __future__ import annotations

import re
import uuid
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Form, HTTPException, Query, Request, status
from fastapi.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from sqlalchemy import text
from sqlmodel import col, select

from switchboard.api.access import ADMIN_ROLES, INBOX_ROLES
from switchboard.api.deps import ResourcesDep, SessionDep, SettingsDep
from switchboard.console.app import console_language, render
from switchboard.console.deps import PageContext, page_access
from switchboard.db.models import Customer, CustomerIdentity
from switchboard.i18n import N_, gettext
from switchboard.media.store import MediaCopyFailed, MediaStore
from switchboard.observability import get_logger
from switchboard.privacy.erase import ERASED_PREFIX, ERASING_PREFIX, confirms_identity
from switchboard.privacy.export import export_key, export_link, export_link_is_valid, new_export_id
from switchboard.queue.jobs import enqueue_erase_customer, enqueue_export_customer, export_pending
from switchboard.runtime.resources import Resources
from switchboard.settings import Settings
from switchboard.validation import has_unstorable_chars

__all__ = ["customer_pages_router", "customer_page_data", "parse_attributes"]

log = get_logger(__name__)
customer_pages_router = APIRouter(include_in_schema=False)
InboxPage = Annotated[PageContext, Depends(page_access(INBOX_ROLES))]
AdminPage = Annotated[PageContext, Depends(page_access(ADMIN_ROLES))]

_KEY = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_ .-]{0,63}$")
MAX_ATTRIBUTES = 50
MAX_VALUE_CHARS = 500

BAD_ATTRIBUTES = N_(
    "Write one attribute a line as name = value (names of letters, digits, spaces, _ . -; values up to 500 characters; at most 50)."
)
NOT_THE_IDENTITY = N_("That is not this customer's identity: nothing was erased.")
ERASE_STARTED = N_("Erasing this customer. This cannot be undone; the page shows when it is done.")
EXPORT_STARTED = N_("Preparing the export. The download link appears here when it is ready.")
SAVED = N_("Saved.")


def parse_attributes(raw: str) -> dict[str, str]:
    """``name = value`` lines → attributes.

    Raises:
        ValueError: a line without ``=``, a bad name, a value too long or unstorable, too many lines.
    """
    out: dict[str, str] = {}
    for line in raw.replace("\r\n", "\n").split("\n"):
        if not line.strip():
            continue
        name, sep, value = line.partition("=")
        name, value = name.strip(), value.strip()
        if not sep or not _KEY.match(name) or len(value) > MAX_VALUE_CHARS or has_unstorable_chars(value):
            raise ValueError(line[:80])
        out[name] = value
    if len(out) > MAX_ATTRIBUTES:
        raise ValueError("too many")
    return out


def _plain_attributes(profile: dict[str, Any]) -> dict[str, str]:
    """The attributes a person edits: text and number values (structured ones, such as the opt-out
    record, are shown apart and kept)."""
    return {
        k: str(v) for k, v in profile.items() if isinstance(v, str | int | float) and not isinstance(v, bool)
    }


async def _customer_or_404(session: Any, page: PageContext, customer_id: uuid.UUID) -> Customer:
    customer = (
        await session.exec(
            select(Customer).where(Customer.tenant_id == page.tenant.id, Customer.id == customer_id)
        )
    ).first()
    if customer is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, "customer not found")
    return customer


async def customer_page_data(session: Any, tenant_id: uuid.UUID, customer: Customer) -> dict[str, Any]:
    """What the customer page shows: identities, conversations (newest first, with message counts),
    memory, leads, opt-out state, attributes, erase state."""
    p = {"t": tenant_id, "c": customer.id}
    conn = await session.connection()
    identities = list(
        (
            await session.exec(
                select(CustomerIdentity)
                .where(CustomerIdentity.tenant_id == tenant_id, CustomerIdentity.customer_id == customer.id)
                .order_by(
                    col(CustomerIdentity.retired_at).desc().nulls_first(), col(CustomerIdentity.created_at)
                )
            )
        ).all()
    )
    conversations = (
        (
            await conn.execute(
                text(
                    "SELECT c.id, c.channel, c.status, c.created_at, c.closed_at, "
                    "(SELECT count(*) FROM messages m WHERE m.conversation_id = c.id AND m.role IN ('user', 'assistant', "
                    "'human_agent')) AS messages FROM conversations c WHERE c.tenant_id = :t AND c.customer_id = :c "
                    "ORDER BY c.created_at DESC LIMIT 200"
                ),
                p,
            )
        )
        .mappings()
        .all()
    )
    memory = (
        (
            await conn.execute(
                text(
                    "SELECT summary, facts, updated_at FROM user_memories WHERE tenant_id = :t AND customer_id = :c"
                ),
                p,
            )
        )
        .mappings()
        .first()
    )
    leads = (
        (
            await conn.execute(
                text(
                    "SELECT interest, summary, status, consent, created_at FROM leads WHERE tenant_id = :t "
                    "AND customer_id = :c ORDER BY created_at DESC"
                ),
                p,
            )
        )
        .mappings()
        .all()
    )
    profile = dict(customer.profile or {})
    consents = {lead["consent"] for lead in leads}
    return {
        "customer": customer,
        "identities": identities,
        "conversations": conversations,
        "memory": memory,
        "leads": leads,
        "opt_out": profile.get("marketing_opt_out"),
        "consent": "denied" if "denied" in consents else "granted" if "granted" in consents else "unknown",
        "attributes": _plain_attributes(profile),
        "erasing": customer.external_user_id.startswith(ERASING_PREFIX),
        "erased": customer.external_user_id.startswith(ERASED_PREFIX),
    }


def _back(page: PageContext, customer_id: uuid.UUID, **query: str) -> RedirectResponse:
    target = f"/t/{page.tenant.slug}/customers/{customer_id}"
    if query:
        target += "?" + urlencode(query)
    return RedirectResponse(target, status_code=303)


def _flash(request: Request, page: PageContext, words: str) -> str:
    return gettext(console_language(request, page.tenant), words)


@customer_pages_router.get("/t/{slug}/customers/{customer_id}", response_class=HTMLResponse)
async def customer_page(
    request: Request,
    customer_id: uuid.UUID,
    page: InboxPage,
    session: SessionDep,
    settings: SettingsDep,
    resources: ResourcesDep,
    export: Annotated[str | None, Query(max_length=32)] = None,
    flash: Annotated[str | None, Query(max_length=300)] = None,
    error: Annotated[str | None, Query(max_length=300)] = None,
) -> Response:
    customer = await _customer_or_404(session, page, customer_id)
    data = await customer_page_data(session, page.tenant.id, customer)
    is_admin = page.role in ADMIN_ROLES
    state = await _export_state(settings, resources, page, export) if export and is_admin else None
    return render(
        request,
        "customer.html",
        tenant=page.tenant,
        active="inbox",
        is_admin=is_admin,
        flash=flash,
        error=error,
        export=state,
        **data,
    )


async def _export_state(
    settings: Settings, resources: Resources, page: PageContext, export_id: str
) -> dict[str, str] | None:
    """Where the export ``export_id`` is: ``{"id", "state": "ready", "download"}`` (a signed link),
    ``waiting`` (its job is queued or running) or ``failed`` (neither stored nor coming); ``None`` for a
    malformed id."""
    try:
        key = export_key(page.tenant.id, export_id)
    except ValueError:
        return None
    if await MediaStore.from_settings(settings).exists(key):
        link = export_link(settings, page.tenant.id, export_id, base_url=_exports_url(page))
        return {"id": export_id, "state": "ready", "download": link}
    if resources.redis is None or await export_pending(resources.redis, export_id):
        return {"id": export_id, "state": "waiting"}
    return {"id": export_id, "state": "failed"}


def _exports_url(page: PageContext) -> str:
    return f"/t/{page.tenant.slug}/customers/exports"


@customer_pages_router.get(
    "/t/{slug}/customers/{customer_id}/exports/{export_id}", response_class=HTMLResponse
)
async def export_card(
    request: Request,
    customer_id: uuid.UUID,
    export_id: str,
    page: AdminPage,
    session: SessionDep,
    settings: SettingsDep,
    resources: ResourcesDep,
) -> Response:
    """The customer page's export card alone (the page polls it while the export is prepared)."""
    customer = await _customer_or_404(session, page, customer_id)
    state = await _export_state(settings, resources, page, export_id)
    if state is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, "no such export")
    return render(request, "_customer_export.html", tenant=page.tenant, customer=customer, export=state)


@customer_pages_router.post("/t/{slug}/customers/{customer_id}/attributes")
async def save_attributes(
    request: Request,
    customer_id: uuid.UUID,
    page: InboxPage,
    session: SessionDep,
    display_name: Annotated[str, Form(max_length=200)] = "",
    attributes: Annotated[str, Form(max_length=40_000)] = "",
) -> Response:
    customer = await _customer_or_404(session, page, customer_id)
    if customer.external_user_id.startswith((ERASED_PREFIX, ERASING_PREFIX)):
        raise HTTPException(status.HTTP_409_CONFLICT, "customer erased")
    try:
        parsed = parse_attributes(attributes)
    except ValueError:
        return _back(page, customer_id, error=_flash(request, page, BAD_ATTRIBUTES))
    if has_unstorable_chars(display_name):
        return _back(page, customer_id, error=_flash(request, page, BAD_ATTRIBUTES))
    profile = dict(customer.profile or {})
    kept = {k: v for k, v in profile.items() if k not in _plain_attributes(profile)}  # structured: untouched
    customer.profile = {**kept, **parsed}
    customer.display_name = display_name.strip() or None
    session.add(customer)
    await session.commit()
    log.info(
        "customer_edited", customer_id=str(customer_id), user_id=str(page.user.id), attributes=len(parsed)
    )
    return _back(page, customer_id, flash=_flash(request, page, SAVED))


@customer_pages_router.post("/t/{slug}/customers/{customer_id}/erase")
async def erase_action(
    request: Request,
    customer_id: uuid.UUID,
    page: AdminPage,
    session: SessionDep,
    resources: ResourcesDep,
    confirm: Annotated[str, Form(max_length=320)] = "",
) -> Response:
    customer = await _customer_or_404(session, page, customer_id)
    if not await confirms_identity(session, tenant_id=page.tenant.id, customer=customer, typed=confirm):
        return _back(page, customer_id, error=_flash(request, page, NOT_THE_IDENTITY))
    if resources.redis is None:
        raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE, "the job queue is not available")
    await enqueue_erase_customer(
        resources.redis,
        tenant_id=page.tenant.id,
        customer_id=customer_id,
        actor=f"console_user:{page.user.id}",
    )
    log.info("customer_erase_requested", customer_id=str(customer_id), user_id=str(page.user.id))
    return _back(page, customer_id, flash=_flash(request, page, ERASE_STARTED))


@customer_pages_router.post("/t/{slug}/customers/{customer_id}/export")
async def export_action(
    request: Request, customer_id: uuid.UUID, page: AdminPage, session: SessionDep, resources: ResourcesDep
) -> Response:
    await _customer_or_404(session, page, customer_id)
    if resources.redis is None:
        raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE, "the job queue is not available")
    export_id = new_export_id()
    await enqueue_export_customer(
        resources.redis,
        tenant_id=page.tenant.id,
        customer_id=customer_id,
        export_id=export_id,
        actor=f"console_user:{page.user.id}",
    )
    return _back(page, customer_id, export=export_id, flash=_flash(request, page, EXPORT_STARTED))


@customer_pages_router.get("/t/{slug}/customers/exports/{export_id}.zip")
async def download_export(
    export_id: str,
    page: AdminPage,
    settings: SettingsDep,
    exp: Annotated[int, Query()],
    sig: Annotated[str, Query(max_length=128)],
) -> Response:
    """The export ZIP behind a signed link: the tenant's own exports only, 403 once the link expired."""
    try:
        key = export_key(page.tenant.id, export_id)
    except ValueError:
        key = None
    if key is None or not export_link_is_valid(settings, key, exp, sig):
        return PlainTextResponse("This download link has expired or is not valid.", status_code=403)
    try:
        data = await MediaStore.from_settings(settings).get(key)
    except MediaCopyFailed:
        return PlainTextResponse("This export is no longer stored.", status_code=404)
    return Response(
        data,
        media_type="application/zip",
        headers={
            "Content-Disposition": 'attachment; filename="customer-export.zip"',
            "Cache-Control": "no-store",
        },
    )
