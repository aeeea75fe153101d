"""Voice notes and pictures read by the tenant's own transcription and vision deployments: the tenant's
key goes with the audio, a failing first deployment falls back to the next, the cost joins the turn's,
and the platform's key never goes to an address the tenant set (a recording listener stands in for the
tenant's server, the offline model server for a provider, the Graph sandbox serves the media)."""

from __future__ import annotations

from typing import Any

import httpx
from arq.connections import RedisSettings, create_pool
from sqlmodel import select
from switchboard.analytics import tenant_analytics
from switchboard.crypto import CredentialCipher
from switchboard.db.models import Turn
from switchboard.llm.config import encrypt_api_key
from switchboard.llm.health import tenant_health
from switchboard.standins.offline_server import ScriptedResponse

from tests.utils.agent import answer_with_script, deployment, unique_model
from tests.utils.audio import voice_note
from tests.utils.key_listener import key_listener
from tests.utils.rows import messages_of
from tests.utils.whatsapp import channel_service, load_payload, new_media_id, sent_to, with_media_id
from tests.utils.workers import run_worker_burst

TENANT_KEY = "sk-tenant-own-transcription-k3y"
PLATFORM_KEY = "sk-platform-openai-canary-m3d1a"
CLOSED = "http://127.0.0.1:9/v1"
"""An address nothing listens on: the connection is refused at once."""
WHISPER_USD_PER_S = 0.0001
"""LiteLLM's price of ``whisper-1`` (per second of audio)."""


def _whisper(deployment_id: str, api_base: str, *, priority: int = 1, **extra: Any) -> dict[str, Any]:
    return {
        "id": deployment_id,
        "provider": "openai_compatible",
        "model": "whisper-1",
        "api_base": api_base,
        "priority": priority,
        **extra,
    }


async def _media_arrives(settings, ai_tenant, graph_sandbox, payload: str, data: bytes, mime: str) -> None:  # type: ignore[no-untyped-def]
    media_id = new_media_id()
    async with httpx.AsyncClient() as http:
        await http.put(
            f"{graph_sandbox[0]}/_control/media/{media_id}", content=data, headers={"content-type": mime}
        )
    body = with_media_id(load_payload(payload, phone_number_id=ai_tenant.phone_number_id), media_id)
    body["entry"][0]["changes"][0]["value"]["messages"][0]["id"] = f"wamid.{media_id}"  # a new message
    async with channel_service(settings) as svc:
        await svc.post(body)
    await run_worker_burst(settings)


async def _turn(sessions, tenant_id) -> Turn:  # type: ignore[no-untyped-def]
    async with sessions() as session:
        (turn,) = (await session.exec(select(Turn).where(Turn.tenant_id == tenant_id))).all()
    return turn


async def test_the_tenants_transcription_deployment_gets_the_audio_with_the_tenants_key(
    e2e_settings, wa_tenant, sessions, offline_model, graph_sandbox
) -> None:  # type: ignore[no-untyped-def]
    settings = e2e_settings(openai_api_key=PLATFORM_KEY, tenants_may_use_platform_keys=True)
    cipher = CredentialCipher(settings.secret("encryption_key").encode())
    async with key_listener() as listener:
        chat = await answer_with_script(
            sessions,
            wa_tenant.tenant.id,
            offline_model,
            policy={
                "transcription": [
                    _whisper(
                        "own-whisper",
                        listener.url + "/v1",
                        api_key_encrypted=encrypt_api_key(cipher, TENANT_KEY),
                    )
                ]
            },
        )
        chat.default = ScriptedResponse(content="Entendido.")
        note = voice_note("ogg", transcript="ignored by the listener", seconds=2.0)
        await _media_arrives(
            settings, wa_tenant, graph_sandbox, "audio_voice_note_ogg_opus.json", note, "audio/ogg"
        )
    assert [s.path for s in listener.seen] == ["/v1/audio/transcriptions"]
    assert listener.seen[0].credentials == {"authorization": f"Bearer {TENANT_KEY}"}
    assert chat.requests[0]["messages"][-1]["content"] == '[Audio transcription]: "listener transcription"'
    assert [m["text"] for m in sent_to(graph_sandbox[1], wa_tenant.phone_number_id)] == ["Entendido."]
    turn = await _turn(sessions, wa_tenant.tenant.id)
    expected = 2.0 * WHISPER_USD_PER_S  # the note's 2 s (Opus pre-skip makes it a little more)
    assert abs(turn.usage["media_cost_usd"]["transcription"] - expected) < 0.1 * expected
    assert abs(turn.cost_usd - turn.usage["media_cost_usd"]["transcription"]) < 1e-9  # the chat model is free
    async with sessions() as session:  # Analytics' estimated model cost (and the budget) counts it
        figures = await tenant_analytics(session, wa_tenant.tenant.id, days=1)
    assert abs(figures.totals["cost_usd"] - turn.cost_usd) < 1e-6


