"""The channel conformance suite: every registered channel (``channels.base.channel_names()``) must pass it.

Each test runs the channel's real service app, the real worker and the real orchestrator; only the
provider (its sandbox) and the model (the scripted offline server) stand in for what is outside.
"""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import update
from sqlmodel import col, select
from switchboard.channels.base import channel_names
from switchboard.db.models import Message, Outbox
from switchboard.llm.offline_server import ScriptedResponse
from switchboard.queue import Queue
from switchboard.queue.keys import inbound_job_id

from tests.channels.kits import KITS, ChannelKit, Posted, new_id, raw
from tests.utils.agent import answer_with_script
from tests.utils.workers import run_worker_burst

CHANNELS = channel_names()


def test_every_registered_channel_has_a_conformance_kit() -> None:
    assert CHANNELS and [name for name in CHANNELS if name not in KITS] == []


@pytest.fixture(params=CHANNELS)
def kit(request: pytest.FixtureRequest) -> ChannelKit:
    kit = KITS[request.param]
    if not kit.webhook_carries_messages:
        pytest.skip(f"{kit.name}'s webhook carries no messages: see ChannelKit.webhook_carries_messages")
    return kit


async def _rows(sessions, tenant_id: uuid.UUID) -> list[Message]:  # type: ignore[no-untyped-def]
    async with sessions() as session:
        return list(
            (
                await session.exec(
                    select(Message)
                    .where(Message.tenant_id == tenant_id, Message.direction == "inbound")
                    .order_by(col(Message.created_at), col(Message.external_id))
                )
            ).all()
        )


async def _post(kit: ChannelKit, settings, body, headers=None):  # type: ignore[no-untyped-def]
    data = raw(body)
    async with kit.service(settings) as client:
        return await client.post(
            kit.webhook_path,
            content=data,
            headers={
                "Content-Type": "application/json",
                **(kit.sign(data, settings) if headers is None else headers),
            },
        )


async def test_a_duplicate_delivery_stores_nothing(
    kit, make_settings, make_tenant, sessions, arq_pool, stops_at_the_queue
) -> None:  # type: ignore[no-untyped-def]
    settings = make_settings()
    tenant = await make_tenant()
    account = await kit.connect(sessions, tenant, settings)
    body = kit.delivery(
        account,
        [Posted(new_id("dup"), "15550100301", "hello"), Posted(new_id("dup"), "15550100301", "again")],
    )
    first = await _post(kit, settings, body)
    second = await _post(kit, settings, body)
    assert (first.status_code, second.status_code) == (200, 200)
    assert (first.json()["stored"], second.json()["stored"], second.json()["duplicates"]) == (2, 0, 2)
    rows = await _rows(sessions, tenant.id)
    assert [r.text for r in rows] == ["hello", "again"]
    queued = {job_id.decode() for job_id in await arq_pool.zrange(Queue.chat.value, 0, -1)}
    assert queued == {inbound_job_id(r.id) for r in rows}  # one job per stored row, none for the duplicates


async def test_a_bad_signature_is_refused_and_stores_nothing(
    kit, make_settings, make_tenant, sessions
) -> None:  # type: ignore[no-untyped-def]
    settings = make_settings()
    tenant = await make_tenant()
    account = await kit.connect(sessions, tenant, settings)
    body = kit.delivery(account, [Posted(new_id("sig"), "15550100302", "hello")])
    missing = await _post(kit, settings, body, headers={})
    wrong = await _post(kit, settings, body, headers=kit.bad_signature())
    assert (missing.status_code, wrong.status_code) == (401, 403)
    assert await _rows(sessions, tenant.id) == []


async def test_an_unknown_account_is_acknowledged_and_logged(kit, make_settings, capsys) -> None:  # type: ignore[no-untyped-def]
    settings = make_settings()
    unknown = str(900_000_000_000_000 + uuid.uuid4().int % 10**14)
    capsys.readouterr()
    response = await _post(kit, settings, kit.delivery(unknown, [Posted(new_id("unk"), "15550100303", "hi")]))
    assert response.status_code == 200
    assert (response.json()["stored"], response.json()["unknown_accounts"]) == (0, [unknown])
    lines = [line for line in capsys.readouterr().err.splitlines() if unknown in line]
    assert (
        "webhook_unknown_account" in lines[0] and f"channel={kit.name}" in lines[0] and "warning" in lines[0]
    )


