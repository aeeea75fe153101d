"""WhatsApp Cloud API webhook bodies → :class:`~switchboard.contracts.InboundMessage` and status updates.

Nothing past this module sees Meta's JSON. Parsing is tolerant on purpose (``tests/fixtures/payloads/INDEX.md``,
"Payload shapes developers get wrong"): every ``entry``/``change``/``message`` is iterated, contacts are
matched to each message by ``wa_id``/``user_id`` (never ``contacts[0]``), a missing ``contacts`` array or
``profile`` is fine, ``from`` may be ``""`` (username users: the sender is ``from_user_id``), timestamps are
epoch seconds as strings, and an item we cannot understand becomes an ``unsupported`` message instead of an
exception (a 500 makes Meta resend the delivery for days).

Customer identity: ``sender_id`` is the business-scoped user id (BSUID, ``contacts[].user_id`` /
``from_user_id``) when present, else the phone number (``wa_id``). Both are kept in ``flags`` (``bsuid``,
``wa_id``) so the worker can find the one customer under either.
"""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from typing import Any

from switchboard.channels.ingest import (
    UNPROCESSABLE_FLAG,
    NormalizedDelivery,
    StatusUpdate,
    WebhookErrorEvent,
)
from switchboard.channels.whatsapp.statuses import conversation_block_reason
from switchboard.contracts import InboundMessage, MediaRef, SenderIdentity, SystemEvent
from switchboard.observability import get_logger

__all__ = [
    "NormalizedDelivery",
    "StatusUpdate",
    "WebhookErrorEvent",
    "normalize_delivery",
    "render_location",
    "render_order",
    "strip_mime_params",
    "MEDIA_KINDS",
]

log = get_logger(__name__)

MEDIA_KINDS = ("image", "audio", "video", "document", "sticker")
"""Message types whose payload is a media object ``{id, mime_type, sha256, caption?, filename?}``."""

_RECORD_ONLY_KINDS = {"sticker", "reaction", "system", "unsupported", "contacts_only"}


def strip_mime_params(mime: str | None) -> str | None:
    """``"audio/ogg; codecs=opus"`` → ``"audio/ogg"`` (parameters break extension guessing, INDEX §5)."""
    if not mime:
        return None
    return mime.split(";", 1)[0].strip().lower() or None


def render_location(location: dict[str, Any]) -> str:
    """One line for the agent: ``"Name, Address (lat, lon)"``; missing parts are left out.

    Example: ``"Example Coffee, 101 Example Ave, Springfield, ZZ 00000 (37.44221496582, -122.16165924072)"``.
    """
    parts = [str(location[k]) for k in ("name", "address") if location.get(k)]
    lat, lon = location.get("latitude"), location.get("longitude")
    coords = f"({lat}, {lon})" if lat is not None and lon is not None else ""
    head = ", ".join(parts)
    text = f"{head} {coords}".strip() if head else coords
    return text or "[Location]"


CHAT_OPENED_TEXT = "[The customer opened the chat for the first time]"
"""What the agent reads for a ``request_welcome`` message (Cloud API: a welcome message may be sent)."""
ORDER_ITEMS_SHOWN = 50
"""Catalog order lines rendered for the agent; the rest is summed up as "... and N more items"."""


