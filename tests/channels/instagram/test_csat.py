"""Customer satisfaction on Instagram: the AI ends the conversation, the customer is asked once with
quick replies, and the tapped quick reply is stored without a model turn and thanked."""

from __future__ import annotations

from sqlmodel import select
from switchboard.db.models import Conversation, CsatAnswer

from tests.utils.agent import call, text, tool_calls
from tests.utils.instagram import load_payload, new_igsid
from tests.utils.workers import run_worker_burst


async def test_the_ai_closing_asks_once_with_quick_replies_and_the_tap_is_counted(ig, sessions) -> None:  # type: ignore[no-untyped-def]
    customer = new_igsid()
    ig.script.push(tool_calls(call("end_conversation", {"farewell": True, "reason": "answered"})))
    ig.script.push(text("Glad I could help. Goodbye!"))
    await ig.post(load_payload("text_dm.json", account_id=ig.account_id, customer=customer))
    await run_worker_burst(ig.settings)
    async with sessions() as session:
        conversation = (
            await session.exec(select(Conversation).where(Conversation.tenant_id == ig.tenant.id))
        ).one()
    assert conversation.status == "closed"
    sent = ig.sent()
    [question] = [m for m in sent if m.get("quick_replies")]
    assert question["text"] == "How did we do? Please rate this conversation."
    assert [(q["payload"], q["title"]) for q in question["quick_replies"]] == [
        (f"csat:{conversation.id}:5", "Good"),
        (f"csat:{conversation.id}:3", "OK"),
        (f"csat:{conversation.id}:1", "Bad"),
    ]
    assert [m["text"] for m in sent] == ["Glad I could help. Goodbye!", question["text"]]  # goodbye first

    model_calls = len(ig.script.requests)
    tap = load_payload("quick_reply.json", account_id=ig.account_id, customer=customer)
    tap["entry"][0]["messaging"][0]["message"].update(
        text="OK", quick_reply={"payload": f"csat:{conversation.id}:3"}
    )
    await ig.post(tap)
    await run_worker_burst(ig.settings)
    assert len(ig.script.requests) == model_calls  # never a model turn
    assert [m["text"] for m in ig.sent()[-2:]] == [
        "Thank you for your rating!",
        "Anything you'd like to add? Just write it here, or skip this.",
    ]
    async with sessions() as session:
        [answer] = (await session.exec(select(CsatAnswer).where(CsatAnswer.tenant_id == ig.tenant.id))).all()
        conversations = (
            await session.exec(select(Conversation).where(Conversation.tenant_id == ig.tenant.id))
        ).all()
    assert (answer.conversation_id, answer.channel, answer.handled_by, answer.rating) == (
        conversation.id,
        "instagram",
        "ai",
        3,
    )
    assert len(conversations) == 1  # the tap did not open a new conversation
