"""Structured parts rendered per channel: no option is ever dropped, every payload is within the
channel's limits (property-based), and the shapes each channel sends."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from switchboard.channels.base import OutboundPart, text_length
from switchboard.channels.instagram.replies import limit_problems as instagram_problems
from switchboard.channels.instagram.send import TEXT_LIMIT as INSTAGRAM_TEXT_LIMIT
from switchboard.channels.render import render_reply, shorten
from switchboard.channels.whatsapp.interactive import limit_problems as whatsapp_problems
from switchboard.outbox.writer import OutboxItem, fit_to_channel
from switchboard.replies import OptionList, ProductCard, QuickReplies, ReplyOption, chosen_option_text

# text with emoji, accents and combining marks (UTF-16 counting matters), no surrogates or NUL
_TEXT = st.text(
    alphabet=st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="\x00"),
    min_size=1,
    max_size=120,
).filter(lambda s: s.strip())
_LONG_TEXT = st.text(alphabet=st.sampled_from("abcdé👍 \n"), min_size=1, max_size=1400).filter(
    lambda s: s.strip()
)


@st.composite
def _options(draw: st.DrawFn) -> list[ReplyOption]:
    count = draw(st.integers(1, 30))
    return [
        ReplyOption(
            id=f"opt_{i}_{draw(st.text(alphabet='abcxyz', max_size=8))}",
            title=draw(_TEXT),
            description=draw(st.none() | _TEXT),
            url=draw(st.none() | st.just(f"https://shop.example/p/{i}")),
        )
        for i in range(count)
    ]


_CHOICES = st.builds(
    lambda kind, prompt, options, label: (
        QuickReplies(prompt=prompt, options=options)
        if kind == "buttons"
        else OptionList(prompt=prompt, options=options, button_label=label)
    ),
    st.sampled_from(["buttons", "list"]),
    _LONG_TEXT.map(lambda s: s[:1000]).filter(lambda s: s.strip()),
    _options(),
    _TEXT.map(lambda s: s[:60]).filter(lambda s: s.strip()),
)
_CARDS = st.builds(
    lambda title, description, price, cta_url: ProductCard(
        title=title[:200],
        description=description[:1000],
        price=price,
        currency="EUR" if price is not None else None,
        image_url="https://cdn.example/p.jpg",
        cta={"title": "Buy it now, today only", "url": cta_url}
        if cta_url
        else {"title": "Add to my order please", "id": "add_1"},
    ),
    _TEXT,
    _LONG_TEXT,
    st.none() | st.decimals(min_value=0, max_value=10_000, places=2),
    st.booleans().map(lambda b: "https://shop.example/buy" if b else None),
)


def _written(channel: str, text: str, parts: list) -> list[OutboundPart]:  # type: ignore[type-arg]
    """What the outbox writer stores: the channel's rendering, then split to its text limit."""
    import uuid

    items = [
        OutboxItem(
            conversation_id=uuid.uuid4(), channel=channel, channel_account_id=None, recipient="x", part=p
        )
        for p in render_reply(channel, text, parts)
    ]
    return [item.part for item in fit_to_channel(items)]


def _whatsapp_ids(parts: list[OutboundPart]) -> list[str]:
    ids = []
    for part in parts:
        inter = part.interactive or {}
        action = inter.get("action") or {}
        ids += [b["reply"]["id"] for b in action.get("buttons") or []]
        ids += [r["id"] for s in action.get("sections") or [] for r in s["rows"]]
    return ids


def _visible(parts: list[OutboundPart]) -> str:
    """Every text the customer can read in the rendered parts."""
    out = []
    for part in parts:
        out.append(part.text)
        inter = part.interactive or {}
        out.append(((inter.get("body") or {}).get("text")) or "")
        action = inter.get("action") or {}
        out += [b["reply"]["title"] for b in action.get("buttons") or []]
        for section in action.get("sections") or []:
            for row in section["rows"]:
                out += [row["title"], row.get("description") or ""]
        out += [b["title"] for b in inter.get("buttons") or []]
        for element in ((inter.get("attachment") or {}).get("payload") or {}).get("elements") or []:
            out += [element.get("title") or "", element.get("subtitle") or ""]
    return "\n".join(out)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.just("") | _LONG_TEXT, part=_CHOICES)
def test_whatsapp_keeps_every_option_and_stays_within_meta_limits(text: str, part) -> None:  # type: ignore[no-untyped-def]
    parts = _written("whatsapp", text, [part])
    assert [o.id for o in part.options] == _whatsapp_ids(parts)  # every option tappable, in order, once
    for p in parts:
        if p.type == "interactive":
            assert whatsapp_problems(p.interactive or {}) == []
        else:
            assert p.type == "text" and 0 < text_length(p.text, "utf16") <= 4096
    visible = _visible(parts)
    for option in part.options:  # shortened on the button, but in full somewhere before it
        assert option.title in visible
        assert option.description is None or option.description in visible
        assert option.url is None or option.url in visible
    assert part.prompt.strip() in visible and (not text.strip() or text.strip()[:50] in visible)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.just("") | _LONG_TEXT, part=_CHOICES)
