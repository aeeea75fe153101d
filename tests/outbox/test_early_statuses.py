"""Delivery statuses that arrive before the send call returned the provider's id, several at once:
none is lost, and the row ends at the status their rank order gives. Real Postgres and Redis, the real
WhatsApp channel against the Graph sandbox (which holds its answer while the statuses arrive)."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from switchboard.outbox.delivery import DeliveryScope, deliver
from switchboard.outbox.statuses import STATUS_RANK, DeliveryStatus, apply_statuses

from tests.utils.outbox import rows_of, script, sent_by, write_parts

FORWARD = ["sent", "delivered", "read", "played"]


def expected_status(statuses: list[str]) -> str:
    """What the row must end as: the highest forward status, unless a failure came before ``read``."""
    best = max((s for s in statuses if s != "failed"), key=STATUS_RANK.__getitem__, default="sent")
    if "failed" in statuses and STATUS_RANK[best] < STATUS_RANK["read"]:
        return "failed"
    return best


async def _in_flight_record(sandbox, phone_number_id: str) -> dict:  # type: ignore[no-untyped-def]
    for _ in range(500):  # the send is held by the sandbox: its record appears first
        recorded = await sent_by(sandbox[0], phone_number_id)
        if recorded:
            return recorded[0]
        await asyncio.sleep(0.01)
    raise AssertionError("the sandbox never recorded the send")


async def _race(deps, scene, sessions, sandbox, arrivals: list[tuple[str, bool]]):  # type: ignore[no-untyped-def]
    """Send one part held 0.6 s by the sandbox; meanwhile apply ``arrivals`` (status, echoes our
    correlation id) all at once, one webhook each. Returns the row once the send returned."""
    (written,) = await write_parts(sessions, scene, ["early statuses"])
    await script(sandbox[0], phone_number_id=scene.phone_number_id, mode="delay", delay_s=0.6)
    sending = asyncio.create_task(deliver(deps, DeliveryScope(inbound_message_id=scene.inbound.id)))
    record = await _in_flight_record(sandbox, scene.phone_number_id)
    statuses = [
        DeliveryStatus(
            account_id=scene.phone_number_id,
            external_id=record["id"],
            status=status,
            correlation_id=written.correlation_id if echoed else None,
        )
        for status, echoed in arrivals
    ]
    await asyncio.gather(*(apply_statuses(sessions, deps.redis, "whatsapp", [s]) for s in statuses))
    assert (await sending).sent == 1
    (row,) = await rows_of(sessions, scene)
    assert row.external_id == record["id"]
    return row


@pytest.mark.parametrize(
    "arrivals",
    [
        [("sent", True), ("delivered", True)],
        [("delivered", True), ("sent", True)],
        [("read", True), ("delivered", True), ("sent", True)],
        [("delivered", False), ("sent", False)],
        [("sent", True), ("delivered", False), ("read", True)],
        [("delivered", True), ("failed", True)],
        [("failed", False), ("read", False)],
    ],
)
async def test_early_statuses_applied_at_once_all_count(make_deps, make_scene, sessions, sandbox, arrivals):  # type: ignore[no-untyped-def]
    deps, scene = make_deps(), await make_scene()
    row = await _race(deps, scene, sessions, sandbox, arrivals)
    assert row.status == expected_status([s for s, _ in arrivals])


_ARRIVALS = st.lists(st.sampled_from(FORWARD), min_size=1, max_size=4, unique=True).flatmap(
    lambda chosen: st.permutations(chosen).flatmap(
        lambda order: st.lists(st.booleans(), min_size=len(order), max_size=len(order)).map(
            lambda echoes: list(zip(order, echoes, strict=True))
        )
    )
)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(arrivals=_ARRIVALS)
async def test_any_order_of_early_statuses_ends_at_the_highest(
    make_deps, make_scene, sessions, sandbox, arrivals
):  # type: ignore[no-untyped-def]
    deps, scene = make_deps(), await make_scene()
    row = await _race(deps, scene, sessions, sandbox, arrivals)
    assert row.status == expected_status([s for s, _ in arrivals])
