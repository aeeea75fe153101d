"""A visitor's POST as a :class:`~switchboard.channels.ingest.NormalizedDelivery`: the same shape every
channel hands to the one ingest.

The body (JSON; the route has checked the widget key, the ``Origin`` and the size already)::

    {"key": "wk_...", "visitor": "<random id the browser keeps>",
     "user_id": "...", "user_hash": "<hex HMAC-SHA256>", "name": "...",      # optional: a verified user
     "messages": [{"id": "<client id>", "text": "...", "payload": "<button id>"}],
     "statuses": [{"id": "<reply id>", "status": "delivered" | "read"}]}

A message's provider id is the client's own id: 16-64 characters the widget draws at random (16 bytes
from the browser's CSPRNG), so nobody can guess another visitor's; the widget retries a POST that got no
answer with the same ids, and the ingest's unique insert stores it once. An item that is not an object with a
plain ``id`` is skipped (counted), its siblings are stored. Statuses other than ``delivered`` and
``read`` are ignored: a browser cannot report a failure of ours.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import regex

from switchboard.channels.ingest import NormalizedDelivery, StatusUpdate
from switchboard.contracts import InboundMessage, SenderIdentity

__all__ = ["CLIENT_ID", "VisitorIdentity", "normalize_visitor_post"]

CLIENT_ID = regex.compile(r"^[A-Za-z0-9_.-]{16,64}$")
_STATUSES = frozenset({"delivered", "read"})


class VisitorIdentity:
    """Who posts: the visitor id, and the verified user id when the backend's signature matched."""

    def __init__(self, visitor: str, user_id: str | None = None, name: str | None = None) -> None:
        self.visitor = visitor
        self.user_id = user_id
        self.name = name if user_id else None  # a name is taken only from a verified page

    @property
    def address(self) -> str:
        """Where replies go: the verified user's stream (every browser they sign in on), else the visitor's."""
        from switchboard.channels.web.widgets import user_address

        return user_address(self.user_id) if self.user_id else self.visitor

    @property
    def identities(self) -> list[SenderIdentity]:
        """The verified user first (it names the customer), then the browser's visitor id."""
        found = [SenderIdentity(kind="visitor", value=self.visitor)]
        if self.user_id:
            found.insert(0, SenderIdentity(kind="web_user", value=self.user_id))
        return found


def normalize_visitor_post(
    body: dict[str, Any], *, key: str, who: VisitorIdentity, received_at: datetime | None = None
) -> NormalizedDelivery:
    """Every message and status of one visitor POST (never raises on odd shapes)."""
    now = received_at or datetime.now(UTC)
    delivery = NormalizedDelivery()
    messages = body.get("messages")
    for item in messages if isinstance(messages, list) else []:
        if (
            not isinstance(item, dict)
            or not isinstance(item.get("id"), str)
            or not CLIENT_ID.match(item["id"])
        ):
            delivery.skipped += 1
            continue
        text = item.get("text") if isinstance(item.get("text"), str) else ""
        payload = item.get("payload") if isinstance(item.get("payload"), str) else None
        delivery.messages.append(
            InboundMessage(
                channel="web",
                account_id=key,
                kind="interactive" if payload else "text",
                external_id=item["id"],
                sender_id=who.address,
                sent_at=now,
                text=text,
                payload=(payload or None) and payload[:256],
                identities=who.identities,
                sender_name=who.name,
                raw={"web": {"client_id": item["id"], "verified": bool(who.user_id)}},
            )
        )
    statuses = body.get("statuses")
    for item in statuses if isinstance(statuses, list) else []:
        if (
            not isinstance(item, dict)
            or not isinstance(item.get("id"), str)
            or item.get("status") not in _STATUSES
        ):
            delivery.skipped += 1
            continue
        delivery.statuses.append(
            StatusUpdate(
                account_id=key,
                external_id=item["id"][:64],
                status=str(item["status"]),
                timestamp=now,
                recipient_id=who.address,
            )
        )
    return delivery
