"""Structured replies: buttons, option lists and product cards, rendered per channel
(docs/agent.md#structured-replies)."""

from switchboard.replies.parts import (
    CallToAction,
    OptionList,
    ProductCard,
    QuickReplies,
    ReplyOption,
    StructuredPart,
    chosen_option_text,
    format_price,
)

__all__ = [
    "CallToAction",
    "OptionList",
    "ProductCard",
    "QuickReplies",
    "ReplyOption",
    "StructuredPart",
    "chosen_option_text",
    "format_price",
]
