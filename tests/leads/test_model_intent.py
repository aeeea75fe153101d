"""Lead capture with a provider model: the after-turn intent check goes through the real gateway to an
OpenAI-compatible deployment (the offline model server, scripted, stands in for the provider at the
HTTP boundary), whose answer must be the strict intent JSON. A malformed answer is logged and never
crashes the turn; a conversation gets one lead however many turns show intent, and no model call is
spent once it has one."""

from __future__ import annotations

import json

from sqlmodel import select
from switchboard.db.models import EventOutbox, Lead, Tenant
from switchboard.leads.capture import HEURISTIC_FALLBACK, OFFLINE_HEURISTIC
from switchboard.leads.intent import INTENT_INSTRUCTION

from tests.utils.agent import (
    answer_with_script,
    deployment,
    llm_settings,
    make_conversation,
    text,
    unique_model,
)
from tests.utils.outbox import captured_logs


async def _provider_tenant(sessions, make_tenant, offline_model):  # type: ignore[no-untyped-def]
    """A tenant whose only deployment is an ``openai_compatible`` provider (so ``intent_check: auto``,
    the product's default, takes the model path), served by the scripted offline server."""
    tenant = await make_tenant()
    state, url = offline_model
    name = unique_model("provider")
    script = await answer_with_script(
        sessions, tenant.id, offline_model, name=name, leads={"intent_check": "auto"}
    )
    async with sessions() as session, session.begin():
        row = await session.get(Tenant, tenant.id)
        row.settings_extensions = {
            **row.settings_extensions,
            "llm": llm_settings(deployment(url, name, provider="openai_compatible")),
        }
        session.add(row)
    return tenant, script, name


def _is_intent_check(request) -> bool:  # type: ignore[no-untyped-def]
    return request["messages"][0]["content"] == INTENT_INSTRUCTION


async def _leads(sessions, tenant_id):  # type: ignore[no-untyped-def]
    async with sessions() as session:
        return list((await session.exec(select(Lead).where(Lead.tenant_id == tenant_id))).all())


async def test_the_provider_models_verdict_records_one_lead_and_is_not_asked_again(
    sessions, make_tenant, orchestrator, offline_model
) -> None:  # type: ignore[no-untyped-def]
    tenant, script, name = await _provider_tenant(sessions, make_tenant, offline_model)
    handle = await make_conversation(sessions, tenant)
    script.push(text("Hello! How can I help?"))
    script.push(text('{"buying_intent": false, "product": "", "summary": "", "consent": "unknown"}'))
    await orchestrator.handle_turn(handle.request("hi, what are your opening hours?"))
    assert await _leads(sessions, tenant.id) == []

    verdict = {
        "buying_intent": True,
        "product": "DN50 ball valve",
        "summary": "Wants 10 DN50 ball valves for a chlorine line and a quote by Friday.",
        "consent": "granted",
    }
    script.push(text("The DN50 is 129 EUR."))
    script.push(text("```json\n" + json.dumps(verdict) + "\n```"))  # a fenced answer is accepted
    result = await orchestrator.handle_turn(handle.request("I need ten DN50s, send me a quote and call me"))
    assert result.reply == "The DN50 is 129 EUR."
    (lead,) = await _leads(sessions, tenant.id)
    assert (lead.source, lead.detected_by, lead.interest, lead.summary, lead.consent, lead.notes) == (
        "intent",
        f"model:{name}",
        "DN50 ball valve",
        verdict["summary"],
        "granted",
        "",
    )

    # the check's request: the strict instruction, then the chat as one data block
    checks = [r for r in script.requests if _is_intent_check(r)]
    assert len(checks) == 2 and "tools" not in checks[-1]
    chat = checks[-1]["messages"][1]["content"]
    assert chat.startswith("<chat>\n") and "user: I need ten DN50s, send me a quote and call me" in chat

    # more intent later: still one lead, and no further intent call (the lead exists)
    script.push(text("Sure, I'll add two more."))
    await orchestrator.handle_turn(handle.request("actually make it twelve, I want to buy today"))
    assert len(await _leads(sessions, tenant.id)) == 1
    assert len([r for r in script.requests if _is_intent_check(r)]) == 2
    async with sessions() as session:
        events = (
            await session.exec(
                select(EventOutbox).where(
                    EventOutbox.tenant_id == tenant.id, EventOutbox.event_type == "lead.created"
                )
            )
        ).all()
    assert [e.payload["data"]["detected_by"] for e in events] == [f"model:{name}"]


