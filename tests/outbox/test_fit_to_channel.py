"""The outbox writer cuts every item to its channel's limits and never drops text."""

from __future__ import annotations

import uuid

from switchboard.channels.base import OutboundPart, text_length
from switchboard.channels.whatsapp.send import CAPTION_LIMIT, TEXT_LIMIT_CHARS
from switchboard.outbox.writer import OutboxItem, fit_to_channel


def _item(part: OutboundPart, channel: str = "whatsapp") -> OutboxItem:
    return OutboxItem(
        conversation_id=uuid.uuid4(),
        channel=channel,
        channel_account_id=None,
        recipient="15550100099",
        part=part,
    )


def test_a_long_caption_keeps_what_fits_and_the_rest_follows_as_text() -> None:
    caption = ("Your receipt. " * 200).strip()  # 2,799 characters
    media = {"ref": "1000000000000021", "kind": "image", "caption": caption}
    items = fit_to_channel([_item(OutboundPart(type="media", media=(media,)))])
    first, *rest = [item.part for item in items]
    assert first.type == "media" and first.media[0]["ref"] == "1000000000000021"
    head = first.media[0]["caption"]
    assert text_length(head, "utf16") <= CAPTION_LIMIT and head.endswith("receipt.")
    assert [p.type for p in rest] == ["text"]
    assert " ".join([head, *(p.text for p in rest)]) == caption  # nothing lost, in order


def test_a_text_over_the_limit_in_utf16_units_is_split() -> None:
    text = "🌵" * 3000  # 3,000 code points, 6,000 UTF-16 units: over WhatsApp's 4,096 in UTF-16 only
    items = fit_to_channel([_item(OutboundPart(type="text", text=text))])
    assert [text_length(i.part.text, "utf16") for i in items] == [4096, 6000 - 4096]
    assert all(text_length(i.part.text, "utf16") <= TEXT_LIMIT_CHARS for i in items)


def test_items_within_the_limits_or_of_unknown_channels_are_kept_as_they_are() -> None:
    short = _item(OutboundPart(type="text", text="hola"))
    unknown = _item(OutboundPart(type="text", text="x" * 10_000), channel="carrier-pigeon")
    assert fit_to_channel([short, unknown]) == [short, unknown]
