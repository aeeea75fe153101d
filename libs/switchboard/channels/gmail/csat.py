"""The satisfaction question in an e-mail: one signed link per answer, opened in the console.

A mail has no buttons, so the question (an outbox part of type ``interactive`` whose body has
``kind = "csat_links"``, written by :mod:`switchboard.conversations.csat`) is sent as its text with one
link per answer: ``{CONSOLE_PUBLIC_URL}/csat/{conversation id}/{rating}?exp=<epoch s>&sig=<hex>``.
``sig`` is HMAC-SHA256 over ``"{conversation id}:{rating}:{exp}"`` with a key derived from
``SERVICE_TOKEN`` for this purpose only (:func:`switchboard.media.links.link_signature`), so a link
names one conversation and one rating and nobody can make another.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from switchboard.media.links import link_is_valid, link_signature
from switchboard.settings import Settings

__all__ = ["CSAT_LINKS", "LINK_TTL_S", "KIND", "mail_text", "rating_link", "rating_link_is_valid"]

CSAT_LINKS = b"switchboard-csat-links"
"""The purpose rating links are signed for (a media link never passes as one, nor the reverse)."""
LINK_TTL_S = 30 * 86_400
"""How long a rating link works (seconds: 30 days)."""
KIND = "csat_links"
"""``interactive.kind`` of the outbox part holding the question."""


def rating_link(
    settings: Settings, base_url: str, conversation_id: uuid.UUID, rating: int, *, now: float | None = None
) -> str:
    """The signed link that rates ``conversation_id`` with ``rating`` (1-5), under ``base_url``."""
    exp = int((now if now is not None else time.time()) + LINK_TTL_S)
    sig = link_signature(settings, f"{conversation_id}:{rating}", exp, purpose=CSAT_LINKS)
    return f"{base_url.rstrip('/')}/csat/{conversation_id}/{rating}?exp={exp}&sig={sig}"


def rating_link_is_valid(
    settings: Settings,
    conversation_id: uuid.UUID,
    rating: int,
    exp: int,
    sig: str,
    *,
    now: float | None = None,
) -> bool:
    """Whether ``sig`` is ours for this conversation, rating and ``exp``, and ``exp`` has not passed."""
    return link_is_valid(settings, f"{conversation_id}:{rating}", exp, sig, now=now, purpose=CSAT_LINKS)


def mail_text(settings: Settings, base_url: str, question: str, body: dict[str, Any]) -> str:
    """The mail's text: the question, then one line per answer with its link (``Good: https://...``).

    Args:
        body: the part's ``interactive`` body: ``{"kind", "conversation_id", "options": [{"rating",
            "title"}]}``.
    """
    conversation_id = uuid.UUID(str(body["conversation_id"]))
    lines = [question.strip(), ""]
    for option in body.get("options") or []:
        link = rating_link(settings, base_url, conversation_id, int(option["rating"]))
        lines.append(f"{option['title']}: {link}")
    return "\n".join(lines)
