"""Signing a delivery: HMAC-SHA256 over the timestamp and the raw body, with the endpoint's secret.

Headers of every delivery (docs/integrations.md#event-webhooks has a Python check a receiver can copy):

* ``X-Switchboard-Event``: the event type; ``X-Switchboard-Delivery``: the event id (retries repeat it);
* ``X-Switchboard-Timestamp``: Unix seconds when this attempt was signed;
* ``X-Switchboard-Signature``: ``v1=<hex HMAC-SHA256(secret, "<timestamp>.<raw body>")>``.

Binding the timestamp into the MAC is what makes the timestamp worth checking: a receiver refuses a
signature older than a few minutes (:data:`DEFAULT_TOLERANCE_S`), so a captured delivery cannot be
replayed later, and cannot be re-stamped without the secret. Compare with ``hmac.compare_digest``.

An endpoint may choose the Standard Webhooks scheme instead (``signature_scheme = "standard"``,
standardwebhooks.com), so a receiver verifies with that project's libraries:

* ``webhook-id``: the event id (retries repeat it); ``webhook-timestamp``: Unix seconds;
* ``webhook-signature``: ``v1,<base64 HMAC-SHA256(key, "<id>.<timestamp>.<raw body>")>``, the key being
  the secret after ``whsec_``, base64-decoded.

While a secret is being rotated both the new and the previous secret sign, each signature separated
by a space (``v1=<hex> v1=<hex>``; ``v1,<b64> v1,<b64>``): a receiver accepts the delivery when one of
them matches the secret it holds, so it can switch to the new secret at any moment of the overlap.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from typing import Literal

__all__ = [
    "DEFAULT_TOLERANCE_S",
    "EVENT_HEADER",
    "DELIVERY_HEADER",
    "SIGNATURE_HEADER",
    "TIMESTAMP_HEADER",
    "SCHEMES",
    "STANDARD_ID_HEADER",
    "STANDARD_SIGNATURE_HEADER",
    "STANDARD_TIMESTAMP_HEADER",
    "Scheme",
    "sign",
    "sign_standard",
    "signature_headers",
    "verify",
    "verify_standard",
]

Scheme = Literal["switchboard", "standard"]
SCHEMES: tuple[str, ...] = ("switchboard", "standard")
STANDARD_ID_HEADER = "webhook-id"
STANDARD_TIMESTAMP_HEADER = "webhook-timestamp"
STANDARD_SIGNATURE_HEADER = "webhook-signature"

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


def _fresh(timestamp: str, tolerance_s: int, now: float | None) -> bool:
    if not timestamp.isdigit():
        return False
    return abs((now if now is not None else time.time()) - int(timestamp)) <= tolerance_s


def verify(
    secret: str,
    body: bytes,
    *,
    timestamp: str,
    signature: str,
    tolerance_s: int = DEFAULT_TOLERANCE_S,
    now: float | None = None,
) -> bool:
    """Whether one of the space-separated signatures in ``signature`` is ours for ``body`` at
    ``timestamp``, not older than ``tolerance_s``."""
    if not _fresh(timestamp, tolerance_s, now):
        return False
    expected = sign(secret, int(timestamp), body)
    return any(hmac.compare_digest(expected, candidate) for candidate in signature.split(" ") if candidate)


def _standard_key(secret: str) -> bytes:
    # as the Standard Webhooks libraries read a secret: after ``whsec_``, base64 (padding optional)
    return base64.b64decode(secret.removeprefix("whsec_") + "==")


def sign_standard(secret: str, message_id: str, timestamp: int, body: bytes) -> str:
    """``v1,<base64>``: HMAC-SHA256 with the secret's key of ``b"<id>.<timestamp>." + body``."""
    mac = hmac.new(_standard_key(secret), f"{message_id}.{timestamp}.".encode() + body, hashlib.sha256)
    return "v1," + base64.b64encode(mac.digest()).decode()


def verify_standard(
    secret: str,
    body: bytes,
    *,
    message_id: str,
    timestamp: str,
    signature: str,
    tolerance_s: int = DEFAULT_TOLERANCE_S,
    now: float | None = None,
) -> bool:
    """Whether one of the space-separated ``v1,`` signatures is ours (a receiver without the library)."""
    if not _fresh(timestamp, tolerance_s, now):
        return False
    expected = sign_standard(secret, message_id, int(timestamp), body)
    return any(hmac.compare_digest(expected, candidate) for candidate in signature.split(" ") if candidate)


def signature_headers(
    scheme: str, secrets: list[str], *, event_id: str, event_type: str, timestamp: int, body: bytes
) -> dict[str, str]:
    """The signing headers of one attempt: ``secrets`` is the current secret first, then the previous
    one while a rotation overlaps (each signs). The event type and id go along in both schemes."""
    headers = {EVENT_HEADER: event_type, DELIVERY_HEADER: event_id}
    if scheme == "standard":
        headers[STANDARD_ID_HEADER] = event_id
        headers[STANDARD_TIMESTAMP_HEADER] = str(timestamp)
        headers[STANDARD_SIGNATURE_HEADER] = " ".join(
            sign_standard(s, event_id, timestamp, body) for s in secrets
        )
    else:
        headers[TIMESTAMP_HEADER] = str(timestamp)
        headers[SIGNATURE_HEADER] = " ".join(sign(s, timestamp, body) for s in secrets)
    return headers
