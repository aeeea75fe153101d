"""A throttled number's sends wait a growing, jittered, capped hold (with or without ``Retry-After``),
and the parts that waited are released spread out after it, not all at once. Real Postgres and Redis,
the real WhatsApp channel against the Graph sandbox answering Meta's throughput errors."""

from __future__ import annotations

from datetime import timedelta

from hypothesis import given
from hypothesis import strategies as st
from switchboard.db.models import OutboxPurpose, utcnow
from switchboard.outbox.delivery import DeliveryScope, deliver
from switchboard.outbox.policy import throttle_hold_s, throttle_release
from switchboard.queue.keys import channel_throttle_key

from tests.utils.outbox import past, rows_of, script, sent_by, set_row, write_parts


@given(
    throttles=st.integers(1, 80),
    retry_after_s=st.one_of(st.none(), st.floats(0.5, 900)),
    base_s=st.floats(1, 120),
    cap_s=st.floats(1, 3600),
    share=st.floats(0, 0.999),
)
def test_the_hold_grows_is_jittered_capped_and_never_shorter_than_retry_after(
    throttles, retry_after_s, base_s, cap_s, share
):
    hold = throttle_hold_s(
        throttles, retry_after_s=retry_after_s, base_s=base_s, cap_s=cap_s, rng=lambda: share
    )
    step = min(cap_s, base_s * 2 ** (throttles - 1))
    assert hold >= (retry_after_s or 0)
    assert hold <= max(step, retry_after_s or 0)
    assert hold >= step / 2
    if retry_after_s is None:  # the next limit in a row never waits less at the same draw
        again = throttle_hold_s(
            throttles + 1, retry_after_s=None, base_s=base_s, cap_s=cap_s, rng=lambda: share
        )
        assert again >= hold


def test_release_lies_within_the_spread_after_the_hold():
    expiry = utcnow()
    times = [throttle_release(expiry, spread_s=15, rng=lambda s=s: s / 10) for s in range(10)]
    assert times[0] == expiry and times[-1] == expiry + timedelta(seconds=13.5)
    assert throttle_release(expiry, spread_s=0) == expiry


async def test_parts_waiting_for_a_throttled_number_are_released_spread_out(
    make_deps, make_scene, sessions, sandbox, arq_redis
) -> None:  # type: ignore[no-untyped-def]
    deps, scene = make_deps(whatsapp_throttle_backoff_s=30, delivery_throttle_spread_s=20), await make_scene()
    await write_parts(sessions, scene, ["the reply"])
    for n in range(24):  # notices of other groups from the same number
        await write_parts(sessions, scene, [f"notice {n}"], purpose=OutboxPurpose.notice, keyed=False)
    await script(sandbox[0], phone_number_id=scene.phone_number_id, code=131056, http_status=400)

    report = await deliver(deps, DeliveryScope(tenant_id=scene.tenant.id))

    ttl_ms = await arq_redis.pttl(channel_throttle_key("whatsapp", scene.phone_number_id))
    assert 14_000 < ttl_ms <= 30_000  # the first hold: between half of the base and all of it
    expiry = utcnow() + timedelta(milliseconds=ttl_ms)
    first, *waiting = await rows_of(sessions, scene)
    assert (first.status, first.error_code, first.attempts) == ("pending", "131056", 0)
    assert abs((first.next_attempt_at - expiry).total_seconds()) < 2  # the part that hit the limit goes first
    released = sorted(r.next_attempt_at for r in waiting)
    assert len(waiting) == 24 and all(r.status == "pending" for r in waiting)
    assert released[0] >= expiry - timedelta(seconds=2)
    assert released[-1] <= expiry + timedelta(seconds=20)
    assert len(set(released)) == 24  # never two parts at the same moment
    assert (released[-1] - released[0]).total_seconds() > 10  # spread over the window, not bunched
    per_second: dict[int, int] = {}
    for at in released:
        per_second[int((at - expiry).total_seconds())] = (
            per_second.get(int((at - expiry).total_seconds()), 0) + 1
        )
    assert max(per_second.values()) <= 8
    assert await sent_by(sandbox[0], scene.phone_number_id) == []
    assert report.sent == 0 and report.pending == 25


async def test_a_limit_again_after_the_hold_waits_longer_with_or_without_retry_after(
    make_deps, make_scene, sessions, sandbox, arq_redis
) -> None:  # type: ignore[no-untyped-def]
    deps, scene = (
        make_deps(whatsapp_throttle_backoff_s=30, whatsapp_throttle_backoff_max_s=100),
        await make_scene(),
    )
    (row,) = await write_parts(sessions, scene, ["patience"])
    key = channel_throttle_key("whatsapp", scene.phone_number_id)
    holds = []
    for headers in ({}, {"Retry-After": "5"}, {}, {"Retry-After": "5"}):
        await script(
            sandbox[0], phone_number_id=scene.phone_number_id, code=130429, http_status=429, headers=headers
        )
        await arq_redis.delete(key)  # the hold ended
        await set_row(sessions, row.id, next_attempt_at=past(1))
        await deliver(deps, DeliveryScope(inbound_message_id=scene.inbound.id))
        holds.append(await arq_redis.pttl(key) / 1000)
    assert 14 < holds[0] <= 30
    assert 29 < holds[1] <= 60  # Retry-After 5 is only a lower bound
    assert 49 < holds[2] <= 100  # 120 capped at 100
    assert 49 < holds[3] <= 100
    await arq_redis.delete(key)
    await set_row(sessions, row.id, next_attempt_at=past(1))
    assert (await deliver(deps, DeliveryScope(inbound_message_id=scene.inbound.id))).sent == 1
    assert [r.attempts for r in await rows_of(sessions, scene)] == [1]
