"""The tenant's webhook endpoints: register (with a new signing secret), list, enable, disable, delete.

URLs are checked by the outbound-address policy (:mod:`switchboard.egress`: public ``https://``
addresses only, loopback only with ``EGRESS_ALLOW_LOOPBACK``) before they are stored, and again at
every delivery (:mod:`switchboard.events.delivery`: a name's address can change).
"""

from __future__ import annotations

import base64
import secrets
import uuid
from datetime import datetime, timedelta

from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from switchboard.crypto import CredentialCipher
from switchboard.db.models import WebhookEndpoint, utcnow
from switchboard.egress import EgressPolicy, EgressRefused
from switchboard.errors import SwitchboardError
from switchboard.events.outbox import forget_subscribers
from switchboard.events.schemas import EVENT_TYPES
from switchboard.events.signing import SCHEMES
from switchboard.observability import get_logger
from switchboard.validation import check_text

__all__ = [
    "EndpointRefused",
    "create_endpoint",
    "endpoint_secret",
    "new_secret",
    "previous_secret_until",
    "rotate_secret",
    "signing_secrets",
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
    session: AsyncSession,
    *,
    tenant_id: uuid.UUID,
    url: str,
    event_types: list[str],
    description: str,
    cipher: CredentialCipher,
    egress: EgressPolicy,
    signature_scheme: str = "switchboard",
) -> tuple[WebhookEndpoint, str]:
    """Register an endpoint with a new secret (:func:`new_secret`), signed the ``signature_scheme`` way
    (:data:`~switchboard.events.signing.SCHEMES`); the caller commits.

    Returns:
        The row and the secret in clear (shown once; stored encrypted).

    Raises:
        EndpointRefused: the outbound-address policy refused the URL (its reason in plain words), an
            unknown event type, an unknown signature scheme, or a description over 500 characters or
            holding a NUL or another character the database cannot store.
    """
    try:
        description = check_text(description, field="description", max_length=500, allow_empty=True)
    except ValueError as exc:
        raise EndpointRefused(str(exc)) from None
    try:
        checked = await egress.check(url)
    except EgressRefused as exc:
        raise EndpointRefused(str(exc)) from None
    if signature_scheme not in SCHEMES:
        raise EndpointRefused(f"signature_scheme is one of {list(SCHEMES)}")
    secret = new_secret()
    endpoint = WebhookEndpoint(
        tenant_id=tenant_id,
        url=checked,
        event_types=_check_events(event_types),
        description=description,
        secret_encrypted=cipher.encrypt({"secret": secret}),
        signature_scheme=signature_scheme,
    )
    session.add(endpoint)
    await session.flush()
    forget_subscribers(tenant_id)
    log.info("webhook_endpoint_created", tenant_id=str(tenant_id), endpoint_id=str(endpoint.id))
    return endpoint, secret


def new_secret() -> str:
    """``whsec_`` + 32 random bytes in standard base64: the form the Standard Webhooks libraries read
    (they base64-decode what follows ``whsec_``); the Switchboard scheme uses the whole string."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(32)).decode()


def endpoint_secret(endpoint: WebhookEndpoint, cipher: CredentialCipher) -> str:
    """The endpoint's signing secret in clear.

    Raises:
        CredentialDecryptError: the encryption key changed without a rotation.
    """
    return str(cipher.decrypt(endpoint.secret_encrypted)["secret"])


def signing_secrets(
    endpoint: WebhookEndpoint, cipher: CredentialCipher, *, now: datetime | None = None
) -> list[str]:
    """The secrets that sign a delivery now: the current one, then the previous one until its overlap
    ends (:func:`rotate_secret`).

    Raises:
        CredentialDecryptError: the encryption key changed without a rotation.
    """
    stored = cipher.decrypt(endpoint.secret_encrypted)
    out = [str(stored["secret"])]
    until = stored.get("previous_until")
    if stored.get("previous") and until and datetime.fromisoformat(str(until)) > (now or utcnow()):
        out.append(str(stored["previous"]))
    return out


def previous_secret_until(endpoint: WebhookEndpoint, cipher: CredentialCipher) -> datetime | None:
    """When the previous secret stops signing (``None``: no rotation under way or it ended)."""
    try:
        until = cipher.decrypt(endpoint.secret_encrypted).get("previous_until")
    except Exception:  # noqa: BLE001 (an unreadable secret shows no rotation; deliveries say why)
        return None
    when = datetime.fromisoformat(str(until)) if until else None
    return when if when is not None and when > utcnow() else None


ROTATION_OVERLAP_MAX_S = 7 * 86_400
"""The longest overlap of a rotation (seconds): a week."""


def rotate_secret(
    endpoint: WebhookEndpoint, cipher: CredentialCipher, *, overlap_s: int, now: datetime | None = None
) -> str:
    """Give the endpoint a new secret; the current one keeps signing too for ``overlap_s`` seconds
    (0: it stops at once), so the receiver can switch whenever it is ready. The caller adds and commits.

    Returns:
        The new secret in clear (shown once).

    Raises:
        EndpointRefused: ``overlap_s`` outside 0 .. :data:`ROTATION_OVERLAP_MAX_S`.
        CredentialDecryptError: the stored secret cannot be read.
    """
    if not 0 <= overlap_s <= ROTATION_OVERLAP_MAX_S:
        raise EndpointRefused(f"overlap_s is 0 to {ROTATION_OVERLAP_MAX_S} seconds (a week)")
    current = endpoint_secret(endpoint, cipher)
    secret = new_secret()
    until = (now or utcnow()) + timedelta(seconds=overlap_s)
    endpoint.secret_encrypted = cipher.encrypt(
        {"secret": secret, "previous": current, "previous_until": until.isoformat()}
        if overlap_s
        else {"secret": secret}
    )
    endpoint.updated_at = utcnow()
    log.info(
        "webhook_secret_rotated",
        tenant_id=str(endpoint.tenant_id),
        endpoint_id=str(endpoint.id),
        overlap_s=overlap_s,
    )
    return secret


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
