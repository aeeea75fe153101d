"""Customers from channel identities: one person under several ids, never two people as one.

A person reaches a tenant under one or more identities (:class:`Identity`): a WhatsApp phone
(``wa_id``), a WhatsApp business-scoped user id (``bsuid``), an Instagram ``igsid``, an e-mail address.
``customer_identities`` is the source of truth for "who wrote": an active identity (``retired_at``
null) belongs to exactly one customer of the tenant. ``customers.phone``, ``external_user_id`` and
``profile["whatsapp_bsuid"]`` are kept filled for the code that reads them, never used for lookups.

Every change runs under a transaction-scoped advisory lock per tenant and channel, so two messages
of a new person arriving at once create one customer.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from sqlalchemy import text, tuple_
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from switchboard.channels.base import channel_address, reply_identity_kinds
from switchboard.db.models import Customer, CustomerIdentity, IdentityKind, utcnow
from switchboard.observability import get_logger

__all__ = [
    "BSUID_PROFILE_KEY",
    "Identity",
    "ResolvedCustomer",
    "active_identities",
    "change_identity",
    "channel_identities",
    "reply_address",
    "resolve_customer",
]

log = get_logger(__name__)

BSUID_PROFILE_KEY = "whatsapp_bsuid"
"""``customers.profile`` key mirroring the customer's BSUID (compatibility; lookups use identities)."""
PREVIOUS_PHONES_PROFILE_KEY = "previous_phones"
"""``customers.profile`` key listing the numbers a customer changed away from (oldest first)."""
RETIRED_KEY_PREFIX = "retired:"
"""``customers.external_user_id`` of a customer whose key value now belongs to somebody else."""

_KEY_PREFERENCE = (
    IdentityKind.bsuid,
    IdentityKind.igsid,
    IdentityKind.email,
    IdentityKind.web_user,
    IdentityKind.visitor,
    IdentityKind.wa_id,
)
"""Which identity becomes ``customers.external_user_id`` of a new customer (first present wins)."""
_STABLE_KINDS = frozenset(
    {IdentityKind.bsuid, IdentityKind.igsid, IdentityKind.email, IdentityKind.web_user, IdentityKind.visitor}
)
"""Identity kinds that name one account for good (a phone number, ``wa_id``, can be recycled)."""


@dataclass(frozen=True)
class Identity:
    """One id a message arrived under, as the channel's normalizer saw it."""

    channel: str
    """``whatsapp`` | ``instagram`` | ``gmail``."""
    kind: str
    """An :class:`~switchboard.db.models.IdentityKind` value."""
    value: str
    """The id itself (E.164 digits for ``wa_id``, lower-cased for ``email``)."""

    @property
    def key(self) -> tuple[str, str]:
        return self.kind, self.value


class _KindValue(Protocol):
    kind: str
    value: str


def channel_identities(channel: str, identities: Iterable[_KindValue]) -> list[Identity]:
    """:class:`Identity` rows of one channel from ``(kind, value)`` items, order kept (e.g. a stored
    message's :class:`~switchboard.contracts.SenderIdentity` list)."""
    return [Identity(channel, identity.kind, identity.value) for identity in identities]


@dataclass(frozen=True)
class ResolvedCustomer:
    """The customer a message is from, and the identity rows that say so."""

    customer: Customer
    identities: tuple[CustomerIdentity, ...]
    """The customer's active rows among the message's identities, in the order given (matched or created)."""
    created: bool
    """True when the customer was created by this call."""


def _clean(identities: Sequence[Identity]) -> list[Identity]:
    """Drop empty values and repeats (first occurrence kept); e-mail addresses lower-cased.

    Raises:
        ValueError: nothing left, or identities of more than one channel.
    """
    out: list[Identity] = []
    for identity in identities:
        value = (identity.value or "").strip()
        if identity.kind == IdentityKind.email:
            value = value.lower()
        if value and all(o.key != (identity.kind, value) for o in out):
            out.append(Identity(identity.channel, identity.kind, value))
    if not out:
        raise ValueError("a customer needs at least one identity with a value")
    if len({i.channel for i in out}) > 1:
        raise ValueError("identities of one message belong to one channel")
    return out


