"""Structured replies on WhatsApp, end to end: the model calls ``offer_options`` / ``show_product``, the
Graph sandbox receives interactive messages within Meta's limits, and the customer's tap comes back
as the next message whose option id the model sees (the configurator remembers the choice)."""

from __future__ import annotations

import json
import uuid

from sqlmodel import select
from switchboard.db.models import Outbox, Turn

from tests.utils.agent import call, text, tool_calls
from tests.utils.whatsapp import channel_service, load_payload, sent_to, text_body
from tests.utils.workers import run_worker_burst

SIZES = [
    {"id": "size_s", "title": "Small"},
    {"id": "size_m", "title": "Medium"},
    {"id": "size_l", "title": "Large"},
]


def _tap(phone_number_id: str, kind: str, option_id: str, title: str) -> dict:  # type: ignore[type-arg]
    """The customer's tap on a reply button (``button_reply``) or list row (``list_reply``)."""
    name = "interactive_button_reply.json" if kind == "button_reply" else "interactive_list_reply.json"
    body = load_payload(name, phone_number_id=phone_number_id)
    message = body["entry"][0]["changes"][0]["value"]["messages"][0]
    message["id"] = f"wamid.TAP{uuid.uuid4().hex}"
    message["interactive"] = {"type": kind, kind: {"id": option_id, "title": title}}
    return body


async def test_buttons_go_out_natively_and_the_tapped_id_reaches_the_next_turn(
    e2e_settings, ai_tenant, model, sessions, graph_sandbox
) -> None:  # type: ignore[no-untyped-def]
    state, name, _ = model
    script = state.script(name)
    script.push(
        tool_calls(call("offer_options", {"style": "buttons", "prompt": "Which size?", "options": SIZES}))
    )
    script.push(text("Great choice, the valve comes in three sizes."))
    script.push(text("Large it is. Which material?"))
    settings = e2e_settings()
    pid = ai_tenant.phone_number_id
    async with channel_service(settings) as svc:
        assert (
            await svc.post(text_body(phone_number_id=pid, wamid="wamid.CFG1", text="I want a valve"))
        ).status_code == 200
    await run_worker_burst(settings)

    (sent,) = sent_to(graph_sandbox[1], pid)
    assert (sent["type"], sent["answer"]) == ("interactive", "ok")
    assert sent["interactive"] == {
        "type": "button",
        "body": {"text": "Great choice, the valve comes in three sizes.\n\nWhich size?"},
        "action": {"buttons": [{"type": "reply", "reply": o} for o in SIZES]},
    }
    async with sessions() as session:
        turn = (await session.exec(select(Turn).where(Turn.tenant_id == ai_tenant.tenant.id))).one()
        (row,) = (await session.exec(select(Outbox).where(Outbox.tenant_id == ai_tenant.tenant.id))).all()
    assert turn.result["parts"][0]["kind"] == "buttons" and row.status == "sent"

    async with channel_service(settings) as svc:
        assert (await svc.post(_tap(pid, "button_reply", "size_l", "Large"))).status_code == 200
    await run_worker_burst(settings)
    second = script.requests[-1]["messages"]
    assert second[-1] == {"role": "user", "content": "Large [chose option id: size_l]"}
    offered = [m for m in second if m["role"] == "assistant" and m.get("tool_calls")]
    assert json.loads(offered[0]["tool_calls"][0]["function"]["arguments"])["options"] == SIZES
    assert [m["text"] for m in sent_to(graph_sandbox[1], pid)][-1] == "Large it is. Which material?"


async def test_twelve_options_are_two_lists_and_a_chosen_row_carries_across_turns(
    e2e_settings, ai_tenant, model, graph_sandbox
) -> None:  # type: ignore[no-untyped-def]
    state, name, _ = model
    script = state.script(name)
    options = [
        {"id": f"dn{n}", "title": f"DN{n} ball valve, stainless steel 316"} for n in range(10, 130, 10)
    ]
    script.push(
        tool_calls(
            call(
                "offer_options",
                {"style": "list", "prompt": "Pick a bore:", "options": options, "button_label": "Bores"},
            )
        )
    )
    script.push(text("Here are our bores."))
    script.push(text("DN50, noted."))
    script.push(text("Anything else?"))
    settings = e2e_settings()
    pid = ai_tenant.phone_number_id
    async with channel_service(settings) as svc:
        await svc.post(text_body(phone_number_id=pid, wamid="wamid.CFG2", text="valves?"))
    await run_worker_burst(settings)
    sent = sent_to(graph_sandbox[1], pid)
    assert [m["type"] for m in sent] == ["interactive", "interactive"]
    # the whole titles fit the rows' descriptions: nothing needs a text before the lists
    assert [m["interactive"]["body"]["text"] for m in sent] == [
        "Here are our bores.\n\nPick a bore: (1/2)",
        "Pick a bore: (2/2)",
    ]
    rows = [r for m in sent for r in m["interactive"]["action"]["sections"][0]["rows"]]
    assert [r["id"] for r in rows] == [o["id"] for o in options]  # none dropped
    assert all(
        len(r["title"]) <= 24 and r["description"] == o["title"] for r, o in zip(rows, options, strict=True)
    )
    assert [m["interactive"]["action"]["button"] for m in sent] == ["Bores", "Bores"]

    async with channel_service(settings) as svc:
        await svc.post(_tap(pid, "list_reply", "dn50", "DN50 ball valve, stainle"))
    await run_worker_burst(settings)
    async with channel_service(settings) as svc:
        await svc.post(text_body(phone_number_id=pid, wamid="wamid.CFG3", text="and the price?"))
    await run_worker_burst(settings)
    third = [m["content"] for m in script.requests[-1]["messages"] if m["role"] == "user"]
    assert third[-2:] == ["DN50 ball valve, stainle [chose option id: dn50]", "and the price?"]


