"""A WhatsApp media URL that expired between the lookup and the download: the media id is looked up
once more and the fresh URL downloaded (Graph sandbox serving the media, offline model transcribing)."""

from __future__ import annotations

import httpx
import pytest
from switchboard.standins.faults import Fault
from switchboard.standins.offline_server import ScriptedResponse

from tests.utils.whatsapp import channel_service, load_payload, new_media_id, sent_to, with_media_id
from tests.utils.workers import run_worker_burst


async def _voice_note(e2e_settings, ai_tenant, model, graph_sandbox, media_id: str) -> None:  # type: ignore[no-untyped-def]
    async with httpx.AsyncClient() as http:
        await http.put(
            f"{graph_sandbox[0]}/_control/media/{media_id}",
            content=b"SWITCHBOARD-TRANSCRIPT: my parcel is late",
            headers={"content-type": "audio/ogg"},
        )
    settings = e2e_settings(transcription_base_url=model[2]["api_base"].removesuffix("/v1"))
    async with channel_service(settings) as svc:
        payload = load_payload("audio_voice_note_ogg_opus.json", phone_number_id=ai_tenant.phone_number_id)
        await svc.post(with_media_id(payload, media_id))
    await run_worker_burst(settings)


@pytest.mark.parametrize("status", [401, 403, 404])
async def test_an_expired_download_link_is_resolved_again_once(
    e2e_settings, ai_tenant, model, graph_sandbox, status
) -> None:  # type: ignore[no-untyped-def]
    state, name, _ = model
    state.script(name).default = ScriptedResponse(content="Let me check.")
    media_id = new_media_id()
    # the lookup passes, the download of its URL fails (after=1: the second call of this media id)
    graph_sandbox[1].script_media(Fault(http_status=status, code=131052), media_id=media_id, after=1)
    await _voice_note(e2e_settings, ai_tenant, model, graph_sandbox, media_id)
    last = state.script(name).requests[0]["messages"][-1]
    assert last == {"role": "user", "content": '[Audio transcription]: "my parcel is late"'}
    assert [m["text"] for m in sent_to(graph_sandbox[1], ai_tenant.phone_number_id)] == ["Let me check."]


async def test_a_link_that_dies_twice_is_read_as_a_notice_not_retried_forever(
    e2e_settings, ai_tenant, model, graph_sandbox
) -> None:  # type: ignore[no-untyped-def]
    state, name, _ = model
    state.script(name).default = ScriptedResponse(content="Could you type it?")
    media_id = new_media_id()
    # lookup ok, then the id is dead for good (downloads and lookups 404): one new lookup, then a notice
    graph_sandbox[1].script_media(Fault(http_status=404, code=131052), media_id=media_id, after=1, times=8)
    await _voice_note(e2e_settings, ai_tenant, model, graph_sandbox, media_id)
    last = state.script(name).requests[0]["messages"][-1]
    assert last == {
        "role": "user",
        "content": "[Voice message received but could not be read: the link had expired]",
    }
