"""Export one customer: a ZIP with ``customer.json`` (everything stored about them) and their media files.

:func:`export_customer` builds the ZIP in memory and returns its bytes; :func:`write_export` (the
``export_customer`` background job) stores it in media storage under ``exports/<tenant>/<export id>.zip``,
and :func:`export_link` / :func:`export_link_is_valid` sign and check the expiring download link the
console serves (HMAC over the key and the expiry, with a purpose of its own: a media link never opens an
export).

``customer.json``::

    {"format": "switchboard.customer_export/1", "exported_at", "customer": {...},
     "identities": [...], "conversations": [{..., "messages": [...]}], "memory": {...} | null,
     "leads": [...], "meetings": [...], "orders": [...], "pending_actions": [...], "feedback": [...]}

Every message of every conversation is there (text, kind, media entries with ``file``: the path of the
copy inside the ZIP when we stored one), oldest first.
"""

from __future__ import annotations

import io
import json
import time
import uuid
import zipfile
from datetime import datetime
from decimal import Decimal
from typing import Any
from urllib.parse import quote

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, async_sessionmaker
from sqlmodel.ext.asyncio.session import AsyncSession

from switchboard.db.models import AuditLog
from switchboard.media.links import link_is_valid, link_signature
from switchboard.media.store import MediaCopyFailed, MediaStore, is_stored, key_of
from switchboard.observability import get_logger
from switchboard.privacy.erase import CustomerNotFound
from switchboard.settings import Settings

__all__ = [
    "EXPORT_FORMAT",
    "EXPORT_LINKS",
    "audit_export",
    "export_customer",
    "export_key",
    "export_link",
    "export_link_is_valid",
    "new_export_id",
    "write_export",
]

log = get_logger(__name__)

EXPORT_FORMAT = "switchboard.customer_export/1"
EXPORT_LINKS = b"switchboard-customer-exports"
"""The purpose export links are signed for."""


def new_export_id() -> str:
    """A fresh, unguessable export id (32 hex characters)."""
    return uuid.uuid4().hex


def export_key(tenant_id: uuid.UUID, export_id: str) -> str:
    """Where the export ``export_id`` of ``tenant_id`` is stored in media storage.

    Raises:
        ValueError: ``export_id`` is not 32 hex characters.
    """
    if len(export_id) != 32 or any(c not in "0123456789abcdef" for c in export_id):
        raise ValueError("not an export id")
    return f"exports/{tenant_id}/{export_id}.zip"


def export_link(
    settings: Settings, tenant_id: uuid.UUID, export_id: str, *, base_url: str, now: float | None = None
) -> str:
    """A signed link ``{base_url}/{export_id}.zip?exp=..&sig=..`` to the export ``export_id`` of
    ``tenant_id``, valid for ``CUSTOMER_EXPORT_LINK_TTL_S`` seconds; the signature covers the stored key
    (:func:`export_key`), so the link opens that tenant's file only.

    Raises:
        ValueError: a malformed ``export_id``.
    """
    key = export_key(tenant_id, export_id)
    exp = int((now if now is not None else time.time()) + settings.customer_export_link_ttl_s)
    sig = link_signature(settings, key, exp, purpose=EXPORT_LINKS)
    return f"{base_url.rstrip('/')}/{quote(export_id)}.zip?exp={exp}&sig={sig}"


def export_link_is_valid(
    settings: Settings, key: str, exp: int, sig: str, *, now: float | None = None
) -> bool:
    """Whether ``sig`` is an export link's for ``key`` and ``exp`` has not passed."""
    return link_is_valid(settings, key, exp, sig, now=now, purpose=EXPORT_LINKS)


def _plain(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, Decimal):
        return str(value)
    return value


