"""The typed reply: the model answers with one JSON object holding its text and structured parts,
instead of calling ``offer_options`` / ``show_product`` (docs/agent.md#structured-replies).

Opt-in per tenant (``agent.typed_replies``): the system prompt then describes the object
(:data:`TYPED_REPLY_RULE`) and the loop reads the model's final answer with :func:`parse_typed_reply`.
The object is validated with pydantic against :class:`TypedReply` (the parts are the same
:data:`~switchboard.replies.parts.StructuredPart` models the tools build, so each channel renders them
in the one place, :mod:`switchboard.channels.render`). An answer that is not such an object is plain
text, as before; an object that does not validate sends its ``text`` alone (or, without a usable
``text``, the answer as written) and is logged by the caller, so the customer is always answered.

Why not the provider's ``response_format``: a JSON schema forced on every call would also bind the
calls that answer with tool calls, and providers (LiteLLM translates them) differ in what a schema
may hold; reading the answer keeps every provider and the tool loop as they are.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from switchboard.replies.parts import MAX_REPLY_PARTS, StructuredPart

__all__ = ["TYPED_REPLY_RULE", "TypedParse", "TypedReply", "parse_typed_reply"]

TEXT_MAX_CHARS = 4096
"""Longest ``text`` (WhatsApp's text limit; channels split or shorten further within their own)."""

TYPED_REPLY_RULE = (
    "- To show buttons, a menu or a product card, you may answer with one JSON object and nothing else: "
    '{"text": "<your message>", "parts": [<part>, ...]} (at most '
    f"{MAX_REPLY_PARTS} parts). A part is "
    '{"kind": "buttons", "prompt": "<question>", "options": [{"id": "<stable id>", "title": "<short>"}]} '
    '(2-3 options), {"kind": "list", "prompt": "<question>", "button_label": "<label>", "options": [...]}, '
    'or {"kind": "product", "title": "...", "description": "...", "image_url": "https://...", '
    '"price": "129.90", "currency": "EUR", "cta": {"title": "<label>", "url": "https://..."}} '
    '(the cta has "url" or "id"). Options may add "description" and an https "url". A tap returns as '
    "the customer's next message with '[chose option id: ...]'. Otherwise answer in plain text."
)
"""The system-prompt line that offers the typed reply (appended to the rules when it is enabled)."""


class TypedReply(BaseModel):
    """The JSON object the model may answer with."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    text: str = Field(min_length=1, max_length=TEXT_MAX_CHARS)
    parts: list[StructuredPart] = Field(default_factory=list, max_length=MAX_REPLY_PARTS)


@dataclass
class TypedParse:
    """How the model's answer was read.

    ``status``: ``plain`` (not a typed object: ``text`` is the answer as written), ``typed``
    (validated: ``text`` and ``parts``), ``invalid`` (an object that did not validate: ``text`` is
    its ``text`` field when that is a non-empty string, else the answer as written; ``error`` says why).
    """

    status: Literal["plain", "typed", "invalid"]
    text: str
    parts: list[StructuredPart] = field(default_factory=list)
    error: str | None = None


def _unfenced(content: str) -> str:
    text = content.strip()
    if text.startswith("```") and text.endswith("```") and len(text) >= 6:
        text = text[3:-3].strip()
        text = text.removeprefix("json").strip()
    return text


def parse_typed_reply(content: str) -> TypedParse:
    """Read ``content`` (the model's final answer, reasoning already stripped) as a :class:`TypedReply`.

    Only an object with a ``text`` or ``parts`` key counts as a typed reply (a ``{...}`` that is
    something else, or not JSON at all, is plain text). Never raises.
    """
    body = _unfenced(content)
    if not body.startswith("{"):
        return TypedParse("plain", content)
    try:
        data = json.loads(body)
    except ValueError:
        return TypedParse("plain", content)
    if not isinstance(data, dict) or not ({"text", "parts"} & data.keys()):
        return TypedParse("plain", content)
    try:
        reply = TypedReply.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        error = f"{exc.error_count()} error(s); first at {where or 'top'}: {first['msg']}"[:300]
        text = data.get("text")
        usable = text.strip() if isinstance(text, str) else ""
        return TypedParse("invalid", usable[:TEXT_MAX_CHARS] or content, error=error)
    return TypedParse("typed", reply.text, list(reply.parts))
