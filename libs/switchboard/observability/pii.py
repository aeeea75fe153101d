"""Personal data out of logs and traces: phone numbers and e-mail addresses are masked, message text is
never written.

:func:`mask_pii` is the structlog processor (every line of every service passes it, foreign library lines
too); :func:`mask_attributes` does the same for span attributes (:func:`switchboard.observability.tracing.span`).
A phone number keeps its last two digits (``***89``), an address its first letter and domain
(``a***@example.org``), so a line can still be told apart from another. Values under the keys of
:data:`TEXT_KEYS` (a message's words, a reply, a transcript) are replaced by their length; values under
:data:`ACCOUNT_KEYS` (the business's own channel accounts) are left as they are.

``LOG_UNMASK_PII=true`` turns masking off for debugging (:func:`set_unmasked`); every service then says so
in a warning at startup.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = [
    "ACCOUNT_KEYS",
    "TEXT_KEYS",
    "mask_attributes",
    "mask_pii",
    "mask_text",
    "is_unmasked",
    "set_unmasked",
]

TEXT_KEYS = frozenset(
    {
        "text",
        "body",
        "message_text",
        "reply",
        "reply_text",
        "transcript",
        "caption",
        "content",
        "summary",
        "prompt",
        "answer",
        "question",
        "snippet",
        "excerpt",
    }
)
"""Keys whose value is a person's or the model's words: logged as ``[N chars]``."""

ACCOUNT_KEYS = frozenset(
    {
        "account_id",
        "external_account_id",
        "phone_number_id",
        "waba_id",
        "channel_account",
        "mailbox",
        "page_id",
        "ig_account_id",
        "business_account_id",
    }
)
"""Keys whose value names one of the *business's* channel accounts (a WhatsApp number's id, the business's
own mailbox, an Instagram account): never a customer's, and what an operator needs to tell which
connection a line is about (an unknown account posting webhooks), so they are left as they are."""

_EMAIL = re.compile(r"(?<![\w.+-])([A-Za-z0-9._%+-])[A-Za-z0-9._%+-]*@([A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+)")
_PHONE = re.compile(r"(?<![\w.:/-])\+?\d(?:[ \-]?\d){7,14}(?![\w.:/-])")
"""8 to 15 digits (E.164), optionally with ``+`` and single spaces or dashes between digits; not part
of a word, an id, a version, a path or a time."""
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}")

_unmasked = False


def set_unmasked(unmasked: bool) -> None:
    """Turn masking off (``True``: ``LOG_UNMASK_PII``) or back on, for this process."""
    global _unmasked
    _unmasked = unmasked


def is_unmasked() -> bool:
    return _unmasked


def _phone(match: re.Match[str]) -> str:
    found = match.group(0)
    if _DATE.match(found):
        return found
    digits = re.sub(r"\D", "", found)
    return "***" + digits[-2:]


def mask_text(value: str) -> str:
    """``value`` with every e-mail address and phone number in it masked."""
    if "@" in value:
        value = _EMAIL.sub(lambda m: f"{m.group(1)}***@{m.group(2)}", value)
    return _PHONE.sub(_phone, value)


def _mask(value: Any, depth: int = 0) -> Any:
    if isinstance(value, str):
        return mask_text(value)
    if depth > 4:
        return value
    if isinstance(value, Mapping):
        return {k: _mask_item(k, v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_mask(v, depth + 1) for v in value)
    return value


def _mask_item(key: Any, value: Any, depth: int) -> Any:
    if isinstance(key, str) and key.lower() in TEXT_KEYS and isinstance(value, str):
        return f"[{len(value)} chars]"
    if isinstance(key, str) and key.lower() in ACCOUNT_KEYS:
        return value
    return _mask(value, depth)


def mask_pii(_logger: Any, _method: str, event_dict: dict[str, Any]) -> dict[str, Any]:
    """structlog processor: mask phone numbers and e-mail addresses in every value (the event too, and
    inside dicts and lists), and replace message text (:data:`TEXT_KEYS`) by its length."""
    if _unmasked:
        return event_dict
    return {k: _mask_item(k, v, 0) for k, v in event_dict.items()}


def mask_attributes(attributes: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """Span attributes with phone numbers and e-mail addresses masked (and message text dropped)."""
    if attributes is None or _unmasked:
        return attributes
    return {k: _mask_item(k.rsplit(".", 1)[-1], v, 0) for k, v in attributes.items()}
