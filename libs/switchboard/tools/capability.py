"""The per-turn tool capability: what the orchestrator signs and the MCP tool server verifies on every call.

The service token (``MCP_SERVICE_TOKEN``) only opens the door of the tool server; it reads nothing on
its own. Every call must also carry a capability the orchestrator signed for the turn: the tenant,
customer, conversation and trace id it is for, the tools that turn may call, and an expiry a few
minutes out. The server serves the call only when the signature is valid, the capability has not
expired, its tenant (and customer, conversation and trace id, when the call names them) equal the
call's, and the tool is among its tools. A leaked service token, or a caller that edits the ids,
gets ``Forbidden``.

Format: an itsdangerous ``URLSafeSerializer`` token (HMAC-SHA1 over a JSON payload, key derived
from the secret and the salt :data:`SALT`; itsdangerous 2.2 docs, "Serialization Interface"), the
secret being ``settings.secret("tool_capability_key")`` (generated into ``DATA_DIR/secrets`` when
unset, so the orchestrator and tool server on one machine share it; set
``TOOL_CAPABILITY_KEY`` for both in a deployment).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass

from itsdangerous import BadSignature, URLSafeSerializer

__all__ = [
    "DEFAULT_TTL_S",
    "CapabilityRejected",
    "ToolCapability",
    "sign_capability",
    "verify_capability",
]

SALT = "switchboard.tool-capability.v1"
"""Domain separation: a token signed for anything else with the same secret does not verify here."""
DEFAULT_TTL_S = 300.0
"""Lifetime of a capability (seconds): the turn budget (120 s) plus its tool calls' margin."""
MAX_TTL_S = 3600.0
"""A capability claiming a longer life than this is refused (a signing bug must not mint forever-tokens)."""


class CapabilityRejected(Exception):
    """The capability is missing, forged, expired or does not cover the call; ``reason`` says which."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


@dataclass(frozen=True, kw_only=True)
class ToolCapability:
    """What one turn may do on the tool server."""

    tenant_id: uuid.UUID
    customer_id: uuid.UUID | None
    conversation_id: uuid.UUID | None
    trace_id: str | None
    tools: frozenset[str]
    """Tool names the turn may call."""
    expires_at: float
    """Unix time (seconds) after which the capability is refused."""


def _serializer(secret: str) -> URLSafeSerializer:
    return URLSafeSerializer(secret, salt=SALT)


def sign_capability(
    secret: str,
    *,
    tenant_id: uuid.UUID,
    customer_id: uuid.UUID | None,
    conversation_id: uuid.UUID | None,
    trace_id: str | None,
    tools: Iterable[str],
    ttl_s: float = DEFAULT_TTL_S,
    now: float | None = None,
) -> str:
    """A signed capability token (URL-safe text, a few hundred bytes)."""
    issued = time.time() if now is None else now
    payload = {
        "t": str(tenant_id),
        "c": str(customer_id) if customer_id else None,
        "v": str(conversation_id) if conversation_id else None,
        "tr": trace_id,
        "tools": sorted(set(tools)),
        "exp": round(issued + min(ttl_s, MAX_TTL_S), 3),
        "iat": round(issued, 3),
    }
    return str(_serializer(secret).dumps(payload))


def _uuid(value: object) -> uuid.UUID | None:
    return uuid.UUID(str(value)) if value else None


def verify_capability(secret: str, token: str | None, *, now: float | None = None) -> ToolCapability:
    """The capability in ``token``.

    Raises:
        CapabilityRejected: ``missing``, ``bad_signature``, ``malformed``, ``expired`` or ``too_long_lived``.
    """
    if not token:
        raise CapabilityRejected("missing")
    try:
        payload = _serializer(secret).loads(token)
    except BadSignature:
        raise CapabilityRejected("bad_signature") from None
    try:
        capability = ToolCapability(
            tenant_id=uuid.UUID(str(payload["t"])),
            customer_id=_uuid(payload.get("c")),
            conversation_id=_uuid(payload.get("v")),
            trace_id=payload.get("tr"),
            tools=frozenset(str(name) for name in payload["tools"]),
            expires_at=float(payload["exp"]),
        )
        issued = float(payload["iat"])
    except (KeyError, TypeError, ValueError):
        raise CapabilityRejected("malformed") from None
    current = time.time() if now is None else now
    if capability.expires_at <= current:
        raise CapabilityRejected("expired")
    if capability.expires_at - issued > MAX_TTL_S + 1:
        raise CapabilityRejected("too_long_lived")
    return capability
