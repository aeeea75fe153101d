"""The model gateway over real HTTP to the offline server: fallbacks, cooldown, keys, router cache."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from switchboard.crypto import CredentialCipher
from switchboard.llm.config import LLMSettings, default_deployments, encrypt_api_key
from switchboard.llm.router import ContextOverflow, ModelCallFailed, ModelGateway
from switchboard.settings import load_settings
from switchboard.standins.offline_server import ScriptedResponse

from tests.utils.agent import deployment, unique_model

MESSAGES = [{"role": "user", "content": "hello"}]


def _llm(*deployments, **policy) -> LLMSettings:
    return LLMSettings.model_validate({"deployments": list(deployments), "num_retries": 0, **policy})


@pytest.mark.parametrize(
    "failure",
    [
        ScriptedResponse(kind="error", status=500),
        ScriptedResponse(kind="error", status=429),
        ScriptedResponse(kind="error", status=503),
    ],
    ids=["500", "429", "503"],
)
async def test_fallback_to_next_priority_group_on_provider_error(gateway, offline_model, failure):
    state, url = offline_model
    primary, backup = unique_model("primary"), unique_model("backup")
    llm = _llm(deployment(url, primary, priority=1), deployment(url, backup, priority=2))
    state.script(primary).push(failure)
    state.script(backup).push(ScriptedResponse(content="from backup"))
    router = gateway.router_for(uuid.uuid4(), llm)
    reply = await gateway.complete(router, MESSAGES, tools=None, llm=llm, trace_id="t")
    assert (reply.content, reply.model_id, reply.fallback_used) == ("from backup", backup, True)
    assert len(state.script(primary).requests) == 1
    assert reply.failed_deployments[0]["deployment"] == primary


async def test_fallback_on_timeout(gateway, offline_model):
    state, url = offline_model
    primary, backup = unique_model("slow"), unique_model("backup")
    llm = _llm(deployment(url, primary, priority=1, timeout_s=0.3), deployment(url, backup, priority=2))
    state.script(primary).push(ScriptedResponse(kind="hang"))
    state.script(backup).push(ScriptedResponse(content="in time"))
    router = gateway.router_for(uuid.uuid4(), llm)
    reply = await gateway.complete(router, MESSAGES, tools=None, llm=llm, trace_id="t")
    assert (reply.content, reply.model_id, reply.fallback_used) == ("in time", backup, True)
    # the primary was given up on by its own 0.3 s timeout, not by the hang ending (600 s)
    assert [(f["deployment"], f["error"].split(":")[0]) for f in reply.failed_deployments] == [
        (primary, "Timeout")
    ]


async def test_retry_inside_a_group_reaches_the_healthy_sibling(gateway, offline_model):
    state, url = offline_model
    broken, healthy = unique_model("a"), unique_model("b")
    llm = _llm(deployment(url, broken), deployment(url, healthy), num_retries=1, allowed_fails=0)
    router = gateway.router_for(uuid.uuid4(), llm)
    state.script(broken).default = ScriptedResponse(kind="error", status=500)
    state.script(healthy).default = ScriptedResponse(content="healthy")
    replies = [await gateway.complete(router, MESSAGES, tools=None, llm=llm, trace_id="t") for _ in range(3)]
    assert [r.content for r in replies] == ["healthy"] * 3
    assert {r.model_id for r in replies} == {healthy}
    assert not any(r.fallback_used for r in replies)


async def test_cooldown_skips_a_failing_deployment_then_retries_it(gateway, offline_model):
    state, url = offline_model
    primary, backup = unique_model("flaky"), unique_model("backup")
    llm = _llm(
        deployment(url, primary, priority=1),
        deployment(url, backup, priority=2),
        allowed_fails=2,
        cooldown_s=2.0,
    )
    router = gateway.router_for(uuid.uuid4(), llm)
    state.script(primary).default = ScriptedResponse(kind="error", status=500)
    state.script(backup).default = ScriptedResponse(content="backup")
    for _ in range(6):
        reply = await gateway.complete(router, MESSAGES, tools=None, llm=llm, trace_id="t")
        assert reply.model_id == backup
    hits_while_failing = len(state.script(primary).requests)
    # allowed_fails=2: the third failure cools the deployment down; later calls skip it
    assert hits_while_failing == 3
    state.script(primary).default = ScriptedResponse(content="primary again")
    # poll until the cooldown ends: every call before that is answered by the backup, and the cooling
    # deployment receives nothing (a cap, not a sleep: the cooldown is 2 s)
    async with asyncio.timeout(30):
        while (
            reply := await gateway.complete(router, MESSAGES, tools=None, llm=llm, trace_id="t")
        ).model_id == backup:
            assert len(state.script(primary).requests) == hits_while_failing
            await asyncio.sleep(0.1)
    assert (reply.content, reply.model_id, reply.fallback_used) == ("primary again", primary, False)
    assert len(state.script(primary).requests) == hits_while_failing + 1


async def test_every_group_failing_raises_model_call_failed(gateway, offline_model):
    state, url = offline_model
    primary, backup = unique_model("p"), unique_model("b")
    llm = _llm(deployment(url, primary, priority=1), deployment(url, backup, priority=2))
    state.script(primary).push(ScriptedResponse(kind="error", status=500))
    state.script(backup).push(ScriptedResponse(kind="error", status=503))
    router = gateway.router_for(uuid.uuid4(), llm)
    with pytest.raises(ModelCallFailed) as caught:
        await gateway.complete(router, MESSAGES, tools=None, llm=llm, trace_id="t")
    assert "InternalServerError" in str(caught.value)


async def test_context_overflow_is_its_own_error(gateway, offline_model):
    state, url = offline_model
    model = unique_model("small")
    llm = _llm(deployment(url, model))
    state.script(model).push(ScriptedResponse(kind="overflow"))
    router = gateway.router_for(uuid.uuid4(), llm)
    with pytest.raises(ContextOverflow):
        await gateway.complete(router, MESSAGES, tools=None, llm=llm, trace_id="t")


async def test_tenant_key_is_decrypted_and_sent(gateway, offline_model, settings):
    state, url = offline_model
    model = unique_model("keyed")
    cipher = CredentialCipher(settings.secret("encryption_key").encode())
    llm = _llm(
        deployment(
            url,
            model,
            provider="openai_compatible",
            api_key_encrypted=encrypt_api_key(cipher, "sk-tenant-123"),
        )
    )
    state.script(model).push(ScriptedResponse(content="ok"))
    router = gateway.router_for(uuid.uuid4(), llm)
    await gateway.complete(router, MESSAGES, tools=None, llm=llm, trace_id="t")
    assert state.script(model).authorizations == ["Bearer sk-tenant-123"]


async def test_router_is_cached_and_rebuilt_when_settings_change(gateway, offline_model):
    _, url = offline_model
    tenant_id = uuid.uuid4()
    model = unique_model()
    first = gateway.router_for(tenant_id, _llm(deployment(url, model)))
    assert gateway.router_for(tenant_id, _llm(deployment(url, model))) is first
    changed = gateway.router_for(tenant_id, _llm(deployment(url, model), cooldown_s=5))
    assert changed is not first and changed.router is not first.router


async def test_unknown_model_uses_configured_or_default_context_window(gateway, offline_model):
    _, url = offline_model
    router = gateway.router_for(uuid.uuid4(), _llm(deployment(url, unique_model(), max_input_tokens=1234)))
    assert router.context_window_tokens == 1234
    router = gateway.router_for(
        uuid.uuid4(), _llm(deployment(url, unique_model()), default_context_window_tokens=4096)
    )
    assert router.context_window_tokens == 4096


def test_default_deployment_is_the_offline_server_without_keys(tmp_path):
    settings = load_settings(
        data_dir=tmp_path,
        model_server_port=18999,
        _env_file=None,
        openai_api_key=None,
        anthropic_api_key=None,
    )
    (only,) = default_deployments(settings)
    assert (only.provider, only.api_base) == ("offline", "http://127.0.0.1:18999/v1")


def test_default_deployments_use_process_keys(tmp_path):
    settings = load_settings(
        data_dir=tmp_path, _env_file=None, openai_api_key="sk-x", anthropic_api_key="sk-y"
    )
    assert [(d.id, d.priority, d.litellm_model()) for d in default_deployments(settings)] == [
        ("openai-default", 1, "openai/gpt-4o-mini"),
        ("anthropic-default", 2, "anthropic/claude-haiku-4-5"),
    ]


async def test_semaphore_bounds_concurrent_model_calls(settings, offline_model):
    state, url = offline_model
    model = unique_model("busy")
    state.script(model).latency_s = 0.3
    state.script(model).default = ScriptedResponse(content="ok")
    gateway = ModelGateway(
        settings=settings,
        cipher=CredentialCipher(settings.secret("encryption_key").encode()),
        max_concurrent_calls=2,
    )
    llm = _llm(deployment(url, model))
    router = gateway.router_for(uuid.uuid4(), llm)
    replies = await asyncio.gather(
        *(gateway.complete(router, MESSAGES, tools=None, llm=llm, trace_id="t") for _ in range(6))
    )
    assert [r.content for r in replies] == ["ok"] * 6
    assert state.script(model).max_in_flight == 2


def test_a_deadline_timeout_is_a_stable_step_within_the_time_left():
    """Per-call timeouts under a deadline are 0.5 s steps (LiteLLM keeps a provider client per timeout
    value: a new float per call built a new client and TCP connection per call), never more than 50 ms
    past the time left, never below 1 s, and none when the deployments' own timeout comes first."""
    import time

    from switchboard.llm.router import _group_timeout

    llm = LLMSettings(request_timeout_s=45.0, fallback_reserve_s=5.0)
    now = time.monotonic()
    assert _group_timeout(llm, now + 20.0, is_last=True) == 20.0  # the guardrail's now + timeout_s
    assert _group_timeout(llm, time.monotonic() + 20.0, is_last=True) == 20.0  # the same value again
    assert _group_timeout(llm, time.monotonic() + 7.3, is_last=True) == 7.0
    assert _group_timeout(llm, time.monotonic() + 20.0, is_last=False) == 15.0  # the reserve is kept
    assert _group_timeout(llm, time.monotonic() + 0.2, is_last=True) == 1.0
    assert _group_timeout(llm, time.monotonic() + 100.0, is_last=True) is None
    assert _group_timeout(llm, None, is_last=True) is None
