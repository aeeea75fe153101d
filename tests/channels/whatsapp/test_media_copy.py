"""WhatsApp media are copied to our storage when they arrive: the console and later turns read our copy
after Meta (the Graph sandbox) has forgotten the media id; a dead id is a notice, a 5xx a retry."""

from __future__ import annotations

import hashlib

import httpx
import pytest
from arq.jobs import Job
from obstore.store import MemoryStore
from sqlmodel import select
from switchboard.channels.base import ChannelDeps, OutboundPart
from switchboard.channels.whatsapp.channel import WhatsAppChannel
from switchboard.crypto import CredentialCipher
from switchboard.db.models import Message, Role
from switchboard.media import MediaStore, key_of
from switchboard.queue.keys import copy_media_job_id
from switchboard.standins.faults import Fault
from switchboard.standins.offline_server import ScriptedResponse

from services.console.main import create_app as create_console
from tests.utils.console import log_in, new_user
from tests.utils.whatsapp import channel_service, load_payload, new_media_id, with_media_id
from tests.utils.workers import run_worker_burst

OGG = b"OggS\x00\x02\x00\x00SWITCHBOARD-TRANSCRIPT: where is my order"
JPEG = b"\xff\xd8\xff\xe0\x00\x10JFIF" + b"\x00" * 48
PDF = b"%PDF-1.4\n% an invoice\n" + b"0" * 48


async def _arrive(e2e_settings, ai_tenant, model, graph_sandbox, payload, data, mime, **overrides):  # type: ignore[no-untyped-def]
    """The sandbox holds ``data`` under a new media id, the customer's message with it arrives, the
    chat worker runs until its queue is empty. Returns ``(settings, media id, stored row)``."""
    media_id = new_media_id()
    if data is not None:
        async with httpx.AsyncClient() as http:
            await http.put(
                f"{graph_sandbox[0]}/_control/media/{media_id}", content=data, headers={"content-type": mime}
            )
    offline = model[2]["api_base"].removesuffix("/v1")
    settings = e2e_settings(transcription_base_url=offline, vision_base_url=offline, **overrides)
    body = with_media_id(load_payload(payload, phone_number_id=ai_tenant.phone_number_id), media_id)
    async with channel_service(settings) as svc:
        assert (await svc.post(body)).status_code == 200
    await run_worker_burst(settings)
    return settings, media_id, body


async def _row(sessions, tenant_id, body):  # type: ignore[no-untyped-def]
    external_id = body["entry"][0]["changes"][0]["value"]["messages"][0]["id"]
    async with sessions() as session:
        return (
            await session.exec(
                select(Message).where(Message.tenant_id == tenant_id, Message.external_id == external_id)
            )
        ).one()


@pytest.mark.parametrize(
    ("payload", "data", "mime"),
    [
        ("image_with_caption.json", JPEG, "image/jpeg"),
        ("audio_voice_note_ogg_opus.json", OGG, "audio/ogg"),
        ("document_pdf.json", PDF, "application/pdf"),
    ],
)
async def test_media_are_copied_at_arrival_and_the_console_serves_our_copy_after_meta_forgets_the_id(
    e2e_settings, ai_tenant, model, graph_sandbox, sessions, payload, data, mime
) -> None:  # type: ignore[no-untyped-def]
    state, name, _ = model
    state.script(name).default = ScriptedResponse(content="Thanks, I have it.")
    settings, media_id, body = await _arrive(
        e2e_settings, ai_tenant, model, graph_sandbox, payload, data, mime
    )
    row = await _row(sessions, ai_tenant.tenant.id, body)
    ref = row.media[0]["ref"]
    assert ref.startswith(f"store:whatsapp/{ai_tenant.tenant.id}/")
    assert (row.media[0]["size_bytes"], row.media[0]["mime"], "expiring" in row.media[0]) == (
        len(data),
        mime,
        False,
    )
    assert await MediaStore.from_settings(settings).get(ref) == data
    assert key_of(ref).split("/")[-1].startswith(hashlib.sha256(data).hexdigest())

    graph_sandbox[1].media.pop(media_id)  # Meta no longer knows the id
    user = await new_user(sessions, role=Role.agent, tenant_id=ai_tenant.tenant.id)
    console = create_console(settings)
    async with (
        console.router.lifespan_context(console),
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=console, client=("10.9.8.7", 40000)),
            base_url="http://console.test",
            headers={"Accept": "text/html"},
        ) as client,
    ):
        await log_in(client, user)
        served = await client.get(f"/t/{ai_tenant.tenant.slug}/messages/{row.id}/media/0")
    assert (served.status_code, served.content) == (200, data)


