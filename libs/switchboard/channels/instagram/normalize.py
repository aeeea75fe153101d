"""Instagram Messaging webhook bodies → :class:`~switchboard.contracts.InboundMessage` and read updates.

Nothing past this module sees Meta's JSON. Shape (Meta's Instagram Messaging webhook docs, ``tests/fixtures/payloads/INDEX.md``
"Instagram"): ``{"object": "instagram", "entry": [{"id": <IG professional account id>, "time",
"messaging": [...]}]}``; ``entry[].standby[]`` carries the same items while another app owns the
thread (recorded, never answered), and ``entry[].changes[]`` (``{"field", "value": <a messaging
item>}``, what the dashboard's test button and some subscriptions send) is read the same way.
Timestamps are epoch **milliseconds** as integers (the dashboard's test event sends seconds as a
string: both are accepted). Every item of every entry is read; one we cannot understand becomes an
``unsupported`` message when it has a ``mid`` and is counted in ``skipped`` otherwise (a 500 makes
Meta resend the delivery for days).

Customer key: the customer's Instagram-scoped id (IGSID), ``sender.id`` of what they send. An echo
(``message.is_echo``: what the business sent, from Switchboard or from the Instagram app) has sender
and recipient swapped, so its customer is ``recipient.id``; an item whose only party is the business
account is dropped. Event kinds:

* ``message``: ``text``, attachments (``image``, ``video``, ``audio``, ``file`` → ``document``,
  ``share``, ``story_mention``, ``reel``/``ig_reel`` → ``reel``, ``unsupported``), ``reply_to``
  (``mid`` of a message, or ``story{id, url}``), ``quick_reply.payload``, ``referral``;
  ``is_deleted`` (unsend) → ``revoke`` of the mid; ``is_unsupported`` → ``unsupported``.
* ``postback`` (ice breakers, buttons) → kind ``postback``, text = title, payload.
* ``reaction`` (``react`` / ``unreact``) → kind ``reaction`` on ``reaction.mid``, record only.
* ``message_edit`` → kind ``edit`` of ``mid`` with the new text.
* ``read`` (``messaging_seen``) → a :class:`StatusUpdate` ``read`` of our message ``mid``.
* ``referral`` without a message (an ad or link opened the thread) → kind ``referral``, record only.

Media refs are the CDN URLs Meta sent, marked ``expiring``: they die (stories within hours) and there
is no id to resolve later, so the ingest enqueues a copy of the bytes into our media storage right
after the insert (:mod:`switchboard.media.jobs`).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from switchboard.channels.ingest import NormalizedDelivery, StatusUpdate
from switchboard.contracts import InboundMessage, MediaRef, SenderIdentity
from switchboard.observability import get_logger

__all__ = ["ATTACHMENT_KINDS", "identities_of", "normalize_delivery"]

log = get_logger(__name__)

ATTACHMENT_KINDS = {
    "image": "image",
    "video": "video",
    "audio": "audio",
    "file": "document",
    "share": "share",
    "story_mention": "story_mention",
    "reel": "reel",
    "ig_reel": "reel",
    "animated_image": "image",
}
"""Instagram ``attachments[].type`` → our row kind (``unsupported`` for anything else)."""
_RECORD_ONLY_KINDS = {"reaction", "story_mention", "unsupported", "referral", "share", "reel"}
"""Kinds that never wake the agent (a share or reel with no text has nothing to answer)."""
_CHANGE_FIELDS = {
    "messages",
    "messaging_postbacks",
    "message_reactions",
    "messaging_seen",
    "messaging_referral",
    "message_edit",
    "messaging_handover",
    "standby",
}
STORY_MENTION_LINE = "[The customer mentioned your account in their Instagram story]"
STORY_REPLY_LINE = "[The customer replied to your Instagram story]"


def _s(value: Any) -> str | None:
    """A non-empty string or ``None`` (numbers become strings; ``""`` and others count as missing)."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    return value if isinstance(value, str) and value.strip() else None


