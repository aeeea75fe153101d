"""The channel-neutral fault scripts every provider sandbox uses (switchboard.standins.faults)."""

from __future__ import annotations

import pytest
from switchboard.standins.faults import Fault, FaultScript, FaultSpec

BOOM = Fault(code=131000)


def test_after_passes_calls_through_then_times_faults_apply():
    script = FaultScript()
    script.add("send", "to:1", BOOM, times=2, after=1)
    assert [script.next("send", "to:1") for _ in range(4)] == [None, BOOM, BOOM, None]
    assert script.queues == {}


def test_the_first_matching_key_wins_and_star_matches_any():
    script = FaultScript()
    specific, anything = Fault(code=1), Fault(code=2)
    script.add("media", "*", anything)
    script.add("media", "m1", specific)
    assert script.next("media", "m1") is specific
    assert script.next("media", "m2") is anything
    assert script.next("media", "m1") is None


def test_clear_counts_faults_only():
    script = FaultScript()
    script.add("send", "k", BOOM, times=2, after=3)
    assert script.pending("send", "k") == 2
    assert script.clear("send", "k") == 2 and script.queues == {}


def test_queues_are_bounded():
    with pytest.raises(ValueError):
        FaultScript().add("send", "k", BOOM, times=1000, after=9500)


def test_spec_defaults_the_status_of_an_accepted_then_lost_send_to_500():
    assert FaultSpec(to="1", mode="accept_then_500").fault().http_status == 500
    assert FaultSpec(to="1").fault().http_status == 400
    with pytest.raises(ValueError):
        FaultSpec(to="1", surprise=True)
