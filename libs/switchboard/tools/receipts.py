"""Tool receipts and security alerts (docs/tools.md#the-tenant-boundary): one ``tool_receipts`` row for every call, allowed or
not, and one ``security_alerts`` row for every denial. Both writers never raise: the turn goes on."""

from __future__ import annotations

import hashlib
import uuid
from typing import Any, Literal

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel.ext.asyncio.session import AsyncSession

from switchboard.db.engine import session_scope
from switchboard.db.models import SecurityAlert, ToolReceipt
from switchboard.observability import get_logger
from switchboard.tools.context import canonical_arguments

__all__ = ["Outcome", "args_hash", "record_receipt", "record_security_alert"]

log = get_logger(__name__)

Outcome = Literal["ok", "error", "rejected", "timeout"]


def args_hash(arguments: dict[str, Any]) -> str:
    """SHA-256 hex of the canonical JSON (sorted keys, no spaces) of the arguments (UTF-8; an
    unpaired surrogate a model sent is hashed as its code point, not an error)."""
    return hashlib.sha256(canonical_arguments(arguments).encode("utf-8", "surrogatepass")).hexdigest()


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
            tenant_id=str(tenant_id),
            trace_id=trace_id,
            tool_name=tool_name,
            error=type(exc).__name__,
        )


async def record_security_alert(
    sessions: async_sessionmaker[AsyncSession],
    *,
    tenant_id: uuid.UUID,
    kind: str,
    details: dict[str, Any],
    trace_id: str | None,
) -> None:
    """Write one ``security_alerts`` row in its own transaction (a denial stands whether or not it is
    written). A failure is logged as ``security_alert_not_written``, never raised.

    Args:
        kind: what was refused, e.g. ``tool_forbidden``.
        details: ids and names only (``tool_name``, ``conversation_id``, ``where``...), no customer text.
    """
    try:
        async with session_scope(sessions) as session:
            session.add(SecurityAlert(tenant_id=tenant_id, kind=kind, details=details, trace_id=trace_id))
    except Exception as exc:  # the alert must not break the call: log and go on
        log.error(
            "security_alert_not_written",
            tenant_id=str(tenant_id),
            kind=kind,
            tool_name=details.get("tool_name"),
            error=type(exc).__name__,
        )