async def _rows(conn: AsyncConnection, query: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    result = await conn.execute(text(query), params)
    return [{k: _plain(v) for k, v in row.items()} for row in result.mappings()]


async def export_customer(
    sessions: async_sessionmaker[AsyncSession],
    *,
    tenant_id: uuid.UUID,
    customer_id: uuid.UUID,
    store: MediaStore | None = None,
) -> bytes:
    """The ZIP (bytes) of everything stored about the customer (the module docstring gives its shape);
    media files that are no longer in storage are listed with ``"file": null``.

    Raises:
        CustomerNotFound: no such customer in the tenant.
    """
    p = {"t": tenant_id, "c": customer_id}
    async with sessions() as session:
        conn = await session.connection()
        customers = await _rows(
            conn,
            "SELECT id, channel, external_user_id, phone, email, display_name, profile, created_at, updated_at "
            "FROM customers WHERE tenant_id = :t AND id = :c",
            p,
        )
        if not customers:
            raise CustomerNotFound(f"no customer {customer_id} in this tenant")
        identities = await _rows(
            conn,
            "SELECT channel, kind, value, created_at, last_seen_at, retired_at FROM customer_identities "
            "WHERE tenant_id = :t AND customer_id = :c ORDER BY created_at",
            p,
        )
        conversations = await _rows(
            conn,
            "SELECT id, channel, status, created_at, closed_at, escalation_reason FROM conversations "
            "WHERE tenant_id = :t AND customer_id = :c ORDER BY created_at",
            p,
        )
        messages = await _rows(
            conn,
            "SELECT m.id, m.conversation_id, m.direction, m.role, m.kind, m.text, m.media, m.sent_at, m.created_at "
            "FROM messages m JOIN conversations c ON c.id = m.conversation_id "
            "WHERE m.tenant_id = :t AND c.customer_id = :c AND m.role <> 'tool' AND m.kind <> 'tool_result' "
            "ORDER BY m.created_at, m.id",
            p,
        )
        memory = await _rows(
            conn,
            "SELECT summary, facts, updated_at FROM user_memories WHERE tenant_id = :t AND customer_id = :c",
            p,
        )
        leads = await _rows(
            conn,
            "SELECT id, interest, notes, summary, status, consent, source, created_at FROM leads "
            "WHERE tenant_id = :t AND customer_id = :c ORDER BY created_at",
            p,
        )
        meetings = await _rows(
            conn,
            "SELECT m.id, m.topic, s.starts_at, s.duration_min, m.created_at FROM meetings m "
            "LEFT JOIN meeting_slots s ON s.id = m.slot_id WHERE m.tenant_id = :t AND m.customer_id = :c",
            p,
        )
        orders = await _rows(
            conn,
            "SELECT order_number, status, total, currency, items, carrier, tracking_number, placed_at "
            "FROM orders WHERE tenant_id = :t AND customer_id = :c ORDER BY placed_at",
            p,
        )
        pending = await _rows(
            conn,
            "SELECT tool_name, arguments, status, created_at, decided_at FROM pending_actions "
            "WHERE tenant_id = :t AND customer_id = :c ORDER BY created_at",
            p,
        )
        feedback = await _rows(
            conn,
            "SELECT f.message_id, f.rating, f.comment, f.created_at FROM feedback f "
            "JOIN conversations c ON c.id = f.conversation_id WHERE f.tenant_id = :t AND c.customer_id = :c",
            p,
        )
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        written: dict[str, str | None] = {}
        for message in messages:
            for item in message["media"] or []:
                ref = item.get("ref") if isinstance(item, dict) else None
                if not is_stored(ref):
                    continue
                if ref not in written:
                    written[ref] = await _add_file(archive, store, str(ref))
                item["file"] = written[ref]
                item.pop("ref", None)
        by_conversation: dict[str, list[dict[str, Any]]] = {}
        for message in messages:
            by_conversation.setdefault(message.pop("conversation_id"), []).append(message)
        for conversation in conversations:
            conversation["messages"] = by_conversation.get(conversation["id"], [])
        document = {
            "format": EXPORT_FORMAT,
            "exported_at": _plain(datetime.now().astimezone()),
            "customer": customers[0],
            "identities": identities,
            "conversations": conversations,
            "memory": memory[0] if memory else None,
            "leads": leads,
            "meetings": meetings,
            "orders": orders,
            "pending_actions": pending,
            "feedback": feedback,
        }
        archive.writestr("customer.json", json.dumps(document, ensure_ascii=False, indent=2))
    return buffer.getvalue()


async def _add_file(archive: zipfile.ZipFile, store: MediaStore | None, ref: str) -> str | None:
    if store is None:
        return None
    try:
        data = await store.get(ref)
    except MediaCopyFailed:
        return None
    name = "media/" + key_of(ref).rsplit("/", 1)[-1]
    archive.writestr(name, data)
    return name


async def audit_export(
    sessions: async_sessionmaker[AsyncSession], *, tenant_id: uuid.UUID, customer_id: uuid.UUID, actor: str
) -> None:
    """Record who exported which customer (``customer_exported`` in ``audit_logs``; no personal data)."""
    async with sessions() as session, session.begin():
        session.add(
            AuditLog(
                tenant_id=tenant_id,
                actor=actor[:128],
                action="customer_exported",
                target_type="customer",
                target_id=str(customer_id),
            )
        )


async def write_export(
    sessions: async_sessionmaker[AsyncSession],
    store: MediaStore,
    *,
    tenant_id: uuid.UUID,
    customer_id: uuid.UUID,
    export_id: str,
    actor: str = "system",
) -> str:
    """Build the export, store it and audit it (``actor``: who asked); returns its key (:func:`export_key`).

    Raises:
        CustomerNotFound: no such customer in the tenant.
        ValueError: a malformed ``export_id``.
    """
    key = export_key(tenant_id, export_id)
    data = await export_customer(sessions, tenant_id=tenant_id, customer_id=customer_id, store=store)
    await store.write(key, data)
    await audit_export(sessions, tenant_id=tenant_id, customer_id=customer_id, actor=actor)
    log.info(
        "customer_exported", tenant_id=str(tenant_id), customer_id=str(customer_id), size_bytes=len(data)
    )
    return key
