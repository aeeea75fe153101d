"""Instagram media: CDN links copied into our storage at ingest (a story whose link dies afterwards is
still read), audio without a MIME type sniffed and uploaded with a real extension, dead and oversized
links as clear outcomes. The model provider is a recording server on loopback; the CDN is the sandbox's."""

from __future__ import annotations

import asyncio
import uuid

import httpx
import pytest
from fastapi import FastAPI, Request
from sqlmodel import select
from switchboard.db.models import Message
from switchboard.media import MediaStore, is_stored
from switchboard.standins.offline_server import ScriptedResponse

from tests.utils.instagram import load_payload, mid, new_igsid
from tests.utils.servers import serve_app
from tests.utils.workers import run_worker_burst

M4A = b"\x00\x00\x00\x18ftypM4A \x00\x00\x02\x00M4A isommp42" + b"\x00" * 64
JPEG = b"\xff\xd8\xff\xe0\x00\x10JFIF" + b"\x00" * 64


@pytest.fixture(scope="module")
def provider():  # type: ignore[no-untyped-def]
    """Stands in for the transcription / vision provider: records uploads, answers OpenAI-shaped JSON."""
    app = FastAPI()
    seen: list[dict] = []

    @app.post("/v1/audio/transcriptions")
    async def transcriptions(request: Request) -> dict:
        form = await request.form()
        upload = form["file"]
        data = await upload.read()  # type: ignore[union-attr]
        seen.append({"filename": upload.filename, "content_type": upload.content_type, "size": len(data)})  # type: ignore[union-attr]
        return {"text": "is the blue one back?"}

    @app.post("/v1/chat/completions")
    async def chat(body: dict) -> dict:
        seen.append({"vision_url_prefix": body["messages"][0]["content"][1]["image_url"]["url"][:23]})
        return {"choices": [{"message": {"role": "assistant", "content": "A blue mug on a shelf."}}]}

    @app.get("/healthz")
    async def healthz() -> dict:
        return {}

    with serve_app(app) as url:
        yield url, seen


def _pointed(body, url):  # type: ignore[no-untyped-def]
    message = body["entry"][0]["messaging"][0]["message"]
    for attachment in message.get("attachments", []):
        attachment["payload"]["url"] = url
    if (message.get("reply_to") or {}).get("story"):
        message["reply_to"]["story"]["url"] = url
    return body


async def _row(sessions, tenant_id, external_id):  # type: ignore[no-untyped-def]
    async with sessions() as session:
        return (
            await session.exec(
                select(Message).where(Message.tenant_id == tenant_id, Message.external_id == external_id)
            )
        ).one()


async def test_an_image_whose_link_dies_right_after_ingest_is_still_read(ig, sessions, provider) -> None:  # type: ignore[no-untyped-def]
    ig.settings = ig.settings.model_copy(update={"vision_base_url": provider[0], "inbound_debounce_s": 1.5})
    ig.script.default = ScriptedResponse(content="That one is back!")
    asset = "img-" + uuid.uuid4().hex
    url = await ig.cdn(asset, JPEG)
    await ig.post(
        _pointed(load_payload("image_attachment.json", account_id=ig.account_id, customer=new_igsid()), url)
    )

    async def expire_once_copied() -> None:  # the CDN link dies as soon as our copy exists
        for _ in range(400):
            row = await _row(sessions, ig.tenant.id, mid(2))
            if is_stored(row.media[0]["ref"]):
                await ig.expire(asset)
                return
            await asyncio.sleep(0.01)
        raise AssertionError("the media was never copied")

    await asyncio.gather(run_worker_burst(ig.settings), expire_once_copied())
    async with httpx.AsyncClient() as client:
        assert (await client.get(url)).status_code == 403  # the link is dead
    row = await _row(sessions, ig.tenant.id, mid(2))
    assert row.text == '[Image description]: "A blue mug on a shelf."'
    assert (row.media[0]["mime"], row.media[0]["size_bytes"], "expiring" in row.media[0]) == (
        "image/jpeg",
        len(JPEG),
        False,
    )
    assert row.media[0]["ref"].endswith(".jpg") and url not in str(row.media)  # the signed link is not kept
    assert await MediaStore.from_settings(ig.settings).get(row.media[0]["ref"]) == JPEG
    assert [m["text"] for m in ig.sent()] == ["That one is back!"]


