"""Handoff summaries fit ``handoff.summary_max_chars`` by cutting at a word with an ellipsis, never
mid-word: the model's note keeps its beginning, the quoted fallback its newest messages."""

from __future__ import annotations

from switchboard.channels.render import shorten
from switchboard.handoff.summary import write_handoff_summary

from tests.utils.agent import answer_with_script, conversation_messages, make_conversation, text


async def test_a_long_model_note_is_cut_at_a_word_with_an_ellipsis(
    sessions, make_tenant, gateway, orchestrator, offline_model
) -> None:  # type: ignore[no-untyped-def]
    tenant = await make_tenant()
    script = await answer_with_script(sessions, tenant.id, offline_model, handoff={"summary_max_chars": 100})
    handle = await make_conversation(sessions, tenant)
    script.push(text("Hello!"))
    await orchestrator.handle_turn(handle.request("My DN50 valve leaks at the flange since yesterday"))
    note = (
        "Customer reports a leaking DN50 ball valve at the flange; gasket replacement was suggested but "
        "the customer wants a technician visit this week."
    )
    script.push(text(note))
    summary = await write_handoff_summary(
        sessions, gateway, tenant_id=tenant.id, conversation_id=handle.conversation.id, trace_id="t"
    )
    assert summary == (
        "Customer reports a leaking DN50 ball valve at the flange; gasket replacement was suggested but the…"
    )
    assert len(summary) <= 100

    # without a model: the customer's messages quoted, the newest kept, cut at a word
    for words in ("the replacement gasket did not arrive", "and the technician never called me back today"):
        script.push(text("Sorry to hear that."))
        await orchestrator.handle_turn(handle.request(words))
    assert len(await conversation_messages(sessions, handle.conversation.id)) == 6
    fallback = await write_handoff_summary(
        sessions, None, tenant_id=tenant.id, conversation_id=handle.conversation.id, trace_id="t"
    )
    assert fallback == (
        "…the replacement gasket did not arrive / Customer: and the technician never called me back today"
    )
    assert len(fallback) <= 100


def test_shorten_backs_off_to_a_word_only_when_one_is_near() -> None:
    assert shorten("Customer wants the DN50 valve in stainless steel", 20, "chars", words=True) == (
        "Customer wants the…"
    )
    assert shorten("a Supercalifragilisticexpialidocious", 20, "chars", words=True) == "a Supercalifragilis…"
    assert shorten("one two three four", 12, "chars", words=True, keep="end") == "…three four"
    assert shorten("one two", 20, "chars", words=True) == "one two"