async def _lock(session: AsyncSession, tenant_id: uuid.UUID, channel: str) -> None:
    """Serialize identity changes of one tenant and channel until the transaction ends."""
    await session.exec(
        text("SELECT pg_advisory_xact_lock(hashtextextended(:k, 0))"),
        params={"k": f"customer-identity:{tenant_id}:{channel}"},
    )


async def _active(
    session: AsyncSession, tenant_id: uuid.UUID, channel: str, keys: Sequence[tuple[str, str]]
) -> dict[tuple[str, str], CustomerIdentity]:
    rows = await session.exec(
        select(CustomerIdentity).where(
            CustomerIdentity.tenant_id == tenant_id,
            CustomerIdentity.channel == channel,
            col(CustomerIdentity.retired_at).is_(None),
            tuple_(col(CustomerIdentity.kind), col(CustomerIdentity.value)).in_(list(keys)),
        )
    )
    return {(row.kind, row.value): row for row in rows.all()}


async def active_identities(
    session: AsyncSession, *, tenant_id: uuid.UUID, customer_id: uuid.UUID
) -> list[CustomerIdentity]:
    """The customer's active identities, most recently seen first."""
    rows = await session.exec(
        select(CustomerIdentity)
        .where(
            CustomerIdentity.tenant_id == tenant_id,
            CustomerIdentity.customer_id == customer_id,
            col(CustomerIdentity.retired_at).is_(None),
        )
        .order_by(col(CustomerIdentity.last_seen_at).desc(), col(CustomerIdentity.created_at).desc())
    )
    return list(rows.all())


async def _free_external_key(
    session: AsyncSession, *, tenant_id: uuid.UUID, channel: str, value: str, keep: uuid.UUID | None
) -> None:
    """Make ``value`` usable as a new ``external_user_id``: a customer still keyed by it (who no longer
    holds it as an active identity) is re-keyed to one of its active identities, else ``retired:...``."""
    query = select(Customer).where(
        Customer.tenant_id == tenant_id, Customer.channel == channel, Customer.external_user_id == value
    )
    if keep is not None:
        query = query.where(Customer.id != keep)
    stale = (await session.exec(query.with_for_update())).first()
    if stale is None:
        return
    remaining = [
        i
        for i in await active_identities(session, tenant_id=tenant_id, customer_id=stale.id)
        if i.value != value
    ]
    stale.external_user_id = _preferred(remaining) or f"{RETIRED_KEY_PREFIX}{value}:{stale.id.hex[:8]}"[:255]
    stale.updated_at = utcnow()
    session.add(stale)
    await session.flush()


def _preferred(identities: Sequence[Identity | CustomerIdentity]) -> str | None:
    for kind in _KEY_PREFERENCE:
        for identity in identities:
            if identity.kind == kind:
                return identity.value
    return None


def _fill_compat(customer: Customer, identities: Sequence[Identity], display_name: str | None) -> bool:
    """Fill ``phone``, ``profile.whatsapp_bsuid`` and ``display_name`` where empty. Returns whether changed."""
    changed = False
    for identity in identities:
        if identity.kind == IdentityKind.wa_id and not customer.phone:
            customer.phone = identity.value[:32]
            changed = True
        if identity.kind == IdentityKind.bsuid and customer.profile.get(BSUID_PROFILE_KEY) != identity.value:
            customer.profile = {**customer.profile, BSUID_PROFILE_KEY: identity.value}
            changed = True
    if display_name and not customer.display_name:
        customer.display_name = display_name[:200]
        changed = True
    return changed


async def _retired_of(
    session: AsyncSession, customer_id: uuid.UUID, keys: Sequence[tuple[str, str]]
) -> dict[tuple[str, str], datetime]:
    """When the customer left each of ``keys`` (the latest ``retired_at`` of their retired rows)."""
    if not keys:
        return {}
    rows = await session.exec(
        select(CustomerIdentity).where(
            CustomerIdentity.customer_id == customer_id,
            col(CustomerIdentity.retired_at).is_not(None),
            tuple_(col(CustomerIdentity.kind), col(CustomerIdentity.value)).in_(list(keys)),
        )
    )
    out: dict[tuple[str, str], datetime] = {}
    for row in rows.all():
        assert row.retired_at is not None
        key = (row.kind, row.value)
        out[key] = max(out.get(key, row.retired_at), row.retired_at)
    return out


