"""Signing a delivery: HMAC-SHA256 over the timestamp and the raw body, with the endpoint's secret.

Headers of every delivery (docs/integrations.md#event-webhooks has a Python check a receiver can copy):

* ``X-Switchboard-Event``: the event type; ``X-Switchboard-Delivery``: the event id (retries repeat it);
* ``X-Switchboard-Timestamp``: Unix seconds when this attempt was signed;
* ``X-Switchboard-Signature``: ``v1=<hex HMAC-SHA256(secret, "<timestamp>.<raw body>")>``.

Binding the timestamp into the MAC is what makes the timestamp worth checking: a receiver refuses a
signature older than a few minutes (:data:`DEFAULT_TOLERANCE_S`), so a captured delivery cannot be
replayed later, and cannot be re-stamped without the secret. Compare with ``hmac.compare_digest``.
"""

from __future__ import annotations

import hashlib
import hmac
import time

__all__ = [
    "DEFAULT_TOLERANCE_S",
    "EVENT_HEADER",
    "DELIVERY_HEADER",
    "SIGNATURE_HEADER",
    "TIMESTAMP_HEADER",
    "sign",
    "verify",
]

EVENT_HEADER = "X-Switchboard-Event"
DELIVERY_HEADER = "X-Switchboard-Delivery"
TIMESTAMP_HEADER = "X-Switchboard-Timestamp"
SIGNATURE_HEADER = "X-Switchboard-Signature"
DEFAULT_TOLERANCE_S = 300
"""How old a signature a receiver should still accept, seconds."""


def sign(secret: str, timestamp: int, body: bytes) -> str:
    """``v1=<hex>``: HMAC-SHA256 with ``secret`` of ``b"<timestamp>." + body``."""
    mac = hmac.new(secret.encode(), str(timestamp).encode() + b"." + body, hashlib.sha256)
    return "v1=" + mac.hexdigest()


def verify(
    secret: str, body: bytes, *, timestamp: str, signature: str, tolerance_s: int = DEFAULT_TOLERANCE_S,
    now: float | None = None,
) -> bool:  # fmt: skip
    """Whether ``signature`` is ours for ``body`` at ``timestamp`` and not older than ``tolerance_s``."""
    if not timestamp.isdigit():
        return False
    if abs((now if now is not None else time.time()) - int(timestamp)) > tolerance_s:
        return False
    return hmac.compare_digest(sign(secret, int(timestamp), body), signature)
