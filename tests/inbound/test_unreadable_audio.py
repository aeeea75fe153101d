"""A voice note in a container the transcription provider refuses: converted to WAV and transcribed;
refused again, the customer is told and a person takes the conversation (offline model server as the
provider, the Graph sandbox serving the media)."""

from __future__ import annotations

import httpx
from sqlmodel import select
from switchboard.db.models import Conversation
from switchboard.standins.offline_server import ScriptedResponse
from switchboard.tenant_settings import AgentSettings

from tests.utils.audio import voice_note
from tests.utils.rows import messages_of
from tests.utils.whatsapp import channel_service, load_payload, new_media_id, sent_to, with_media_id
from tests.utils.workers import run_worker_burst


async def _voice_note_arrives(e2e_settings, ai_tenant, model, graph_sandbox, data: bytes, mime: str):  # type: ignore[no-untyped-def]
    media_id = new_media_id()
    async with httpx.AsyncClient() as http:
        await http.put(
            f"{graph_sandbox[0]}/_control/media/{media_id}", content=data, headers={"content-type": mime}
        )
    settings = e2e_settings(transcription_base_url=model[2]["api_base"].removesuffix("/v1"))
    async with channel_service(settings) as svc:
        await svc.post(
            with_media_id(
                load_payload("audio_voice_note_ogg_opus.json", phone_number_id=ai_tenant.phone_number_id),
                media_id,
            )
        )
    await run_worker_burst(settings)


async def test_a_refused_container_is_converted_to_wav_and_the_agent_reads_the_transcript(
    e2e_settings, ai_tenant, model, sessions, graph_sandbox
) -> None:  # type: ignore[no-untyped-def]
    state, name, _ = model
    state.script(name).default = ScriptedResponse(content="Claro, lo cambio.")
    state.transcription_refuses = {"audio/webm"}
    state.transcriptions.clear()
    try:
        note = voice_note("webm", transcript="quiero cambiar mi pedido")
        await _voice_note_arrives(e2e_settings, ai_tenant, model, graph_sandbox, note, "audio/webm")
    finally:
        state.transcription_refuses = set()
    uploads = [(t["sniffed"], t["refused"]) for t in state.transcriptions]
    assert uploads == [("audio/webm", True), ("audio/wav", False)]
    last = state.script(name).requests[0]["messages"][-1]
    assert last == {"role": "user", "content": '[Audio transcription]: "quiero cambiar mi pedido"'}
    assert [m["text"] for m in sent_to(graph_sandbox[1], ai_tenant.phone_number_id)] == ["Claro, lo cambio."]


async def test_refused_again_as_wav_the_customer_is_told_and_a_person_takes_over(
    e2e_settings, ai_tenant, model, sessions, graph_sandbox
) -> None:  # type: ignore[no-untyped-def]
    state, name, _ = model
    state.transcription_refuses = {"audio/ogg", "audio/wav"}
    state.transcriptions.clear()
    try:
        note = voice_note("ogg", transcript="where is my order")
        await _voice_note_arrives(e2e_settings, ai_tenant, model, graph_sandbox, note, "audio/ogg")
    finally:
        state.transcription_refuses = set()
    assert [(t["sniffed"], t["refused"]) for t in state.transcriptions] == [
        ("audio/ogg", True),
        ("audio/wav", True),
    ]
    assert state.script(name).requests == []  # no model turn on words nobody could read
    reply = AgentSettings().unreadable_audio_reply
    assert [m["text"] for m in sent_to(graph_sandbox[1], ai_tenant.phone_number_id)] == [reply]
    (inbound,) = [m for m in await messages_of(sessions, ai_tenant.tenant.id) if m.direction == "inbound"]
    assert inbound.text == "[Voice message received but could not be read: the audio could not be understood]"
    async with sessions() as session:
        conversation = (
            await session.exec(select(Conversation).where(Conversation.id == inbound.conversation_id))
        ).one()
    assert conversation.status == "human"  # waiting for a person (no agent online: queued)
    assert conversation.queued_at is not None


async def test_audio_that_is_not_decodable_goes_to_a_person_without_a_second_upload(
    e2e_settings, ai_tenant, model, sessions, graph_sandbox
) -> None:  # type: ignore[no-untyped-def]
    state, name, _ = model
    state.transcription_refuses = {"audio/webm"}
    state.transcriptions.clear()
    try:  # a WebM header and nothing a decoder can use: the provider refuses it and so does FFmpeg
        await _voice_note_arrives(
            e2e_settings, ai_tenant, model, graph_sandbox, b"\x1aE\xdf\xa3" + b"\x00" * 512, "audio/webm"
        )
    finally:
        state.transcription_refuses = set()
    assert [t["refused"] for t in state.transcriptions] == [True]
    assert state.script(name).requests == []
    assert [m["text"] for m in sent_to(graph_sandbox[1], ai_tenant.phone_number_id)] == [
        AgentSettings().unreadable_audio_reply
    ]