async def _retire(session: AsyncSession, row: CustomerIdentity, *, now: datetime, keep_history: bool) -> None:
    """Retire an active identity row; a phone leaves ``customers.phone`` (and, with ``keep_history``,
    joins ``profile["previous_phones"]``)."""
    row.retired_at = now
    session.add(row)
    await session.flush()  # the partial unique index sees the retirement before a new row
    if row.kind != IdentityKind.wa_id:
        return
    holder = await session.get(Customer, row.customer_id, with_for_update=True)
    if holder is None:
        return
    if keep_history:
        previous = list(holder.profile.get(PREVIOUS_PHONES_PROFILE_KEY, []))
        if row.value not in previous:
            holder.profile = {**holder.profile, PREVIOUS_PHONES_PROFILE_KEY: [*previous, row.value]}
    if holder.phone == row.value:
        holder.phone = None
    holder.updated_at = now
    session.add(holder)


async def resolve_customer(
    session: AsyncSession,
    *,
    tenant_id: uuid.UUID,
    identities: Sequence[Identity],
    display_name: str | None = None,
    sent_at: datetime | None = None,
) -> ResolvedCustomer:
    """The customer a message is from, found by any of its active identities or created.

    Who wins: a phone number can be given to somebody else (recycled), a BSUID / IGSID / address names
    one account. So the customer holding the message's *account* id (:data:`_STABLE_KINDS`) wins; only
    a message without one (or whose one nobody holds yet) is matched by its phone. The rules that
    follow from "the message came from this account at this number" (Meta says so, signed):

    - the customer found by the account id now holds the message's phone: a *different* customer
      holding it loses it (``identity_moved``), and the customer's other active phones are retired
      into ``profile["previous_phones"]`` (one WhatsApp account has one number), so a later writer of
      a number this person left is never taken for them;
    - a phone held by a customer with a *different* account id of the same kind was recycled: a new
      customer is created and the phone moves to them;
    - a phone held by a customer without an account id is that customer (the account id is attached);
    - a phone the found customer *left* (a retired row of theirs) is not taken back by a message sent
      before they left it (a late or redelivered message); a message sent after is a return.

    Two customers are never merged; any other clash (two account ids held by two customers) is left
    as it is and logged as ``identity_conflict`` (ids and kinds only, never the values). Every matched
    row gets ``last_seen_at`` = now; ``customers.phone`` is the phone the customer last wrote from.
    Runs in the caller's transaction under the tenant+channel lock.

    Args:
        identities: the message's ids, all of one channel; empty values are ignored.
        display_name: the sender's profile name (fills an empty ``display_name``, cut to 200 chars).
        sent_at: when the provider says the message was sent (``None``: now).

    Raises:
        ValueError: no identity with a value, or identities of several channels.
    """
    given = _clean(identities)
    channel = given[0].channel
    await _lock(session, tenant_id, channel)
    now = utcnow()
    found = await _active(session, tenant_id, channel, [i.key for i in given])
    stable = [i for i in given if i.kind in _STABLE_KINDS]
    phones = [i for i in given if i.kind == IdentityKind.wa_id]
    owner_id = next((found[i.key].customer_id for i in stable if i.key in found), None)
    by_account = owner_id is not None
    if owner_id is None:
        for phone in phones:
            row = found.get(phone.key)
            if row is None:
                continue
            if stable and await _holds_other_account(session, row.customer_id, stable):
                log.warning(  # the number was given to somebody else: they are a new customer
                    "identity_recycled",
                    tenant_id=str(tenant_id),
                    channel=channel,
                    kind=phone.kind,
                    previous_customer_id=str(row.customer_id),
                )
                await _retire(session, row, now=now, keep_history=True)
                del found[phone.key]
                by_account = True  # the new customer is the phone's holder now
                continue
            owner_id = row.customer_id
            break
    created = owner_id is None
    if owner_id is None:
        key = _preferred(given)
        assert key is not None
        await _free_external_key(session, tenant_id=tenant_id, channel=channel, value=key, keep=None)
        customer = Customer(
            tenant_id=tenant_id,
            channel=channel,
            external_user_id=key[:255],
            display_name=(display_name or None) and display_name[:200],
        )
        _fill_compat(customer, given, None)
        session.add(customer)
        await session.flush()
    else:
        customer = await session.get(Customer, owner_id, with_for_update=True)
        assert customer is not None
    left = {} if created else await _retired_of(session, customer.id, [p.key for p in phones])
    sent = sent_at or now
    rows: list[CustomerIdentity] = []
    current_phone: str | None = None
    for identity in given:
        row = found.get(identity.key)
        if (
            identity.key in left
            and left[identity.key] > sent
            and (row is None or row.customer_id != customer.id)
        ):
            continue  # a number this customer left, in a message older than the move: history only
        if row is not None and row.customer_id != customer.id:
            if identity.kind == IdentityKind.wa_id and by_account:
                log.warning(  # the account now writes from this number: replies to it reach them
                    "identity_moved",
                    tenant_id=str(tenant_id),
                    channel=channel,
                    kind=identity.kind,
                    customer_id=str(customer.id),
                    previous_customer_id=str(row.customer_id),
                )
                await _retire(session, row, now=now, keep_history=True)
                row = None
            else:
                log.warning(
                    "identity_conflict",
                    tenant_id=str(tenant_id),
                    channel=channel,
                    kind=identity.kind,
                    customer_id=str(customer.id),
                    other_customer_id=str(row.customer_id),
                    first_kind=given[0].kind,
                )
                continue
        if row is None:
            row = CustomerIdentity(
                tenant_id=tenant_id,
                customer_id=customer.id,
                channel=channel,
                kind=identity.kind,
                value=identity.value[:320],
                created_at=now,
                last_seen_at=now,
            )
        else:
            row.last_seen_at = now
        session.add(row)
        rows.append(row)
        if identity.kind == IdentityKind.wa_id and current_phone is None:
            current_phone = row.value
    if by_account and current_phone is not None and not created:
        for other in await active_identities(session, tenant_id=tenant_id, customer_id=customer.id):
            if other.kind == IdentityKind.wa_id and other.value != current_phone:
                await _retire(session, other, now=now, keep_history=True)  # the person changed number
        customer = await session.get(Customer, customer.id, with_for_update=True)  # _retire may edit it
        assert customer is not None
    held = [Identity(channel, row.kind, row.value) for row in rows]
    if not created and _fill_compat(customer, held, display_name):
        customer.updated_at = now
        session.add(customer)
    if current_phone is not None and customer.phone != current_phone[:32]:
        customer.phone = current_phone[:32]  # replies by phone (handoff relays) go where they wrote from
        customer.updated_at = now
        session.add(customer)
    await session.flush()
    if created:
        log.info("customer_created", tenant_id=str(tenant_id), channel=channel, customer_id=str(customer.id))
    return ResolvedCustomer(customer=customer, identities=tuple(rows), created=created)


