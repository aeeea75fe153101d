"""Where every message is sent from: one writer (:mod:`.writer`), one delivery loop (:mod:`.delivery`),
and delivery statuses that only move forward (:mod:`.statuses`)."""

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


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'switchboard.outbox' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"switchboard.outbox.{module}"), name)
