"""The end-to-end load run's own counters (``loadtests/e2e_accounting.py``) on a tiny known input: the
"without a reply" and "sent twice" numbers it prints must count exactly what they claim."""

from __future__ import annotations

import uuid

import pytest

from tests.utils.agent import make_conversation
from tests.utils.scripts import loadtest_script

acc = loadtest_script("e2e_accounting")


def record(
    channel: str, customer: str, message_id: str, at: float, status: int = 200, redelivery: bool = False
) -> dict:
    return {
        "channel": channel,
        "customer": customer,
        "message_id": message_id,
        "posted_at": at,
        "ack_ms": 5.0,
        "status": status,
        "kind": "text",
        "redelivery": redelivery,
    }


RECORDS = [
    # customer A (WhatsApp): a burst m1, m2 inside the debounce window, m2 redelivered
    record("whatsapp", "A", "m1", 0.0),
    record("whatsapp", "A", "m2", 0.5),
    record("whatsapp", "A", "m2", 0.7, redelivery=True),
    # customer B (WhatsApp): m3 answered, then m4 never
    record("whatsapp", "B", "m3", 10.0),
    record("whatsapp", "B", "m4", 20.0),
    # customer C (Instagram): m5, its first post refused (503), the redelivery acknowledged
    record("instagram", "C", "m5", 0.0, status=503),
    record("instagram", "C", "m5", 1.0, redelivery=True),
    # thread T (Gmail): m6, answered to another thread
    record("gmail", "T", "m6", 0.0),
    # refused and never acknowledged: not a customer message the system holds
    record("gmail", "U", "m7", 0.0, status=503),
]

REPLIES = [
    acc.Reply("whatsapp", "A", 3.0, "m2", "reply:0", "w1"),  # answers the burst (m1 coalesced into m2)
    acc.Reply("whatsapp", "B", 12.0, "m3", "reply:0", "w2"),
    acc.Reply("instagram", "C", 2.5, "m5", "reply:1", "i0"),  # second part of the reply, once
    acc.Reply("instagram", "C", 3.0, "m5", "reply:0", "i1"),
    acc.Reply("instagram", "C", 5.0, "m5", "reply:0", "i2"),  # the same first part again: sent twice
    acc.Reply("gmail", "T2", 4.0, "m6", "reply:0", "g1"),  # to the wrong thread
    acc.Reply("whatsapp", "B", 25.0, None, "?", "w3"),  # a send no outbox row claims
    acc.Reply("whatsapp", "Z", 1.0, "old-run", "reply:0", "w4"),  # answers a message of another run
]


def test_messages_are_the_first_acknowledged_post_of_each_id() -> None:
    sent = acc.sent_from_records(RECORDS)

    assert [(s.channel, s.message_id, s.posted_at) for s in sent] == [
        ("whatsapp", "m1", 0.0),
        ("gmail", "m6", 0.0),
        ("whatsapp", "m2", 0.5),
        ("instagram", "m5", 1.0),
        ("whatsapp", "m3", 10.0),
        ("whatsapp", "m4", 20.0),
    ]


def test_counts_unanswered_turns_and_double_sends() -> None:
    result = acc.account(acc.sent_from_records(RECORDS), REPLIES)

    assert result.messages == 6
    # m4 (after B's last answered message) and m6 (its only reply went to another thread)
    assert sorted(result.unanswered_ids) == ["gmail:m6", "whatsapp:m4"]
    assert (result.without_reply, result.customers_unanswered) == (2, 2)
    # i2 repeats i1's reply, w3 is unclaimed, g1 went to the wrong thread
    assert (result.sent_twice, result.unclaimed_sends, result.misdirected) == (3, 1, 1)
    assert result.doubled_keys == [("instagram:m5", "reply:0")]
    assert result.unclaimed == ["whatsapp:B:w3"]
    assert result.turns_answered == 3
    # first part of each answered turn minus the post of the answered message (m2: 3.0 - 0.5)
    assert {k: sorted(v) for k, v in result.latencies.items()} == {
        "whatsapp": [pytest.approx(2.0), pytest.approx(2.5)],
        "instagram": [pytest.approx(2.0)],
    }