async def _holds_other_account(
    session: AsyncSession, customer_id: uuid.UUID, stable: Sequence[Identity]
) -> bool:
    """Whether the customer holds an active account id of the same kind as one of ``stable`` but another
    value (so a phone they hold and a message from another account at that phone means recycling)."""
    kinds = {i.kind for i in stable}
    mine = {i.key for i in stable}
    rows = await session.exec(
        select(CustomerIdentity).where(
            CustomerIdentity.customer_id == customer_id,
            col(CustomerIdentity.retired_at).is_(None),
            col(CustomerIdentity.kind).in_(sorted(kinds)),
        )
    )
    return any((row.kind, row.value) not in mine for row in rows.all())


async def change_identity(
    session: AsyncSession,
    *,
    tenant_id: uuid.UUID,
    channel: str,
    kind: str,
    old_value: str,
    new_value: str,
) -> Customer | None:
    """The customer's id changed (WhatsApp ``user_changed_number``): retire the old identity, give the
    customer the new one, keep the history.

    When ``new_value`` is active on another customer (a recycled number), it is retired there first
    (``identity_recycled``); customers are never merged. For a ``wa_id``, ``customers.phone`` becomes the
    new number and the old one is appended to ``profile["previous_phones"]``; ``external_user_id``
    follows when it was the old value. Runs in the caller's transaction under the same lock as
    :func:`resolve_customer`.

    Returns:
        The customer, or ``None`` when nobody holds ``old_value`` (nothing changes).
    """
    old_value, new_value = old_value.strip(), new_value.strip()
    if not old_value or not new_value:
        return None
    await _lock(session, tenant_id, channel)
    now = utcnow()
    found = await _active(session, tenant_id, channel, [(kind, old_value), (kind, new_value)])
    old = found.get((kind, old_value))
    if old is None:
        return None
    customer = await session.get(Customer, old.customer_id, with_for_update=True)
    assert customer is not None
    if old_value == new_value:
        return customer
    holder = found.get((kind, new_value))
    if holder is not None and holder.customer_id != customer.id:
        log.warning(  # replies to that number now reach another customer: worth an operator's eye
            "identity_recycled",
            tenant_id=str(tenant_id),
            channel=channel,
            kind=kind,
            customer_id=str(customer.id),
            previous_customer_id=str(holder.customer_id),
        )
        await _retire(session, holder, now=now, keep_history=True)
        holder = None
    await _retire(session, old, now=now, keep_history=True)
    customer = await session.get(Customer, customer.id, with_for_update=True)  # _retire edited it
    assert customer is not None
    if holder is None:
        session.add(
            CustomerIdentity(
                tenant_id=tenant_id,
                customer_id=customer.id,
                channel=channel,
                kind=kind,
                value=new_value[:320],
                created_at=now,
                last_seen_at=now,
            )
        )
    if kind == IdentityKind.wa_id:
        customer.phone = new_value[:32]
    if customer.external_user_id == old_value:
        await _free_external_key(
            session, tenant_id=tenant_id, channel=channel, value=new_value, keep=customer.id
        )
        customer.external_user_id = new_value[:255]
    customer.updated_at = now
    session.add(customer)
    await session.flush()
    return customer


