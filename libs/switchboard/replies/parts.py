"""Structured parts of a reply: quick-reply buttons, a list of options, a product card.

These are the channel-neutral shapes a turn produces (:attr:`switchboard.contracts.TurnResult.parts`,
filled by the built-in tools ``offer_options`` and ``show_product``). Each channel renders them natively
within its own limits (:mod:`switchboard.channels.render`); the limits here are only what any channel can
carry back: an option ``id`` of at most 200 characters fits a WhatsApp list row id (200), a reply
button id (256) and an Instagram quick-reply payload (1,000).

A tapped button or chosen row comes back as the customer's next message with the option's title as
text and its ``id`` as payload (:func:`chosen_option_text` is how the model reads it).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Annotated, Literal, Self
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = [
    "CHOICE_KINDS",
    "CallToAction",
    "MAX_OPTIONS",
    "MAX_REPLY_PARTS",
    "OptionList",
    "ProductCard",
    "QuickReplies",
    "ReplyOption",
    "StructuredPart",
    "chosen_option_text",
    "format_price",
]

CHOICE_KINDS = ("button", "interactive", "postback", "quick_reply")
"""Inbound row kinds whose stored ``payload`` is the id of what the customer tapped (WhatsApp template
quick reply, reply button, list row; Instagram postback and quick reply)."""
MAX_OPTIONS = 30
"""Options in one part: more than a customer reads on a phone; channels split them into several
messages where one cannot hold them all (WhatsApp lists hold 10 rows, Instagram 13 quick replies)."""
MAX_REPLY_PARTS = 5
"""Structured parts one reply may carry (:attr:`switchboard.contracts.TurnResult.parts`), from the tools
and the typed reply together."""
OPTION_ID_MAX_CHARS = 200
"""WhatsApp list row ids hold 200 characters (the smallest of the channels' id limits)."""


def _https_url(value: str | None) -> str | None:
    if value is None:
        return None
    parts = urlsplit(value.strip())
    if parts.scheme != "https" or not parts.hostname:
        raise ValueError("links must be absolute https:// URLs")
    return value.strip()


class _Part(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True, frozen=True)


class ReplyOption(_Part):
    """One choice the customer can tap."""

    id: str = Field(min_length=1, max_length=OPTION_ID_MAX_CHARS, pattern=r"^[^\s].*$")
    """Stable id the tap comes back with (payload), e.g. ``size_l``; unique within the part."""
    title: str = Field(min_length=1, max_length=200)
    """What the customer sees and what the tap's text is."""
    description: str | None = Field(None, min_length=1, max_length=500)
    """A second line (WhatsApp list rows show it; other channels put it in the text)."""
    url: str | None = Field(None, max_length=2000)
    """An https link about the option (shown as a link where a button cannot hold one)."""

    @field_validator("url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        return _https_url(value)


class _Choices(_Part):
    prompt: str = Field(min_length=1, max_length=1000)
    """The question the options answer, e.g. "Which size would you like?"."""
    options: list[ReplyOption] = Field(min_length=1, max_length=MAX_OPTIONS)

    @model_validator(mode="after")
    def _unique_ids(self) -> Self:
        ids = [o.id for o in self.options]
        if len(set(ids)) != len(ids):
            raise ValueError("option ids must be unique within one part")
        return self


class QuickReplies(_Choices):
    """A few quick answers shown as buttons (WhatsApp reply buttons, Instagram quick replies)."""

    kind: Literal["buttons"] = "buttons"


class OptionList(_Choices):
    """A longer menu behind one button (WhatsApp list message; quick replies or text elsewhere)."""

    kind: Literal["list"] = "list"
    button_label: str = Field("Options", min_length=1, max_length=60)
    """The label of the button that opens the list (WhatsApp shows at most 20 characters)."""


class CallToAction(_Part):
    """The product card's button: a link (``url``) or a reply (``id``), exactly one of them."""

    title: str = Field(min_length=1, max_length=60)
    url: str | None = Field(None, max_length=2000)
    id: str | None = Field(None, min_length=1, max_length=OPTION_ID_MAX_CHARS)

    @field_validator("url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        return _https_url(value)

    @model_validator(mode="after")
    def _one_target(self) -> Self:
        if (self.url is None) == (self.id is None):
            raise ValueError("a call to action has exactly one of url or id")
        return self


class ProductCard(_Part):
    """One product with image, price and a call to action."""

    kind: Literal["product"] = "product"
    title: str = Field(min_length=1, max_length=200)
    description: str = Field("", max_length=1000)
    image_url: str | None = Field(None, max_length=2000)
    """An https image Meta's servers can fetch (WhatsApp header image, Instagram template image)."""
    price: Decimal | None = Field(None, ge=0, max_digits=14, decimal_places=4)
    currency: str | None = Field(None, pattern=r"^[A-Z]{3}$")
    """ISO 4217 code, e.g. ``EUR``; required with ``price``."""
    cta: CallToAction

    @field_validator("image_url")
    @classmethod
    def _image(cls, value: str | None) -> str | None:
        return _https_url(value)

    @model_validator(mode="after")
    def _price_has_currency(self) -> Self:
        if self.price is not None and self.currency is None:
            raise ValueError("a price needs its currency (ISO 4217, e.g. EUR)")
        return self


StructuredPart = Annotated[QuickReplies | OptionList | ProductCard, Field(discriminator="kind")]
"""Any structured part, told apart by ``kind`` (``buttons``, ``list``, ``product``)."""


def format_price(price: Decimal | None, currency: str | None) -> str | None:
    """``Decimal("129.5"), "EUR"`` → ``"129.50 EUR"`` (two decimals unless more were given)."""
    if price is None or currency is None:
        return None
    exponent = price.as_tuple().exponent
    places = max(2, -exponent) if isinstance(exponent, int) else 2
    return f"{price:.{places}f} {currency}"


def chosen_option_text(title: str, payload: str | None) -> str:
    """How the model reads a tapped button or chosen row: its title and the option id it carries,
    e.g. ``Large [chose option id: size_l]`` (the id is what the configurator's state keys on)."""
    title = title.strip()
    if not payload or not payload.strip():
        return title
    return f"{title} [chose option id: {payload.strip()}]".strip()
