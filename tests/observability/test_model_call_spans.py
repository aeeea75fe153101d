"""``llm.call`` spans of the model gateway over real HTTP to the offline server: the deployment that
answered, the tokens, and a fallback as an attribute and an event."""

from __future__ import annotations

import uuid

from switchboard.llm.config import LLMSettings
from switchboard.observability import metrics
from switchboard.standins.offline_server import ScriptedResponse

from tests.utils.agent import deployment, unique_model


async def test_a_fallback_is_an_attribute_and_an_event_of_the_model_call(
    spans, gateway, offline_model
) -> None:  # noqa: F811
    state, url = offline_model
    primary, backup = unique_model("primary"), unique_model("backup")
    llm = LLMSettings.model_validate(
        {
            "deployments": [deployment(url, primary, priority=1), deployment(url, backup, priority=2)],
            "num_retries": 0,
        }
    )
    state.script(primary).push(ScriptedResponse(kind="error", status=500))
    state.script(backup).push(ScriptedResponse(content="from backup"))
    tenant_id = uuid.uuid4()
    router = gateway.router_for(tenant_id, llm)
    reply = await gateway.complete(
        router, [{"role": "user", "content": "hello"}], tools=None, llm=llm, trace_id="t"
    )
    assert reply.model_id == backup

    (call,) = [s for s in spans.get_finished_spans() if s.name == "llm.call"]
    attributes = dict(call.attributes or {})
    assert (attributes["llm.deployment"], attributes["llm.fallback"], attributes["llm.outcome"]) == (
        backup,
        True,
        "ok",
    )
    assert attributes["gen_ai.usage.input_tokens"] == reply.prompt_tokens > 0
    assert attributes["gen_ai.usage.output_tokens"] == reply.completion_tokens > 0
    (event,) = [e for e in call.events if e.name == "fallback"]
    assert (event.attributes["answered_by"], list(event.attributes["failed_deployments"])) == (
        backup,
        [primary],
    )
    assert metrics.MODEL_FALLBACKS.labels(backup)._value.get() == 1
    assert metrics.MODEL_CALLS.labels(primary, "error")._value.get() == 1
    assert metrics.MODEL_CALLS.labels(backup, "ok")._value.get() == 1
    prompt = metrics.MODEL_TOKENS.labels(str(tenant_id), backup, "prompt")._value.get()
    assert prompt == reply.prompt_tokens
