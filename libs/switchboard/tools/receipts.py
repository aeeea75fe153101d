"""Tool receipts (DESIGN.md): one ``tool_receipts`` row for every call, allowed or not."""

from __future__ import annotations

import hashlib
import json
import uuid
from typing import Any, Literal

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel.ext.asyncio.session import AsyncSession

from switchboard.db.engine import session_scope
from switchboard.db.models import ToolReceipt
from switchboard.observability import get_logger

__all__ = ["Outcome", "args_hash", "record_receipt"]

log = get_logger(__name__)

Outcome = Literal["ok", "error", "rejected", "timeout"]


def args_hash(arguments: dict[str, Any]) -> str:
    """SHA-256 hex of the canonical JSON (sorted keys, no spaces) of the arguments."""
    canonical = json.dumps(arguments, sort_keys=True, separators=(",", ":"), default=str, ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


async def record_receipt(
    sessions: async_sessionmaker[AsyncSession],
    *,
    tenant_id: uuid.UUID,
    conversation_id: uuid.UUID | None,
    trace_id: str | None,
    tool_name: str,
    tool_version: str | None,
    arguments: dict[str, Any],
    outcome: Outcome,
    duration_ms: float,
    idempotency_key: str | None = None,
    error_type: str | None = None,
    rejection_reason: str | None = None,
) -> None:
    """Write one receipt in its own transaction. A failure is logged, never raised (the turn goes on).

    Args:
        arguments: the model's arguments (only their hash is stored: they may hold personal data).
        duration_ms: wall time of the call in milliseconds, including the transport.
    """
    try:
        async with session_scope(sessions) as session:
            session.add(
                ToolReceipt(
                    tenant_id=tenant_id,
                    conversation_id=conversation_id,
                    trace_id=trace_id,
                    tool_name=tool_name[:128],
                    tool_version=(tool_version or None) and tool_version[:32],
                    args_hash=args_hash(arguments),
                    idempotency_key=idempotency_key,
                    outcome=outcome,
                    error_type=error_type,
                    rejection_reason=rejection_reason,
                    duration_ms=round(duration_ms, 3),
                )
            )
    except SQLAlchemyError as exc:
        log.error(
            "tool_receipt_not_written",
            tenant_id=str(tenant_id), trace_id=trace_id, tool_name=tool_name, error=type(exc).__name__,
        )  # fmt: skip
