"""Links a provider can fetch our stored media from (sending an image on Instagram is by URL).

``GET {MEDIA_PUBLIC_BASE_URL}/media/{key}?exp=<epoch s>&sig=<hex>``: ``sig`` is HMAC-SHA256 over
``"{key}:{exp}"`` with a key derived from ``SERVICE_TOKEN``, so only links we made are served, and only
until ``exp``. The route is :func:`media_router` (mounted by the services that send media by URL).
"""

from __future__ import annotations

import hashlib
import hmac
import time
from urllib.parse import quote

from fastapi import APIRouter, Query
from fastapi.responses import PlainTextResponse, Response

from switchboard.media.sniff import sniff_mime
from switchboard.media.store import MediaCopyFailed, MediaStore, key_of
from switchboard.settings import Settings

__all__ = ["media_url", "link_is_valid", "link_signature", "media_router", "LINK_TTL_S", "MEDIA_LINKS"]

LINK_TTL_S = 3600
"""How long a link stays valid (Meta fetches an attachment within seconds of the send)."""


MEDIA_LINKS = b"switchboard-media-links"
"""The purpose media links are signed for (another purpose's link never passes as a media link)."""


def link_signature(settings: Settings, key: str, exp: int, *, purpose: bytes = MEDIA_LINKS) -> str:
    """HMAC-SHA256 hex over ``"{key}:{exp}"`` with a key derived from ``SERVICE_TOKEN`` and ``purpose``."""
    secret = hmac.new(settings.secret("service_token").encode(), purpose, hashlib.sha256)
    return hmac.new(secret.digest(), f"{key}:{exp}".encode(), hashlib.sha256).hexdigest()


def _signature(settings: Settings, key: str, exp: int) -> str:
    return link_signature(settings, key, exp)


def media_url(
    settings: Settings, ref: str, *, base_url: str, ttl_s: int = LINK_TTL_S, now: float | None = None
) -> str:
    """A signed link to ``store:<key>`` under ``base_url`` (the service that mounts :func:`media_router`)."""
    key = key_of(ref)
    exp = int((now if now is not None else time.time()) + ttl_s)
    return f"{base_url.rstrip('/')}/media/{quote(key)}?exp={exp}&sig={_signature(settings, key, exp)}"


def link_is_valid(
    settings: Settings,
    key: str,
    exp: int,
    sig: str,
    *,
    now: float | None = None,
    purpose: bytes = MEDIA_LINKS,
) -> bool:
    """Whether ``sig`` is ours for ``key``, ``exp`` and ``purpose`` and ``exp`` has not passed
    (constant-time compare)."""
    if exp < (now if now is not None else time.time()):
        return False
    return hmac.compare_digest(link_signature(settings, key, exp, purpose=purpose), sig)


def media_router(settings: Settings, store: MediaStore) -> APIRouter:
    """``GET /media/{key}``: the stored file behind a signed link; 403 for a bad or expired link."""
    router = APIRouter(tags=["media"])

    @router.get(
        "/media/{key:path}",
        summary="A stored media file behind a signed link",
        description="Serves a copy from media storage to the provider that fetches an attachment we send; "
        "403 when the signature is wrong or `exp` has passed, 404 when the file is gone.",
    )
    async def serve(key: str, exp: int = Query(...), sig: str = Query(...)) -> Response:
        if not link_is_valid(settings, key, exp, sig):
            return PlainTextResponse("Forbidden", status_code=403)
        try:
            data = await store.get(key)
        except MediaCopyFailed:
            return PlainTextResponse("Not found", status_code=404)
        return Response(data, media_type=sniff_mime(data) or "application/octet-stream")

    return router
