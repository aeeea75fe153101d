"""Customers from channel identities: one person under several ids, never two people as one."""

from __future__ import annotations

import asyncio

import pytest
from sqlmodel import col, select
from structlog.testing import capture_logs
from switchboard.channels.base import reply_identity_kinds
from switchboard.channels.whatsapp.normalize import normalize_delivery
from switchboard.conversations import (
    Identity,
    active_identities,
    change_identity,
    channel_identities,
    reply_address,
    resolve_customer,
)
from switchboard.db.models import Customer, CustomerIdentity, utcnow

from tests.utils.outbox import captured_logs
from tests.utils.whatsapp import load_payload

PHONE = "15550100099"
WHATSAPP_KINDS = reply_identity_kinds("whatsapp")
"""The customer's number in the real payloads (``text.json``...)."""
NEW_PHONE = "15550100097"
"""The number ``system_user_changed_number.json`` moves them to."""
BSUID = "US.10000000000000000001"
"""Their business-scoped user id (``image_with_caption.json``, the username payload)."""


def _message(name: str):  # type: ignore[no-untyped-def]
    """The first normalized message of a real payload."""
    return normalize_delivery(load_payload(name)).messages[0]


def _ids(name: str) -> list[Identity]:
    """The sender identities of a real payload's first message, as the channel normalized them."""
    return channel_identities("whatsapp", _message(name).identities)


def _wa(value: str) -> Identity:
    return Identity("whatsapp", "wa_id", value)


async def _resolve(sessions, tenant, identities, name=None, sent_at=None):  # type: ignore[no-untyped-def]
    async with sessions() as session, session.begin():
        return await resolve_customer(
            session, tenant_id=tenant.id, identities=identities, display_name=name, sent_at=sent_at
        )


async def _customers(sessions, tenant) -> list[Customer]:  # type: ignore[no-untyped-def]
    async with sessions() as session:
        rows = await session.exec(
            select(Customer).where(Customer.tenant_id == tenant.id).order_by(col(Customer.created_at))
        )
        return list(rows.all())


async def _identities(sessions, tenant) -> list[tuple[str, str, str, bool]]:  # type: ignore[no-untyped-def]
    """``(customer external_user_id, kind, value, active)`` of every identity of the tenant."""
    async with sessions() as session:
        rows = await session.exec(
            select(Customer.external_user_id, CustomerIdentity)
            .join(Customer, col(Customer.id) == CustomerIdentity.customer_id)
            .where(CustomerIdentity.tenant_id == tenant.id)
            .order_by(col(CustomerIdentity.created_at), col(CustomerIdentity.kind))
        )
        return [(key, i.kind, i.value, i.retired_at is None) for key, i in rows.all()]


async def test_the_real_payloads_name_the_phone_first_then_the_bsuid() -> None:
    assert _ids("text.json") == [_wa(PHONE)]
    assert _ids("image_with_caption.json") == [_wa(PHONE), Identity("whatsapp", "bsuid", BSUID)]
    assert _ids("text_from_username_user_phone_withheld.json") == [Identity("whatsapp", "bsuid", BSUID)]


async def test_seen_by_phone_then_by_bsuid_is_one_customer(sessions, make_tenant) -> None:  # type: ignore[no-untyped-def]
    tenant = await make_tenant()
    first = await _resolve(sessions, tenant, _ids("text.json"), "Test Customer")
    both = await _resolve(sessions, tenant, _ids("image_with_caption.json"))
    bsuid_only = await _resolve(sessions, tenant, _ids("text_from_username_user_phone_withheld.json"))
    assert first.created and not both.created and not bsuid_only.created
    assert first.customer.id == both.customer.id == bsuid_only.customer.id
    [customer] = await _customers(sessions, tenant)
    assert (customer.external_user_id, customer.phone, customer.display_name, customer.profile) == (
        PHONE,
        PHONE,
        "Test Customer",
        {"whatsapp_bsuid": BSUID},
    )
    assert await _identities(sessions, tenant) == [
        (PHONE, "wa_id", PHONE, True),
        (PHONE, "bsuid", BSUID, True),
    ]
    assert [(i.kind, i.value) for i in both.identities] == [("wa_id", PHONE), ("bsuid", BSUID)]


async def test_both_ids_in_the_first_message_make_one_customer_keyed_by_the_bsuid(
    sessions, make_tenant
) -> None:  # type: ignore[no-untyped-def]
    tenant = await make_tenant()
    both = await _resolve(sessions, tenant, _ids("image_with_caption.json"))
    by_phone = await _resolve(sessions, tenant, [_wa(PHONE)])
    by_bsuid = await _resolve(sessions, tenant, _ids("text_from_username_user_phone_withheld.json"))
    assert both.created and both.customer.id == by_phone.customer.id == by_bsuid.customer.id
    [customer] = await _customers(sessions, tenant)
    assert (customer.external_user_id, customer.phone, customer.profile) == (
        BSUID,
        PHONE,
        {"whatsapp_bsuid": BSUID},
    )


