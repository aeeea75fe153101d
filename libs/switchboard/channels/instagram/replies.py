"""Structured parts as Instagram messages: quick replies and the generic template, within Meta's limits.

Limits (Instagram Messaging "Quick Replies" and "Generic Template" references; counted in UTF-16 units
like every Instagram text, see ``send.py``): at most 13 quick replies on one message, each title at
most 20 characters, payload at most 1,000; the message they hang on holds at most 1,000 characters; a
generic-template element has a title and a subtitle of at most 80 characters each, an image URL and at
most 3 buttons whose titles hold at most 20 characters.

How a part is rendered (:func:`render_structured`): buttons and lists are the same on Instagram: quick
replies under the prompt, 13 per message (more options: more messages, numbered ``(1/2)``); a title that
does not fit is shortened on the button and every option that lost something (a long title, a
description, a link) is written in full in a text message before it. A product card is a generic
template (title, price and description as subtitle, image, one ``web_url`` or ``postback`` button);
what the subtitle cannot hold goes in full in a text before it. A tapped quick reply comes back as
``message.quick_reply.payload`` and a template button as ``postback.payload``, the option's id
(:mod:`switchboard.channels.instagram.normalize`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from switchboard.channels.base import OutboundPart
from switchboard.channels.instagram.send import QUICK_REPLY_LIMIT, QUICK_REPLY_TITLE_LIMIT, TEXT_LIMIT
from switchboard.channels.render import details_text, fits, shorten
from switchboard.replies.parts import ProductCard, ReplyOption, StructuredPart, format_price

__all__ = [
    "ELEMENT_TEXT_MAX",
    "TEMPLATE_BUTTON_TITLE_MAX",
    "limit_problems",
    "render_structured",
]

ELEMENT_TEXT_MAX = 80
"""Characters of a generic-template element's ``title`` and of its ``subtitle``."""
TEMPLATE_BUTTON_TITLE_MAX = 20
PAYLOAD_MAX = 1000
"""Characters of a quick reply's or postback button's payload."""


def _quick_reply(option: ReplyOption) -> tuple[dict[str, str], bool]:
    title = shorten(option.title, QUICK_REPLY_TITLE_LIMIT)
    lost = title != option.title or option.description is not None or option.url is not None
    return {"id": option.id, "title": title}, lost


def _card(card: ProductCard) -> tuple[dict[str, Any], str | None]:
    """The generic template ``message`` and the card in full when the element cannot hold it."""
    price = format_price(card.price, card.currency)
    subtitle_full = " · ".join(x for x in (price, card.description) if x)
    title = shorten(card.title, ELEMENT_TEXT_MAX)
    element: dict[str, Any] = {"title": title}
    if subtitle_full:
        element["subtitle"] = shorten(subtitle_full, ELEMENT_TEXT_MAX)
    if card.image_url:
        element["image_url"] = card.image_url
    button_title = shorten(card.cta.title, TEMPLATE_BUTTON_TITLE_MAX)
    if card.cta.url:
        element["buttons"] = [{"type": "web_url", "url": card.cta.url, "title": button_title}]
    else:
        element["buttons"] = [{"type": "postback", "payload": card.cta.id, "title": button_title}]
    message = {
        "attachment": {"type": "template", "payload": {"template_type": "generic", "elements": [element]}}
    }
    lost = (
        title != card.title or element.get("subtitle", "") != subtitle_full or button_title != card.cta.title
    )
    full = "\n".join(x for x in (card.title, price, card.description) if x)
    return message, (full if lost else None)


