"""WhatsApp delivery statuses → the channel-neutral :class:`~switchboard.outbox.statuses.DeliveryStatus`.

The rules (monotonic, ``failed`` before ``read`` only, matching by ``wamid`` or by the
``biz_opaque_callback_data`` we sent, parking) live in :mod:`switchboard.outbox.statuses`. What is
WhatsApp's own is here: which failures block the conversation: 131047 (outside the 24-hour window) and 131026
(undeliverable) are recorded on it, and nothing is retried as free text.
"""

from __future__ import annotations

__all__ = ["conversation_block_reason"]


def conversation_block_reason(code: int | None) -> str | None:
    """Text recorded on the conversation for a permanent recipient error, or ``None``."""
    if code == 131047:
        return "whatsapp 131047: outside the 24-hour window; needs a template message or a human"
    if code == 131026:
        return "whatsapp 131026: message undeliverable to this customer"
    return None
