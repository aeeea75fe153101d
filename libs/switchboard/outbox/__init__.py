"""Where every message is sent from: one writer (:mod:`.writer`), one delivery loop (:mod:`.delivery`),
and delivery statuses that only move forward (:mod:`.statuses`)."""

from switchboard.outbox.writer import OutboxItem, text_items, write_outbox

__all__ = ["OutboxItem", "text_items", "write_outbox"]
