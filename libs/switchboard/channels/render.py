"""A reply's text and structured parts → the channel's :class:`~switchboard.channels.base.OutboundPart`\\ s.

A channel that can show buttons, lists or cards declares a ``render_structured(text, parts)`` function
on its channel class (WhatsApp: :mod:`switchboard.channels.whatsapp.interactive`, Instagram:
:mod:`switchboard.channels.instagram.replies`); every other channel (Gmail) gets
:func:`render_as_text`: the options as a numbered list with their links. Nothing is ever dropped: what
does not fit a channel's limits is shortened on the button and written in full in a text message
before it (:func:`details_text`), and options beyond what one message holds go in further messages.
The outbox writer stores what comes out (:func:`switchboard.outbox.writer.reply_items`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal

from switchboard.channels.base import OutboundPart, TextUnit, channel_renderer, graphemes, text_length
from switchboard.replies.parts import (
    OptionList,
    ProductCard,
    QuickReplies,
    ReplyOption,
    StructuredPart,
    format_price,
)

__all__ = [
    "ELLIPSIS",
    "Renderer",
    "details_text",
    "fits",
    "option_line",
    "part_as_text",
    "product_lines",
    "render_as_text",
    "render_reply",
    "shorten",
]

Renderer = Callable[[str, Sequence[StructuredPart]], list[OutboundPart]]
"""``render(text, parts)`` → the parts to send, in order (text first)."""

ELLIPSIS = "…"
CHOOSE_LINE = "Reply with the number or the name of your choice."
"""Closes a numbered list on channels without buttons (e-mail)."""


def fits(text: str, limit: int, unit: TextUnit = "utf16") -> bool:
    """Whether ``text`` is at most ``limit`` long, counted in ``unit`` (Meta counts UTF-16 units)."""
    return text_length(text, unit) <= limit


WORD_BACKOFF_SHARE = 0.5
"""``words=True`` backs off to a word boundary only if that keeps at least this share of the room
(one 40-character word is cut inside rather than dropped whole)."""


def shorten(
    text: str,
    limit: int,
    unit: TextUnit = "utf16",
    *,
    words: bool = False,
    keep: Literal["start", "end"] = "start",
) -> str:
    """``text`` when it fits ``limit``; else the whole graphemes that fit with an ``…``.

    Args:
        words: cut at a word boundary (whitespace) instead of inside a word, when one is near enough
            (:data:`WORD_BACKOFF_SHARE`).
        keep: ``start`` keeps the beginning (``Hello wor…``), ``end`` keeps the end (``…o world``,
            e.g. the newest of a running transcript).

    Raises:
        ValueError: ``limit`` below 2 (no room for one character and the ellipsis).
    """
    text = text.strip()
    if fits(text, limit, unit):
        return text
    if limit < 2:
        raise ValueError("limit too small to shorten into")
    room = limit - text_length(ELLIPSIS, unit)
    clusters = graphemes(text)
    if keep == "end":
        clusters = clusters[::-1]
    kept, size = [], 0
    for cluster in clusters:
        size += text_length(cluster, unit)
        if size > room:
            break
        kept.append(cluster)
    next_char = clusters[len(kept)] if len(kept) < len(clusters) else ""
    if words and not next_char.isspace():  # the cut falls inside a word: back off to its start
        boundary = max((i for i, c in enumerate(kept) if c.isspace()), default=-1)
        if boundary >= 0 and text_length("".join(kept[:boundary]), unit) >= room * WORD_BACKOFF_SHARE:
            kept = kept[:boundary]
    if keep == "end":
        return ELLIPSIS + "".join(reversed(kept)).lstrip()
    return "".join(kept).rstrip() + ELLIPSIS


def option_line(number: int, option: ReplyOption) -> str:
    """``"2. Large — 190 cm and up (https://...)"``: an option in full, for a text message."""
    line = f"{number}. {option.title}"
    if option.description:
        line += f" — {option.description}"
    if option.url:
        line += f" ({option.url})"
    return line


def details_text(numbered: Sequence[tuple[int, ReplyOption]]) -> str | None:
    """The options whose button or row could not show all of them, in full (``None`` when none)."""
    if not numbered:
        return None
    return "\n".join(option_line(number, option) for number, option in numbered)


def product_lines(card: ProductCard) -> list[str]:
    """Title, price and description of a card (non-empty lines only)."""
    price = format_price(card.price, card.currency)
    return [line for line in (card.title, price, card.description) if line]


def part_as_text(part: StructuredPart) -> str:
    """One part as plain text: the prompt and a numbered list with links, or a product's lines, its
    image link and its call to action."""
    if isinstance(part, QuickReplies | OptionList):
        lines = [part.prompt, *(option_line(i, o) for i, o in enumerate(part.options, 1)), CHOOSE_LINE]
        return "\n".join(lines)
    lines = product_lines(part)
    if part.image_url:
        lines.append(f"Image: {part.image_url}")
    if part.cta.url:
        lines.append(f"{part.cta.title}: {part.cta.url}")
    else:
        lines.append(f'Reply "{part.cta.title}" to choose it.')
    return "\n".join(lines)


def render_as_text(text: str, parts: Sequence[StructuredPart]) -> list[OutboundPart]:
    """Channels without buttons (e-mail): one text with the reply and every part as text (the outbox
    writer splits it to the channel's text limit)."""
    blocks = [text.strip(), *(part_as_text(p) for p in parts)]
    body = "\n\n".join(b for b in blocks if b)
    return [OutboundPart(type="text", text=body)] if body else []


def render_reply(channel: str, text: str, parts: Sequence[StructuredPart]) -> list[OutboundPart]:
    """``text`` and ``parts`` as ``channel`` sends them: its own renderer when it declares one
    (:func:`~switchboard.channels.base.channel_renderer`), else :func:`render_as_text`."""
    if not parts:
        return [OutboundPart(type="text", text=text)] if text.strip() else []
    renderer = channel_renderer(channel) or render_as_text
    return renderer(text, parts)
