"""Hostile and odd input at the edge, the same for every channel: what a signed body may hold and still
be stored, and why a message is kept but not processed.

Every channel's webhook passes through here (:mod:`switchboard.channels.webhook` parses with
:func:`parse_json_body` and cleans with :func:`clean_tree` before the channel's normalizer runs;
:mod:`switchboard.channels.ingest` asks :func:`unprocessable_reason` about each message), so one
channel's parser never has to know about the following:

* Postgres ``text`` and ``jsonb`` refuse ``U+0000`` and (through the UTF-8 encoder) lone surrogates
  (``"\\ud800"`` is valid JSON; CPython decodes it to a lone surrogate): NUL is removed, a lone
  surrogate becomes ``U+FFFD``;
* bytes that are not UTF-8 inside a string are decoded as ``U+FFFD`` (the rest of the body survives);
* ``NaN``, ``Infinity`` and numbers outside the double range (``1e400``) are not JSON numbers
  Postgres accepts: they become ``null``; integers longer than :data:`MAX_INT_DIGITS` digits (CPython
  refuses to parse past 4,300) are kept as their digit string;
* nesting deeper than :data:`MAX_DEPTH` (Meta's bodies are about 10 deep) is replaced by a marker, so
  neither the parser nor the JSON encoder of the database driver hits Python's recursion limit;
* identifiers longer than the columns they end up in (``customers.phone`` 32, ``external_user_id``
  255, ``messages.external_id`` 512) make a message *unprocessable*: it is stored with that reason
  (``inbound_state = done``, ``last_error``), never processed, and never truncated into somebody
  else's id.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from switchboard.contracts import InboundMessage
from switchboard.db.models import Customer, CustomerIdentity, Message
from switchboard.storable import MAX_DEPTH, TOO_DEEP, clean_text, clean_tree

__all__ = [
    "MAX_DEPTH",
    "MAX_INT_DIGITS",
    "TOO_DEEP",
    "UNPROCESSABLE_PREFIX",
    "clean_text",
    "clean_tree",
    "parse_clean_json_body",
    "identity_limit",
    "parse_json_body",
    "unprocessable_reason",
]

MAX_INT_DIGITS = 1000
"""Longest integer literal parsed as a number; longer ones stay strings (CPython's own cap is 4,300)."""
UNPROCESSABLE_PREFIX = "unprocessable: "
"""``messages.last_error`` of a row stored but never processed (the reason follows)."""


def _parse_int(digits: str) -> int | str:
    return int(digits) if len(digits.lstrip("-")) <= MAX_INT_DIGITS else digits


def _parse_float(literal: str) -> float | None:
    number = float(literal)
    return number if math.isfinite(number) else None


def _parse_constant(_name: str) -> None:
    return None  # NaN, Infinity, -Infinity: not JSON numbers Postgres accepts


def parse_json_body(raw: bytes) -> tuple[Any, str | None]:
    """Parse a webhook body leniently (see the module docstring).

    Returns:
        ``(value, None)``, or ``(None, reason)`` when it is not JSON at all (or nests past the parser's
        recursion limit): the reason is logged and the delivery answered 2xx, since a retry cannot fix it.
    """
    text = raw.decode("utf-8-sig", errors="replace")
    try:
        return (
            json.loads(text, parse_int=_parse_int, parse_float=_parse_float, parse_constant=_parse_constant),
            None,
        )
    except RecursionError:
        return None, "nested past the parser's recursion limit"
    except ValueError as exc:  # JSONDecodeError is a ValueError
        return None, f"malformed json: {str(exc)[:200]}"


_SUSPECT_BYTES = re.compile(rb"\x00|\\u(?:0000|[dD][89a-fA-F])")
"""What in a JSON body could decode to a string :func:`~switchboard.storable.clean_text` changes: a NUL
byte, a ``\\u0000`` escape or a surrogate escape (``\\ud800``-``\\udfff``). Invalid UTF-8 cannot:
:func:`parse_json_body` decodes it with U+FFFD. An escaped backslash before ``u`` matches too (harmless)."""


def parse_clean_json_body(raw: bytes) -> tuple[Any, str | None]:
    """:func:`parse_json_body`, then :func:`~switchboard.storable.clean_tree` of the value, skipping the
    tree walk when the bytes show it would change nothing: no :data:`_SUSPECT_BYTES`, and fewer
    ``{``/``[`` in the whole body than :data:`~switchboard.storable.MAX_DEPTH` (so nothing nests that
    deep); non-finite numbers are already ``None`` (the parse hooks). The common body pays two byte
    scans instead of a copy of its tree (the webhook's hot path).

    Returns:
        ``(storable value, None)`` or ``(None, reason)`` as :func:`parse_json_body`.
    """
    value, malformed = parse_json_body(raw)
    if malformed is not None:
        return value, malformed
    if _SUSPECT_BYTES.search(raw) or raw.count(b"{") + raw.count(b"[") >= MAX_DEPTH:
        return clean_tree(value), None
    return value, None


def _column_length(table: Any, column: str) -> int:
    length = table.__table__.c[column].type.length
    assert isinstance(length, int)
    return length


_PHONE_MAX = _column_length(Customer, "phone")
_KEY_MAX = _column_length(Customer, "external_user_id")
_IDENTITY_MAX = _column_length(CustomerIdentity, "value")
_EXTERNAL_ID_MAX = _column_length(Message, "external_id")
_SENDER_MAX = _column_length(Message, "sender_external_id")


def identity_limit(kind: str) -> int:
    """Longest value of an identity ``kind`` every column it is copied into can hold (a ``wa_id``
    becomes ``customers.phone``; any identity may become ``customers.external_user_id``)."""
    longest = min(_KEY_MAX, _IDENTITY_MAX)
    return min(longest, _PHONE_MAX) if kind == "wa_id" else longest


def unprocessable_reason(msg: InboundMessage) -> str | None:
    """Why ``msg`` can be stored but not processed, or ``None`` when it can be processed.

    Checks what the worker would otherwise crash on, again and again: the provider id, the sender id
    and each identity against the columns they are written to.
    """
    if len(msg.external_id) > _EXTERNAL_ID_MAX:
        return f"message id longer than {_EXTERNAL_ID_MAX} characters"
    if len(msg.sender_id) > _SENDER_MAX:
        return f"sender id longer than {_SENDER_MAX} characters"
    for identity in msg.identities:
        limit = identity_limit(identity.kind)
        if len(identity.value) > limit:
            return f"{identity.kind} longer than {limit} characters"
    if msg.system is not None:
        for identity in msg.system.new_identities:
            limit = identity_limit(identity.kind)
            if len(identity.value) > limit:
                return f"new {identity.kind} longer than {limit} characters"
    return None
