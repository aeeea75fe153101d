"""Fallback inside the turn budget: no hidden Retry-After waits, cooldown instead, empty
answers fall back, the answering deployment is the one recorded, context-window fallback groups.

Behaviour, not timing: each test counts the requests every deployment received (the offline server
records them) and checks what cooled down; the latency figures are ``loadtests/fallback_latency.py``.
"""

from __future__ import annotations

import time
import uuid

import pytest
from switchboard.llm.config import LLMSettings
from switchboard.llm.router import ContextOverflow, retry_after_s
from switchboard.standins.offline_server import ScriptedResponse

from tests.utils.agent import deployment, unique_model

MESSAGES = [{"role": "user", "content": "hello"}]
RATE_LIMITED = ScriptedResponse(kind="error", status=429, headers={"Retry-After": "47"})


def _llm(*deployments, **policy) -> LLMSettings:
    return LLMSettings.model_validate({"deployments": list(deployments), **policy})


def _pair(url, **first):
    primary, backup = unique_model("primary"), unique_model("backup")
    return (
        primary,
        backup,
        [deployment(url, primary, priority=1, **first), deployment(url, backup, priority=2)],
    )


async def test_429_with_long_retry_after_falls_back_at_once_and_cools_the_primary_down(
    gateway, offline_model
):
    state, url = offline_model
    primary, backup, deployments = _pair(url)
    llm = _llm(*deployments, num_retries=2)  # the Router's retries would wait out the 47 s
    state.script(primary).default = RATE_LIMITED
    state.script(backup).default = ScriptedResponse(content="from backup")
    router = gateway.router_for(uuid.uuid4(), llm)
    first = await gateway.complete(router, MESSAGES, tools=None, llm=llm, trace_id="t")
    assert (first.content, first.model_id, first.fallback_used) == ("from backup", backup, True)
    assert state.script(primary).received == 1  # not retried
    assert first.failed_deployments[0]["deployment"] == primary
    assert "RateLimitError" in first.failed_deployments[0]["error"]
    # the primary cools down for the 47 s it asked for: the next calls go straight to the backup
    assert 40 < router.cooldown_until[primary] - time.monotonic() <= 47
    second = await gateway.complete(router, MESSAGES, tools=None, llm=llm, trace_id="t")
    assert second.model_id == backup and state.script(primary).received == 1


async def test_503_with_retry_after_beyond_the_cap_is_not_waited_out(gateway, offline_model):
    state, url = offline_model
    primary, backup, deployments = _pair(url)
    llm = _llm(*deployments, num_retries=2, max_retry_wait_s=1.0)
    state.script(primary).default = ScriptedResponse(kind="error", status=503, headers={"Retry-After": "30"})
    state.script(backup).default = ScriptedResponse(content="ok")
    router = gateway.router_for(uuid.uuid4(), llm)
    reply = await gateway.complete(router, MESSAGES, tools=None, llm=llm, trace_id="t")
    assert (reply.model_id, state.script(primary).received) == (backup, 1)
    assert router.is_cooling(primary, time.monotonic())


async def test_transient_500_is_retried_with_a_short_wait_then_falls_back(gateway, offline_model):
    state, url = offline_model
    primary, backup, deployments = _pair(url)
    llm = _llm(*deployments, num_retries=2, max_retry_wait_s=0.05, allowed_fails=10)
    state.script(primary).default = ScriptedResponse(kind="error", status=500)
    state.script(backup).default = ScriptedResponse(content="ok")
    router = gateway.router_for(uuid.uuid4(), llm)
    reply = await gateway.complete(router, MESSAGES, tools=None, llm=llm, trace_id="t")
    assert (reply.model_id, state.script(primary).received) == (backup, 3)  # 1 + num_retries


async def test_a_retry_after_within_the_cap_is_honoured_on_the_same_deployment(gateway, offline_model):
    state, url = offline_model
    primary, backup, deployments = _pair(url)
    llm = _llm(*deployments, num_retries=1, max_retry_wait_s=1.0)
    state.script(primary).push(ScriptedResponse(kind="error", status=503, headers={"Retry-After": "0"}))
    state.script(primary).push(ScriptedResponse(content="primary after a retry"))
    router = gateway.router_for(uuid.uuid4(), llm)
    reply = await gateway.complete(router, MESSAGES, tools=None, llm=llm, trace_id="t")
    assert (reply.content, reply.model_id, reply.fallback_used) == ("primary after a retry", primary, False)


