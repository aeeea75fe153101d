"""``/webhooks/instagram``: Instagram's :class:`~switchboard.channels.webhook.MetaWebhook` spec.

The route (handshake, signature, 413/401/403/200/503 outcomes, durable insert, dedupe on the ``mid``)
is the one shared by the Meta channels (:mod:`switchboard.channels.webhook`). What is Instagram's: the
``object`` (``instagram``), the normalizer, and the app secret: ``INSTAGRAM_APP_SECRET``, which may
differ from the WhatsApp app's (an Instagram-Login app has its own secret, Meta's Instagram Login docs). Rate
limits come back on send answers only (codes 4, 17, 32, 613), never as webhook events, so there is
no webhook throttle.
"""

from __future__ import annotations

from fastapi import APIRouter

from switchboard.channels.instagram.normalize import normalize_delivery
from switchboard.channels.webhook import MetaWebhook, meta_webhook_router

__all__ = ["INSTAGRAM_WEBHOOK", "webhook_router"]

INSTAGRAM_WEBHOOK = MetaWebhook(
    channel="instagram",
    object_name="instagram",
    normalize=normalize_delivery,
    app_secret=lambda settings: settings.secret("instagram_app_secret"),
    verify_token=lambda settings: settings.secret("meta_verify_token"),
    max_body_bytes=lambda settings: settings.instagram_max_body_bytes,
    description="Object `instagram`, `entry[].messaging[]` / `standby[]` / `changes[]`; deduplicated on the "
    "mid. Echoes of our own sends are recorded on their outbox row; media links are copied at once.",
)


def webhook_router() -> APIRouter:
    """The router to mount at ``/webhooks/instagram``."""
    return meta_webhook_router(INSTAGRAM_WEBHOOK)
