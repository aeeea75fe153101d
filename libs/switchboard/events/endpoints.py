"""The tenant's webhook endpoints: register (with a new signing secret), list, enable, disable, delete.

URLs are checked by the outbound-address policy (:mod:`switchboard.egress`: public ``https://``
addresses only, loopback only with ``EGRESS_ALLOW_LOOPBACK``) before they are stored, and again at
every delivery (:mod:`switchboard.events.delivery`: a name's address can change).
"""

from __future__ import annotations

import secrets
import uuid

from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from switchboard.crypto import CredentialCipher
from switchboard.db.models import WebhookEndpoint, utcnow
from switchboard.egress import EgressPolicy, EgressRefused
from switchboard.errors import SwitchboardError
from switchboard.events.outbox import forget_subscribers
from switchboard.events.schemas import EVENT_TYPES
from switchboard.observability import get_logger
from switchboard.validation import check_text

__all__ = [
    "EndpointRefused",
    "create_endpoint",
    "endpoint_secret",
    "list_endpoints",
    "set_endpoint_active",
]

log = get_logger(__name__)

SECRET_PREFIX = "whsec_"


class EndpointRefused(SwitchboardError):
    """The URL or event list of an endpoint is not acceptable (the caller's fault: a 422)."""


def _check_events(event_types: list[str]) -> list[str]:
    unknown = sorted(set(event_types) - set(EVENT_TYPES))
    if unknown:
        raise EndpointRefused(f"unknown event types {unknown}; known: {sorted(EVENT_TYPES)}")
    return sorted(set(event_types))


async def create_endpoint(
    session: AsyncSession, *, tenant_id: uuid.UUID, url: str, event_types: list[str], description: str,
    cipher: CredentialCipher, egress: EgressPolicy,
) -> tuple[WebhookEndpoint, str]:  # fmt: skip
    """Register an endpoint with a new secret (``whsec_`` + 32 random bytes, url-safe); the caller commits.

    Returns:
        The row and the secret in clear (shown once; stored encrypted).

    Raises:
        EndpointRefused: the outbound-address policy refused the URL (its reason in plain words), an
            unknown event type, or a description over 500 characters or holding a NUL or another
            character the database cannot store.
    """
    try:
        description = check_text(description, field="description", max_length=500, allow_empty=True)
    except ValueError as exc:
        raise EndpointRefused(str(exc)) from None
    try:
        checked = await egress.check(url)
    except EgressRefused as exc:
        raise EndpointRefused(str(exc)) from None
    secret = SECRET_PREFIX + secrets.token_urlsafe(32)
    endpoint = WebhookEndpoint(
        tenant_id=tenant_id, url=checked, event_types=_check_events(event_types), description=description,
        secret_encrypted=cipher.encrypt({"secret": secret}),
    )  # fmt: skip
    session.add(endpoint)
    await session.flush()
    forget_subscribers(tenant_id)
    log.info("webhook_endpoint_created", tenant_id=str(tenant_id), endpoint_id=str(endpoint.id))
    return endpoint, secret


def endpoint_secret(endpoint: WebhookEndpoint, cipher: CredentialCipher) -> str:
    """The endpoint's signing secret in clear.

    Raises:
        CredentialDecryptError: the encryption key changed without a rotation.
    """
    return str(cipher.decrypt(endpoint.secret_encrypted)["secret"])


async def list_endpoints(session: AsyncSession, *, tenant_id: uuid.UUID) -> list[WebhookEndpoint]:
    """The tenant's endpoints, oldest first."""
    rows = await session.exec(
        select(WebhookEndpoint)
        .where(WebhookEndpoint.tenant_id == tenant_id)
        .order_by(col(WebhookEndpoint.created_at))
    )
    return list(rows.all())


def set_endpoint_active(endpoint: WebhookEndpoint, active: bool, *, reason: str | None = None) -> None:
    """Enable (clears the failure count) or disable an endpoint; the caller adds and commits."""
    endpoint.is_active = active
    endpoint.updated_at = utcnow()
    forget_subscribers(endpoint.tenant_id)
    if active:
        endpoint.consecutive_failures, endpoint.disabled_at, endpoint.disabled_reason = 0, None, None
    else:
        endpoint.disabled_at, endpoint.disabled_reason = utcnow(), reason