async def test_a_dead_media_id_is_recorded_unavailable_and_the_agent_reads_a_notice(
    e2e_settings, ai_tenant, model, graph_sandbox, sessions
) -> None:  # type: ignore[no-untyped-def]
    state, name, _ = model
    state.script(name).default = ScriptedResponse(content="Could you send the photo again?")
    _, _, body = await _arrive(
        e2e_settings, ai_tenant, model, graph_sandbox, "image_with_caption.json", None, None
    )
    row = await _row(sessions, ai_tenant.tenant.id, body)
    assert (row.media[0]["ref"], row.media[0]["unavailable"]) == ("", "expired")
    last = state.script(name).requests[0]["messages"][-1]["content"]
    assert last.endswith("[Image received but could not be read: the link had expired]")
    assert [m["text"] for m in graph_sandbox[1].sent_by(ai_tenant.phone_number_id)] == [
        "Could you send the photo again?"
    ]


async def test_a_5xx_on_the_media_lookup_is_retried_and_the_file_still_copied(
    e2e_settings, ai_tenant, model, graph_sandbox, sessions, arq_pool
) -> None:  # type: ignore[no-untyped-def]
    state, name, _ = model
    state.script(name).default = ScriptedResponse(content="Got it.")
    media_id = new_media_id()
    graph_sandbox[1].script_media(Fault(http_status=503, code=2), media_id=media_id)
    async with httpx.AsyncClient() as http:
        await http.put(
            f"{graph_sandbox[0]}/_control/media/{media_id}",
            content=PDF,
            headers={"content-type": "application/pdf"},
        )
    offline = model[2]["api_base"].removesuffix("/v1")
    # the customer's turn waits longer than the copy's first retry: the 503 is the copy job's
    settings = e2e_settings(transcription_base_url=offline, vision_base_url=offline, inbound_debounce_s=6.0)
    body = with_media_id(
        load_payload("document_pdf.json", phone_number_id=ai_tenant.phone_number_id), media_id
    )
    async with channel_service(settings) as svc:
        assert (await svc.post(body)).status_code == 200
    await run_worker_burst(settings)
    row = await _row(sessions, ai_tenant.tenant.id, body)
    result = await Job(copy_media_job_id(row.id), arq_pool).result_info()
    assert result is not None and (result.job_try, result.result) == (2, {"copied": 1, "failed": 0})
    assert row.media[0]["ref"].startswith("store:") and "unavailable" not in row.media[0]


async def test_our_copy_relayed_on_whatsapp_is_uploaded_to_the_number_and_sent_by_its_new_id(
    graph_sandbox, make_settings, wa_tenant
) -> None:  # type: ignore[no-untyped-def]
    settings = make_settings()
    store = MediaStore(MemoryStore(), max_bytes=settings.media_max_bytes)
    stored = await store.put(JPEG, namespace=f"whatsapp/{wa_tenant.tenant.id}", mime="image/jpeg")
    channel = WhatsAppChannel(
        ChannelDeps(
            settings=settings,
            cipher=CredentialCipher(settings.secret("encryption_key").encode()),
            http=None,
            extra={"media_store": store},
        )  # type: ignore[arg-type]
    )
    try:
        await channel.send(
            wa_tenant.account,
            "5511999990000",
            OutboundPart(type="media", media=({"ref": stored.ref, "mime": "image/jpeg"},)),
            correlation_id="relay-1",
        )
    finally:
        await channel.aclose()
    sent = graph_sandbox[1].sent_by(wa_tenant.phone_number_id)[-1]["body"]
    media_id = sent["image"]["id"]
    assert media_id != stored.ref and graph_sandbox[1].media[media_id] == (JPEG, "image/jpeg")
