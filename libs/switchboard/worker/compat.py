"""Jobs kept so that work queued by older releases still runs after an upgrade.

`apply_whatsapp_statuses`: WhatsApp delivery statuses queued by releases before the shared channel ingest."""

from __future__ import annotations

from typing import Any

from switchboard.channels.whatsapp.statuses import conversation_block_reason
from switchboard.outbox.statuses import apply_delivery_statuses

__all__ = ["apply_whatsapp_statuses"]


async def apply_whatsapp_statuses(ctx: dict[str, Any], statuses: list[dict[str, Any]]) -> int:
    """ARQ job of releases before the shared ingest (jobs still queued at an upgrade): WhatsApp statuses
    without ``conversation_reason``, which is derived here from the error code."""
    for item in statuses:
        code = item.get("error_code")
        item.setdefault(
            "conversation_reason", conversation_block_reason(code if isinstance(code, int) else None)
        )
    return await apply_delivery_statuses(ctx, "whatsapp", statuses)
