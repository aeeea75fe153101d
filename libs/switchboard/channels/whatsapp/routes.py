"""``/webhooks/whatsapp``: WhatsApp's :class:`~switchboard.channels.webhook.MetaWebhook` spec.

The route itself (handshake, signature, 413/401/403/200/503 outcomes, durable insert) is shared by the
Meta channels: :mod:`switchboard.channels.webhook`.
"""

from __future__ import annotations

from fastapi import APIRouter

from switchboard.channels.ingest import Throttle
from switchboard.channels.webhook import MetaWebhook, meta_webhook_router
from switchboard.channels.whatsapp.normalize import normalize_delivery

__all__ = ["WHATSAPP_WEBHOOK", "THROTTLE_CODES", "webhook_router"]

THROTTLE_CODES = frozenset({130429, 131056, 80007, 4})
"""Account-level error codes that mean "slow down" (WhatsApp Cloud API error codes: 130429 throughput
reached, 131056 pair rate limit, 80007 and 4 rate limits); the number's sends then wait
``WHATSAPP_THROTTLE_BACKOFF_S``."""

WHATSAPP_WEBHOOK = MetaWebhook(
    channel="whatsapp",
    object_name="whatsapp_business_account",
    normalize=normalize_delivery,
    app_secret=lambda settings: settings.secret("meta_app_secret"),
    verify_token=lambda settings: settings.secret("meta_verify_token"),
    max_body_bytes=lambda settings: settings.whatsapp_max_body_bytes,
    throttle=lambda settings: Throttle(THROTTLE_CODES, settings.whatsapp_throttle_backoff_s),
    description="Deduplicated on the wamid.",
)


def webhook_router() -> APIRouter:
    """The router to mount at ``/webhooks/whatsapp``."""
    return meta_webhook_router(WHATSAPP_WEBHOOK)
