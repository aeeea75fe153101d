"""Service windows (customer and agent, with and without the agent template), provider refusals and
the per-account throttle."""

from __future__ import annotations

from datetime import timedelta

from switchboard.db.models import Conversation, OutboxPurpose, utcnow
from switchboard.outbox.delivery import DeliveryReport, DeliveryScope, deliver
from switchboard.queue.keys import channel_throttle_key

from tests.utils.outbox import (
    make_human_agent,
    past,
    rows_of,
    script,
    sent_by,
    set_row,
    write_agent_notice,
    write_parts,
)
from tests.utils.whatsapp import channel_service, load_payload


async def _conversation(sessions, scene) -> Conversation:  # type: ignore[no-untyped-def]
    async with sessions() as session:
        return await session.get(Conversation, scene.conversation.id)


async def test_customer_outside_the_window_gets_nothing_and_the_reason_is_recorded(
    make_deps, make_scene, sessions, sandbox
) -> None:  # type: ignore[no-untyped-def]
    deps, scene = make_deps(), await make_scene(last_message_age=timedelta(hours=24, minutes=1))
    await write_parts(sessions, scene, ["one", "two"])

    report = await deliver(deps, DeliveryScope(inbound_message_id=scene.inbound.id))

    assert report == DeliveryReport(sent=0, failed=2, pending=0, retry_in_s=None)
    assert await sent_by(sandbox[0], scene.phone_number_id) == []
    assert [
        (r.status, r.error_code, r.error_message, r.attempts) for r in await rows_of(sessions, scene)
    ] == [
        ("failed", "window_closed", "outside the 24-hour customer-service window: needs a template", 0),
        (
            "failed",
            "window_closed",
            "not sent: part 0 failed: outside the 24-hour customer-service window: needs a template",
            0,
        ),
    ]
    assert (await _conversation(sessions, scene)).escalation_reason == (
        "whatsapp: outside the 24-hour window; needs a template message or a human"
    )


async def test_agent_outside_their_window_gets_the_tenant_template(
    make_deps, make_scene, sessions, sandbox
) -> None:  # type: ignore[no-untyped-def]
    deps = make_deps()
    scene = await make_scene(handoff={"agent_template_name": "agent_ping", "agent_template_language": "es"})
    agent = await make_human_agent(sessions, scene, last_inbound_age=timedelta(hours=30))
    notice = await write_agent_notice(sessions, scene, agent, "New conversation for you.")

    report = await deliver(deps, DeliveryScope(tenant_id=scene.tenant.id, recipient=agent.phone))

    assert report.sent == 1
    (sent,) = await sent_by(sandbox[0], scene.phone_number_id)
    assert (sent["to"], sent["type"], sent["body"]["template"]) == (
        agent.phone,
        "template",
        {"name": "agent_ping", "language": {"code": "es"}},
    )
    assert sent["biz_opaque_callback_data"] == notice.correlation_id
    (row,) = await rows_of(sessions, scene)
    assert (row.status, row.error_code, row.external_id) == ("sent", "agent_template", sent["id"])


async def test_agent_outside_their_window_without_a_template_is_recorded_undeliverable(
    make_deps, make_scene, sessions, sandbox
) -> None:  # type: ignore[no-untyped-def]
    deps, scene = make_deps(), await make_scene()
    away = await make_human_agent(sessions, scene, last_inbound_age=timedelta(hours=24, seconds=5))
    near = await make_human_agent(sessions, scene, last_inbound_age=timedelta(minutes=3))
    await write_agent_notice(sessions, scene, away, "for the away agent")
    await write_agent_notice(sessions, scene, near, "for the near agent")

    report = await deliver(deps, DeliveryScope(tenant_id=scene.tenant.id))

    assert (report.sent, report.failed, report.pending) == (1, 1, 0)
    assert [(m["to"], m["type"], m["text"]) for m in await sent_by(sandbox[0], scene.phone_number_id)] == [
        (near.phone, "text", "for the near agent")
    ]
    rows = {r.recipient: r for r in await rows_of(sessions, scene)}
    assert (rows[away.phone].status, rows[away.phone].error_code, rows[away.phone].error_message) == (
        "failed",
        "agent_window_closed",
        "the agent has not written to the business number in 24 hours and no handoff.agent_template_name "
        "is configured",
    )
    assert (rows[near.phone].status, rows[near.phone].error_code) == ("sent", None)
    assert (
        await _conversation(sessions, scene)
    ).escalation_reason is None  # an agent's window is not the customer's


