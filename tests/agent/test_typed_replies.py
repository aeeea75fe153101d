"""The typed reply (``agent.typed_replies``): the model answers one JSON object ``{"text", "parts"}``
through the offline model; valid parts join the turn's, an invalid object sends its text alone (logged),
plain text stays plain, and without the setting nothing is parsed nor offered."""

from __future__ import annotations

import json

from switchboard.replies import ProductCard, QuickReplies

from tests.utils.agent import answer_with_script, make_conversation, text, tool_calls
from tests.utils.outbox import captured_logs

BUTTONS = {
    "kind": "buttons",
    "prompt": "Which size?",
    "options": [{"id": "s", "title": "Small"}, {"id": "l", "title": "Large"}],
}
PRODUCT = {
    "kind": "product",
    "title": "Ball valve DN50",
    "price": "129.90",
    "currency": "EUR",
    "image_url": "https://cdn.shop.example/dn50.jpg",
    "cta": {"title": "Buy", "url": "https://shop.example/dn50"},
}


async def _typed_tenant(sessions, make_tenant, offline_model, enabled=True):  # type: ignore[no-untyped-def]
    tenant = await make_tenant()
    script = await answer_with_script(sessions, tenant.id, offline_model, agent={"typed_replies": enabled})
    return tenant, script


async def test_a_typed_reply_carries_its_parts(sessions, make_tenant, orchestrator, offline_model) -> None:  # type: ignore[no-untyped-def]
    tenant, script = await _typed_tenant(sessions, make_tenant, offline_model)
    handle = await make_conversation(sessions, tenant)
    script.push(
        text("```json\n" + json.dumps({"text": "Here it is.", "parts": [PRODUCT, BUTTONS]}) + "\n```")
    )
    result = await orchestrator.handle_turn(handle.request("show me the DN50"))
    assert result.reply == "Here it is."
    assert [type(p) for p in result.parts] == [ProductCard, QuickReplies]
    assert str(result.parts[0].price) == "129.90" and [o.id for o in result.parts[1].options] == ["s", "l"]
    assert '"kind": "buttons"' in script.requests[0]["messages"][0]["content"]  # offered in the prompt


async def test_an_invalid_typed_reply_sends_its_text_alone_and_is_logged(
    sessions, make_tenant, orchestrator, offline_model
) -> None:  # type: ignore[no-untyped-def]
    tenant, script = await _typed_tenant(sessions, make_tenant, offline_model)
    handle = await make_conversation(sessions, tenant)
    bad = {**PRODUCT, "cta": {"title": "Buy", "url": "http://shop.example/dn50"}}  # not https
    script.push(text(json.dumps({"text": "Here it is.", "parts": [bad]})))
    script.push(text('{"parts": [' + json.dumps(BUTTONS) + "]}"))  # no text at all
    with captured_logs() as logs:
        first = await orchestrator.handle_turn(handle.request("show me the DN50"))
        second = await orchestrator.handle_turn(handle.request("which sizes?"))
    assert (first.reply, first.parts) == ("Here it is.", [])
    invalid = [e for e in logs if e["event"] == "typed_reply_invalid"]
    assert (
        len(invalid) == 2
        and "https" in invalid[0]["error"]
        and invalid[1]["error"].startswith("1 error(s); first at text")
    )
    assert (
        second.reply == '{"parts": [' + json.dumps(BUTTONS) + "]}" and second.parts == []
    )  # the answer as written


async def test_plain_text_stays_plain_and_the_tools_parts_count_toward_the_limit(
    sessions, make_tenant, orchestrator, offline_model
) -> None:  # type: ignore[no-untyped-def]
    tenant, script = await _typed_tenant(sessions, make_tenant, offline_model)
    handle = await make_conversation(sessions, tenant)
    script.push(text("{curly} but plain"))
    assert (await orchestrator.handle_turn(handle.request("hi"))).reply == "{curly} but plain"
    options = {"style": "buttons", "prompt": "Colour?", "options": [{"id": "r", "title": "Red"}]}
    script.push(tool_calls(*[("offer_options", options)] * 3))
    script.push(text(json.dumps({"text": "Pick.", "parts": [BUTTONS, BUTTONS, BUTTONS]})))
    with captured_logs() as logs:
        result = await orchestrator.handle_turn(handle.request("colours and sizes?"))
    assert result.reply == "Pick." and len(result.parts) == 5  # 3 from the tools, 2 of the 3 typed
    assert [e["kept"] for e in logs if e["event"] == "typed_reply_parts_over_limit"] == [2]


async def test_without_the_setting_the_json_is_the_reply_and_the_prompt_offers_nothing(
    sessions, make_tenant, orchestrator, offline_model
) -> None:  # type: ignore[no-untyped-def]
    tenant, script = await _typed_tenant(sessions, make_tenant, offline_model, enabled=False)
    handle = await make_conversation(sessions, tenant)
    answer = json.dumps({"text": "Here it is.", "parts": [BUTTONS]})
    script.push(text(answer))
    result = await orchestrator.handle_turn(handle.request("show me"))
    assert (result.reply, result.parts) == (answer, [])
    assert '"kind": "buttons"' not in script.requests[0]["messages"][0]["content"]
