"""Creating and finding tenants (admin operations; not tenant-scoped by nature)."""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence

from sqlalchemy import func
from sqlalchemy.exc import IntegrityError
from sqlmodel import select
from sqlmodel.ext.asyncio.session import AsyncSession

from switchboard.crypto import CredentialCipher
from switchboard.db.models import ChannelAccount, Organization, Tenant
from switchboard.errors import SwitchboardError, TenantNotFound
from switchboard.validation import has_unstorable_chars

__all__ = [
    "create_tenant",
    "get_tenant",
    "list_tenants",
    "add_channel_account",
    "count_tenants",
    "TenantExists",
    "DEFAULT_TOOLS",
]

_SLUG_MAX = 64
"""``tenants.slug`` column length (a UUID, 36 characters, fits too)."""
SLUG_RE = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?$")


class TenantExists(SwitchboardError):
    def __init__(self, slug: str) -> None:
        self.slug = slug
        super().__init__(f"a tenant with slug {slug!r} already exists")


async def count_tenants(session: AsyncSession) -> int:
    return int((await session.exec(select(func.count()).select_from(Tenant))).one())


DEFAULT_TOOLS: tuple[str, ...] = ("search_knowledge_base",)
"""Tools a new tenant has enabled from the start: its knowledge base is searched as soon as it has
documents (every other tool is off until ``switchboard tools enable`` / the admin API)."""


async def create_tenant(
    session: AsyncSession,
    *,
    slug: str,
    name: str,
    organization_name: str | None = None,
    default_tools: Sequence[str] = DEFAULT_TOOLS,
) -> Tenant:
    """Create a tenant (and its organization, found or created by name) with ``default_tools`` enabled.

    Args:
        slug: 1-64 chars of ``a-z``, ``0-9`` and inner ``-``; unique.
        name: display name.
        organization_name: defaults to ``name``.
        default_tools: tools enabled at once (audited like ``tools enable``); default :data:`DEFAULT_TOOLS`.

    Raises:
        ValueError: malformed slug.
        TenantExists: the slug is taken.
    """
    if not SLUG_RE.match(slug):
        raise ValueError(f"invalid slug {slug!r}: use 1-64 characters a-z, 0-9 and '-' (not at either end)")
    org_name = organization_name or name
    org = (await session.exec(select(Organization).where(Organization.name == org_name))).first()
    if org is None:
        org = Organization(name=org_name)
        session.add(org)
        await session.flush()
    tenant = Tenant(organization_id=org.id, slug=slug, name=name)
    session.add(tenant)
    try:
        await session.flush()
    except IntegrityError:
        raise TenantExists(slug) from None
    if default_tools:
        from switchboard.tools.toolbox import set_enabled  # here: the toolbox imports the tool contracts

        for tool_name in default_tools:
            await set_enabled(session, tenant.id, tool_name, enabled=True, actor="system")
    return tenant


async def get_tenant(session: AsyncSession, slug_or_id: str) -> Tenant:
    """Find a tenant by slug or UUID.

    Raises:
        TenantNotFound: neither matches.
    """
    if len(slug_or_id) > _SLUG_MAX or has_unstorable_chars(slug_or_id):
        raise TenantNotFound(slug_or_id[:80])  # no slug is like that: never ask the database
    try:
        tenant_uuid = uuid.UUID(slug_or_id)
    except ValueError:
        tenant_uuid = None
    where = Tenant.id == tenant_uuid if tenant_uuid else Tenant.slug == slug_or_id
    tenant = (await session.exec(select(Tenant).where(where))).first()
    if tenant is None:
        raise TenantNotFound(slug_or_id)
    return tenant


async def list_tenants(session: AsyncSession) -> list[Tenant]:
    return list((await session.exec(select(Tenant).order_by(Tenant.slug))).all())


async def add_channel_account(
    session: AsyncSession,
    *,
    tenant: Tenant,
    channel: str,
    external_account_id: str,
    display_name: str | None = None,
    credentials: dict | None = None,
    cipher: CredentialCipher | None = None,
    api_base_url: str | None = None,
) -> ChannelAccount:
    """Connect a channel account to ``tenant``; credentials are stored encrypted with ``cipher``.

    Args:
        api_base_url: the provider API root of this account (``channel_accounts.api_base_url``):
            ``None`` the real API, ``"sandbox"`` this deployment's sandbox, or a URL.
    """
    encrypted = None
    if credentials:
        if cipher is None:
            raise ValueError("credentials given without a cipher")
        encrypted = cipher.encrypt(credentials)
    account = ChannelAccount(
        tenant_id=tenant.id,
        channel=channel,
        external_account_id=external_account_id,
        display_name=display_name,
        credentials_encrypted=encrypted,
        api_base_url=api_base_url,
    )
    session.add(account)
    await session.flush()
    return account