async def test_provider_window_and_undeliverable_errors_fail_the_rest_of_the_group(
    make_deps, make_scene, sessions, sandbox
) -> None:  # type: ignore[no-untyped-def]
    for code, reason in (
        (131047, "whatsapp 131047: outside the 24-hour window; needs a template message or a human"),
        (131026, "whatsapp 131026: message undeliverable to this customer: (#131026) Message undeliverable"),
    ):
        deps, scene = make_deps(), await make_scene()
        await write_parts(sessions, scene, ["one", "two", "three"])
        await script(sandbox[0], to=scene.customer.phone, code=code, http_status=400)

        report = await deliver(deps, DeliveryScope(inbound_message_id=scene.inbound.id))

        assert report == DeliveryReport(sent=0, failed=3, pending=0, retry_in_s=None)
        assert [(r.status, r.error_code, r.attempts) for r in await rows_of(sessions, scene)] == [
            ("failed", str(code), 1),
            ("failed", str(code), 0),
            ("failed", str(code), 0),
        ]
        assert (await _conversation(sessions, scene)).escalation_reason == reason
        assert await sent_by(sandbox[0], scene.phone_number_id) == []


async def test_throttled_account_holds_all_its_rows_and_others_keep_sending(
    make_deps, make_scene, sessions, sandbox, arq_redis
) -> None:  # type: ignore[no-untyped-def]
    deps, scene = make_deps(), await make_scene()
    elsewhere = await make_scene(tenant=scene.tenant)  # the same tenant's second number
    await write_parts(sessions, scene, ["reply one", "reply two"])
    await write_parts(sessions, scene, ["a notice"], purpose=OutboxPurpose.notice, keyed=False)
    await write_parts(sessions, elsewhere, ["other number"])
    await script(
        sandbox[0],
        phone_number_id=scene.phone_number_id,
        code=130429,
        http_status=400,
        headers={"Retry-After": "30"},
    )

    before = utcnow()
    report = await deliver(deps, DeliveryScope(tenant_id=scene.tenant.id))
    key = channel_throttle_key("whatsapp", scene.phone_number_id)
    ttl_ms = await arq_redis.pttl(key)

    assert 29_000 < ttl_ms <= 30_000
    reply1, reply2, notice = await rows_of(sessions, scene)
    hold = before + timedelta(seconds=30)
    assert (reply1.status, reply1.attempts, reply1.error_code) == ("pending", 0, "130429")
    assert hold <= reply1.next_attempt_at <= utcnow() + timedelta(seconds=30)
    assert (reply2.status, reply2.next_attempt_at) == ("pending", None)  # waits behind part one
    assert (notice.status, notice.attempts) == ("pending", 0)
    spread = timedelta(seconds=deps.settings.delivery_throttle_spread_s)  # released spread out after it
    assert hold - timedelta(seconds=1) <= notice.next_attempt_at <= utcnow() + timedelta(seconds=30) + spread
    assert await sent_by(sandbox[0], scene.phone_number_id) == []
    assert [m["text"] for m in await sent_by(sandbox[0], elsewhere.phone_number_id)] == ["other number"]
    assert (report.sent, report.failed, report.pending) == (1, 0, 3)
    assert 29 <= report.retry_in_s <= 30

    # still throttled: rows made due by hand still wait; once the key is gone everything goes, in order
    for row in (reply1, notice):
        await set_row(sessions, row.id, next_attempt_at=past(1))
    assert (await deliver(deps, DeliveryScope(tenant_id=scene.tenant.id))).sent == 0
    await arq_redis.delete(key)
    for row in (reply1, notice):
        await set_row(sessions, row.id, next_attempt_at=past(1))
    assert (await deliver(deps, DeliveryScope(tenant_id=scene.tenant.id))).sent == 3
    assert [m["text"] for m in await sent_by(sandbox[0], scene.phone_number_id)] == [
        "reply one",
        "reply two",
        "a notice",
    ]
    assert [r.attempts for r in await rows_of(sessions, scene)] == [1, 1, 1]


async def test_webhook_throughput_error_holds_the_number(
    make_deps, make_scene, make_settings, sessions, sandbox, arq_redis
) -> None:  # type: ignore[no-untyped-def]
    settings = make_settings(whatsapp_throttle_backoff_s=45)
    deps, scene = make_deps(whatsapp_throttle_backoff_s=45), await make_scene()
    await write_parts(sessions, scene, ["after the limit"])
    async with channel_service(settings) as svc:
        response = await svc.post(
            load_payload("errors_only_entry.json", phone_number_id=scene.phone_number_id)
        )
    assert response.status_code == 200
    assert 44_000 < await arq_redis.pttl(channel_throttle_key("whatsapp", scene.phone_number_id)) <= 45_000

    report = await deliver(deps, DeliveryScope(inbound_message_id=scene.inbound.id))

    spread_s = deps.settings.delivery_throttle_spread_s  # released at a random moment after the hold
    assert (report.sent, report.pending) == (0, 1) and 43 < report.retry_in_s <= 45 + spread_s
    (row,) = await rows_of(sessions, scene)
    assert (row.status, row.attempts) == ("pending", 0)
    assert await sent_by(sandbox[0], scene.phone_number_id) == []