def _amount(value: Any) -> Decimal | None:
    """A quantity or price as WhatsApp sends it (number or numeric string) → a finite Decimal, else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return None
    text = str(value).strip()
    if not text or len(text) > 40:  # a price is never 40 digits long; refuse before Decimal parses it
        return None
    try:
        amount = Decimal(text)
    except InvalidOperation:
        return None
    # finite, and of a size a quantity or a price can have (1e308 is neither)
    return amount if amount.is_finite() and abs(amount.adjusted()) <= 15 else None


def _show(amount: Decimal) -> str:
    """``Decimal("30")`` → ``"30"``, ``Decimal("12.50")`` → ``"12.50"`` (as sent, never in exponent form)."""
    return f"{amount:f}"


def render_order(order: dict[str, Any]) -> str:
    """A catalog ``order`` message as lines the agent can read: items, quantities, prices, total, note.

    Shape (WhatsApp Cloud API, messages webhook, ``type: "order"``): ``order.catalog_id``, ``order.text``
    (what the customer wrote with the order), ``order.product_items[]`` of ``{product_retailer_id,
    quantity, item_price, currency}``; numbers may arrive as JSON numbers or strings. Example::

        [Order from catalog 354160437058781]
        - 3 x HAMBURGER at 30 ILS each = 90 ILS
        - 2 x SODA at 10 ILS each = 20 ILS
        Total: 110 ILS
        Customer's note: "no onions"

    The total is given only when every line has a quantity, a price and the same currency.
    """
    catalog = _s(order.get("catalog_id"))
    lines = [f"[Order from catalog {catalog}]" if catalog else "[Order]"]
    listed = order.get("product_items") if isinstance(order.get("product_items"), list) else []
    items = [item for item in listed if isinstance(item, dict)]
    total: Decimal | None = Decimal(0) if len(items) == len(listed) else None
    currencies: set[str] = set()
    shown = 0
    for item in items:
        sku = _s(item.get("product_retailer_id")) or "unknown item"
        quantity, price = _amount(item.get("quantity")), _amount(item.get("item_price"))
        currency = _s(item.get("currency")) or ""
        currencies.add(currency)
        line = f"- {_show(quantity) if quantity is not None else '?'} x {sku}"
        if price is not None:
            line += f" at {_show(price)} {currency}".rstrip() + " each"
            if quantity is not None:
                line += f" = {_show(quantity * price)} {currency}".rstrip()
        if quantity is None or price is None:
            total = None
        elif total is not None:
            total += quantity * price
        if shown < ORDER_ITEMS_SHOWN:
            lines.append(line)
            shown += 1
    if len(items) > shown:
        lines.append(f"- ... and {len(items) - shown} more items")
    if not items:
        lines.append("- (no items)")
    elif total is not None and len(currencies) == 1:
        lines.append(f"Total: {_show(total)} {currencies.pop()}".rstrip())
    note = _s(order.get("text"))
    if note:
        lines.append(f'Customer\'s note: "{note.strip()}"')
    return "\n".join(lines)


def _epoch(value: Any) -> datetime:
    """WhatsApp timestamps are epoch seconds as strings; anything unreadable becomes now (logged)."""
    try:
        return datetime.fromtimestamp(int(str(value).strip()), tz=UTC)
    except (TypeError, ValueError, OverflowError, OSError):
        log.warning("whatsapp_bad_timestamp", value=str(value)[:40])
        return datetime.now(UTC)


def _list(value: Any) -> list[Any]:
    """``value`` when it is a JSON array, else ``[]`` (``"messages": 1``, ``true``, ``{}`` are not lists)."""
    return value if isinstance(value, list) else []


_CODE_DIGITS = 12
"""Longest error code read as a number (Meta's codes have at most 6 digits)."""


def _code(value: Any) -> int | None:
    """An error code as an int: a JSON integer, or a string of ASCII digits; anything else (``"²"``, which
    passes ``str.isdigit``, a 5,000-digit string, ``true``) is ``None``."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if len(str(abs(value))) <= _CODE_DIGITS else None
    if isinstance(value, str) and 0 < len(value.strip()) <= _CODE_DIGITS and value.strip().isascii():
        text = value.strip()
        return int(text) if text.isdigit() else None
    return None


def _s(value: Any) -> str | None:
    """A non-empty string or ``None`` (``""`` and non-strings count as missing)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = str(value)
    return value if isinstance(value, str) and value.strip() else None


def _find_contact(contacts: list[Any], wa_id: str | None, bsuid: str | None) -> dict[str, Any]:
    """The ``contacts[]`` entry of this sender, matched by ``wa_id`` or ``user_id`` (never ``contacts[0]``
    unless it is the only one and it does not contradict the sender)."""
    dicts = [c for c in contacts if isinstance(c, dict)]
    for contact in dicts:
        if (wa_id and _s(contact.get("wa_id")) == wa_id) or (bsuid and _s(contact.get("user_id")) == bsuid):
            return contact
    if len(dicts) == 1:
        only = dicts[0]
        if not _s(only.get("wa_id")) or not wa_id:
            return only
    return {}


def _media(kind: str, obj: dict[str, Any]) -> MediaRef | None:
    media_id = _s(obj.get("id"))
    if media_id is None:
        return None
    return MediaRef(
        ref=media_id,
        mime=strip_mime_params(_s(obj.get("mime_type"))),
        filename=_s(obj.get("filename")),
        caption=_s(obj.get("caption")),
        voice=bool(obj.get("voice")) if kind == "audio" else False,
        expiring=True,  # Meta forgets media ids (about 30 days): the bytes are copied at arrival
    )


def _render_contacts(cards: list[Any]) -> str:
    lines = []
    for card in cards:
        if not isinstance(card, dict):
            continue
        name = card.get("name") if isinstance(card.get("name"), dict) else {}
        shown = _s(name.get("formatted_name")) or " ".join(
            p for p in (_s(name.get("first_name")), _s(name.get("last_name"))) if p
        )
        phones = [
            f"{_s(p.get('phone')) or _s(p.get('wa_id'))}"
            + (f" ({_s(p.get('type'))})" if _s(p.get("type")) else "")
            for p in _list(card.get("phones"))
            if isinstance(p, dict) and (_s(p.get("phone")) or _s(p.get("wa_id")))
        ]
        lines.append(f"{shown or 'Contact'}: {', '.join(phones)}" if phones else (shown or "Contact"))
    return "[Shared contacts]\n" + "\n".join(lines) if lines else "[Shared contacts]"


def _message_body(
    kind: str, msg: dict[str, Any]
) -> tuple[str, str, list[MediaRef], str | None, dict[str, Any]]:
    """``(kind, text, media, payload, extra_flags)`` for one ``messages[]`` item (or an edit's inner message).

    Unknown or broken shapes come back as kind ``unsupported`` with empty text.
    """
    flags: dict[str, Any] = {}
    if kind == "text":
        body = msg.get("text") if isinstance(msg.get("text"), dict) else {}
        text = body.get("body") if isinstance(body.get("body"), str) else ""
        return ("text", text, [], None, flags) if text else ("unsupported", "", [], None, flags)
    if kind in MEDIA_KINDS:
        obj = msg.get(kind) if isinstance(msg.get(kind), dict) else {}
        ref = _media(kind, obj)
        if ref is None:
            return "unsupported", "", [], None, {"reason": f"{kind} without media id"}
        if kind == "sticker":
            flags["animated"] = bool(obj.get("animated"))
        return kind, ref.caption or "", [ref], None, flags
    if kind == "location":
        loc = msg.get("location") if isinstance(msg.get("location"), dict) else None
        if loc is None:
            return "unsupported", "", [], None, {"reason": "location without payload"}
        return "location", render_location(loc), [], None, {"location": loc}
    if kind == "contacts":
        cards = msg.get("contacts") if isinstance(msg.get("contacts"), list) else []
        return "contacts", _render_contacts(cards), [], None, {"contacts": cards}
    if kind == "interactive":
        inter = msg.get("interactive") if isinstance(msg.get("interactive"), dict) else None
        if inter is None:
            return "unsupported", "", [], None, {"reason": "interactive without payload"}
        sub = _s(inter.get("type"))
        reply = inter.get(sub) if sub and isinstance(inter.get(sub), dict) else None
        if sub in ("button_reply", "list_reply") and reply is not None:
            title = _s(reply.get("title")) or ""
            return "interactive", title, [], _s(reply.get("id")), {"interactive_type": sub}
        if sub == "nfm_reply" and reply is not None:
            return "interactive", _s(reply.get("body")) or "", [], _s(reply.get("response_json")), flags
        return "unsupported", "", [], None, {"reason": f"interactive type {sub!r}"}
    if kind == "order":
        order = msg.get("order") if isinstance(msg.get("order"), dict) else None
        if order is None:
            return "unsupported", "", [], None, {"reason": "order without payload"}
        items = order.get("product_items") if isinstance(order.get("product_items"), list) else []
        flags["order"] = {"catalog_id": _s(order.get("catalog_id")), "items": len(items)}
        return "order", render_order(order), [], None, flags
    if kind == "request_welcome":  # the customer opened the chat for the first time (no text of theirs)
        return "request_welcome", CHAT_OPENED_TEXT, [], None, flags
    if kind == "button":
        button = msg.get("button") if isinstance(msg.get("button"), dict) else None
        if button is None:
            return "unsupported", "", [], None, {"reason": "button without payload"}
        return "button", _s(button.get("text")) or "", [], _s(button.get("payload")), flags
    return "unsupported", "", [], None, {"reason": f"type {kind!r}"}


def _base_flags(msg: dict[str, Any]) -> dict[str, Any]:
    flags: dict[str, Any] = {}
    ctx = msg.get("context") if isinstance(msg.get("context"), dict) else {}
    if ctx.get("forwarded"):
        flags["forwarded"] = True
    if ctx.get("frequently_forwarded"):
        flags["frequently_forwarded"] = True
    if isinstance(ctx.get("referred_product"), dict):  # "ask about this product" from a catalog
        flags["referred_product"] = {
            k: ctx["referred_product"][k]
            for k in ("catalog_id", "product_retailer_id")
            if k in ctx["referred_product"]
        }
    ref = msg.get("referral")
    if isinstance(ref, dict):
        flags["referral"] = {
            k: ref[k]
            for k in ("source_id", "source_type", "source_url", "ctwa_clid", "headline", "body", "media_type")
            if k in ref
        }
    if isinstance(msg.get("errors"), list) and msg["errors"]:
        first = msg["errors"][0] if isinstance(msg["errors"][0], dict) else {}
        flags["error_code"] = _code(first.get("code"))
    return flags


def identities_of(wa_id: str | None, bsuid: str | None) -> list[SenderIdentity]:
    """A WhatsApp sender's identities: the phone number (``wa_id``) first when known — replies go to
    it — then the business-scoped user id (BSUID)."""
    out = []
    if wa_id:
        out.append(SenderIdentity(kind="wa_id", value=wa_id))
    if bsuid:
        out.append(SenderIdentity(kind="bsuid", value=bsuid))
    return out


def _normalize_message(
    msg: dict[str, Any], contacts: list[Any], account_id: str, *, echo: bool = False
) -> InboundMessage | None:
    """One ``messages[]`` (or ``message_echoes[]``) item; ``None`` when it has no id or no sender at all."""
    external_id = _s(msg.get("id"))
    if echo:
        wa_id, bsuid = _s(msg.get("to")), _s(msg.get("to_user_id"))
    else:
        wa_id, bsuid = _s(msg.get("from")), _s(msg.get("from_user_id"))
    system = msg.get("system") if isinstance(msg.get("system"), dict) else {}
    if not echo and not wa_id and not bsuid and _s(system.get("type")) == "user_changed_user_id":
        bsuid = _s(system.get("previous_user_id"))  # a BSUID change names no sender but the old id
    contact = _find_contact(contacts, wa_id, bsuid)
    wa_id = wa_id or _s(contact.get("wa_id"))
    bsuid = bsuid or _s(contact.get("user_id"))
    sender_id = bsuid or wa_id
    if external_id is None or sender_id is None:
        log.warning("whatsapp_message_skipped", reason="no id or no sender", external_id=external_id)
        return None
    profile = contact.get("profile") if isinstance(contact.get("profile"), dict) else {}
    kind = _s(msg.get("type")) or "unsupported"
    flags = _base_flags(msg)
    flags["wa_id"] = wa_id
    flags["bsuid"] = bsuid
    if _s(contact.get("parent_user_id")):
        flags["parent_bsuid"] = contact["parent_user_id"]
    if _s(profile.get("username")):
        flags["username"] = profile["username"]
    ctx = msg.get("context") if isinstance(msg.get("context"), dict) else {}
    reply_to = _s(ctx.get("id"))
    common = dict(
        identities=identities_of(wa_id, bsuid),
        echo=echo,
        referral=flags.get("referral"),
        channel="whatsapp",
        account_id=account_id,
        external_id=external_id,
        sender_id=sender_id,
        sender_name=_s(profile.get("name")),
        sent_at=_epoch(msg.get("timestamp")),
        reply_to=reply_to,
        raw={"message": msg, "contact": contact or None},
    )
    if kind == "reaction":
        reaction = msg.get("reaction") if isinstance(msg.get("reaction"), dict) else {}
        target = _s(reaction.get("message_id"))
        flags.update(target=target, emoji=reaction.get("emoji") or "")
        return InboundMessage(
            kind="reaction", action="record", target_external_id=target, flags=flags, **common
        )
    if kind == "revoke":
        revoke = msg.get("revoke") if isinstance(msg.get("revoke"), dict) else {}
        flags["target"] = _s(revoke.get("original_message_id"))
        return InboundMessage(
            kind="revoke", action="record", target_external_id=flags["target"], flags=flags, **common
        )
    if kind == "edit":
        edit = msg.get("edit") if isinstance(msg.get("edit"), dict) else {}
        inner = edit.get("message") if isinstance(edit.get("message"), dict) else {}
        inner_kind, text, media, payload, extra = _message_body(_s(inner.get("type")) or "unsupported", inner)
        flags.update(extra, target=_s(edit.get("original_message_id")), edited_kind=inner_kind)
        return InboundMessage(
            kind="edit",
            action="record",
            text=text,
            media=media,
            payload=payload,
            flags=flags,
            target_external_id=flags["target"],
            **common,
        )
    if kind == "system":
        flags.update(
            system_type=_s(system.get("type")),
            new_wa_id=_s(system.get("wa_id")),
            new_bsuid=_s(system.get("user_id")),
        )
        event = SystemEvent(
            type=flags["system_type"] or "unknown",
            new_identities=identities_of(flags["new_wa_id"], flags["new_bsuid"]),
        )
        return InboundMessage(
            kind="system",
            action="record",
            text=_s(system.get("body")) or "",
            flags=flags,
            system=event,
            **common,
        )
    kind, text, media, payload, extra = _message_body(kind, msg)
    flags.update(extra)
    if echo:
        flags.update(direction="outbound", author="human_agent", echo=True)
        action = "record"
    elif kind in _RECORD_ONLY_KINDS:
        action = "record"
    else:
        action = "process"
    return InboundMessage(
        kind=kind, action=action, text=text, media=media, payload=payload, flags=flags, **common
    )


def _guarded(
    msg: dict[str, Any], contacts: list[Any], account_id: str, *, echo: bool
) -> InboundMessage | None:
    """:func:`_normalize_message`, and when that fails on a shape nobody foresaw: the least of the
    message (id, sender, time) as ``unsupported`` with an ``unprocessable`` reason, so it is stored and
    seen, never processed, and the other messages of the delivery are unaffected."""
    try:
        return _normalize_message(msg, contacts, account_id, echo=echo)
    except Exception as exc:  # noqa: BLE001 (logged; the message is kept with the reason)
        reason = f"unreadable {str(_s(msg.get('type')) or 'message')[:32]}: {type(exc).__name__}"
        log.warning("whatsapp_message_unreadable", reason=reason, error=str(exc)[:200])
    external_id = _s(msg.get("id"))
    sender = _s(msg.get("to") if echo else msg.get("from")) or _s(
        msg.get("to_user_id") if echo else msg.get("from_user_id")
    )
    if external_id is None or sender is None:
        return None
    try:
        return InboundMessage(
            channel="whatsapp",
            account_id=account_id,
            kind="unsupported",
            action="record",
            echo=echo,
            external_id=external_id,
            sender_id=sender,
            sent_at=_epoch(msg.get("timestamp")),
            flags={UNPROCESSABLE_FLAG: reason},
            raw={"message": msg},
        )
    except Exception as exc:  # noqa: BLE001
        log.warning("whatsapp_message_skipped", reason="unreadable", error=str(exc)[:200])
        return None


def _normalize_status(item: dict[str, Any], account_id: str) -> StatusUpdate | None:
    external_id, status = _s(item.get("id")), _s(item.get("status"))
    if external_id is None or status is None:
        return None
    errors = item.get("errors") if isinstance(item.get("errors"), list) else []
    first = errors[0] if errors and isinstance(errors[0], dict) else {}
    code = first.get("code")
    error_code = _code(code)
    return StatusUpdate(
        account_id=account_id,
        external_id=external_id,
        status=status.lower(),
        timestamp=_epoch(item.get("timestamp")),
        recipient_id=_s(item.get("recipient_id")) or _s(item.get("recipient_user_id")),
        error_code=error_code,
        error_title=_s(first.get("title")),
        biz_opaque_callback_data=_s(item.get("biz_opaque_callback_data")),
        conversation_reason=conversation_block_reason(error_code),
    )


def normalize_delivery(body: dict[str, Any]) -> NormalizedDelivery:
    """Every event of one webhook body (``object: whatsapp_business_account``).

    Args:
        body: the parsed JSON body.

    Returns:
        A :class:`NormalizedDelivery`; messages sorted by provider timestamp. Items without a
        ``metadata.phone_number_id`` or that cannot be understood are counted in ``skipped`` and logged.
    """
    out = NormalizedDelivery()
    order: list[tuple[datetime, int, InboundMessage]] = []
    entries = body.get("entry") if isinstance(body.get("entry"), list) else []
    for entry in entries:
        changes = (
            entry.get("changes") if isinstance(entry, dict) and isinstance(entry.get("changes"), list) else []
        )
        for change in changes:
            value = (
                change.get("value")
                if isinstance(change, dict) and isinstance(change.get("value"), dict)
                else None
            )
            if value is None:
                out.skipped += 1
                continue
            metadata = value.get("metadata") if isinstance(value.get("metadata"), dict) else {}
            account_id = _s(metadata.get("phone_number_id"))
            if account_id is None:
                log.warning("whatsapp_change_without_account", field=change.get("field"))
                out.skipped += 1
                continue
            contacts = _list(value.get("contacts"))
            for key, is_echo in (("messages", False), ("message_echoes", True)):
                for msg in _list(value.get(key)):
                    normalized = (
                        _guarded(msg, contacts, account_id, echo=is_echo) if isinstance(msg, dict) else None
                    )
                    if normalized is None:
                        out.skipped += 1
                        continue
                    order.append((normalized.sent_at, len(order), normalized))
            for item in _list(value.get("statuses")):
                status = _normalize_status(item, account_id) if isinstance(item, dict) else None
                if status is None:
                    out.skipped += 1
                else:
                    out.statuses.append(status)
            for err in _list(value.get("errors")):
                if isinstance(err, dict):
                    data = err.get("error_data") if isinstance(err.get("error_data"), dict) else {}
                    code = err.get("code")
                    out.errors.append(
                        WebhookErrorEvent(
                            account_id=account_id,
                            code=_code(code),
                            title=_s(err.get("title")),
                            details=_s(data.get("details")),
                        )
                    )
    out.messages = [m for _, _, m in sorted(order, key=lambda t: (t[0], t[1]))]
    return out
