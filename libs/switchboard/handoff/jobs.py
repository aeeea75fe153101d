"""ARQ job of the handoff: send pending handoff messages (notices written by the API, CLI or orchestrator)."""

from __future__ import annotations

from typing import Any

from switchboard.handoff.relay import deliver_handoff_outbox

__all__ = ["deliver_handoff"]


async def deliver_handoff(ctx: dict[str, Any]) -> int:
    """Cron job: send every pending handoff outbox row (locked rows are skipped). Returns how many were sent."""
    deps = ctx["deps"]
    return await deliver_handoff_outbox(deps.resources.sessions, deps.graph, deps.cipher)
