"""Media storage (channel-neutral): sniffing containers from bytes, content-addressed copies with real
extensions and size limits, downloads whose links die, signed links."""

from __future__ import annotations

import httpx
import pytest
from fastapi import FastAPI, Response
from obstore.store import MemoryStore
from switchboard.media import MediaCopyFailed, MediaStore, extension_for, sniff_mime
from switchboard.media.links import link_is_valid, media_router, media_url

from tests.utils.servers import serve_app

SAMPLES = {
    "m4a": (b"\x00\x00\x00\x1cftypM4A \x00\x00\x02\x00M4A mp42isom", "audio/mp4", ".m4a"),
    "mp4-as-audio": (b"\x00\x00\x00\x18ftypmp42\x00\x00\x00\x00mp42isom", "audio/mp4", ".m4a"),
    "mp4-video": (b"\x00\x00\x00\x18ftypisom\x00\x00\x02\x00isomiso2", "video/mp4", ".mp4"),
    "ogg": (b"OggS\x00\x02\x00\x00\x00\x00\x00\x00\x00\x00OpusHead", "audio/ogg", ".ogg"),
    "webm": (b"\x1a\x45\xdf\xa3\x9f\x42\x86\x81\x01", "audio/webm", ".webm"),
    "mp3": (b"ID3\x04\x00\x00\x00\x00\x00\x00", "audio/mpeg", ".mp3"),
    "wav": (b"RIFF\x24\x00\x00\x00WAVEfmt ", "audio/wav", ".wav"),
    "amr": (b"#!AMR\n\x3c", "audio/amr", ".amr"),
    "jpeg": (b"\xff\xd8\xff\xe0\x00\x10JFIF", "image/jpeg", ".jpg"),
    "png": (b"\x89PNG\r\n\x1a\n\x00\x00", "image/png", ".png"),
    "webp": (b"RIFF\x24\x00\x00\x00WEBPVP8 ", "image/webp", ".webp"),
}


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_containers_are_sniffed_and_named_with_a_real_extension(name: str) -> None:
    data, mime, ext = SAMPLES[name]
    kind = "audio" if mime.startswith("audio/") else None
    assert sniff_mime(data, kind=kind) == mime and extension_for(mime) == ext


def test_unknown_bytes_have_no_type() -> None:
    assert (sniff_mime(b"hello world"), extension_for(None)) == (None, ".bin")


async def test_copies_are_content_addressed_and_size_limited() -> None:
    store = MediaStore(MemoryStore(), max_bytes=64)
    data = SAMPLES["m4a"][0]
    first = await store.put(data, namespace="instagram/t1", kind="audio")
    again = await store.put(data, namespace="instagram/t1", kind="audio")
    assert first == again and first.key.endswith(".m4a") and first.mime == "audio/mp4"
    assert await store.get(first.ref) == data
    with pytest.raises(MediaCopyFailed) as big:
        await store.put(b"x" * 65, namespace="instagram/t1")
    with pytest.raises(MediaCopyFailed) as missing:
        await store.get("store:instagram/t1/none.bin")
    assert (big.value.reason, big.value.is_transient, missing.value.reason) == ("too_large", False, "missing")


@pytest.fixture(scope="module")
def cdn():  # type: ignore[no-untyped-def]
    app = FastAPI()

    @app.get("/ok")
    async def ok() -> Response:
        return Response(SAMPLES["jpeg"][0])  # no content type

    @app.get("/big")
    async def big() -> Response:
        return Response(b"\xff\xd8\xff" + b"\x00" * 5000, media_type="image/jpeg")

    @app.get("/dead")
    async def dead() -> Response:
        return Response("URL signature expired", status_code=403)

    @app.get("/down")
    async def down() -> Response:
        return Response("oops", status_code=502)

    with serve_app(app) as url:
        yield url


@pytest.mark.parametrize(
    ("path", "reason", "transient"),
    [
        ("/big", "too_large", False),
        ("/dead", "expired", False),
        ("/down", "http_502", True),
    ],
)
async def test_downloads_that_fail_say_why(cdn, path, reason, transient) -> None:  # type: ignore[no-untyped-def]
    store = MediaStore(MemoryStore(), max_bytes=1024)
    async with httpx.AsyncClient() as http:
        with pytest.raises(MediaCopyFailed) as failed:
            await store.copy_url(http, cdn + path, namespace="x")
    assert (failed.value.reason, failed.value.is_transient) == (reason, transient)


async def test_a_download_is_stored_with_its_sniffed_type(cdn) -> None:  # type: ignore[no-untyped-def]
    store = MediaStore(MemoryStore(), max_bytes=1024)
    async with httpx.AsyncClient() as http:
        stored = await store.copy_url(http, cdn + "/ok", namespace="instagram/t2")
    assert (stored.mime, stored.key.endswith(".jpg"), await store.get(stored.ref)) == (
        "image/jpeg",
        True,
        SAMPLES["jpeg"][0],
    )


async def test_signed_links_serve_only_our_files_until_they_expire(make_settings) -> None:  # type: ignore[no-untyped-def]
    settings = make_settings()
    store = MediaStore(MemoryStore(), max_bytes=1024)
    stored = await store.put(SAMPLES["png"][0], namespace="instagram/t3")
    url = media_url(settings, stored.ref, base_url="http://media.test")
    app = FastAPI()
    app.include_router(media_router(settings, store))
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://media.test"
    ) as client:
        ok = await client.get(url)
        forged = await client.get(url.replace("sig=", "sig=0"))
    assert (ok.status_code, ok.content, ok.headers["content-type"]) == (200, SAMPLES["png"][0], "image/png")
    assert forged.status_code == 403
    key, exp = stored.key, int(url.split("exp=")[1].split("&")[0])
    sig = url.split("sig=")[1]
    assert link_is_valid(settings, key, exp, sig) and not link_is_valid(settings, key, exp, sig, now=exp + 1)
