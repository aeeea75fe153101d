"""Accounting of the end-to-end load run (``e2e_load.py``): which customer messages got no reply, which
replies were sent twice, and the message → reply-sent latencies. Pure functions over plain records, so
``tests/loadtests/test_e2e_accounting.py`` proves the counters on a tiny known input.

Inputs:

* :class:`Sent`: one customer message the scenario posted and the channel acknowledged (HTTP 200),
  first delivery only (a redelivery repeats the message id and is no new message).
* :class:`Reply`: one send recorded by a channel sandbox's send log (``/_control/sent`` of the Graph,
  Instagram and Gmail sandboxes), with ``answers`` = the provider id of the customer message it answers
  and ``part`` = its part key (``purpose:part_index`` of the outbox row that sent it, found in the
  database by the provider id the sandbox returned). A send no outbox row claims has ``answers=None``.

Definitions (a burst gets one reply per debounce window, so "without a reply" is per turn, not per
message):

* **Turn**: the product answers the newest waiting message of a customer and coalesces the older ones
  into that turn (``inbound.steps.coalesce``). So a reply that answers message M of customer C covers M
  and every earlier message of C not covered yet: those messages are one turn.
* **Without a reply**: a customer message that no reply covers, i.e. one sent after the newest
  message of that customer that was answered (a reply sent to another customer never counts). Each such
  message counts once; ``turns_unanswered`` counts the customers with any.
* **Handed to a person**: a message no reply covers, sent in a conversation the AI had already handed
  to a person (human mode: ``handoffs`` gives the time its conversation first switched to ``human``, at
  or before the message was posted). The product answers it by design: the customer got the holding /
  queue-position reply earlier, and the message is relayed to the agent, not answered by the AI. Counted
  apart (``handed_to_person``), never as without a reply; a message with no reply and no handoff before
  it stays lost.
* **Sent twice**: the same reply (``answers``, ``part``) recorded more than once by the sandbox, each
  extra copy counted; plus every send no outbox row claims (``answers=None``): the outbox keeps the
  provider id of its one accepted send, so a second provider send of the same row shows up as a send
  nobody claims.
* **Latency** (message → reply-sent): per reply whose part is the first one (``reply:0``), the
  sandbox's record time minus the time the scenario posted the answered message (seconds).
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field

__all__ = ["Sent", "Reply", "Accounting", "account", "sent_from_records", "percentile"]


@dataclass(frozen=True)
class Sent:
    """One acknowledged customer message (first delivery).

    Attributes:
        channel: ``whatsapp`` | ``instagram`` | ``gmail``.
        customer: the conversation key on that channel (wa_id, IGSID, Gmail thread id).
        message_id: provider message id (wamid, mid, Gmail message id): the key replies are matched on.
        posted_at: epoch seconds when the scenario posted it.
    """

    channel: str
    customer: str
    message_id: str
    posted_at: float


@dataclass(frozen=True)
class Reply:
    """One send in a sandbox's send log.

    Attributes:
        channel: the sandbox's channel.
        to: recipient (wa_id, IGSID; for Gmail the thread id).
        at: epoch seconds the sandbox recorded it.
        answers: provider id of the customer message its outbox row answers; ``None``: no row claims it.
        part: ``purpose:part_index`` of that outbox row (``reply:0`` the first part of an AI reply).
        provider_id: the id the sandbox gave the send.
    """

    channel: str
    to: str
    at: float
    answers: str | None
    part: str = "reply:0"
    provider_id: str = ""


@dataclass
class Accounting:
    """What :func:`account` found; ``without_reply`` and ``sent_twice`` must be 0."""

    messages: int = 0
    turns_answered: int = 0
    without_reply: int = 0
    customers_unanswered: int = 0
    handed_to_person: int = 0
    """Messages no reply covers, sent after their conversation was handed to a person (not lost)."""
    sent_twice: int = 0
    unclaimed_sends: int = 0
    misdirected: int = 0
    """Replies to a recipient other than the customer who sent the answered message (counted as twice)."""
    latencies: dict[str, list[float]] = field(default_factory=dict)
    """Channel → message → reply-sent seconds, one per answered turn."""
    unanswered_ids: list[str] = field(default_factory=list)
    doubled_keys: list[tuple[str, str]] = field(default_factory=list)
    unclaimed: list[str] = field(default_factory=list)
    """``channel:to:provider_id`` of each send no outbox row claims."""


def account(
    sent: list[Sent], replies: list[Reply], handoffs: dict[tuple[str, str], float] | None = None
) -> Accounting:
    """Count messages without a reply, handed to a person, and replies sent twice (definitions in the
    module docstring).

    Args:
        sent: the acknowledged customer messages, any order; a message id must be unique per channel.
        replies: every send the sandboxes recorded during the run, any order.
        handoffs: ``(channel, message_id) → epoch s`` its conversation first switched to ``human``, for
            the messages whose conversation was handed to a person (absent: never handed off).
    """
    handoffs = handoffs or {}
    result = Accounting(messages=len(sent))
    by_id = {(s.channel, s.message_id): s for s in sent}
    copies = Counter((r.channel, r.answers, r.part) for r in replies if r.answers is not None)
    for (channel, answers, part), count in copies.items():
        if count > 1:
            result.sent_twice += count - 1
            result.doubled_keys.append((f"{channel}:{answers}", part))
    result.unclaimed = [f"{r.channel}:{r.to}:{r.provider_id}" for r in replies if r.answers is None]
    result.unclaimed_sends = len(result.unclaimed)
    result.sent_twice += result.unclaimed_sends
    newest_answered: dict[tuple[str, str], float] = {}
    first_part: dict[tuple[str, str], Reply] = {}
    answered: set[tuple[str, str]] = set()
    for reply in sorted(replies, key=lambda r: r.at):
        message = by_id.get((reply.channel, reply.answers)) if reply.answers is not None else None
        if message is None:
            continue  # an answer to a message of another run, or unclaimed (counted above)
        if reply.to != message.customer:
            result.misdirected += 1
            result.sent_twice += 1
            continue
        key = (message.channel, message.customer)
        newest_answered[key] = max(newest_answered.get(key, float("-inf")), message.posted_at)
        answered.add((reply.channel, message.message_id))
        if reply.part.endswith(":0"):
            first_part.setdefault((reply.channel, message.message_id), reply)
    result.turns_answered = len(answered)
    for (channel, message_id), reply in first_part.items():
        message = by_id[(channel, message_id)]
        result.latencies.setdefault(channel, []).append(reply.at - message.posted_at)
    unanswered_by_customer: dict[tuple[str, str], int] = defaultdict(int)
    for message in sent:
        key = (message.channel, message.customer)
        if message.posted_at > newest_answered.get(key, float("-inf")):
            handed_at = handoffs.get((message.channel, message.message_id))
            if handed_at is not None and handed_at <= message.posted_at:
                result.handed_to_person += 1
                continue
            unanswered_by_customer[key] += 1
            result.unanswered_ids.append(f"{message.channel}:{message.message_id}")
    result.without_reply = sum(unanswered_by_customer.values())
    result.customers_unanswered = len(unanswered_by_customer)
    return result


def sent_from_records(records: list[dict]) -> list[Sent]:
    """The customer messages among the scenario's post records (``e2e_locustfile``'s JSON lines): the
    first post of each ``(channel, message_id)`` acknowledged 200 (a redelivery repeats the id and is the
    same message; it counts as the message only when every earlier post of it failed)."""
    seen: set[tuple[str, str]] = set()
    out = []
    for record in sorted(records, key=lambda r: r["posted_at"]):
        key = (record["channel"], record["message_id"])
        if record["status"] != 200 or key in seen:
            continue
        seen.add(key)
        out.append(Sent(record["channel"], record["customer"], record["message_id"], record["posted_at"]))
    return out


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (``q`` in 0..1) of ``values``; ``nan`` when empty."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered) - 1e-9) - 1))]
