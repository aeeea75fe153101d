"""Who wrote: one WhatsApp customer under either of their ids, and their open conversation.

A WhatsApp person can arrive as a phone number (``wa_id``), as a business-scoped user id (BSUID,
``contacts[].user_id`` / ``from_user_id``), or both. The customer row is keyed
(``external_user_id``) by the first id we saw (BSUID preferred); the phone lives in ``phone`` and the
BSUID in ``profile["whatsapp_bsuid"]``, and lookups match any of them, so both shapes of one person
reach one customer and one conversation (INDEX.md, shapes 1 and 3).
"""

from __future__ import annotations

import uuid

from sqlalchemy import or_, text
from sqlalchemy.dialects.postgresql import insert
from sqlmodel import select
from sqlmodel.ext.asyncio.session import AsyncSession

from switchboard.db.models import Conversation, ConversationStatus, Customer, utcnow

__all__ = ["resolve_customer", "open_conversation", "rekey_phone", "BSUID_PROFILE_KEY"]

BSUID_PROFILE_KEY = "whatsapp_bsuid"


async def _advisory_lock(session: AsyncSession, key: str) -> None:
    """Transaction-scoped lock serializing work on one key across processes."""
    await session.execute(text("SELECT pg_advisory_xact_lock(hashtextextended(:k, 0))"), {"k": key})


async def resolve_customer(
    session: AsyncSession, *, tenant_id: uuid.UUID, wa_id: str | None, bsuid: str | None, name: str | None
) -> Customer:
    """Find (or create) the customer with ``wa_id`` or ``bsuid``; fill in whichever id was missing.

    Raises:
        ValueError: neither id given.
    """
    if not wa_id and not bsuid:
        raise ValueError("a WhatsApp customer needs a wa_id or a BSUID")
    await _advisory_lock(session, f"wa-customer:{tenant_id}")
    conditions = []
    if bsuid:
        conditions += [
            Customer.external_user_id == bsuid,
            Customer.profile[BSUID_PROFILE_KEY].astext == bsuid,
        ]  # type: ignore[index]
    if wa_id:
        conditions += [Customer.external_user_id == wa_id, Customer.phone == wa_id]
    found = (
        await session.exec(
            select(Customer)
            .where(Customer.tenant_id == tenant_id, Customer.channel == "whatsapp", or_(*conditions))
            .order_by(Customer.created_at)  # type: ignore[arg-type]
        )
    ).first()
    if found is None:
        key = bsuid or wa_id
        assert key is not None
        await session.execute(
            insert(Customer.__table__)  # type: ignore[arg-type]
            .values(
                id=uuid.uuid4(),
                tenant_id=tenant_id,
                channel="whatsapp",
                external_user_id=key,
                phone=wa_id,
                display_name=(name or None) and name[:200],
                profile={BSUID_PROFILE_KEY: bsuid} if bsuid else {},
                created_at=utcnow(),
                updated_at=utcnow(),
            )  # fmt: skip
            .on_conflict_do_nothing(constraint="uq_customers_tenant_channel_user")
        )
        found = (
            await session.exec(
                select(Customer).where(
                    Customer.tenant_id == tenant_id,
                    Customer.channel == "whatsapp",
                    Customer.external_user_id == key,
                )
            )
        ).one()
        return found
    changed = False
    if wa_id and not found.phone:
        found.phone = wa_id
        changed = True
    if bsuid and found.profile.get(BSUID_PROFILE_KEY) != bsuid and found.external_user_id != bsuid:
        found.profile = {**found.profile, BSUID_PROFILE_KEY: bsuid}
        changed = True
    if name and not found.display_name:
        found.display_name = name[:200]
        changed = True
    if changed:
        session.add(found)
        await session.flush()
    return found


async def open_conversation(
    session: AsyncSession, *, customer: Customer, channel_account_id: uuid.UUID
) -> Conversation:
    """The customer's open (``ai`` or ``human``) conversation, created when there is none."""
    await _advisory_lock(session, f"conversation:{customer.id}")
    conversation = (
        await session.exec(
            select(Conversation)
            .where(
                Conversation.tenant_id == customer.tenant_id,
                Conversation.customer_id == customer.id,
                Conversation.channel == "whatsapp",
                Conversation.status.in_((ConversationStatus.ai.value, ConversationStatus.human.value)),  # type: ignore[attr-defined]
            )
            .order_by(Conversation.created_at.desc())  # type: ignore[attr-defined]
        )
    ).first()
    if conversation is None:
        conversation = Conversation(
            tenant_id=customer.tenant_id,
            customer_id=customer.id,
            channel_account_id=channel_account_id,
            channel="whatsapp",
        )
        session.add(conversation)
        await session.flush()
    return conversation


async def rekey_phone(
    session: AsyncSession, *, tenant_id: uuid.UUID, old_wa_id: str, new_wa_id: str
) -> Customer | None:
    """A ``user_changed_number`` system message: move the customer to the new phone, keeping history."""
    await _advisory_lock(session, f"wa-customer:{tenant_id}")  # same lock as resolve_customer: no lost update
    customer = (
        await session.exec(
            select(Customer).where(
                Customer.tenant_id == tenant_id,
                Customer.channel == "whatsapp",
                or_(Customer.phone == old_wa_id, Customer.external_user_id == old_wa_id),
            )
        )
    ).first()
    if customer is None:
        return None
    previous = list(customer.profile.get("previous_phones", []))
    if old_wa_id not in previous:
        previous.append(old_wa_id)
    customer.profile = {**customer.profile, "previous_phones": previous}
    customer.phone = new_wa_id
    session.add(customer)
    await session.flush()
    return customer
