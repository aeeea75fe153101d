"""Transcription and vision: ``OPENAI_API_KEY`` goes only to OpenAI's own endpoint, never to another
``TRANSCRIPTION_BASE_URL`` / ``VISION_BASE_URL`` (a recording listener stands in for that server)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from functools import partial

import httpx
import pytest
from obstore.store import MemoryStore
from switchboard.channels.base import ChannelDeps
from switchboard.channels.whatsapp.channel import WhatsAppChannel
from switchboard.channels.whatsapp.send import GraphClient
from switchboard.db.models import ChannelAccount
from switchboard.inbound.media import MAX_MEDIA_BYTES, OPENAI_ROOT, _endpoint, media_to_text
from switchboard.media import MediaStore

from tests.utils.key_listener import KeyListener, key_listener
from tests.utils.whatsapp import new_media_id

PLATFORM_OPENAI = "sk-platform-openai-canary-m3d1"
OGG = b"OggS\x00\x02fake-opus-voice-note"
JPEG = b"\xff\xd8\xff\xe0fake-jpeg"


@pytest.fixture
async def listener() -> AsyncIterator[KeyListener]:
    async with key_listener() as recording:
        yield recording


async def _media_text(graph_base: str, settings, kind: str, data: bytes, mime: str) -> str:  # type: ignore[no-untyped-def]
    media_id = new_media_id()
    async with httpx.AsyncClient() as http:
        await http.put(
            f"{graph_base}/_control/media/{media_id}", content=data, headers={"content-type": mime}
        )
        graph = GraphClient(graph_base, "v23.0")
        channel = WhatsAppChannel(
            ChannelDeps(
                settings=None,
                cipher=None,
                http=None,
                extra={
                    "whatsapp_graph": graph,
                    "media_store": MediaStore(MemoryStore(), max_bytes=MAX_MEDIA_BYTES),
                },
            )
        )  # type: ignore[arg-type]
        account = ChannelAccount(tenant_id=uuid.uuid4(), channel="whatsapp", external_account_id="1")
        try:
            return await media_to_text(
                kind=kind,
                media=[{"ref": media_id, "mime": mime}],
                caption="",
                fetch=partial(channel.fetch_media, account, max_bytes=MAX_MEDIA_BYTES),
                http=http,
                settings=settings,
            )
        finally:
            await graph.aclose()


@pytest.mark.parametrize(
    ("kind", "data", "mime"), [("audio", OGG, "audio/ogg"), ("image", JPEG, "image/jpeg")]
)
async def test_the_platform_key_never_goes_to_another_media_endpoint(
    graph_sandbox, make_settings, listener, kind, data, mime
):
    settings = make_settings(
        openai_api_key=PLATFORM_OPENAI,
        tenants_may_use_platform_keys=True,
        transcription_base_url=listener.url,
        vision_base_url=listener.url,
    )
    text = await _media_text(graph_sandbox[0], settings, kind, data, mime)
    assert "listener transcription" in text or "Listener answer." in text  # the listener answered
    assert listener.seen and not listener.carried(PLATFORM_OPENAI), listener.seen
    assert listener.credentials() == []


def test_the_platform_key_goes_to_openais_own_endpoint(make_settings):
    settings = make_settings(openai_api_key=PLATFORM_OPENAI)
    for override in (None, "https://api.openai.com", "https://API.openai.com/"):
        base, headers = _endpoint(settings, override, what="transcription")
        assert headers == {"Authorization": f"Bearer {PLATFORM_OPENAI}"}
        assert base.lower().rstrip("/") == OPENAI_ROOT
    for override in ("http://127.0.0.1:9", "https://api.openai.com.example", "https://x@api.openai.com"):
        assert _endpoint(settings, override, what="vision")[1] == {}
