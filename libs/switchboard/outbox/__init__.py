"""Where every message is sent from: one writer (:mod:`.writer`), one delivery loop (:mod:`.delivery`),
and delivery statuses that only move forward (:mod:`.statuses`)."""

from switchboard.lazy_imports import lazy_getattr
from switchboard.outbox.writer import OutboxItem, reply_items, text_items, write_outbox

__all__ = [
    "OutboxItem",
    "reply_items",
    "text_items",
    "write_outbox",
    # imported on first use (PEP 562): the loop pulls in tenant settings and the channels
    "DeliveryDeps",
    "DeliveryReport",
    "DeliveryScope",
    "DeliveryStatus",
    "apply_statuses",
    "deliver",
    "deliver_outbox",
]

_LAZY = {
    "DeliveryDeps": "delivery",
    "DeliveryReport": "delivery",
    "DeliveryScope": "delivery",
    "deliver": "delivery",
    "DeliveryStatus": "statuses",
    "apply_statuses": "statuses",
    "deliver_outbox": "jobs",
}


__getattr__ = lazy_getattr(__name__, _LAZY)