def render_structured(text: str, parts: Sequence[StructuredPart]) -> list[OutboundPart]:
    """The reply ``text`` and ``parts`` as Instagram messages, in order (see the module docstring).

    Returns:
        Text parts, ``interactive`` parts with ``text`` and ``interactive={"buttons": [{id, title}]}``
        (sent as one text with quick replies), and ``interactive`` parts whose ``interactive`` is a
        generic-template ``message`` (``{"attachment": ...}``).
    """
    out: list[OutboundPart] = []
    pending = text.strip()
    for part in parts:
        before: list[str] = []
        messages: list[OutboundPart] = []
        if isinstance(part, ProductCard):
            message, in_full = _card(part)
            if in_full:
                before.append(in_full)
            messages.append(OutboundPart(type="interactive", interactive=message))
        else:
            in_full_options: list[tuple[int, ReplyOption]] = []
            chunks = [
                part.options[i : i + QUICK_REPLY_LIMIT]
                for i in range(0, len(part.options), QUICK_REPLY_LIMIT)
            ]
            for index, chunk in enumerate(chunks, 1):
                buttons = []
                for number, option in enumerate(chunk, (index - 1) * QUICK_REPLY_LIMIT + 1):
                    button, lost = _quick_reply(option)
                    buttons.append(button)
                    if lost:
                        in_full_options.append((number, option))
                suffix = f" ({index}/{len(chunks)})" if len(chunks) > 1 else ""
                prompt = part.prompt + suffix  # a prompt holds at most 1,000; the suffix may push it over
                if not fits(prompt, TEXT_LIMIT):
                    prompt = shorten(part.prompt, TEXT_LIMIT - len(suffix)) + suffix
                    if index == 1:
                        before.insert(0, part.prompt)
                messages.append(
                    OutboundPart(type="interactive", text=prompt, interactive={"buttons": buttons})
                )
            details = details_text(in_full_options)
            if details:
                before.append(details)
        first = messages[0]
        merged = f"{pending}\n\n{first.text}"
        if pending and not before and first.text and fits(merged, TEXT_LIMIT):
            messages[0] = OutboundPart(type="interactive", text=merged, interactive=first.interactive)
        elif pending:
            out.append(OutboundPart(type="text", text=pending))
        pending = ""
        out += [OutboundPart(type="text", text=t) for t in before]
        out += messages
    if pending:
        out.append(OutboundPart(type="text", text=pending))
    return out


def limit_problems(message: dict[str, Any]) -> list[str]:
    """What in an Instagram Send API ``message`` is over the limits above (empty: within them); the
    Graph sandbox refuses such a message, so a renderer bug shows in tests."""
    problems: list[str] = []
    quick = message.get("quick_replies")
    if quick is not None:
        if not 1 <= len(quick) <= QUICK_REPLY_LIMIT:
            problems.append(f"{len(quick)} quick replies (1..{QUICK_REPLY_LIMIT})")
        for reply in quick:
            if not reply.get("title") or not fits(str(reply["title"]), QUICK_REPLY_TITLE_LIMIT):
                problems.append(f"quick reply title empty or over {QUICK_REPLY_TITLE_LIMIT}")
            if not reply.get("payload") or len(str(reply["payload"])) > PAYLOAD_MAX:
                problems.append(f"quick reply payload empty or over {PAYLOAD_MAX}")
    if "text" in message and not fits(str(message["text"]), TEXT_LIMIT):
        problems.append(f"text over {TEXT_LIMIT}")
    payload = ((message.get("attachment") or {}).get("payload")) or {}
    if payload.get("template_type") == "generic":
        for element in payload.get("elements") or []:
            for key in ("title", "subtitle"):
                if element.get(key) is not None and not fits(str(element[key]), ELEMENT_TEXT_MAX):
                    problems.append(f"element {key} over {ELEMENT_TEXT_MAX}")
            buttons = element.get("buttons") or []
            if len(buttons) > 3:
                problems.append("more than 3 template buttons")
            for button in buttons:
                if not button.get("title") or not fits(str(button["title"]), TEMPLATE_BUTTON_TITLE_MAX):
                    problems.append(f"template button title empty or over {TEMPLATE_BUTTON_TITLE_MAX}")
    return problems