async def test_a_product_card_is_a_cta_url_message_with_its_image(
    e2e_settings, ai_tenant, model, graph_sandbox
) -> None:  # type: ignore[no-untyped-def]
    state, name, _ = model
    script = state.script(name)
    script.push(
        tool_calls(
            call(
                "show_product",
                {
                    "title": "Ball valve DN50",
                    "description": "Stainless 316, PN40.",
                    "price": "129.9",
                    "currency": "EUR",
                    "image_url": "https://cdn.shop.example/dn50.jpg",
                    "cta_title": "Buy on our shop",
                    "cta_url": "https://shop.example/dn50",
                },
            )
        )
    )
    script.push(text("This one fits."))
    settings = e2e_settings()
    pid = ai_tenant.phone_number_id
    async with channel_service(settings) as svc:
        await svc.post(text_body(phone_number_id=pid, wamid="wamid.CARD1", text="show me DN50"))
    await run_worker_burst(settings)
    (sent,) = sent_to(graph_sandbox[1], pid)
    assert sent["interactive"] == {
        "type": "cta_url",
        "header": {"type": "image", "image": {"link": "https://cdn.shop.example/dn50.jpg"}},
        "body": {"text": "This one fits.\n\nBall valve DN50\n129.90 EUR\nStainless 316, PN40."},
        "action": {
            "name": "cta_url",
            "parameters": {"display_text": "Buy on our shop", "url": "https://shop.example/dn50"},
        },
    }


async def test_invalid_options_go_back_to_the_model_and_the_reply_is_text(
    e2e_settings, ai_tenant, model, graph_sandbox
) -> None:  # type: ignore[no-untyped-def]
    state, name, _ = model
    script = state.script(name)
    script.push(
        tool_calls(
            call(
                "offer_options",
                {
                    "style": "buttons",
                    "prompt": "?",
                    "options": [{"id": "a", "title": "A"}, {"id": "a", "title": "B"}],
                },
            )
        )
    )
    script.push(text("Which one, A or B?"))
    settings = e2e_settings()
    pid = ai_tenant.phone_number_id
    async with channel_service(settings) as svc:
        await svc.post(text_body(phone_number_id=pid, wamid="wamid.BAD1", text="hi"))
    await run_worker_burst(settings)
    assert [(m["type"], m["text"]) for m in sent_to(graph_sandbox[1], pid)] == [
        ("text", "Which one, A or B?")
    ]
    tool_result = next(m for m in script.requests[1]["messages"] if m["role"] == "tool")
    assert "invalid_arguments" in tool_result["content"] and "unique" in tool_result["content"]


async def test_the_sandbox_refuses_an_interactive_message_over_metas_limits(graph_sandbox) -> None:  # type: ignore[no-untyped-def]
    import httpx

    body = {
        "messaging_product": "whatsapp",
        "to": "15550100099",
        "type": "interactive",
        "interactive": {
            "type": "button",
            "body": {"text": "?"},
            "action": {
                "buttons": [{"type": "reply", "reply": {"id": f"b{i}", "title": "x" * 21}} for i in range(4)]
            },
        },
    }
    async with httpx.AsyncClient() as http:
        answer = await http.post(
            f"{graph_sandbox[0]}/v23.0/106000000000999/messages",
            json=body,
            headers={"Authorization": "Bearer t"},
        )
    assert answer.status_code == 400
    assert answer.json()["error"]["code"] == 131009
    assert "4 buttons (1..3)" in answer.json()["error"]["message"]


async def test_a_typed_reply_goes_out_as_native_buttons(
    e2e_settings, wa_tenant, script, graph_sandbox
) -> None:  # type: ignore[no-untyped-def]
    """The model fills in the typed reply (``agent.typed_replies``) instead of calling a tool: the same
    parts, rendered by the same WhatsApp renderer."""
    model = await script(agent={"typed_replies": True})
    model.push(
        text(
            json.dumps(
                {
                    "text": "Great choice, the valve comes in three sizes.",
                    "parts": [{"kind": "buttons", "prompt": "Which size?", "options": SIZES}],
                }
            )
        )
    )
    settings = e2e_settings()
    pid = wa_tenant.phone_number_id
    async with channel_service(settings) as svc:
        await svc.post(text_body(phone_number_id=pid, wamid="wamid.TYPED1", text="I want a valve"))
    await run_worker_burst(settings)
    (sent,) = sent_to(graph_sandbox[1], pid)
    assert sent["interactive"] == {
        "type": "button",
        "body": {"text": "Great choice, the valve comes in three sizes.\n\nWhich size?"},
        "action": {"buttons": [{"type": "reply", "reply": o} for o in SIZES]},
    }
    assert '{"text": "<your message>", "parts"' in model.requests[0]["messages"][0]["content"]