async def test_a_story_reply_keeps_a_copy_of_the_story_and_tells_the_agent_what_it_answers(
    ig, sessions
) -> None:  # type: ignore[no-untyped-def]
    ig.script.default = ScriptedResponse(content="It's 25 euros.")
    asset = "story-" + uuid.uuid4().hex
    url = await ig.cdn(asset, JPEG)
    await ig.post(
        _pointed(load_payload("story_reply.json", account_id=ig.account_id, customer=new_igsid()), url)
    )
    await run_worker_burst(ig.settings)
    await ig.expire(asset)
    row = await _row(sessions, ig.tenant.id, mid(4))
    assert (
        is_stored(row.media[0]["ref"])
        and await MediaStore.from_settings(ig.settings).get(row.media[0]["ref"]) == JPEG
    )
    (request,) = ig.script.requests
    assert (
        request["messages"][-1]["content"]
        == "[The customer replied to your Instagram story]\nhow much is this? 😍"
    )


async def test_audio_without_a_mime_type_is_sniffed_and_uploaded_as_m4a(ig, sessions, provider) -> None:  # type: ignore[no-untyped-def]
    ig.settings = ig.settings.model_copy(update={"transcription_base_url": provider[0]})
    ig.script.default = ScriptedResponse(content="Yes, the blue one is back.")
    url = await ig.cdn("voice-" + uuid.uuid4().hex, M4A)  # served with no content type, like Instagram's
    await ig.post(
        _pointed(
            load_payload("audio_attachment_voice.json", account_id=ig.account_id, customer=new_igsid()), url
        )
    )
    await run_worker_burst(ig.settings)
    upload = next(u for u in reversed(provider[1]) if u.get("size") == len(M4A))
    assert (upload["filename"], upload["content_type"]) == ("voice.m4a", "audio/mp4")
    row = await _row(sessions, ig.tenant.id, mid(3))
    assert row.text == '[Audio transcription]: "is the blue one back?"'
    assert (row.media[0]["mime"], row.media[0]["ref"].endswith(".m4a"), row.media[0]["voice"]) == (
        "audio/mp4",
        True,
        True,
    )
    assert [m["text"] for m in ig.sent()] == ["Yes, the blue one is back."]


@pytest.mark.parametrize(
    ("size", "expired", "notice"),
    [
        (64, True, "[Image received but could not be read: the link had expired]"),
        (4096, False, "[Image received but could not be read: the file was too large]"),
    ],
)
async def test_a_dead_or_oversized_link_is_a_clear_outcome_and_the_customer_still_gets_an_answer(
    ig, sessions, size, expired, notice
) -> None:  # type: ignore[no-untyped-def]
    ig.settings = ig.settings.model_copy(update={"media_max_bytes": 2048})
    ig.script.default = ScriptedResponse(content="Sorry, could you send it again?")
    asset = "dead-" + uuid.uuid4().hex
    url = await ig.cdn(asset, b"\xff\xd8\xff" + b"\x00" * size)
    if expired:
        await ig.expire(asset)
    await ig.post(
        _pointed(load_payload("image_attachment.json", account_id=ig.account_id, customer=new_igsid()), url)
    )
    await run_worker_burst(ig.settings)
    row = await _row(sessions, ig.tenant.id, mid(2))
    assert (row.text, row.media[0]["unavailable"], row.media[0]["ref"]) == (
        notice,
        "expired" if expired else "too_large",
        "",
    )
    assert [m["text"] for m in ig.sent()] == ["Sorry, could you send it again?"]
