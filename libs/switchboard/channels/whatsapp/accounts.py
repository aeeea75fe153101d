"""Tenant routing: ``metadata.phone_number_id`` → the tenant's WhatsApp channel account.

Lookups are cached in-process for :data:`CACHE_TTL_S` seconds (unknown ids for
:data:`NEGATIVE_CACHE_TTL_S`, so a freshly connected number is picked up quickly); call
:meth:`AccountDirectory.invalidate` after changing an account in this process.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel import select
from sqlmodel.ext.asyncio.session import AsyncSession

from switchboard.crypto import CredentialCipher
from switchboard.db.models import ChannelAccount

__all__ = ["AccountRef", "AccountDirectory", "CACHE_TTL_S", "NEGATIVE_CACHE_TTL_S", "access_token_of"]

CACHE_TTL_S = 30.0
"""How long a found account is trusted without re-reading the database (seconds)."""
NEGATIVE_CACHE_TTL_S = 5.0
"""How long an unknown ``phone_number_id`` is remembered as unknown (seconds)."""


@dataclass(frozen=True)
class AccountRef:
    """The routing facts of one WhatsApp number."""

    id: uuid.UUID
    """``channel_accounts.id``."""
    tenant_id: uuid.UUID
    phone_number_id: str


class AccountDirectory:
    """Cached ``phone_number_id`` → :class:`AccountRef` (active WhatsApp accounts only)."""

    def __init__(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        self._sessions = sessions
        self._cache: dict[str, tuple[float, AccountRef | None]] = {}

    def invalidate(self, phone_number_id: str | None = None) -> None:
        """Forget one id (or everything)."""
        if phone_number_id is None:
            self._cache.clear()
        else:
            self._cache.pop(phone_number_id, None)

    async def resolve(self, phone_number_id: str) -> AccountRef | None:
        """The active account for ``phone_number_id``, or ``None``.

        Raises:
            sqlalchemy.exc.SQLAlchemyError / OSError: the database is unreachable (the route answers 503).
        """
        now = time.monotonic()
        hit = self._cache.get(phone_number_id)
        if hit is not None and hit[0] > now:
            return hit[1]
        async with self._sessions() as session:
            row = (
                await session.exec(
                    select(ChannelAccount).where(
                        ChannelAccount.channel == "whatsapp",
                        ChannelAccount.external_account_id == phone_number_id,
                        ChannelAccount.is_active.is_(True),  # type: ignore[attr-defined]
                    )
                )
            ).first()
        ref = AccountRef(id=row.id, tenant_id=row.tenant_id, phone_number_id=phone_number_id) if row else None
        self._cache[phone_number_id] = (now + (CACHE_TTL_S if ref else NEGATIVE_CACHE_TTL_S), ref)
        return ref


def access_token_of(account: ChannelAccount, cipher: CredentialCipher) -> str | None:
    """The Graph API access token stored (encrypted) on ``account``, or ``None`` when none is stored."""
    if not account.credentials_encrypted:
        return None
    return cipher.decrypt(account.credentials_encrypted).get("access_token")