async def test_two_people_are_never_merged(sessions, make_tenant) -> None:  # type: ignore[no-untyped-def]
    tenant = await make_tenant()
    ana = await _resolve(sessions, tenant, [Identity("whatsapp", "bsuid", "US.1"), _wa("15550000001")])
    bo = await _resolve(sessions, tenant, [Identity("whatsapp", "bsuid", "US.2"), _wa("15550000002")])
    with capture_logs() as logs:
        # two account ids held by two customers in one message: nobody is merged, the first account wins
        mixed = await _resolve(
            sessions, tenant, [Identity("whatsapp", "bsuid", "US.1"), Identity("whatsapp", "bsuid", "US.2")]
        )
    assert mixed.customer.id == ana.customer.id
    assert [(i.kind, i.value) for i in mixed.identities] == [("bsuid", "US.1")]
    conflicts = [e for e in logs if e["event"] == "identity_conflict"]
    assert conflicts == [
        {
            "event": "identity_conflict",
            "log_level": "warning",
            "tenant_id": str(tenant.id),
            "channel": "whatsapp",
            "kind": "bsuid",
            "customer_id": str(ana.customer.id),
            "other_customer_id": str(bo.customer.id),
            "first_kind": "bsuid",
        }
    ]
    assert "US.2" not in repr(conflicts)  # ids and kinds only, never the values
    assert len(await _customers(sessions, tenant)) == 2
    assert (await _resolve(sessions, tenant, [_wa("15550000002")])).customer.id == bo.customer.id


async def test_the_account_id_wins_over_the_phone_whichever_comes_first(sessions, make_tenant) -> None:  # type: ignore[no-untyped-def]
    tenant = await make_tenant()
    ana = await _resolve(sessions, tenant, [Identity("whatsapp", "bsuid", "US.1"), _wa("15550000001")])
    bo = await _resolve(sessions, tenant, [_wa("15550000002")], "Bo")
    with capture_logs() as logs:
        # Ana's account writes from the number Bo's record holds: Meta says Ana holds it now
        mixed = await _resolve(sessions, tenant, [_wa("15550000002"), Identity("whatsapp", "bsuid", "US.1")])
    assert mixed.customer.id == ana.customer.id
    assert [(i.kind, i.value) for i in mixed.identities] == [("wa_id", "15550000002"), ("bsuid", "US.1")]
    assert [(e["event"], e["customer_id"], e["previous_customer_id"]) for e in logs] == [
        ("identity_moved", str(ana.customer.id), str(bo.customer.id))
    ]
    first, second = await _customers(sessions, tenant)
    assert (first.phone, first.profile["previous_phones"]) == ("15550000002", ["15550000001"])
    assert (second.display_name, second.phone) == ("Bo", None)
    # a later message from either number without an account id: the number she writes from is Ana's,
    # the one she left is nobody's (a new person)
    assert (await _resolve(sessions, tenant, [_wa("15550000002")])).customer.id == ana.customer.id
    stranger = await _resolve(sessions, tenant, [_wa("15550000001")])
    assert stranger.created and stranger.customer.id not in (ana.customer.id, bo.customer.id)


async def test_a_known_account_writing_from_a_new_phone_is_answered_there(sessions, make_tenant) -> None:  # type: ignore[no-untyped-def]
    tenant = await make_tenant()
    first = await _resolve(sessions, tenant, _ids("image_with_caption.json"))
    message = [_wa(NEW_PHONE), Identity("whatsapp", "bsuid", BSUID)]
    again = await _resolve(sessions, tenant, message)
    assert again.customer.id == first.customer.id and not again.created
    assert reply_address(message, WHATSAPP_KINDS) == NEW_PHONE
    [customer] = await _customers(sessions, tenant)
    assert (customer.phone, customer.profile) == (
        NEW_PHONE,
        {"whatsapp_bsuid": BSUID, "previous_phones": [PHONE]},
    )
    assert await _identities(sessions, tenant) == [
        (BSUID, "bsuid", BSUID, True),
        (BSUID, "wa_id", PHONE, False),
        (BSUID, "wa_id", NEW_PHONE, True),
    ]
    # the new holder of the old number is somebody else, with or without their own account id
    newcomer = await _resolve(sessions, tenant, [_wa(PHONE), Identity("whatsapp", "bsuid", "US.9")])
    assert newcomer.created and newcomer.customer.id != customer.id


