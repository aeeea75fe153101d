"""Meta webhook authentication, shared by WhatsApp and Instagram: the ``hub.challenge`` handshake and
``X-Hub-Signature-256``.

Source: Meta "Create a webhook endpoint" (GET ``hub.mode=subscribe&hub.verify_token&hub.challenge``;
every POST carries ``X-Hub-Signature-256: sha256=<hex HMAC-SHA256(app_secret, raw body)>``).
The HMAC is computed over the exact raw bytes (never re-serialized JSON) and compared in constant time.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import httpx

__all__ = ["sign_body", "signature_is_valid", "challenge_response", "post_signed", "SIGNATURE_HEADER"]

SIGNATURE_HEADER = "X-Hub-Signature-256"


def sign_body(body: bytes, app_secret: str) -> str:
    """The header value Meta would send for ``body``: ``"sha256=<64 hex chars>"``."""
    return "sha256=" + hmac.new(app_secret.encode(), body, hashlib.sha256).hexdigest()


def signature_is_valid(body: bytes, header: str | None, app_secret: str) -> bool:
    """``True`` when ``header`` is ``sha256=<hex>`` of ``body`` under ``app_secret`` (constant-time)."""
    if not header or not header.startswith("sha256=") or not app_secret:
        return False
    return hmac.compare_digest(sign_body(body, app_secret).encode(), header.strip().encode())


def challenge_response(
    mode: str | None, token: str | None, challenge: str | None, verify_token: str
) -> str | None:
    """The body to answer the subscription handshake with, or ``None`` to refuse it (403).

    Args:
        mode: ``hub.mode``; must be ``subscribe``.
        token: ``hub.verify_token``; must equal ``verify_token`` (constant-time).
        challenge: ``hub.challenge``; echoed back as is.
    """
    if mode != "subscribe" or not token or not challenge or not verify_token:
        return None
    if not hmac.compare_digest(token.encode(), verify_token.encode()):
        return None
    return challenge


async def post_signed(client: httpx.AsyncClient, url: str, raw: bytes, app_secret: str) -> httpx.Response:
    """POST ``raw`` to ``url`` with ``X-Hub-Signature-256`` as Meta would sign it (``simulate``, load tests)."""
    return await client.post(
        url,
        content=raw,
        headers={"Content-Type": "application/json", SIGNATURE_HEADER: sign_body(raw, app_secret)},
    )