def test_nothing_lost_or_doubled_is_zero() -> None:
    sent = [acc.Sent("whatsapp", "A", "m1", 0.0), acc.Sent("whatsapp", "A", "m2", 0.5)]
    result = acc.account(sent, [acc.Reply("whatsapp", "A", 3.0, "m2", "reply:0", "w1")])

    assert (result.without_reply, result.sent_twice, result.turns_answered) == (0, 0, 1)


def test_percentile_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]

    assert (acc.percentile(values, 0.5), acc.percentile(values, 0.95), acc.percentile(values, 0.99)) == (
        50.0,
        95.0,
        99.0,
    )
    assert acc.percentile([], 0.5) != acc.percentile([], 0.5)  # nan


def test_a_message_after_the_handoff_is_handed_to_a_person_not_lost() -> None:
    """A's conversation went human at t=4 after its holding reply: m2 (t=5) and m3 (t=6) get no AI reply by
    design. B's m5 (t=5) has no reply, and B's handoff came after it (t=7): lost. C was never handed off."""
    sent = [
        acc.Sent("whatsapp", "A", "m1", 0.0),
        acc.Sent("whatsapp", "A", "m2", 5.0),
        acc.Sent("whatsapp", "A", "m3", 6.0),
        acc.Sent("whatsapp", "B", "m5", 5.0),
        acc.Sent("instagram", "C", "m6", 1.0),
    ]
    replies = [acc.Reply("whatsapp", "A", 3.0, "m1", "notice:0", "w1")]  # the holding reply
    handoffs = {
        ("whatsapp", "m1"): 4.0,
        ("whatsapp", "m2"): 4.0,
        ("whatsapp", "m3"): 4.0,
        ("whatsapp", "m5"): 7.0,
    }

    result = acc.account(sent, replies, handoffs)

    assert result.handed_to_person == 2
    assert sorted(result.unanswered_ids) == ["instagram:m6", "whatsapp:m5"]
    assert (result.without_reply, result.customers_unanswered, result.sent_twice) == (2, 2, 0)
    # without handoff data the same messages are lost
    assert acc.account(sent, replies).without_reply == 4


load = loadtest_script("e2e_load")


async def test_a_mail_over_the_threads_reply_cap_counts_as_handed_to_a_person(
    sessions, make_tenant, database_url
) -> None:  # type: ignore[no-untyped-def]
    """The run's own database read: a Gmail mail the reply cap handed to a person (its processing ends
    with ``inbound.steps.reply_cap``'s detail) is handed over, however late its conversation's switch;
    a mail finished otherwise is not. ``account`` then counts the first, not the second, as lost."""
    from switchboard.db.models import Message

    tenant = await make_tenant()
    handle = await make_conversation(sessions, tenant)
    ext_capped, ext_other = f"capped-{uuid.uuid4().hex}", f"other-{uuid.uuid4().hex}"
    async with sessions() as session, session.begin():
        for ext, detail in (
            (ext_capped, "automatic reply cap reached: handed to a person"),
            (ext_other, None),
        ):
            session.add(
                Message(
                    tenant_id=tenant.id,
                    conversation_id=handle.conversation.id,
                    channel="gmail",
                    direction="inbound",
                    role="user",
                    kind="text",
                    text="again",
                    external_id=ext,
                    inbound_state="done",
                    last_error=detail,
                )
            )

    handoffs = await load.handoff_times(database_url)

    assert handoffs[("gmail", ext_capped)] == float("-inf")
    assert ("gmail", ext_other) not in handoffs
    sent = [acc.Sent("gmail", "T", ext_capped, 10.0), acc.Sent("gmail", "T", ext_other, 11.0)]
    result = acc.account(sent, [], handoffs)
    assert (result.handed_to_person, result.unanswered_ids) == (1, [f"gmail:{ext_other}"])