def reply_address(identities: Sequence[Identity | CustomerIdentity], kinds: Sequence[str]) -> str | None:
    """Where a reply goes: the identity the customer wrote from, by the channel's preference.

    ``kinds`` is the channel's :attr:`~switchboard.channels.base.Channel.reply_identity_kinds`, best
    first (WhatsApp: the ``wa_id`` among ``identities``, the inbound message's, else its BSUID;
    Instagram: the IGSID; Gmail: the address), as the channel's send address
    (:func:`~switchboard.channels.base.channel_address`: the website chat's verified user ``42`` is
    ``user:42``). ``None`` when none fits (the caller falls back to ``customers.phone`` /
    ``external_user_id``).
    """
    for kind in kinds:
        for identity in identities:
            if identity.kind == kind and identity.value:
                return channel_address(identity.channel, kind, identity.value)
    return None


async def customer_reply_address(
    session: AsyncSession, customer: Customer, channel: str, *, prefer: str | None = None
) -> str | None:
    """Where a message to ``customer`` goes on ``channel``: their active identity the channel prefers
    (:func:`reply_address`; of several of one kind, the one whose value is ``prefer``), or ``None`` when
    they hold none there."""
    rows = (
        await session.exec(
            select(CustomerIdentity).where(
                CustomerIdentity.customer_id == customer.id,
                CustomerIdentity.channel == channel,
                col(CustomerIdentity.retired_at).is_(None),
            )
        )
    ).all()
    ordered = sorted(rows, key=lambda row: (row.value != prefer, row.created_at))
    return reply_address(ordered, reply_identity_kinds(channel))
