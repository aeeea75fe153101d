"""WhatsApp delivery statuses → the channel-neutral :class:`~switchboard.outbox.statuses.DeliveryStatus`.

The rules (monotonic, ``failed`` before ``read`` only, matching by ``wamid`` or by the
``biz_opaque_callback_data`` we sent, parking) live in :mod:`switchboard.outbox.statuses`. What is
WhatsApp's own is here: the job argument's shape (:func:`~switchboard.channels.whatsapp.store.status_to_job_arg`)
and which failures block the conversation: 131047 (outside the 24-hour window) and 131026
(undeliverable) are recorded on it, and nothing is retried as free text.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from switchboard.outbox.statuses import DeliveryStatus

__all__ = ["conversation_block_reason", "to_delivery_statuses"]


def conversation_block_reason(code: int | None) -> str | None:
    """Text recorded on the conversation for a permanent recipient error, or ``None``."""
    if code == 131047:
        return "whatsapp 131047: outside the 24-hour window; needs a template message or a human"
    if code == 131026:
        return "whatsapp 131026: message undeliverable to this customer"
    return None


def to_delivery_statuses(items: list[dict[str, Any]]) -> list[DeliveryStatus]:
    """Job arguments of ``apply_whatsapp_statuses`` as neutral statuses (items without an id are dropped)."""
    out: list[DeliveryStatus] = []
    for item in items:
        external_id = item.get("external_id")
        if not external_id:
            continue
        code = item.get("error_code")
        stamp = item.get("timestamp")
        out.append(
            DeliveryStatus(
                account_id=str(item.get("account_id") or ""),
                external_id=str(external_id),
                status=str(item.get("status") or "").lower(),
                timestamp=datetime.fromisoformat(stamp) if stamp else None,
                correlation_id=item.get("biz_opaque_callback_data") or None,
                error_code=str(code) if code is not None else None,
                error_title=item.get("error_title"),
                conversation_reason=conversation_block_reason(code if isinstance(code, int) else None),
            )
        )
    return out