async def test_a_failing_first_transcription_deployment_falls_back_to_the_second(
    e2e_settings, wa_tenant, sessions, offline_model, graph_sandbox
) -> None:  # type: ignore[no-untyped-def]
    state, url = offline_model
    state.transcriptions.clear()
    chat = await answer_with_script(
        sessions,
        wa_tenant.tenant.id,
        offline_model,
        policy={
            "transcription": [
                _whisper("refusing", CLOSED, priority=1),
                _whisper("offline-whisper", url + "/v1", priority=2),
            ]
        },
    )
    chat.default = ScriptedResponse(content="Lo reviso.")
    note = voice_note("ogg", transcript="my order did not arrive", seconds=1.0)
    await _media_arrives(
        e2e_settings(), wa_tenant, graph_sandbox, "audio_voice_note_ogg_opus.json", note, "audio/ogg"
    )
    assert [t["sniffed"] for t in state.transcriptions] == ["audio/ogg"]  # the second one read it, once
    # the offline server reads the transcript from the Ogg tag (a byte of the tag's framing may follow it)
    assert chat.requests[0]["messages"][-1]["content"].startswith(
        '[Audio transcription]: "my order did not arrive'
    )
    turn = await _turn(sessions, wa_tenant.tenant.id)
    assert turn.usage["media_cost_usd"]["transcription"] > 0


async def test_the_platform_key_never_goes_to_a_transcription_address_the_tenant_set(
    e2e_settings, wa_tenant, sessions, offline_model, graph_sandbox
) -> None:  # type: ignore[no-untyped-def]
    settings = e2e_settings(openai_api_key=PLATFORM_KEY, tenants_may_use_platform_keys=True)
    async with key_listener() as listener:
        chat = await answer_with_script(
            sessions,
            wa_tenant.tenant.id,
            offline_model,
            policy={
                "transcription": [
                    {
                        "id": "openai-elsewhere",
                        "provider": "openai",
                        "model": "whisper-1",
                        "api_base": listener.url,
                    }
                ],
                "vision": [
                    {
                        "id": "vision-elsewhere",
                        "provider": "openai",
                        "model": "gpt-4o-mini",
                        "api_base": listener.url + "/v1",
                    }
                ],
            },
        )
        chat.default = ScriptedResponse(content="Gracias.")
        note = voice_note("ogg", transcript="hola", seconds=1.0)
        await _media_arrives(
            settings, wa_tenant, graph_sandbox, "audio_voice_note_ogg_opus.json", note, "audio/ogg"
        )
        await _media_arrives(
            settings,
            wa_tenant,
            graph_sandbox,
            "image_with_caption.json",
            b"\xff\xd8\xff\xe0jpeg",
            "image/jpeg",
        )
    assert sorted(s.path for s in listener.seen) == ["/audio/transcriptions", "/v1/chat/completions"]
    assert not listener.carried(PLATFORM_KEY), listener.seen


