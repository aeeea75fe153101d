"""The faults script's own counters (``loadtests/faults.py`` ``count``) on a tiny known input: in, out,
lost, duplicated, delays against the bound, and the holding figures (messages posted during the fault,
their longest wait, answers that were the error reply) must count exactly what they claim."""

from __future__ import annotations

from types import SimpleNamespace

from tests.utils.scripts import loadtest_script

faults = loadtest_script("faults")

ERROR = "Sorry, I can't answer right now."
T0 = 1_000.0  # epoch seconds of the first post


def message(row_id: int, wamid: str, *, coalesced: bool = False) -> SimpleNamespace:
    return SimpleNamespace(
        id=row_id,
        external_id=wamid,
        inbound_state="done",
        last_error=None,
        conversation_id=1,
        coalesced=coalesced,
    )


def outbox(correlation: str, inbound: int, part: int = 0) -> SimpleNamespace:
    return SimpleNamespace(
        correlation_id=correlation,
        inbound_message_id=inbound,
        conversation_id=1,
        purpose="reply",
        part_index=part,
        status="sent",
        attempts=1,
    )


def send(seq: int, to: str, at: float, correlation: str | None, text: str = "We ship abroad.") -> dict:
    return {"seq": seq, "to": to, "at": at, "text": text, "biz_opaque_callback_data": correlation}


def run() -> object:
    posted = {
        "w0": faults.Sent("w0", "D", T0 + 5),  # before the fault, answered 10 s into it
        "w1": faults.Sent("w1", "A", T0),  # before the fault, answered in 2 s
        "w2": faults.Sent("w2", "A", T0 + 20),  # during the fault: error reply after 50 s
        "w3": faults.Sent("w3", "B", T0 + 30),  # during the fault, coalesced into w4
        "w4": faults.Sent("w4", "B", T0 + 31),  # during the fault: answered after 119 s (late), twice
        "w5": faults.Sent("w5", "C", T0 + 90),  # after the heal: never answered
    }
    messages = {
        "w0": message(6, "w0"),
        "w1": message(1, "w1"),
        "w2": message(2, "w2"),
        "w3": message(3, "w3", coalesced=True),
        "w4": message(4, "w4"),
        "w5": message(5, "w5"),
    }
    rows = {c: outbox(c, i) for c, i in (("c0", 6), ("c1", 1), ("c2", 2), ("c4", 4))}
    records = [
        send(1, "A", T0 + 2, "c1"),
        send(6, "D", T0 + 20, "c0"),
        send(2, "A", T0 + 70, "c2", ERROR),
        send(3, "B", T0 + 150, "c4"),
        send(4, "B", T0 + 151, "c4"),  # the same outbox row sent again: one duplicate
        send(5, "Z", T0 + 160, None),  # claimed by no outbox row of this run: not counted out
    ]
    result = faults.Result("providers_down", outage_s=60.0, fault_at=T0 + 10, healed_at=T0 + 70)
    faults.count(result, posted, records, messages, rows, ERROR)
    return result


def test_in_out_lost_and_dup_count_messages_and_sends() -> None:
    result = run()

    assert (result.posted, result.out, result.lost, result.dup, result.coalesced) == (6, 5, 1, 1, 1)
    assert not result.passed
    assert result.notes == ["no answer to w5 (done: None)"]


def test_delays_are_measured_to_the_first_answer_against_45_s_plus_the_outage() -> None:
    result = run()

    assert result.max_delay_s == 120.0  # w3 (coalesced): T0+30 -> w4's first send at T0+150
    assert result.late == 2  # w3 and w4 (119 s; its second send does not count), over 45 + 60 s


def test_holding_figures_count_messages_the_fault_caught_and_error_replies() -> None:
    result = run()

    assert result.caught == 4  # w0 (in flight at the fault), w2, w3, w4; not w1 (answered before), w5 (lost)
    assert result.max_delay_caught_s == 120.0  # w3: T0+30 -> w4's send at T0+150
    assert result.error_replies == 1  # w2's first answer was the error reply
