"""A voice note and an image sent together are answered in one turn that reads both, even when the
voice note's own job has claimed it and not yet stepped aside when the image's turn starts."""

from __future__ import annotations

import asyncio

import httpx
from sqlalchemy import update
from sqlmodel import col
from switchboard.db.models import Message
from switchboard.queue import Queue
from switchboard.queue.keys import inbound_job_id
from switchboard.standins.offline_server import ScriptedResponse

from tests.utils.rows import messages_of
from tests.utils.whatsapp import channel_service, load_payload, new_media_id, sent_to, with_media_id
from tests.utils.workers import run_worker_burst


async def test_the_image_turn_waits_for_the_voice_note_job_that_claimed_it_first(
    e2e_settings, ai_tenant, model, sessions, graph_sandbox, arq_pool
) -> None:  # type: ignore[no-untyped-def]
    state, name, _ = model
    state.script(name).default = ScriptedResponse(content="Both noted.")
    pid = ai_tenant.phone_number_id
    audio_id, image_id = new_media_id(), new_media_id()
    async with httpx.AsyncClient() as http:
        await http.put(
            f"{graph_sandbox[0]}/_control/media/{audio_id}",
            content=b"SWITCHBOARD-TRANSCRIPT: it arrived like this",
            headers={"content-type": "audio/ogg"},
        )
        await http.put(
            f"{graph_sandbox[0]}/_control/media/{image_id}",
            content=b"\xff\xd8\xffjpeg",
            headers={"content-type": "image/jpeg"},
        )
    offline = model[2]["api_base"].removesuffix("/v1")
    settings = e2e_settings(transcription_base_url=offline, vision_base_url=offline)
    async with channel_service(settings) as svc:
        await svc.post(
            with_media_id(load_payload("audio_voice_note_ogg_opus.json", phone_number_id=pid), audio_id)
        )
        await svc.post(with_media_id(load_payload("image_with_caption.json", phone_number_id=pid), image_id))
    voice, image = await messages_of(sessions, ai_tenant.tenant.id)
    assert (voice.kind, image.kind) == ("audio", "image")
    # The voice note's job has claimed its row (``processing``) and is still deciding; here it is
    # taken off the queue and its decision (step aside for the newer message) lands a second later.
    await arq_pool.delete(f"arq:job:{inbound_job_id(voice.id)}")
    await arq_pool.zrem(Queue.chat.value, inbound_job_id(voice.id))
    async with sessions() as session, session.begin():
        await session.exec(
            update(Message).where(col(Message.id) == voice.id).values(inbound_state="processing")
        )

    async def voice_job_steps_aside() -> None:
        # the conversation its claim attached it to: the customer's open one, which the image's job opens
        while True:
            async with sessions() as session:
                conversation_id = (await session.get(Message, image.id)).conversation_id  # type: ignore[union-attr]
            if conversation_id is not None:
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(1.0)
        async with sessions() as session, session.begin():
            await session.exec(
                update(Message)
                .where(col(Message.id) == voice.id)
                .values(
                    conversation_id=conversation_id,
                    inbound_state="done",
                    raw=Message.raw.op("||")({"coalesced": True}),  # type: ignore[union-attr]
                )
            )

    aside = asyncio.create_task(voice_job_steps_aside())
    await run_worker_burst(settings)
    await aside
    (request,) = state.script(name).requests
    said = "\n".join(str(m["content"]) for m in request["messages"] if m["role"] == "user")
    assert '[Audio transcription]: "it arrived like this"' in said
    assert "[Image description]" in said
    assert [m["text"] for m in sent_to(graph_sandbox[1], pid)] == ["Both noted."]
