"""Structured replies on Instagram, end to end: options become quick replies (13 per message, titles
of at most 20 characters, the full text before them), a product card a generic template, and a tapped
quick reply comes back with its payload, which the model reads as the chosen option id."""

from __future__ import annotations

from switchboard.channels.base import text_length

from tests.utils.agent import call, text, tool_calls
from tests.utils.instagram import load_payload, new_igsid
from tests.utils.workers import run_worker_burst


async def test_options_are_quick_replies_and_a_tap_reaches_the_next_turn_with_its_id(ig) -> None:  # type: ignore[no-untyped-def]
    customer = new_igsid()
    options = [{"id": f"colour_{i}", "title": f"Colour {i}"} for i in range(12)]
    options.append({"id": "colour_special", "title": "Midnight blue with gold trim"})
    options.append({"id": "colour_last", "title": "Red"})
    ig.script.push(
        tool_calls(call("offer_options", {"style": "buttons", "prompt": "Which colour?", "options": options}))
    )
    ig.script.push(text("We have fourteen colours."))
    ig.script.push(text("Midnight blue, lovely."))
    await ig.post(load_payload("text_dm.json", account_id=ig.account_id, customer=customer))
    await run_worker_burst(ig.settings)
    sent = ig.sent()
    assert [m["answer"] for m in sent] == ["ok"] * 4
    assert [m["text"] for m in sent] == [
        "We have fourteen colours.",
        "13. Midnight blue with gold trim",
        "Which colour? (1/2)",
        "Which colour? (2/2)",
    ]
    quick = [q for m in sent[2:] for q in m["quick_replies"]]
    assert [q["payload"] for q in quick] == [o["id"] for o in options]
    assert [len(m["quick_replies"]) for m in sent[2:]] == [13, 1]
    assert all(text_length(q["title"], "utf16") <= 20 for q in quick)
    assert quick[12]["title"] == "Midnight blue with…"

    tap = load_payload("quick_reply.json", account_id=ig.account_id, customer=customer)
    tap["entry"][0]["messaging"][0]["message"].update(
        text="Midnight blue with…", quick_reply={"payload": "colour_special"}
    )
    await ig.post(tap)
    await run_worker_burst(ig.settings)
    last = ig.script.requests[-1]["messages"][-1]
    assert last == {"role": "user", "content": "Midnight blue with… [chose option id: colour_special]"}
    assert ig.sent()[-1]["text"] == "Midnight blue, lovely."


async def test_a_product_card_is_a_generic_template(ig) -> None:  # type: ignore[no-untyped-def]
    customer = new_igsid()
    ig.script.push(
        tool_calls(
            call(
                "show_product",
                {
                    "title": "Blue mug",
                    "description": "Stoneware, 350 ml, dishwasher safe.",
                    "price": "18",
                    "currency": "EUR",
                    "image_url": "https://cdn.shop.example/mug.jpg",
                    "cta_title": "Reserve one",
                    "cta_id": "reserve_mug",
                },
            )
        )
    )
    ig.script.push(text("Here it is."))
    await ig.post(load_payload("text_dm.json", account_id=ig.account_id, customer=customer))
    await run_worker_burst(ig.settings)
    first, card = ig.sent()
    assert first["text"] == "Here it is."
    assert card["template"] == {
        "template_type": "generic",
        "elements": [
            {
                "title": "Blue mug",
                "subtitle": "18.00 EUR · Stoneware, 350 ml, dishwasher safe.",
                "image_url": "https://cdn.shop.example/mug.jpg",
                "buttons": [{"type": "postback", "payload": "reserve_mug", "title": "Reserve one"}],
            }
        ],
    }
