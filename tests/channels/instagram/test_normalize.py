"""Every payload in tests/fixtures/payloads/instagram normalizes to what INDEX.md names."""

from __future__ import annotations

from datetime import UTC, datetime

from switchboard.channels.instagram.normalize import normalize_delivery

from tests.utils.instagram import PAYLOAD_ACCOUNT, PAYLOAD_DIR, load_payload, mid

CUSTOMER = "1000000000000001"


def one(name: str):  # type: ignore[no-untyped-def]
    delivery = normalize_delivery(load_payload(name, refresh=False))
    assert len(delivery.messages) == 1 and delivery.statuses == [] and delivery.skipped == 0, name
    return delivery.messages[0]


def test_every_payload_normalizes_without_error() -> None:
    names = sorted(p.name for p in PAYLOAD_DIR.glob("*.json"))
    assert len(names) == 13
    for name in names:
        delivery = normalize_delivery(load_payload(name, refresh=False))
        assert delivery.skipped == 0, name
        assert len(delivery.messages) + len(delivery.statuses) == 1, name
        for msg in delivery.messages:
            assert msg.sender_id and msg.sender_id != msg.account_id and msg.channel == "instagram"


def test_text_dm() -> None:
    msg = one("text_dm.json")
    assert (msg.kind, msg.text, msg.action, msg.external_id) == (
        "text",
        "hi, is the blue one back in stock?",
        "process",
        mid(1),
    )
    assert (msg.account_id, msg.sender_id) == (PAYLOAD_ACCOUNT, CUSTOMER)
    assert [(i.kind, i.value) for i in msg.identities] == [("igsid", CUSTOMER)]
    assert msg.sent_at == datetime.fromtimestamp(1780999999.388, UTC)


def test_image_has_the_cdn_url_as_ref_and_no_mime() -> None:
    msg = one("image_attachment.json")
    assert (msg.kind, msg.text, msg.action, msg.external_id) == ("image", "", "process", mid(2))
    (media,) = msg.media
    assert media.ref.startswith("https://lookaside.fbsbx.com/ig_messaging_cdn/?asset_id=18000000000000002")
    assert (media.mime, media.voice) == (None, False)


def test_audio_is_a_voice_message_without_mime() -> None:
    msg = one("audio_attachment_voice.json")
    assert (msg.kind, msg.action, msg.external_id) == ("audio", "process", mid(3))
    assert (msg.media[0].mime, msg.media[0].voice) == (None, True)


def test_story_reply_keeps_the_story_id_and_copies_its_media() -> None:
    msg = one("story_reply.json")
    assert (msg.kind, msg.text, msg.action, msg.external_id) == (
        "text",
        "how much is this? 😍",
        "process",
        mid(4),
    )
    assert msg.reply_to == "18000000000000104"
    assert msg.flags["story"]["id"] == "18000000000000104"
    assert msg.context_line == "[The customer replied to your Instagram story]"
    assert [m.filename for m in msg.media] == ["story"]


def test_story_mention_is_recorded_with_a_line_for_the_agent() -> None:
    msg = one("story_mention.json")
    assert (msg.kind, msg.text, msg.action, msg.external_id) == ("story_mention", "", "record", mid(5))
    assert msg.context_line == "[The customer mentioned your account in their Instagram story]"
    assert msg.media[0].ref.endswith("FAKE_SIGNATURE_e4da3b7fbbce2345d7772b0674a318d5")


def test_echo_is_keyed_on_the_recipient_and_never_wakes_the_agent() -> None:
    msg = one("message_echo.json")
    assert (msg.kind, msg.action, msg.echo, msg.external_id) == ("text", "record", True, mid(6))
    assert msg.sender_id == CUSTOMER  # the recipient: never the business account 17841400000000001
    assert msg.flags["direction"] == "outbound"
    assert msg.text == "Yes! The blue one is back. Want me to reserve one?"


def test_reaction_is_a_record_only_control_on_the_reacted_message() -> None:
    msg = one("reaction_react.json")
    assert (msg.kind, msg.action, msg.target_external_id) == ("reaction", "record", mid(6))
    assert (msg.flags["emoji"], msg.flags["reaction"], msg.flags.get("unreact")) == ("❤️", "love", None)


def test_unreact() -> None:
    body = load_payload("reaction_react.json", refresh=False)
    body["entry"][0]["messaging"][0]["reaction"] = {"mid": mid(6), "action": "unreact"}
    (msg,) = normalize_delivery(body).messages
    assert (msg.kind, msg.action, msg.flags["unreact"]) == ("reaction", "record", True)