async def test_one_bad_message_never_blocks_the_rest_of_its_delivery(
    kit, make_settings, make_tenant, sessions, stops_at_the_queue
) -> None:  # type: ignore[no-untyped-def]
    settings = make_settings()
    tenant = await make_tenant()
    account = await kit.connect(sessions, tenant, settings)
    good = [Posted(new_id("ok"), "15550100304", f"message {i}") for i in range(3)]
    response = await _post(kit, settings, kit.delivery(account, good, malformed_at=1))
    assert response.status_code == 200 and response.json()["stored"] == 3
    assert sorted(r.external_id for r in await _rows(sessions, tenant.id)) == sorted(
        m.external_id for m in good
    )


@pytest.fixture
async def answering_tenant(make_tenant, sessions, model, offline_model):  # type: ignore[no-untyped-def]
    tenant = await make_tenant()
    await answer_with_script(sessions, tenant.id, offline_model, name=model[1])
    return tenant


async def test_a_rerun_job_sends_each_part_once_and_in_order(
    kit, e2e_settings, answering_tenant, model, sessions, graph_sandbox, arq_pool
) -> None:  # type: ignore[no-untyped-def]
    state, name, _ = model
    paragraphs = [f"Part {i}: " + ("All the details you asked for. " * 120).strip() for i in range(3)]
    reply = "\n\n".join(paragraphs)  # each paragraph fits one message, the whole does not
    state.script(name).default = ScriptedResponse(content=reply)
    settings = e2e_settings()
    account = await kit.connect(sessions, answering_tenant, settings)
    sender = "15550100305"
    assert (
        await _post(kit, settings, kit.delivery(account, [Posted(new_id("long"), sender, "tell me all")]))
    ).status_code == 200
    await run_worker_burst(settings)
    sent = kit.sent(graph_sandbox[1], account)
    assert [m["text"] for m in sent] == paragraphs and {m["to"] for m in sent} == {sender}

    # the worker dies after sending but before recording the row as done: the job runs again
    (row,) = await _rows(sessions, answering_tenant.id)
    async with sessions() as session, session.begin():
        await session.execute(
            update(Message).where(col(Message.id) == row.id).values(inbound_state="processing")
        )
    await arq_pool.enqueue_job("process_inbound", str(row.id), _job_id=inbound_job_id(row.id) + ":rerun")
    await run_worker_burst(settings)
    assert kit.sent(graph_sandbox[1], account) == sent
    assert len(state.script(name).requests) == 1  # the turn is not asked again either
    async with sessions() as session:
        parts = (
            await session.exec(
                select(Outbox).where(Outbox.inbound_message_id == row.id).order_by(col(Outbox.part_index))
            )
        ).all()
    assert [(p.part_index, p.status, p.external_id) for p in parts] == [
        (i, "sent", m["id"]) for i, m in enumerate(sent)
    ]


async def test_statuses_only_move_forward(
    kit, e2e_settings, answering_tenant, model, sessions, graph_sandbox
) -> None:  # type: ignore[no-untyped-def]
    state, name, _ = model
    state.script(name).default = ScriptedResponse(content="Status check.")
    settings = e2e_settings()
    account = await kit.connect(sessions, answering_tenant, settings)
    await _post(kit, settings, kit.delivery(account, [Posted(new_id("st"), "15550100306", "hi")]))
    await run_worker_burst(settings)
    (sent,) = kit.sent(graph_sandbox[1], account)
    # out of order, as providers may send them; a late "failed" after "read" changes nothing either
    for status in ("read", "delivered", "sent", "failed"):
        assert (await _post(kit, settings, kit.status(account, sent["id"], status))).status_code == 200
        await run_worker_burst(settings)
    async with sessions() as session:
        (part,) = (await session.exec(select(Outbox).where(Outbox.external_id == sent["id"]))).all()
    assert (part.status, part.error_code) == ("read", None)
