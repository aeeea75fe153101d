"""Starting a conversation by phone (a template, or free text inside the 24-hour window) and a
person's sends beyond text, written through the one outbox and delivered to the Graph sandbox."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import update
from sqlmodel import select
from switchboard.channels.whatsapp.templates import TemplateValues
from switchboard.db.models import Conversation, Customer, Message, Outbox, utcnow
from switchboard.outbox.delivery import DeliveryScope, deliver
from switchboard.outreach import (
    OutreachRefused,
    TemplateChoice,
    normalize_phone,
    send_message,
    start_conversation,
)
from switchboard.replies import OptionList, QuickReplies, ReplyOption

from tests.utils.handoff import random_phone
from tests.utils.outbox import sent_by
from tests.utils.whatsapp import connect_whatsapp

ORDER = TemplateChoice(
    "order_update", "en_US", TemplateValues(body=["Ana", "#1042", "on its way"], buttons=["1042"])
)


async def _start(sessions, tenant_id, **kwargs):  # type: ignore[no-untyped-def]
    async with sessions() as session:
        try:
            sent = await start_conversation(session, tenant_id=tenant_id, **kwargs)
        except OutreachRefused:
            await session.rollback()
            raise
        await session.commit()
    return sent


async def _set_last_customer_message(sessions, conversation_id, age: timedelta) -> None:  # type: ignore[no-untyped-def]
    async with sessions() as session, session.begin():
        await session.exec(
            update(Conversation)
            .where(Conversation.id == conversation_id)
            .values(last_customer_message_at=utcnow() - age)
        )


async def test_a_template_starts_a_conversation_with_a_new_customer_and_is_delivered(
    templated, sessions, deliveries, graph_sandbox
) -> None:  # type: ignore[no-untyped-def]
    phone = random_phone()
    sent = await _start(
        sessions,
        templated.tenant.id,
        phone=f"+{phone[:2]} {phone[2:5]}-{phone[5:]}",
        template=ORDER,
        sender={"key_id": "k1"},
    )
    assert (sent.created, sent.via, sent.outbox_rows) == (True, "template", 1)

    report = await deliver(deliveries, DeliveryScope(conversation_id=sent.conversation_id))
    assert report.sent == 1
    [record] = await sent_by(graph_sandbox[0], templated.phone_number_id)
    assert (record["to"], record["type"]) == (phone, "template")
    assert record["template"] == {
        "name": "order_update",
        "language": {"code": "en_US"},
        "components": [
            {
                "type": "body",
                "parameters": [
                    {"type": "text", "text": "Ana"},
                    {"type": "text", "text": "#1042"},
                    {"type": "text", "text": "on its way"},
                ],
            },
            {
                "type": "button",
                "sub_type": "url",
                "index": "0",
                "parameters": [{"type": "text", "text": "1042"}],
            },
        ],
    }
    async with sessions() as session:
        customer = await session.get(Customer, sent.customer_id)
        history = (
            await session.exec(select(Message).where(Message.conversation_id == sent.conversation_id))
        ).all()
    assert customer is not None and customer.phone == phone
    assert [(m.role, m.text, m.proxy_metadata["sender"], m.proxy_metadata["key_id"]) for m in history] == [
        ("human_agent", "Hi Ana, your order #1042 is on its way.", "api", "k1")
    ]


async def test_free_text_to_a_customer_who_never_wrote_is_refused_with_the_rule(templated, sessions) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(OutreachRefused) as refused:
        await _start(sessions, templated.tenant.id, phone="+" + random_phone(), text="Hello!")
    assert (refused.value.status, refused.value.code) == (409, "outside_customer_service_window")
    assert str(refused.value) == (
        "WhatsApp lets a business send free text only within 24 hours of the customer's last message, and "
        "the customer has never written to this number. Send an approved template instead; free text is "
        "possible again once the customer answers."
    )
    async with sessions() as session:
        assert (await session.exec(select(Outbox).where(Outbox.tenant_id == templated.tenant.id))).all() == []


async def test_free_text_inside_the_window_goes_out_outside_it_only_a_template(
    templated, sessions, deliveries, graph_sandbox
) -> None:  # type: ignore[no-untyped-def]
    phone = random_phone()
    first = await _start(sessions, templated.tenant.id, phone=phone, template=ORDER)
    await _set_last_customer_message(sessions, first.conversation_id, timedelta(hours=23, minutes=50))
    again = await _start(sessions, templated.tenant.id, phone=phone, text="Your parcel is at the door.")
    assert (again.conversation_id, again.customer_id, again.created, again.via) == (
        first.conversation_id,
        first.customer_id,
        False,
        "text",
    )
    assert (await deliver(deliveries, DeliveryScope(conversation_id=first.conversation_id))).sent == 2

    await _set_last_customer_message(sessions, first.conversation_id, timedelta(hours=25))
    with pytest.raises(OutreachRefused, match="the customer last wrote 25 hours ago") as refused:
        await _start(sessions, templated.tenant.id, phone=phone, text="Still there?")
    assert refused.value.code == "outside_customer_service_window"
    late = await _start(sessions, templated.tenant.id, phone=phone, template=ORDER)
    assert late.via == "template"

    assert (await deliver(deliveries, DeliveryScope(conversation_id=first.conversation_id))).sent == 1
    assert [(r["type"], r["text"]) for r in await sent_by(graph_sandbox[0], templated.phone_number_id)] == [
        ("template", None),
        ("text", "Your parcel is at the door."),
        ("template", None),
    ]


@pytest.mark.parametrize(
    ("choice", "code", "detail"),
    [
        (TemplateChoice("order_update", None), "template_not_found", "exists in several languages"),
        (
            TemplateChoice("spring_sale", "en_US", TemplateValues(body=["20%"])),
            "template_not_approved",
            "is pending",
        ),
        (
            TemplateChoice("order_update", "es", TemplateValues(body=["Ana"], buttons=["1"])),
            "template_parameters_invalid",
            r"takes 3 body value\(s\), 1 given",
        ),
        (TemplateChoice("no_such", "en_US"), "template_not_found", "no template no_such on this number"),
    ],
)
async def test_template_mistakes_are_refused_before_anything_is_written(
    templated, sessions, choice, code, detail
) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(OutreachRefused, match=detail) as refused:
        await _start(sessions, templated.tenant.id, phone=random_phone(), template=choice)
    assert (refused.value.status, refused.value.code) == (422, code)
    async with sessions() as session:
        assert (
            await session.exec(select(Customer).where(Customer.tenant_id == templated.tenant.id))
        ).all() == []


async def test_the_number_to_write_from(templated, sessions, settings) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(OutreachRefused, match="connect a WhatsApp number first"):
        await _start(sessions, __import__("uuid").uuid4(), phone=random_phone(), template=ORDER)
    second = await connect_whatsapp(sessions, templated.tenant, settings)
    with pytest.raises(
        OutreachRefused, match="you have 2 WhatsApp numbers: name the one to write from"
    ) as refused:
        await _start(sessions, templated.tenant.id, phone=random_phone(), template=ORDER)
    assert refused.value.code == "channel_account_required"
    sent = await _start(
        sessions,
        templated.tenant.id,
        phone=random_phone(),
        template=ORDER,
        channel_account_id=templated.account.id,
    )
    assert sent.via == "template"
    with pytest.raises(
        OutreachRefused, match="no template order_update on this number"
    ):  # its templates: none yet
        await _start(
            sessions, templated.tenant.id, phone=random_phone(), template=ORDER, channel_account_id=second.id
        )


@given(
    st.from_regex(r"[1-9][0-9]{7,14}", fullmatch=True),
    st.sampled_from(["+", "00", ""]),
    st.sampled_from(["", " ", "-", "."]),
)
def test_a_phone_in_any_usual_writing_is_its_digits(digits: str, prefix: str, separator: str) -> None:
    written = prefix + separator.join(digits[i : i + 3] for i in range(0, len(digits), 3))
    assert normalize_phone(written) == digits


@pytest.mark.parametrize("phone", ["", "+12", "0600000000", "+34 600 abc 000", "1" * 16])
def test_a_phone_that_is_not_one_is_refused(phone: str) -> None:
    with pytest.raises(OutreachRefused, match="international form") as refused:
        normalize_phone(phone)
    assert refused.value.code == "invalid_phone"


async def _send(sessions, tenant_id, conversation_id, **kwargs):  # type: ignore[no-untyped-def]
    async with sessions() as session:
        sent = await send_message(session, tenant_id=tenant_id, conversation_id=conversation_id, **kwargs)
        await session.commit()
    return sent


async def test_buttons_and_a_list_go_out_as_whatsapp_interactive_messages(
    templated, sessions, deliveries, graph_sandbox
) -> None:  # type: ignore[no-untyped-def]
    started = await _start(sessions, templated.tenant.id, phone=random_phone(), template=ORDER)
    await _set_last_customer_message(sessions, started.conversation_id, timedelta(minutes=3))
    buttons = QuickReplies(
        prompt="Deliver when?",
        options=[ReplyOption(id="am", title="Morning"), ReplyOption(id="pm", title="Afternoon")],
    )
    listed = OptionList(
        prompt="Pick a store",
        button_label="Stores",
        options=[ReplyOption(id=f"s{i}", title=f"Store {i}", description="Open 9-21") for i in range(5)],
    )
    assert (
        await _send(sessions, templated.tenant.id, started.conversation_id, interactive=buttons)
    ).via == "interactive"
    await _send(
        sessions, templated.tenant.id, started.conversation_id, text="Or choose a store:", interactive=listed
    )

    await deliver(deliveries, DeliveryScope(conversation_id=started.conversation_id))
    records = await sent_by(graph_sandbox[0], templated.phone_number_id)
    [button_msg, list_msg] = [r["interactive"] for r in records if r["type"] == "interactive"]
    assert button_msg["type"] == "button"
    assert [b["reply"] for b in button_msg["action"]["buttons"]] == [
        {"id": "am", "title": "Morning"},
        {"id": "pm", "title": "Afternoon"},
    ]
    assert list_msg["type"] == "list" and list_msg["body"]["text"] == "Or choose a store:\n\nPick a store"
    assert [row["title"] for s in list_msg["action"]["sections"] for row in s["rows"]] == [
        f"Store {i}" for i in range(5)
    ]


async def test_a_person_s_send_obeys_the_window_and_the_conversation(templated, sessions) -> None:  # type: ignore[no-untyped-def]
    started = await _start(sessions, templated.tenant.id, phone=random_phone(), template=ORDER)
    with pytest.raises(OutreachRefused, match="the customer has never written to this number") as refused:
        await _send(sessions, templated.tenant.id, started.conversation_id, text="Hi")
    assert refused.value.code == "outside_customer_service_window"
    again = await _send(sessions, templated.tenant.id, started.conversation_id, template=ORDER)
    assert again.via == "template"
    with pytest.raises(OutreachRefused, match="conversation not found"):
        await _send(sessions, __import__("uuid").uuid4(), started.conversation_id, template=ORDER)
    async with sessions() as session, session.begin():
        await session.exec(
            update(Conversation)
            .where(Conversation.id == started.conversation_id)
            .values(status="closed", closed_at=utcnow())
        )
    with pytest.raises(OutreachRefused, match="the conversation is closed") as closed:
        await _send(sessions, templated.tenant.id, started.conversation_id, template=ORDER)
    assert (closed.value.status, closed.value.code) == (409, "conversation_closed")


PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 200
PDF = b"%PDF-1.7\n" + b"x" * 300


async def test_an_image_and_a_pdf_are_uploaded_to_whatsapp_and_sent_from_the_outbox(
    templated, sessions, deliveries, graph_sandbox, make_settings
) -> None:  # type: ignore[no-untyped-def]
    from switchboard.channels.whatsapp.templates import upload_media
    from switchboard.outreach.sends import send_attachment

    settings = make_settings()
    started = await _start(sessions, templated.tenant.id, phone=random_phone(), template=ORDER)
    await _set_last_customer_message(sessions, started.conversation_id, timedelta(minutes=1))

    async def upload(account, data, mime, name):  # type: ignore[no-untyped-def]
        return await upload_media(settings, account, data, mime, name)

    for data, name, caption in ((PNG, "photo.png", "Your parcel"), (PDF, "../invoice 1042.pdf", None)):
        async with sessions() as session:
            sent = await send_attachment(
                session,
                tenant_id=templated.tenant.id,
                conversation_id=started.conversation_id,
                data=data,
                filename=name,
                caption=caption,
                upload=upload,
                max_bytes=10**7,
            )
            await session.commit()
        assert sent.via == ("image" if data is PNG else "document")
    await deliver(deliveries, DeliveryScope(conversation_id=started.conversation_id))
    media = [
        r["body"]
        for r in await sent_by(graph_sandbox[0], templated.phone_number_id)
        if r["type"] in ("image", "document")
    ]
    assert [m["type"] for m in media] == ["image", "document"]
    assert (
        media[0]["image"]["caption"] == "Your parcel"
        and media[1]["document"]["filename"] == ".._invoice 1042.pdf"
    )
    assert graph_sandbox[1].media[media[0]["image"]["id"]] == (PNG, "image/png")
    assert graph_sandbox[1].media[media[1]["document"]["id"]] == (PDF, "application/pdf")


@pytest.mark.parametrize(
    ("data", "max_bytes", "status", "code"),
    [
        (b"GIF89a" + b"\x00" * 50, 10**7, 415, "unsupported_media_type"),
        (b"just text, named photo.png", 10**7, 415, "unsupported_media_type"),
        (b"", 10**7, 415, "unsupported_media_type"),
        (PNG + b"\x00" * 5 * 1024 * 1024, 10**8, 413, "body_too_large"),
        (PDF, 100, 413, "body_too_large"),
    ],
)
def test_attachments_are_checked_by_their_content_and_size(
    data: bytes, max_bytes: int, status: int, code: str
) -> None:
    from switchboard.outreach.sends import check_attachment

    with pytest.raises(OutreachRefused) as refused:
        check_attachment(data, max_bytes=max_bytes)
    assert (refused.value.status, refused.value.code) == (status, code)