async def test_a_recycled_number_with_another_account_id_is_a_new_customer(sessions, make_tenant) -> None:  # type: ignore[no-untyped-def]
    tenant = await make_tenant()
    ana = await _resolve(sessions, tenant, [_wa(PHONE), Identity("whatsapp", "bsuid", BSUID)], "Ana")
    with captured_logs() as logs:
        # no number-change notice reached us: Bo's account writes from Ana's old number
        bo_message = [_wa(PHONE), Identity("whatsapp", "bsuid", "US.20000000000000000002")]
        bo = await _resolve(sessions, tenant, bo_message, "Bo")
    assert bo.created and bo.customer.id != ana.customer.id
    assert [e["event"] for e in logs if e["event"].startswith(("identity_", "customer_"))] == [
        "identity_recycled",
        "customer_created",
    ]
    assert reply_address(bo_message, WHATSAPP_KINDS) == PHONE
    first, second = await _customers(sessions, tenant)
    assert (first.display_name, first.phone) == ("Ana", None)
    assert (second.display_name, second.phone) == ("Bo", PHONE)
    assert (await _resolve(sessions, tenant, [_wa(PHONE)])).customer.id == bo.customer.id
    assert (
        await _resolve(sessions, tenant, [Identity("whatsapp", "bsuid", BSUID)])
    ).customer.id == ana.customer.id


async def test_a_late_message_from_a_left_number_never_takes_it_back(sessions, make_tenant) -> None:  # type: ignore[no-untyped-def]
    tenant = await make_tenant()
    bsuid = Identity("whatsapp", "bsuid", BSUID)
    before = utcnow()
    ana = await _resolve(sessions, tenant, [_wa(PHONE), bsuid], "Ana")
    async with sessions() as session, session.begin():
        await change_identity(
            session,
            tenant_id=tenant.id,
            channel="whatsapp",
            kind="wa_id",
            old_value=PHONE,
            new_value=NEW_PHONE,
        )
    bo = await _resolve(sessions, tenant, [_wa(PHONE)], "Bo")  # the old number's new holder
    # Meta redelivers a message Ana sent from her old number before the change
    late = await _resolve(sessions, tenant, [_wa(PHONE), bsuid], sent_at=before)
    assert late.customer.id == ana.customer.id
    assert [(i.kind, i.value) for i in late.identities] == [("bsuid", BSUID)]
    first, second = await _customers(sessions, tenant)
    assert (first.phone, second.phone) == (NEW_PHONE, PHONE)
    assert (await _resolve(sessions, tenant, [_wa(PHONE)])).customer.id == bo.customer.id


async def test_another_tenant_never_sees_the_customer(sessions, make_tenant) -> None:  # type: ignore[no-untyped-def]
    shop, other = await make_tenant(), await make_tenant()
    mine = await _resolve(sessions, shop, [_wa(PHONE)])
    theirs = await _resolve(sessions, other, [_wa(PHONE)])
    assert theirs.created and theirs.customer.id != mine.customer.id


async def test_number_change_keeps_the_customer_and_history(sessions, make_tenant) -> None:  # type: ignore[no-untyped-def]
    tenant = await make_tenant()
    resolved = await _resolve(sessions, tenant, _ids("text.json"))
    system = _message("system_user_changed_number.json")
    async with sessions() as session, session.begin():
        changed = await change_identity(
            session,
            tenant_id=tenant.id,
            channel="whatsapp",
            kind="wa_id",
            old_value=system.identities[0].value,
            new_value=system.system.new_identities[0].value,
        )
    assert changed is not None and changed.id == resolved.customer.id
    [customer] = await _customers(sessions, tenant)
    assert (customer.external_user_id, customer.phone, customer.profile) == (
        NEW_PHONE,
        NEW_PHONE,
        {"previous_phones": [PHONE]},
    )
    assert await _identities(sessions, tenant) == [
        (NEW_PHONE, "wa_id", PHONE, False),
        (NEW_PHONE, "wa_id", NEW_PHONE, True),
    ]
    assert (await _resolve(sessions, tenant, [_wa(NEW_PHONE)])).customer.id == customer.id


async def test_number_change_of_nobody_changes_nothing(sessions, make_tenant) -> None:  # type: ignore[no-untyped-def]
    tenant = await make_tenant()
    async with sessions() as session, session.begin():
        nobody = await change_identity(
            session,
            tenant_id=tenant.id,
            channel="whatsapp",
            kind="wa_id",
            old_value=PHONE,
            new_value=NEW_PHONE,
        )
    assert nobody is None and await _identities(sessions, tenant) == []


