"""WhatsApp-only effects of recorded rows, called through :meth:`WhatsAppChannel.on_record_only`."""

from __future__ import annotations

from typing import Any

from sqlmodel.ext.asyncio.session import AsyncSession

from switchboard.conversations import change_identity
from switchboard.db.models import Message
from switchboard.observability import get_logger

__all__ = ["record_only"]

log = get_logger(__name__)


async def record_only(session: AsyncSession, row: Message, ic: Any) -> None:
    """A ``user_changed_number`` system message moves the customer to the new number, a
    ``user_changed_user_id`` one to the new BSUID (history kept)."""
    system = ic.stored.system
    if row.kind != "system" or system is None:
        return
    kind = _CHANGED_KIND.get(system.type)
    if kind is None:
        return
    new = next((i.value for i in system.new_identities if i.kind == kind), None)
    old = next((i.value for i in ic.stored.identities if i.kind == kind), None)
    if new and old:
        await change_identity(
            session, tenant_id=row.tenant_id, channel="whatsapp", kind=kind, old_value=old, new_value=new
        )
        log.info("whatsapp_customer_rekeyed", kind=kind)


_CHANGED_KIND = {"user_changed_number": "wa_id", "user_changed_user_id": "bsuid"}
"""System message type → the identity kind it changes (Cloud API ``system`` webhook types)."""