def _d(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _epoch_ms(value: Any) -> datetime:
    """Milliseconds since the epoch (an int, or a string of seconds from the dashboard test);
    anything unreadable becomes now (logged)."""
    try:
        number = int(str(value).strip())
        seconds = number / 1000 if number > 100_000_000_000 else number  # ms after 1973; seconds before
        return datetime.fromtimestamp(seconds, tz=UTC)
    except (TypeError, ValueError, OverflowError, OSError):
        log.warning("instagram_bad_timestamp", value=str(value)[:40])
        return datetime.now(UTC)


def identities_of(igsid: str) -> list[SenderIdentity]:
    """An Instagram customer's identity: the Instagram-scoped id (IGSID)."""
    return [SenderIdentity(kind="igsid", value=igsid[:255])]


def _attachments(message: dict[str, Any]) -> tuple[str | None, list[MediaRef], dict[str, Any]]:
    """``(kind, media, flags)`` of ``message.attachments`` (``kind`` ``None`` without attachments)."""
    items = [a for a in message.get("attachments") or [] if isinstance(a, dict)]
    if not items:
        return None, [], {}
    kind: str | None = None
    media: list[MediaRef] = []
    flags: dict[str, Any] = {}
    for item in items:
        ig_type = _s(item.get("type")) or "unsupported"
        mapped = ATTACHMENT_KINDS.get(ig_type, "unsupported")
        kind = kind or mapped
        payload = _d(item.get("payload"))
        url = _s(payload.get("url"))
        if ig_type in ("share", "reel", "ig_reel") and url:
            flags.setdefault("shared", []).append(
                {k: payload[k] for k in ("url", "title", "reel_video_id") if k in payload}
            )
        if url and mapped in ("image", "video", "audio", "document", "story_mention", "reel"):
            media.append(
                MediaRef(
                    ref=url,
                    expiring=True,
                    voice=mapped == "audio",
                    filename=_s(payload.get("name")) or _s(payload.get("title")),
                )
            )
    flags["attachment_types"] = [_s(a.get("type")) or "unsupported" for a in items]
    return kind, media, flags


def _referral(item: dict[str, Any], message: dict[str, Any]) -> dict[str, Any] | None:
    ref = item.get("referral") if isinstance(item.get("referral"), dict) else message.get("referral")
    if not isinstance(ref, dict):
        return None
    keep = ("ref", "source", "type", "ad_id", "ads_context_data", "product", "referer_uri")
    return {k: ref[k] for k in keep if k in ref}


def _normalize_item(
    item: dict[str, Any], account_id: str, *, standby: bool
) -> tuple[InboundMessage | None, StatusUpdate | None]:
    """One ``messaging[]`` / ``standby[]`` item → a message, a read mark, or neither (``None, None``)."""
    sender = _s(_d(item.get("sender")).get("id"))
    recipient = _s(_d(item.get("recipient")).get("id"))
    message = _d(item.get("message"))
    echo = bool(message.get("is_echo"))
    customer = recipient if echo else sender
    if customer is None or customer == account_id:
        # never key a conversation on the business account itself
        log.warning("instagram_item_skipped", reason="no customer id", echo=echo)
        return None, None
    sent_at = _epoch_ms(item.get("timestamp"))
    read = _d(item.get("read"))
    if read:
        mid = _s(read.get("mid"))
        if mid is None:  # a Messenger-style watermark: nothing to match
            return None, None
        return None, StatusUpdate(
            account_id=account_id, external_id=mid, status="read", timestamp=sent_at, recipient_id=customer
        )
    flags: dict[str, Any] = {"igsid": customer}
    if standby:
        flags["standby"] = True
    referral = _referral(item, message)
    if referral is not None:
        flags["referral"] = referral
    common: dict[str, Any] = dict(
        channel="instagram",
        account_id=account_id,
        sender_id=customer,
        sent_at=sent_at,
        identities=identities_of(customer),
        echo=echo,
        referral=referral,
        raw={"item": item},
    )
    action_default = "record" if standby else "process"

    if isinstance(item.get("postback"), dict):
        postback = item["postback"]
        mid = _s(postback.get("mid"))
        if mid is None:
            return None, None
        return InboundMessage(
            kind="postback",
            external_id=mid,
            text=_s(postback.get("title")) or "",
            payload=_s(postback.get("payload")),
            action=action_default,
            flags=flags,
            **common,
        ), None
    if isinstance(item.get("reaction"), dict):
        reaction = item["reaction"]
        target = _s(reaction.get("mid"))
        if target is None:
            return None, None
        verb = _s(reaction.get("action")) or "react"
        flags.update(target=target, emoji=reaction.get("emoji") or "", reaction=reaction.get("reaction"))
        if verb == "unreact":
            flags["unreact"] = True
        stamp = int(sent_at.timestamp() * 1000)
        return InboundMessage(
            kind="reaction",
            external_id=f"{target}:{verb}:{customer}:{stamp}",
            action="record",
            target_external_id=target,
            flags=flags,
            **common,
        ), None
    if isinstance(item.get("message_edit"), dict):
        edit = item["message_edit"]
        target = _s(edit.get("mid"))
        if target is None:
            return None, None
        flags.update(target=target, num_edit=edit.get("num_edit"))
        return InboundMessage(
            kind="edit",
            external_id=f"{target}:edit:{edit.get('num_edit', 0)}",
            text=_s(edit.get("text")) or "",
            action="record",
            target_external_id=target,
            flags=flags,
            **common,
        ), None
    if not message:
        if referral is not None:  # an ad / ig.me link opened the thread before any message
            stamp = int(sent_at.timestamp() * 1000)
            return InboundMessage(
                kind="referral",
                external_id=f"referral:{customer}:{stamp}",
                action="record",
                flags=flags,
                **common,
            ), None
        return None, None
    mid = _s(message.get("mid"))
    if mid is None:
        return None, None
    if message.get("is_deleted"):
        flags["target"] = mid
        return InboundMessage(
            kind="revoke",
            external_id=f"{mid}:deleted",
            action="record",
            target_external_id=mid,
            flags=flags,
            **common,
        ), None
    text = message.get("text") if isinstance(message.get("text"), str) else ""
    kind, media, extra = _attachments(message)
    flags.update(extra)
    payload = None
    if kind is None:
        if isinstance(message.get("quick_reply"), dict):
            kind, payload = "quick_reply", _s(message["quick_reply"].get("payload"))
        elif text:
            kind = "text"
        else:
            kind = "unsupported"
    if message.get("is_unsupported"):
        kind = "unsupported"
    reply = _d(message.get("reply_to"))
    reply_to = _s(reply.get("mid"))
    story = _d(reply.get("story"))
    context_line = None
    if story:
        reply_to = _s(story.get("id"))
        flags["story"] = {"id": reply_to, "url": _s(story.get("url"))}
        context_line = STORY_REPLY_LINE
        if _s(story.get("url")):  # copied like any attachment: the story disappears within a day
            media.append(MediaRef(ref=str(story["url"]), filename="story", expiring=True))
    if kind == "story_mention":
        context_line = STORY_MENTION_LINE
    if echo:
        flags.update(direction="outbound", echo=True)
        action = "record"
    elif kind in _RECORD_ONLY_KINDS and not text:
        action = "record"
    else:
        action = action_default
    return InboundMessage(
        kind=kind,
        external_id=mid,
        text=text,
        media=media,
        payload=payload,
        reply_to=reply_to,
        action=action,
        flags=flags,
        context_line=context_line,
        **common,
    ), None


def _items_of(entry: dict[str, Any]) -> list[tuple[dict[str, Any], bool]]:
    """``(item, standby)`` of every ``messaging[]``, ``standby[]`` and ``changes[].value`` of an entry."""
    out: list[tuple[dict[str, Any], bool]] = []
    for key, standby in (("messaging", False), ("standby", True)):
        for item in entry.get(key) or []:
            out.append((item if isinstance(item, dict) else {}, standby))
    for change in entry.get("changes") or []:
        change = _d(change)
        name = _s(change.get("field"))
        value = _d(change.get("value"))
        if name in _CHANGE_FIELDS and value:
            out.append((value, name == "standby"))
        else:
            out.append(({}, False))
    return out


def normalize_delivery(body: dict[str, Any]) -> NormalizedDelivery:
    """Every event of one webhook body (``object: instagram``).

    Args:
        body: the parsed JSON body.

    Returns:
        A :class:`~switchboard.channels.ingest.NormalizedDelivery` (no account-level errors on
        Instagram); messages sorted by provider timestamp. Items that cannot be
        understood are counted in ``skipped`` and logged.
    """
    out = NormalizedDelivery()
    order: list[tuple[datetime, int, InboundMessage]] = []
    for entry in body.get("entry") if isinstance(body.get("entry"), list) else []:
        entry = _d(entry)
        account_id = _s(entry.get("id"))
        if account_id is None:
            log.warning("instagram_entry_without_account")
            out.skipped += 1
            continue
        for item, standby in _items_of(entry):
            try:
                message, status = _normalize_item(item, account_id, standby=standby)
            except (ValueError, TypeError) as exc:  # a pydantic refusal of a strange item
                log.warning("instagram_item_unreadable", error=str(exc)[:200])
                message, status = None, None
            if message is not None:
                order.append((message.sent_at, len(order), message))
            elif status is not None:
                out.statuses.append(status)
            else:
                out.skipped += 1
    out.messages = [m for _, _, m in sorted(order, key=lambda t: (t[0], t[1]))]
    return out
