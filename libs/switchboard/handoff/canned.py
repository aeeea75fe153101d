"""Canned replies: a tenant's saved answers, inserted by shortcut.

People type ``/`` in the console's reply box (a picker lists the shortcuts) or ``/r shortcut`` in the
WhatsApp agent console. Two variables are filled when a reply is used, for the conversation it goes
to: ``{customer_name}`` (the customer's name as their channel gave it; empty when it gave none) and
``{agent_name}`` (the person sending). Any other brace is kept as typed.
"""

from __future__ import annotations

import re
import uuid

from sqlalchemy.exc import IntegrityError
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from switchboard.db.models import CannedReply, Customer, utcnow
from switchboard.errors import SwitchboardError
from switchboard.validation import check_text

__all__ = [
    "CannedReplyRefused",
    "SHORTCUT_PATTERN",
    "VARIABLES",
    "TEXT_MAX_CHARS",
    "canned_replies",
    "normalize_shortcut",
    "find_canned",
    "save_canned",
    "delete_canned",
    "fill_canned",
    "customer_name",
]

SHORTCUT_PATTERN = re.compile(r"[a-z0-9][a-z0-9_-]{0,31}")
"""A shortcut: 1 to 32 lower-case letters, digits, ``-`` or ``_``, starting with a letter or digit."""
VARIABLES = ("{customer_name}", "{agent_name}")
TEXT_MAX_CHARS = 4096
"""Longest canned reply (one reply a person may send at once)."""


class CannedReplyRefused(SwitchboardError):
    """A canned reply cannot be saved as given; the message says why, for the person."""


def normalize_shortcut(value: str) -> str:
    """``" /Thanks "`` → ``"thanks"``.

    Raises:
        CannedReplyRefused: not a valid shortcut.
    """
    shortcut = (value or "").strip().lstrip("/").casefold()
    if not SHORTCUT_PATTERN.fullmatch(shortcut):
        raise CannedReplyRefused(
            "A shortcut is one word of letters, digits, - or _ (at most 32), like thanks or refund-policy."
        )
    return shortcut


async def canned_replies(session: AsyncSession, *, tenant_id: uuid.UUID) -> list[CannedReply]:
    """The tenant's canned replies, by shortcut."""
    query = select(CannedReply).where(CannedReply.tenant_id == tenant_id).order_by(col(CannedReply.shortcut))
    return list((await session.exec(query)).all())


async def find_canned(session: AsyncSession, *, tenant_id: uuid.UUID, shortcut: str) -> CannedReply | None:
    """The tenant's canned reply with this shortcut (case-insensitive, a leading ``/`` ignored), or ``None``."""
    wanted = (shortcut or "").strip().lstrip("/").casefold()
    query = select(CannedReply).where(CannedReply.tenant_id == tenant_id, CannedReply.shortcut == wanted)
    return (await session.exec(query)).first()


async def save_canned(
    session: AsyncSession,
    *,
    tenant_id: uuid.UUID,
    shortcut: str,
    text: str,
    reply_id: uuid.UUID | None = None,
) -> CannedReply:
    """Create a canned reply, or change one (``reply_id``); flushed in the caller's transaction.

    Raises:
        CannedReplyRefused: invalid shortcut or text, a shortcut the tenant already has, or no such reply.
    """
    shortcut = normalize_shortcut(shortcut)
    try:
        text = check_text(text, field="The text", max_length=TEXT_MAX_CHARS)
    except ValueError as exc:
        raise CannedReplyRefused(f"{exc}.") from None
    if reply_id is not None:
        row = await session.get(CannedReply, reply_id)
        if row is None or row.tenant_id != tenant_id:
            raise CannedReplyRefused("This canned reply no longer exists.")
    else:
        row = CannedReply(tenant_id=tenant_id, shortcut=shortcut, text=text)
    same = await find_canned(session, tenant_id=tenant_id, shortcut=shortcut)
    if same is not None and same.id != row.id:
        raise CannedReplyRefused(f"/{shortcut} is taken: choose another shortcut or change that reply.")
    row.shortcut, row.text, row.updated_at = shortcut, text, utcnow()
    session.add(row)
    try:
        async with session.begin_nested():
            await session.flush()
    except IntegrityError:  # saved at the same moment by someone else
        raise CannedReplyRefused(f"/{shortcut} is taken: choose another shortcut.") from None
    return row


async def delete_canned(session: AsyncSession, *, tenant_id: uuid.UUID, reply_id: uuid.UUID) -> bool:
    """Delete one of the tenant's canned replies; ``False`` when there was none."""
    row = await session.get(CannedReply, reply_id)
    if row is None or row.tenant_id != tenant_id:
        return False
    await session.delete(row)
    await session.flush()
    return True


def customer_name(customer: Customer | None) -> str:
    """What ``{customer_name}`` becomes: the name the customer's channel gave, else empty."""
    return (customer.display_name or "").strip() if customer is not None else ""


def fill_canned(text: str, *, customer: str, agent: str) -> str:
    """``text`` with ``{customer_name}`` and ``{agent_name}`` filled in (other braces kept as typed)."""
    return text.replace("{customer_name}", customer).replace("{agent_name}", agent)