async def test_recycled_number_makes_a_new_customer_and_replies_follow_each_number(
    sessions, make_tenant
) -> None:  # type: ignore[no-untyped-def]
    tenant = await make_tenant()
    n1, n2 = "15550001001", "15550001002"
    a = await _resolve(sessions, tenant, [_wa(n1)], "Ana")
    async with sessions() as session, session.begin():
        await change_identity(
            session, tenant_id=tenant.id, channel="whatsapp", kind="wa_id", old_value=n1, new_value=n2
        )
    # months later the carrier gives N1 to Bo, who writes in
    b_message = [_wa(n1)]
    b = await _resolve(sessions, tenant, b_message, "Bo")
    assert b.created and b.customer.id != a.customer.id
    a_message = [_wa(n2)]
    assert (await _resolve(sessions, tenant, a_message)).customer.id == a.customer.id
    assert reply_address(b_message, WHATSAPP_KINDS) == n1 and reply_address(a_message, WHATSAPP_KINDS) == n2
    ana, bo = await _customers(sessions, tenant)
    assert (ana.display_name, ana.external_user_id, ana.phone, ana.profile) == (
        "Ana",
        n2,
        n2,
        {"previous_phones": [n1]},
    )
    assert (bo.display_name, bo.external_user_id, bo.phone) == ("Bo", n1, n1)
    assert await _identities(sessions, tenant) == [
        (n2, "wa_id", n1, False),  # Ana's history keeps the number she left
        (n2, "wa_id", n2, True),
        (n1, "wa_id", n1, True),
    ]
    async with sessions() as session:
        assert [
            i.value for i in await active_identities(session, tenant_id=tenant.id, customer_id=ana.id)
        ] == [n2]


async def test_changing_to_a_number_another_customer_holds_retires_it_there_first(
    sessions, make_tenant
) -> None:  # type: ignore[no-untyped-def]
    tenant = await make_tenant()
    n1, n2 = "15550002001", "15550002002"
    old_owner = await _resolve(sessions, tenant, [_wa(n2)], "Old owner of N2")
    mover = await _resolve(sessions, tenant, [_wa(n1)], "Mover")
    with capture_logs() as logs:
        async with sessions() as session, session.begin():
            await change_identity(
                session, tenant_id=tenant.id, channel="whatsapp", kind="wa_id", old_value=n1, new_value=n2
            )
    assert [(e["event"], e["log_level"], e["customer_id"], e["previous_customer_id"]) for e in logs] == [
        ("identity_recycled", "warning", str(mover.customer.id), str(old_owner.customer.id))
    ]
    first, second = await _customers(sessions, tenant)
    assert (first.display_name, first.phone, first.external_user_id) == (
        "Old owner of N2",
        None,
        f"retired:{n2}:{first.id.hex[:8]}",
    )
    assert (second.display_name, second.phone, second.external_user_id) == ("Mover", n2, n2)
    assert (await _resolve(sessions, tenant, [_wa(n2)])).customer.id == mover.customer.id
    assert len(await _customers(sessions, tenant)) == 2  # never merged, nobody new


async def test_concurrent_first_messages_of_a_new_person_create_one_customer(sessions, make_tenant) -> None:  # type: ignore[no-untyped-def]
    tenant = await make_tenant()
    message = [Identity("whatsapp", "bsuid", BSUID), _wa(PHONE)]
    results = await asyncio.gather(*(_resolve(sessions, tenant, message) for _ in range(6)))
    assert len({r.customer.id for r in results}) == 1
    assert sum(r.created for r in results) == 1
    assert len(await _customers(sessions, tenant)) == 1
    assert await _identities(sessions, tenant) == [
        (BSUID, "bsuid", BSUID, True),
        (BSUID, "wa_id", PHONE, True),
    ]


async def test_reply_address_prefers_the_phone_the_message_came_from() -> None:
    assert reply_address([Identity("whatsapp", "bsuid", BSUID), _wa(PHONE)], WHATSAPP_KINDS) == PHONE
    assert reply_address([Identity("whatsapp", "bsuid", BSUID)], WHATSAPP_KINDS) == BSUID
    assert (
        reply_address([Identity("gmail", "email", "ana@example.com")], reply_identity_kinds("gmail"))
        == "ana@example.com"
    )
    assert reply_address([], WHATSAPP_KINDS) is None


async def test_a_message_without_ids_is_refused(sessions, make_tenant) -> None:  # type: ignore[no-untyped-def]
    tenant = await make_tenant()
    with pytest.raises(ValueError):
        await _resolve(sessions, tenant, [_wa("  ")])
    with pytest.raises(ValueError):
        await _resolve(sessions, tenant, [_wa(PHONE), Identity("instagram", "igsid", "1")])