async def test_a_malformed_model_answer_is_logged_and_the_turn_still_answers(
    sessions, make_tenant, orchestrator, offline_model
) -> None:  # type: ignore[no-untyped-def]
    tenant, script, _ = await _provider_tenant(sessions, make_tenant, offline_model)
    handle = await make_conversation(sessions, tenant)
    script.push(text("We open at 9."))
    script.push(text('{"buying_intent": "yes", "product": "valve"}'))  # not a boolean: refused
    with captured_logs() as logs:
        result = await orchestrator.handle_turn(handle.request("when do you open?"))
    assert result.reply == "We open at 9." and not result.silent
    invalid = [e for e in logs if e["event"] == "lead_intent_answer_invalid"]
    assert len(invalid) == 1 and invalid[0]["log_level"] == "warning"
    assert not [e for e in logs if e["event"] == "lead_capture_failed"]
    assert await _leads(sessions, tenant.id) == []  # the answer is not trusted; the heuristic saw no intent


async def test_an_answer_that_is_not_json_falls_back_to_the_heuristic_and_says_so(
    sessions, make_tenant, orchestrator, offline_model
) -> None:  # type: ignore[no-untyped-def]
    tenant, script, _ = await _provider_tenant(sessions, make_tenant, offline_model)
    handle = await make_conversation(sessions, tenant)
    script.push(text("It is 129 EUR."))
    script.push(text("Yes, the customer clearly wants to buy."))
    with captured_logs() as logs:
        await orchestrator.handle_turn(handle.request("I want to buy the DN50 valve"))
    assert [e["event"] for e in logs].count("lead_intent_answer_invalid") == 1
    (lead,) = await _leads(sessions, tenant.id)
    assert (lead.detected_by, lead.summary) == (
        HEURISTIC_FALLBACK,
        "Customer asked: I want to buy the DN50 valve",
    )


async def test_a_failing_provider_call_falls_back_to_the_heuristic_and_never_fails_the_turn(
    sessions, make_tenant, orchestrator, offline_model
) -> None:  # type: ignore[no-untyped-def]
    tenant, script, _ = await _provider_tenant(sessions, make_tenant, offline_model)
    handle = await make_conversation(sessions, tenant)
    script.push(text("Hi!"))
    script.push(text("", kind="error", status=500))
    with captured_logs() as logs:
        result = await orchestrator.handle_turn(handle.request("hello, how much is it, is it in stock?"))
    assert result.reply == "Hi!"
    assert "lead_intent_check_failed" in [e["event"] for e in logs]
    (lead,) = await _leads(sessions, tenant.id)  # "how much" + "in stock": two weak phrases
    assert lead.detected_by == HEURISTIC_FALLBACK


async def test_the_offline_model_asked_for_intent_is_no_malformed_answer(
    sessions, make_tenant, orchestrator, offline_model
) -> None:  # type: ignore[no-untyped-def]
    """With the offline demo model as the tenant's model and the model check forced, the stand-in's
    answer to the intent check is not logged as invalid on every turn: the heuristic decides quietly."""
    tenant = await make_tenant()
    state, url = offline_model
    name = unique_model("offline")
    await answer_with_script(sessions, tenant.id, offline_model, name=name, leads={"intent_check": "model"})
    handle = await make_conversation(sessions, tenant)
    with captured_logs() as logs:
        for said in ("when do you open?", "I want to buy the DN50 valve"):
            result = await orchestrator.handle_turn(handle.request(said))
            assert result.reply and not result.silent
    assert [e["event"] for e in logs].count("lead_intent_answer_invalid") == 0
    intent_checks = [r for r in state.script(name).requests if _is_intent_check(r)]
    assert len(intent_checks) == 2  # the model check ran on both turns
    (lead,) = await _leads(sessions, tenant.id)
    assert (lead.detected_by, lead.summary) == (
        OFFLINE_HEURISTIC,
        "Customer asked: I want to buy the DN50 valve",
    )