async def test_the_tenants_vision_deployment_describes_the_picture(
    e2e_settings, wa_tenant, sessions, offline_model, graph_sandbox
) -> None:  # type: ignore[no-untyped-def]
    state, url = offline_model
    eyes = unique_model("eyes")
    state.script(eyes).default = ScriptedResponse(content="A mug with a cracked handle.")
    chat = await answer_with_script(
        sessions, wa_tenant.tenant.id, offline_model, policy={"vision": [deployment(url, eyes)]}
    )
    chat.default = ScriptedResponse(content="Le envío otra.")
    await _media_arrives(
        e2e_settings(),
        wa_tenant,
        graph_sandbox,
        "image_with_caption.json",
        b"\xff\xd8\xff\xe0jpeg",
        "image/jpeg",
    )
    (asked,) = state.script(eyes).requests
    image = asked["messages"][-1]["content"][1]
    assert image["type"] == "image_url" and image["image_url"]["url"].startswith("data:image/jpeg;base64,")
    assert chat.requests[0]["messages"][-1]["content"].endswith(
        '[Image description]: "A mug with a cracked handle."'
    )
    inbound = [m for m in await messages_of(sessions, wa_tenant.tenant.id) if m.direction == "inbound"]
    assert inbound[0].raw["media_cost_usd"] == {"vision": 0.0}  # the offline model is free


async def test_when_every_transcription_deployment_fails_the_model_health_says_so_until_one_answers(
    e2e_settings, wa_tenant, sessions, offline_model, graph_sandbox
) -> None:  # type: ignore[no-untyped-def]
    state, url = offline_model
    tenant_id = wa_tenant.tenant.id
    chat = await answer_with_script(
        sessions, tenant_id, offline_model, policy={"transcription": [_whisper("refusing", CLOSED)]}
    )
    chat.default = ScriptedResponse(content="Aquí estoy.")
    settings = e2e_settings()
    note = voice_note("ogg", transcript="hello", seconds=1.0)
    await _media_arrives(
        settings, wa_tenant, graph_sandbox, "audio_voice_note_ogg_opus.json", note, "audio/ogg"
    )
    assert chat.requests == []  # nothing read yet: the job retries later
    redis = await create_pool(RedisSettings.from_dsn(settings.redis_url))
    try:
        (failing,) = await tenant_health(redis, tenant_id)
        assert (failing.deployment, failing.state) == ("transcription:refusing", "failing")
        # the tenant points the deployment at a server that answers: the next read marks it healthy
        await answer_with_script(
            sessions,
            tenant_id,
            offline_model,
            name=unique_model("again"),
            policy={"transcription": [_whisper("refusing", url + "/v1")]},
        )
        await _media_arrives(
            settings, wa_tenant, graph_sandbox, "audio_voice_note_ogg_opus.json", note, "audio/ogg"
        )
        assert await tenant_health(redis, tenant_id) == []
    finally:
        await redis.aclose()


async def test_a_container_the_tenants_model_refuses_is_sent_again_as_wav(
    e2e_settings, wa_tenant, sessions, offline_model, graph_sandbox
) -> None:  # type: ignore[no-untyped-def]
    state, url = offline_model
    chat = await answer_with_script(
        sessions,
        wa_tenant.tenant.id,
        offline_model,
        policy={"transcription": [_whisper("own-whisper", url + "/v1")]},
    )
    chat.default = ScriptedResponse(content="Claro.")
    state.transcription_refuses = {"audio/webm"}
    state.transcriptions.clear()
    try:
        note = voice_note("webm", transcript="change my order")
        await _media_arrives(
            e2e_settings(), wa_tenant, graph_sandbox, "audio_voice_note_ogg_opus.json", note, "audio/webm"
        )
    finally:
        state.transcription_refuses = set()
    assert [(t["sniffed"], t["refused"]) for t in state.transcriptions] == [
        ("audio/webm", True),
        ("audio/wav", False),
    ]
    assert chat.requests[0]["messages"][-1]["content"] == '[Audio transcription]: "change my order"'
