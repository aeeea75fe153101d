"""The tenant's webhook endpoints: register (with a new signing secret), list, enable, disable, delete.

URLs are checked before they are stored and again before every attempt (a name's address can change):
``https://`` only, and the host must not be or resolve to a private, loopback, link-local, multicast,
reserved or unspecified address (SSRF: an endpoint must not reach into our own network). With
``WEBHOOKS_ALLOW_LOOPBACK_HTTP`` (tests, a local receiver) ``http://`` and ``https://`` to
``127.0.0.1``/``localhost``/``::1`` are accepted too, and nothing else changes.
"""

from __future__ import annotations

import asyncio
import ipaddress
import secrets
import socket
import uuid
from urllib.parse import urlsplit

from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from switchboard.crypto import CredentialCipher
from switchboard.db.models import WebhookEndpoint, utcnow
from switchboard.errors import SwitchboardError
from switchboard.events.outbox import forget_subscribers
from switchboard.events.schemas import EVENT_TYPES
from switchboard.observability import get_logger

__all__ = [
    "EndpointRefused",
    "LOOPBACK_HOSTS",
    "check_endpoint_url",
    "create_endpoint",
    "endpoint_secret",
    "list_endpoints",
    "set_endpoint_active",
]

log = get_logger(__name__)

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
SECRET_PREFIX = "whsec_"


class EndpointRefused(SwitchboardError):
    """The URL or event list of an endpoint is not acceptable (the caller's fault: a 422)."""


def _is_public(address: str) -> bool:
    ip = ipaddress.ip_address(address)
    return not (
        ip.is_private or ip.is_loopback or ip.is_link_local or ip.is_multicast or ip.is_reserved
        or ip.is_unspecified
    )  # fmt: skip


async def check_endpoint_url(url: str, *, allow_loopback_http: bool, resolve: bool = True) -> str:
    """``url`` when Switchboard may send to it (see the module docstring).

    Args:
        allow_loopback_http: the ``WEBHOOKS_ALLOW_LOOPBACK_HTTP`` setting.
        resolve: also resolve the host name and refuse it if any address it has is not public.

    Raises:
        EndpointRefused: not https, no host, credentials in the URL, or a non-public address.
    """
    parts = urlsplit(url.strip())
    host = (parts.hostname or "").lower()
    if not host:
        raise EndpointRefused("the URL needs a host")
    if parts.username or parts.password:
        raise EndpointRefused("no credentials in the URL: the signature authenticates deliveries")
    if allow_loopback_http and host in LOOPBACK_HOSTS and parts.scheme in ("http", "https"):
        return url.strip()
    if host in LOOPBACK_HOSTS:  # a local receiver (tests, a demo): say which setting allows it
        reason = (
            "endpoints must use https://" if parts.scheme != "https" else f"{host} is not a public address"
        )
        raise EndpointRefused(
            f"{reason}; a loopback receiver ({host}) needs WEBHOOKS_ALLOW_LOOPBACK_HTTP=true on this deployment"
        )
    if parts.scheme != "https":
        raise EndpointRefused("endpoints must use https://")
    try:
        literal = ipaddress.ip_address(host)
    except ValueError:
        literal = None
    if literal is not None:
        if not _is_public(host):
            raise EndpointRefused(f"{host} is not a public address")
        return url.strip()
    if host == "localhost" or host.endswith((".localhost", ".local", ".internal")):
        raise EndpointRefused(f"{host} is not a public host")
    if resolve:
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(
                host, parts.port or 443, type=socket.SOCK_STREAM
            )
        except OSError as exc:
            raise EndpointRefused(f"{host} does not resolve: {exc}") from None
        bad = sorted({info[4][0] for info in infos if not _is_public(str(info[4][0]))})
        if bad:
            raise EndpointRefused(f"{host} resolves to a non-public address ({', '.join(bad)})")
    return url.strip()


def _check_events(event_types: list[str]) -> list[str]:
    unknown = sorted(set(event_types) - set(EVENT_TYPES))
    if unknown:
        raise EndpointRefused(f"unknown event types {unknown}; known: {sorted(EVENT_TYPES)}")
    return sorted(set(event_types))


async def create_endpoint(
    session: AsyncSession, *, tenant_id: uuid.UUID, url: str, event_types: list[str], description: str,
    cipher: CredentialCipher, allow_loopback_http: bool,
) -> tuple[WebhookEndpoint, str]:  # fmt: skip
    """Register an endpoint with a new secret (``whsec_`` + 32 random bytes, url-safe); the caller commits.

    Returns:
        The row and the secret in clear (shown once; stored encrypted).

    Raises:
        EndpointRefused: see :func:`check_endpoint_url`, or an unknown event type.
    """
    checked = await check_endpoint_url(url, allow_loopback_http=allow_loopback_http)
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