@pytest.mark.parametrize(
    "content", ["", "   \n\t ", "<thinking>only reasoning</thinking>"], ids=["empty", "blank", "reasoning"]
)
async def test_an_empty_completion_falls_back_and_the_backup_is_recorded(gateway, offline_model, content):
    state, url = offline_model
    primary, backup, deployments = _pair(url)
    llm = _llm(*deployments)
    state.script(primary).push(ScriptedResponse(kind="empty", content=content))
    state.script(backup).push(ScriptedResponse(content="real words"))
    router = gateway.router_for(uuid.uuid4(), llm)
    reply = await gateway.complete(router, MESSAGES, tools=None, llm=llm, trace_id="t")
    assert (reply.content, reply.model_id, reply.model_group, reply.fallback_used) == (
        "real words",
        backup,
        "p2",
        True,
    )
    assert reply.failed_deployments == [{"deployment": primary, "error": "EmptyCompletion: no visible text"}]


async def test_repeated_empty_answers_cool_the_deployment_down(gateway, offline_model):
    state, url = offline_model
    primary, backup, deployments = _pair(url)
    llm = _llm(*deployments, allowed_fails=1, cooldown_s=60)
    state.script(primary).default = ScriptedResponse(kind="empty")
    state.script(backup).default = ScriptedResponse(content="ok")
    router = gateway.router_for(uuid.uuid4(), llm)
    for _ in range(4):
        assert (
            await gateway.complete(router, MESSAGES, tools=None, llm=llm, trace_id="t")
        ).model_id == backup
    assert state.script(primary).received == 2  # allowed_fails=1: the second empty answer cools it down


async def test_every_group_empty_returns_the_empty_reply_for_the_loop(gateway, offline_model):
    state, url = offline_model
    primary, backup, deployments = _pair(url)
    llm = _llm(*deployments)
    state.script(primary).push(ScriptedResponse(kind="empty"))
    state.script(backup).push(ScriptedResponse(kind="empty", content=" "))
    router = gateway.router_for(uuid.uuid4(), llm)
    reply = await gateway.complete(router, MESSAGES, tools=None, llm=llm, trace_id="t")
    assert reply.model_id == backup and reply.fallback_used and not (reply.content or "").strip()
    assert [f["deployment"] for f in reply.failed_deployments] == [primary, backup]


async def test_context_overflow_falls_back_to_a_larger_window_group(gateway, offline_model):
    state, url = offline_model
    small, large = unique_model("small"), unique_model("large")
    llm = _llm(
        deployment(url, small, priority=1, max_input_tokens=16000),
        deployment(url, large, priority=2, max_input_tokens=128000),
    )
    state.script(small).push(ScriptedResponse(kind="overflow", context_limit_tokens=4096))
    state.script(large).push(ScriptedResponse(content="the large window answered"))
    router = gateway.router_for(uuid.uuid4(), llm)
    reply = await gateway.complete(router, MESSAGES, tools=None, llm=llm, trace_id="t")
    assert (reply.content, reply.model_id) == ("the large window answered", large)


async def test_context_overflow_does_not_fall_back_to_a_window_no_larger(gateway, offline_model):
    state, url = offline_model
    small, same = unique_model("small"), unique_model("same")
    llm = _llm(
        deployment(url, small, priority=1, max_input_tokens=16000),
        deployment(url, same, priority=2, max_input_tokens=4096),
    )
    state.script(small).push(ScriptedResponse(kind="overflow", context_limit_tokens=4096))
    router = gateway.router_for(uuid.uuid4(), llm)
    with pytest.raises(ContextOverflow) as caught:
        await gateway.complete(router, MESSAGES, tools=None, llm=llm, trace_id="t")
    assert (caught.value.limit_tokens, caught.value.window_tokens) == (4096, 16000)
    assert state.script(same).received == 0


def test_retry_after_is_read_from_the_error_response_headers():
    import httpx

    class Error(Exception):
        def __init__(self, headers):
            self.response = httpx.Response(429, headers=headers)

    assert retry_after_s(Error({"Retry-After": "47"})) == 47.0
    assert retry_after_s(Error({"retry-after-ms": "1500"})) == 1.5
    assert retry_after_s(Error({"Retry-After": "Wed, 21 Oct 2026 07:28:00 GMT"})) is None
    assert retry_after_s(Error({})) is None
    assert retry_after_s(ValueError("no response")) is None