def test_instagram_keeps_every_option_and_stays_within_meta_limits(text: str, part) -> None:  # type: ignore[no-untyped-def]
    parts = _written("instagram", text, [part])
    payloads = [b["id"] for p in parts for b in (p.interactive or {}).get("buttons") or []]
    assert payloads == [o.id for o in part.options]
    for p in parts:
        # the message the Send API gets: text with quick replies (the channel splits longer relays itself)
        buttons = (p.interactive or {}).get("buttons")
        message = {"text": p.text} | (
            {
                "quick_replies": [
                    {"content_type": "text", "title": b["title"], "payload": b["id"]} for b in buttons
                ]
            }
            if buttons
            else {}
        )
        assert 0 < text_length(p.text, "utf16") <= INSTAGRAM_TEXT_LIMIT
        assert instagram_problems(message) == []
    visible = _visible(parts)
    for option in part.options:
        assert option.title in visible
        assert option.description is None or option.description in visible


@settings(max_examples=80, deadline=None)
@given(card=_CARDS)
def test_product_cards_fit_every_channel_and_lose_nothing(card: ProductCard) -> None:
    for channel in ("whatsapp", "instagram", "gmail"):
        parts = _written(channel, "Here it is.", [card])
        visible = _visible(parts)
        assert card.title in visible and (not card.description.strip() or card.description.strip() in visible)
        for p in parts:
            if channel == "whatsapp" and p.type == "interactive":
                assert whatsapp_problems(p.interactive or {}) == []
            if channel == "instagram" and p.type == "interactive":
                assert instagram_problems(p.interactive or {}) == []


def test_three_short_options_are_whatsapp_reply_buttons_with_the_reply_in_the_body() -> None:
    part = QuickReplies(
        prompt="Which size?", options=[{"id": "s", "title": "Small"}, {"id": "l", "title": "Large"}]
    )
    (only,) = render_reply("whatsapp", "We have two sizes.", [part])
    assert only.type == "interactive"
    assert only.interactive == {
        "type": "button",
        "body": {"text": "We have two sizes.\n\nWhich size?"},
        "action": {
            "buttons": [
                {"type": "reply", "reply": {"id": "s", "title": "Small"}},
                {"type": "reply", "reply": {"id": "l", "title": "Large"}},
            ]
        },
    }


def test_eleven_options_become_two_whatsapp_lists_and_a_long_title_is_written_in_full_first() -> None:
    options = [{"id": f"v{i}", "title": f"Valve {i}"} for i in range(10)]
    options.append(
        {"id": "long", "title": "Stainless ball valve DN50 PN40 with ISO 5211 pad", "description": "x" * 80}
    )
    parts = render_reply(
        "whatsapp", "", [OptionList(prompt="Which valve?", options=options, button_label="Valves")]
    )
    assert [p.type for p in parts] == ["text", "interactive", "interactive"]
    assert parts[0].text == f"11. Stainless ball valve DN50 PN40 with ISO 5211 pad — {'x' * 80}"
    first, second = (p.interactive for p in parts[1:])
    assert first["body"]["text"] == "Which valve? (1/2)" and second["body"]["text"] == "Which valve? (2/2)"
    assert second["action"]["sections"][0]["rows"] == [
        {"id": "long", "title": "Stainless ball valve DN…", "description": "x" * 71 + "…"}
    ]


def test_fourteen_options_are_two_instagram_messages_of_quick_replies() -> None:
    options = [{"id": f"c{i}", "title": f"Colour {i}"} for i in range(14)]
    parts = render_reply("instagram", "Pick a colour.", [QuickReplies(prompt="Colours:", options=options)])
    assert [(p.text, len(p.interactive["buttons"])) for p in parts] == [
        ("Pick a colour.\n\nColours: (1/2)", 13),
        ("Colours: (2/2)", 1),
    ]


def test_email_gets_a_numbered_list_with_links() -> None:
    part = OptionList(
        prompt="Our plans:",
        options=[
            {"id": "basic", "title": "Basic", "url": "https://shop.example/basic"},
            {"id": "pro", "title": "Pro", "description": "for teams"},
        ],
    )
    card = ProductCard(
        title="Pro plan",
        price=Decimal("49"),
        currency="EUR",
        cta={"title": "Sign up", "url": "https://shop.example/pro"},
    )
    (only,) = render_reply("gmail", "Hello!", [part, card])
    assert only.text == (
        "Hello!\n\nOur plans:\n1. Basic (https://shop.example/basic)\n2. Pro — for teams\n"
        "Reply with the number or the name of your choice.\n\nPro plan\n49.00 EUR\nSign up: https://shop.example/pro"
    )


def test_parts_are_validated() -> None:
    with pytest.raises(ValidationError, match="unique"):
        QuickReplies(prompt="?", options=[{"id": "a", "title": "A"}, {"id": "a", "title": "B"}])
    with pytest.raises(ValidationError, match="https"):
        ReplyOption(id="a", title="A", url="http://insecure.example")
    with pytest.raises(ValidationError, match="exactly one"):
        ProductCard(title="X", cta={"title": "Buy", "url": "https://a.example", "id": "x"})
    with pytest.raises(ValidationError, match="currency"):
        ProductCard(title="X", price=Decimal("1"), cta={"title": "Buy", "id": "x"})


def test_shorten_counts_utf16_and_never_splits_a_grapheme() -> None:
    assert shorten("👩‍👩‍👧👩‍👩‍👧", 10) == "👩‍👩‍👧…"  # a family is 8 UTF-16 units: the second would not fit
    assert text_length(shorten("👍" * 30, 20), "utf16") <= 20
    assert shorten("Small", 20) == "Small"


def test_a_tap_reads_as_its_title_with_the_option_id() -> None:
    assert chosen_option_text("Large", "size_l") == "Large [chose option id: size_l]"
    assert chosen_option_text("Hi", None) == "Hi"
