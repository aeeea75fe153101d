"""Every payload in tests/fixtures/payloads/whatsapp normalizes to what INDEX.md names."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from switchboard.channels.whatsapp.normalize import normalize_delivery, render_location, strip_mime_params

from tests.utils.whatsapp import PAYLOAD_DIR, load_payload

ACCOUNT = "106000000000001"
OUT_01 = "wamid.HBgLMTU1NTAxMDAwOTkVAgARGBI0RUZBMDAwMDAwMDAwMDAwMDEA"
OUT_02 = "wamid.HBgLMTU1NTAxMDAwOTkVAgARGBI0RUZBMDAwMDAwMDAwMDAwMDIA"
OUT_03 = "wamid.HBgLMTU1NTAxMDAwOTkVAgARGBI0RUZBMDAwMDAwMDAwMDAwMDMA"
IN_01 = "wamid.HBgLMTU1NTAxMDAwOTkVAgASGBQzQUZBMDAwMDAwMDAwMDAwMDAwMQA="
IN_02 = "wamid.HBgLMTU1NTAxMDAwOTkVAgASGBQzQUZBMDAwMDAwMDAwMDAwMDAwMgA="
BSUID = "US.10000000000000000001"


def one(name: str):  # type: ignore[no-untyped-def]
    delivery = normalize_delivery(load_payload(name, refresh=False))
    assert len(delivery.messages) == 1, name
    return delivery.messages[0]


def test_every_payload_normalizes_without_error() -> None:
    names = sorted(p.name for p in PAYLOAD_DIR.glob("*.json"))
    assert len(names) == 45
    nothing_for_us = {
        "user_preferences_marketing.json",
        "call_connect_user_initiated.json",
        "empty_entry.json",
    }
    for name in names:
        delivery = normalize_delivery(load_payload(name, refresh=False))
        assert delivery.skipped == 0, name
        has_events = bool(delivery.messages or delivery.statuses or delivery.errors)
        assert has_events == (name not in nothing_for_us), name
        for msg in delivery.messages:
            assert msg.sender_id and msg.account_id == ACCOUNT and msg.external_id.startswith("wamid.")


def test_text() -> None:
    msg = one("text.json")
    assert (msg.kind, msg.text, msg.sender_name, msg.action) == (
        "text",
        "Hi! Does it come in another color?",
        "Test Customer",
        "process",
    )
    assert msg.external_id == IN_01
    assert (
        msg.sender_id == "15550100099" and msg.flags["wa_id"] == "15550100099" and msg.flags["bsuid"] is None
    )
    assert msg.sent_at == datetime.fromtimestamp(1781000000, UTC)


def test_image_with_caption_keeps_bsuid_and_wa_id() -> None:
    msg = one("image_with_caption.json")
    assert (msg.kind, msg.text, msg.action) == ("image", "This arrived broken 😞", "process")
    assert msg.media[0].ref == "1000000000000021" and msg.media[0].mime == "image/jpeg"
    assert msg.media[0].caption == "This arrived broken 😞"
    assert msg.sender_id == BSUID and msg.flags["wa_id"] == "15550100099"
    assert msg.flags["parent_bsuid"] == "US.ENT.10000000000000000002"


def test_voice_note_mime_parameters_stripped() -> None:
    msg = one("audio_voice_note_ogg_opus.json")
    assert msg.kind == "audio" and msg.action == "process"
    assert (msg.media[0].ref, msg.media[0].mime, msg.media[0].voice) == (
        "1000000000000031",
        "audio/ogg",
        True,
    )
    assert strip_mime_params("audio/ogg; codecs=opus") == "audio/ogg"


def test_video_forwarded_and_document_filename() -> None:
    video = one("video_with_caption.json")
    assert (video.kind, video.text, video.media[0].mime, video.media[0].ref) == (
        "video",
        "see how it rattles",
        "video/mp4",
        "1000000000000041",
    )
    assert video.flags["forwarded"] is True
    doc = one("document_pdf.json")
    assert doc.media[0].filename == "Receipt #1042 (copy).pdf" and doc.media[0].mime == "application/pdf"
    assert doc.text == "my receipt"


def test_sticker_is_recorded_not_answered() -> None:
    msg = one("sticker_animated.json")
    assert (msg.kind, msg.action, msg.flags["animated"]) == ("sticker", "record", True)


def test_location_rendered() -> None:
    msg = one("location_named_place.json")
    assert (
        msg.text
        == "Example Coffee, 101 Example Ave, Springfield, ZZ 00000 (37.44221496582, -122.16165924072)"
    )
    assert render_location({"latitude": 1.5, "longitude": 2}) == "(1.5, 2)"


def test_contacts_card_free_text_phone_type() -> None:
    msg = one("contacts_card.json")
    assert msg.kind == "contacts" and len(msg.flags["contacts"]) == 2
    assert "Lucía Ejemplo: +1 (555) 010-0088 (MOBILE)" in msg.text
    assert "Sam: +39 555 010 0087 (Cellulare)" in msg.text


def test_interactive_button_reply_uses_id_as_payload() -> None:
    msg = one("interactive_button_reply.json")
    assert (msg.kind, msg.text, msg.payload, msg.reply_to) == (
        "interactive",
        "Talk to a person",
        "talk_to_human",
        OUT_01,
    )


def test_template_quick_reply_button() -> None:
    msg = one("button_template_quick_reply.json")
    assert (msg.kind, msg.text, msg.payload, msg.reply_to) == ("button", "Unsubscribe", "Unsubscribe", OUT_03)


def test_reaction_is_control() -> None:
    msg = one("reaction.json")
    assert (msg.kind, msg.action, msg.flags["target"], msg.flags["emoji"]) == (
        "reaction",
        "record",
        OUT_01,
        "👍",
    )


def test_reply_with_context() -> None:
    msg = one("text_reply_with_context.json")
    assert (msg.text, msg.reply_to) == ("yes, that one", OUT_02)


def test_batch_matches_contacts_by_sender_and_orders_by_time() -> None:
    delivery = normalize_delivery(load_payload("batch_multiple_messages_and_status.json", refresh=False))
    assert [m.text for m in delivery.messages] == ["Necesito ayuda con mi pedido", "hello?", "anyone there"]
    first = delivery.messages[0]
    assert (first.sender_id, first.sender_name) == ("15550100098", "Zoë Tester 🌵")
    assert {m.sender_name for m in delivery.messages[1:]} == {"Test Customer"}
    assert [(s.external_id, s.status) for s in delivery.statuses] == [(OUT_01, "read")]


@pytest.mark.parametrize(
    ("name", "status", "code"),
    [
        ("status_sent.json", "sent", None),
        ("status_delivered.json", "delivered", None),
        ("status_read.json", "read", None),
        ("status_failed_131047_reengagement.json", "failed", 131047),
        ("status_sent_with_biz_opaque_callback_data.json", "sent", None),
    ],
)
def test_statuses(name: str, status: str, code: int | None) -> None:
    delivery = normalize_delivery(load_payload(name, refresh=False))
    assert not delivery.messages and len(delivery.statuses) == 1
    item = delivery.statuses[0]
    assert (item.status, item.error_code, item.recipient_id) == (status, code, "15550100099")
    if name.startswith("status_sent_with"):
        assert item.biz_opaque_callback_data == "conv=c_000123;turn=7"


def test_unsupported_and_interactive_without_payload() -> None:
    unsupported = one("unsupported_type.json")
    assert (unsupported.kind, unsupported.action, unsupported.text) == ("unsupported", "record", "")
    assert unsupported.flags["error_code"] == 131051
    broken = one("interactive_missing_payload.json")
    assert (broken.kind, broken.action, broken.text) == ("unsupported", "record", "")


def test_system_message_without_contacts() -> None:
    msg = one("system_user_changed_number.json")
    assert (msg.kind, msg.action, msg.sender_id) == ("system", "record", "15550100099")
    assert (msg.flags["system_type"], msg.flags["new_wa_id"]) == ("user_changed_number", "15550100097")


def test_referral_flags() -> None:
    msg = one("referral_click_to_whatsapp_ad.json")
    assert (msg.text, msg.action) == ("Can I get more info on this?", "process")
    assert msg.flags["referral"]["source_id"] == "120000000000000001"
    assert msg.flags["referral"]["ctwa_clid"].startswith("ARAkFAKECLICKID")


def test_errors_only_entry() -> None:
    delivery = normalize_delivery(load_payload("errors_only_entry.json", refresh=False))
    assert not delivery.messages and not delivery.statuses
    assert [(e.code, e.account_id) for e in delivery.errors] == [(130429, ACCOUNT)]


def test_revoke_and_edit_target_the_original() -> None:
    revoke = one("revoke_deleted_by_customer.json")
    assert (revoke.kind, revoke.action, revoke.flags["target"]) == ("revoke", "record", IN_01)
    edit = one("edit_by_customer.json")
    assert (edit.kind, edit.flags["target"], edit.text) == (
        "edit",
        IN_02,
        "This arrived broken 😞 (box was fine though)",
    )


def test_business_app_echo_is_outbound_human() -> None:
    msg = one("smb_message_echo_from_business_app.json")
    assert (msg.action, msg.flags["direction"], msg.flags["author"]) == ("record", "outbound", "human_agent")
    assert msg.sender_id == BSUID and msg.flags["wa_id"] == "15550100099"


def test_username_user_without_phone_is_keyed_by_bsuid() -> None:
    msg = one("text_from_username_user_phone_withheld.json")
    assert msg.sender_id == BSUID and msg.flags["wa_id"] is None
    assert (msg.sender_name, msg.flags["username"]) == ("Test Customer", "@test.customer")


def test_broken_items_are_skipped_not_raised() -> None:
    body = {
        "object": "whatsapp_business_account",
        "entry": [
            {"changes": [{"value": {"metadata": {}, "messages": [{"id": "x"}]}}]},
            {
                "changes": [
                    {
                        "value": {
                            "metadata": {"phone_number_id": "1"},
                            "messages": [{"from": "", "id": "wamid.A"}, "junk"],
                        }
                    }
                ]
            },
            "junk",
        ],
    }
    delivery = normalize_delivery(body)
    assert delivery.messages == [] and delivery.skipped == 3


def test_a_catalog_order_reaches_the_agent_as_items_quantities_prices_and_the_note() -> None:
    msg = one("order_catalog_with_text.json")
    assert (msg.kind, msg.action) == ("order", "process")
    assert msg.text == (
        "[Order from catalog 300000000000001]\n"
        "- 2 x FVAM-2050-B at 49.9 EUR each = 99.8 EUR\n"
        "- 3 x FILTER-10 at 4.50 EUR each = 13.50 EUR\n"
        "Total: 113.30 EUR\n"
        'Customer\'s note: "Can you deliver before Friday?"'
    )
    assert msg.flags["order"] == {"catalog_id": "300000000000001", "items": 2}


def test_an_order_with_odd_items_is_still_readable() -> None:
    from switchboard.channels.whatsapp.normalize import render_order

    odd = render_order(
        {
            "product_items": [
                {"product_retailer_id": "X", "quantity": "²", "item_price": 1e308},
                {"currency": "USD", "quantity": 1, "item_price": "9" * 5000},
                5,
            ]
        }
    )
    assert odd.splitlines() == ["[Order]", "- ? x X", "- 1 x unknown item"]


def test_a_bsuid_change_names_its_sender_by_the_previous_id() -> None:
    msg = one("system_user_changed_user_id.json")
    assert (msg.kind, msg.sender_id) == ("system", "US.10000000000000000001")
    assert [(i.kind, i.value) for i in msg.system.new_identities] == [("bsuid", "US.10000000000000000003")]


def test_a_chat_opened_event_wakes_the_agent_to_greet() -> None:
    msg = one("request_welcome_chat_opened.json")
    assert (msg.kind, msg.action, msg.text) == (
        "request_welcome",
        "process",
        "[The customer opened the chat for the first time]",
    )


@pytest.mark.parametrize("odd", [1, True, 1.5, "text", {"a": 1}, None])
def test_arrays_that_are_not_lists_are_empty(odd) -> None:  # type: ignore[no-untyped-def]
    body = load_payload("batch_multiple_messages_and_status.json")
    for entry in body["entry"]:
        for change in entry["changes"]:
            for key in ("messages", "statuses", "errors", "message_echoes", "contacts"):
                change["value"][key] = odd
    delivery = normalize_delivery(body)
    assert (delivery.messages, delivery.statuses, delivery.errors) == ([], [], [])


@pytest.mark.parametrize(
    ("code", "expected"),
    [("²", None), ("9" * 5000, None), (True, None), ("131047", 131047), (131047, 131047), ("٣", None)],
)
def test_error_codes_are_read_only_when_they_are_plain_numbers(code, expected) -> None:  # type: ignore[no-untyped-def]
    body = load_payload("status_failed_131047_reengagement.json")
    body["entry"][0]["changes"][0]["value"]["statuses"][0]["errors"][0]["code"] = code
    body["entry"][0]["changes"][0]["value"]["errors"] = [{"code": code, "title": "x"}]
    delivery = normalize_delivery(body)
    assert delivery.statuses[0].error_code == expected and delivery.errors[0].code == expected


def test_a_message_that_cannot_be_read_is_kept_with_a_reason_and_spares_its_siblings() -> None:
    body = load_payload("batch_multiple_messages_and_status.json")
    messages = body["entry"][0]["changes"][1]["value"]["messages"]
    messages[0]["from_user_id"] = "US." + "1" * 300  # longer than a BSUID the contract accepts
    delivery = normalize_delivery(body)
    broken = [m for m in delivery.messages if m.flags.get("unprocessable")]
    assert len(delivery.messages) == 3 and len(broken) == 1
    assert (broken[0].kind, broken[0].action) == ("unsupported", "record")
    assert broken[0].flags["unprocessable"].startswith("unreadable text: ValidationError")