def test_icebreaker_postback() -> None:
    msg = one("postback_icebreaker.json")
    assert (msg.kind, msg.text, msg.payload, msg.action, msg.external_id) == (
        "postback",
        "Track my order",
        "ICEBREAKER_TRACK_ORDER",
        "process",
        mid(8),
    )


def test_seen_is_a_read_status_of_our_message() -> None:
    delivery = normalize_delivery(load_payload("messaging_seen.json", refresh=False))
    assert delivery.messages == []
    (status,) = delivery.statuses
    assert (status.external_id, status.status, status.account_id, status.recipient_id) == (
        mid(6),
        "read",
        PAYLOAD_ACCOUNT,
        CUSTOMER,
    )


def test_unsend_is_a_revoke_of_the_original_and_not_an_empty_message() -> None:
    msg = one("message_deleted.json")
    assert (msg.kind, msg.action, msg.target_external_id, msg.text) == ("revoke", "record", mid(1), "")
    assert msg.external_id != mid(1)  # its own key: the original row is updated, no row replaced


def test_quick_reply() -> None:
    msg = one("quick_reply.json")
    assert (msg.kind, msg.text, msg.payload, msg.action, msg.external_id) == (
        "quick_reply",
        "Yes please",
        "RESERVE_YES",
        "process",
        mid(9),
    )


def test_standby_is_record_only() -> None:
    msg = one("standby_message.json")
    assert (msg.kind, msg.text, msg.action, msg.flags["standby"]) == (
        "text",
        "hello? still waiting",
        "record",
        True,
    )


def test_dashboard_test_event_with_a_string_timestamp_in_seconds() -> None:
    msg = one("dashboard_test_event.json")
    assert (msg.account_id, msg.sender_id, msg.external_id, msg.text) == (
        "0",
        "12334",
        "random_mid",
        "random_text",
    )
    assert msg.sent_at == datetime.fromtimestamp(1527459824, UTC)


def test_several_entries_and_messages_in_one_delivery_are_all_read_in_time_order() -> None:
    first = load_payload("text_dm.json", refresh=False)
    second = load_payload("quick_reply.json", refresh=False)
    image = load_payload("image_attachment.json", refresh=False)
    entry = first["entry"][0]
    entry["messaging"] += image["entry"][0]["messaging"]
    body = {"object": "instagram", "entry": [second["entry"][0], entry]}
    assert [m.external_id for m in normalize_delivery(body).messages] == [mid(1), mid(2), mid(9)]


def test_changes_shape_edit_referral_and_broken_items() -> None:
    now = 1781000000000
    body = {
        "object": "instagram",
        "entry": [
            {
                "id": PAYLOAD_ACCOUNT,
                "time": now,
                "changes": [
                    {
                        "field": "messages",
                        "value": {
                            "sender": {"id": CUSTOMER},
                            "recipient": {"id": PAYLOAD_ACCOUNT},
                            "timestamp": now,
                            "message": {"mid": "m-changes", "text": "via changes"},
                        },
                    },
                    {
                        "field": "message_edit",
                        "value": {
                            "sender": {"id": CUSTOMER},
                            "recipient": {"id": PAYLOAD_ACCOUNT},
                            "timestamp": now + 1,
                            "message_edit": {"mid": "m-changes", "text": "edited", "num_edit": 1},
                        },
                    },
                    {
                        "field": "messaging_referral",
                        "value": {
                            "sender": {"id": CUSTOMER},
                            "recipient": {"id": PAYLOAD_ACCOUNT},
                            "timestamp": now + 2,
                            "referral": {
                                "ref": "spring",
                                "source": "ADS",
                                "type": "OPEN_THREAD",
                                "ad_id": "42",
                            },
                        },
                    },
                    {"field": "comments", "value": {"id": "c1"}},
                    {
                        "field": "messages",
                        "value": {
                            "sender": {"id": PAYLOAD_ACCOUNT},
                            "recipient": {"id": PAYLOAD_ACCOUNT},
                            "timestamp": now,
                            "message": {"mid": "m-self"},
                        },
                    },
                ],
            }
        ],
    }
    delivery = normalize_delivery(body)
    assert [(m.kind, m.action, m.text) for m in delivery.messages] == [
        ("text", "process", "via changes"),
        ("edit", "record", "edited"),
        ("referral", "record", ""),
    ]
    assert delivery.messages[1].target_external_id == "m-changes"
    assert delivery.messages[2].referral == {
        "ref": "spring",
        "source": "ADS",
        "type": "OPEN_THREAD",
        "ad_id": "42",
    }
    assert delivery.skipped == 2  # the comment and the item whose only party is the business
