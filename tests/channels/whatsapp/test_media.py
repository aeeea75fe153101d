"""Media → text: Graph media download (sandbox) + an OpenAI-shaped provider on loopback."""

from __future__ import annotations

import uuid
from functools import partial

import httpx
import pytest
from fastapi import FastAPI, Request
from obstore.store import MemoryStore
from switchboard.channels.base import ChannelDeps
from switchboard.channels.whatsapp.channel import WhatsAppChannel
from switchboard.channels.whatsapp.send import GraphClient
from switchboard.db.models import ChannelAccount
from switchboard.inbound.media import (
    MAX_MEDIA_BYTES,
    MediaUnavailable,
    media_to_text,
    safe_filename,
    upload_name,
)
from switchboard.media import MediaStore

from tests.utils.servers import serve_app
from tests.utils.whatsapp import new_media_id


def _fetcher(graph: GraphClient):  # type: ignore[no-untyped-def]
    """The WhatsApp channel's media download through ``graph`` (the sandbox), as the inbound step calls it."""
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
    return partial(channel.fetch_media, account, max_bytes=MAX_MEDIA_BYTES)


OGG = b"OggS\x00\x02fake-opus-voice-note"
JPEG = b"\xff\xd8\xff\xe0fake-jpeg"


@pytest.fixture(scope="module")
def provider() -> tuple[str, list[dict]]:
    """Stands in for the model provider (external): records uploads, answers OpenAI-shaped JSON."""
    app = FastAPI()
    seen: list[dict] = []

    @app.post("/v1/audio/transcriptions")
    async def transcriptions(request: Request) -> dict:
        form = await request.form()
        upload = form["file"]
        data = await upload.read()  # type: ignore[union-attr]
        seen.append(
            {
                "filename": upload.filename,
                "content_type": upload.content_type,
                "model": form["model"],
                "size": len(data),
            }
        )  # type: ignore[union-attr]
        return {"text": "Hola, mi pedido llegó roto"}

    @app.post("/v1/chat/completions")
    async def chat(body: dict) -> dict:
        part = body["messages"][0]["content"][1]["image_url"]["url"]
        seen.append({"vision_url_prefix": part[:24], "model": body["model"]})
        return {"choices": [{"message": {"role": "assistant", "content": "A mug with a cracked handle."}}]}

    @app.get("/healthz")
    async def healthz() -> dict:
        return {}

    with serve_app(app) as url:
        yield url, seen


async def _put_media(base: str, media_id: str, data: bytes, mime: str) -> None:
    async with httpx.AsyncClient() as http:
        await http.put(f"{base}/_control/media/{media_id}", content=data, headers={"content-type": mime})


async def test_voice_note_is_downloaded_and_transcribed(graph_sandbox, provider, make_settings) -> None:  # type: ignore[no-untyped-def]
    base, _ = graph_sandbox
    media_id = new_media_id()  # the sandbox's media store is the session's: an id of this test's own
    await _put_media(base, media_id, OGG, "audio/ogg")
    settings = make_settings(transcription_base_url=provider[0], vision_base_url=provider[0])
    graph = GraphClient(base, "v23.0")
    async with httpx.AsyncClient() as http:
        text = await media_to_text(
            kind="audio",
            media=[{"ref": media_id, "mime": "audio/ogg", "voice": True}],
            caption="",
            fetch=_fetcher(graph),
            http=http,
            settings=settings,
        )
    await graph.aclose()
    assert text == '[Audio transcription]: "Hola, mi pedido llegó roto"'
    upload = provider[1][-1]
    assert (upload["filename"], upload["content_type"], upload["size"]) == (
        "voice.ogg",
        "audio/ogg",
        len(OGG),
    )
    assert upload["model"] == "gpt-transcribe"


async def test_image_caption_then_description(graph_sandbox, provider, make_settings) -> None:  # type: ignore[no-untyped-def]
    base, _ = graph_sandbox
    media_id = new_media_id()
    await _put_media(base, media_id, JPEG, "image/jpeg")
    settings = make_settings(transcription_base_url=provider[0], vision_base_url=provider[0])
    graph = GraphClient(base, "v23.0")
    async with httpx.AsyncClient() as http:
        text = await media_to_text(
            kind="image",
            media=[{"ref": media_id, "mime": "image/jpeg"}],
            caption="This arrived broken 😞",
            fetch=_fetcher(graph),
            http=http,
            settings=settings,
        )
        expired = await media_to_text(
            kind="image",
            media=[{"ref": new_media_id()}],  # never stored: expired
            caption="",
            fetch=_fetcher(graph),
            http=http,
            settings=settings,
        )
    await graph.aclose()
    assert text == 'This arrived broken 😞\n[Image description]: "A mug with a cracked handle."'
    assert provider[1][-1]["vision_url_prefix"] == "data:image/jpeg;base64,/"
    assert expired == "[Image received but could not be read: the link had expired]"


async def test_provider_down_is_transient(graph_sandbox, make_settings) -> None:  # type: ignore[no-untyped-def]
    base, _ = graph_sandbox
    media_id = new_media_id()
    await _put_media(base, media_id, OGG, "audio/ogg")
    settings = make_settings(transcription_base_url="http://127.0.0.1:1")
    graph = GraphClient(base, "v23.0")
    async with httpx.AsyncClient() as http:
        with pytest.raises(MediaUnavailable) as info:
            await media_to_text(
                kind="audio",
                media=[{"ref": media_id}],
                caption="",
                fetch=_fetcher(graph),
                http=http,
                settings=settings,
            )
    await graph.aclose()
    assert info.value.is_transient


async def test_an_expiring_link_dead_before_our_copy_is_retried(graph_sandbox, make_settings) -> None:  # type: ignore[no-untyped-def]
    """Instagram's CDN link can die between ingest and the copy job: the turn waits for the copy (a retry)
    instead of telling the customer their image could not be read."""
    base, _ = graph_sandbox
    graph = GraphClient(base, "v23.0")
    dead = new_media_id()  # never stored: the sandbox answers as for an expired link
    async with httpx.AsyncClient() as http:
        with pytest.raises(MediaUnavailable) as info:
            await media_to_text(
                kind="image",
                media=[{"ref": dead, "mime": "image/jpeg", "expiring": True}],
                caption="",
                fetch=_fetcher(graph),
                http=http,
                settings=make_settings(),
            )
        settled = await media_to_text(  # once the copy job gave its verdict, the notice is given
            kind="image",
            media=[{"ref": "", "unavailable": "expired"}],
            caption="",
            fetch=_fetcher(graph),
            http=http,
            settings=make_settings(),
        )
    await graph.aclose()
    assert info.value.is_transient and "copy of the expiring link is still pending" in str(info.value)
    assert settled == "[Image received but could not be read: the link had expired]"


async def test_document_and_names() -> None:
    text = await media_to_text(
        kind="document",
        media=[{"ref": "1", "mime": "application/pdf", "filename": "Receipt #1042 (copy).pdf"}],
        caption="my receipt",
        fetch=None,
        http=None,
        settings=None,  # type: ignore[arg-type]
    )
    assert text == "my receipt\n[Document received: Receipt #1042 (copy).pdf]"
    assert safe_filename("Receipt #1042 (copy).pdf") == "Receipt _1042 _copy_.pdf"
    assert upload_name("audio/ogg; codecs=opus") == ("voice.ogg", "audio/ogg")
