"""ARQ jobs of the memory feature, on the background queue
(:func:`switchboard.worker.build_background_worker_settings`).

``ctx`` must hold ``resources`` (:class:`~switchboard.runtime.resources.Resources`) and ``model_gateway``
(:class:`~switchboard.llm.router.ModelGateway`), both set in the worker's ``on_startup``.
"""

from __future__ import annotations

import uuid
from typing import Any

from switchboard.db.models import utcnow
from switchboard.memory.store import (
    close_idle_conversations,
    conversations_to_summarize,
    summarize_into_memory,
)
from switchboard.observability import get_logger

__all__ = ["summarize_memory", "memory_sweep"]

log = get_logger(__name__)


async def summarize_memory(ctx: dict[str, Any], tenant_id: str, conversation_id: str) -> str:
    """Job: fold one closed conversation into the customer's memory. Returns ``updated`` or ``unchanged``."""
    text = await summarize_into_memory(
        ctx["resources"].sessions,
        ctx["model_gateway"],
        tenant_id=uuid.UUID(tenant_id),
        conversation_id=uuid.UUID(conversation_id),
        trace_id=f"memory-{conversation_id}",
    )
    return "updated" if text is not None else "unchanged"


async def memory_sweep(ctx: dict[str, Any]) -> dict[str, int]:
    """Cron job: close idle conversations, then summarize every closed conversation not yet summarized.

    Returns:
        ``{"closed": n, "summarized": m}``.
    """
    sessions = ctx["resources"].sessions
    now = utcnow()
    closed = await close_idle_conversations(sessions, now=now)
    summarized = 0
    for tenant_id, conversation_id in await conversations_to_summarize(sessions, now=now):
        if await summarize_memory(ctx, str(tenant_id), str(conversation_id)) == "updated":
            summarized += 1
    if closed or summarized:
        log.info("memory_sweep_done", closed=len(closed), summarized=summarized)
    return {"closed": len(closed), "summarized": summarized}
