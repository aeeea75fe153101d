"""The channel conformance suite: every registered channel (``channels.base.channel_names()``) must pass it.

Each test runs the channel's real service app, the real worker and the real orchestrator; only the
provider (its sandbox) and the model (the scripted offline server) stand in for what is outside.
"""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import update
from sqlmodel import col, select
from switchboard.channels.base import channel_capabilities, channel_names, split_text
from switchboard.db.models import Message, Outbox
from switchboard.queue import Queue
from switchboard.queue.keys import inbound_job_id
from switchboard.standins.offline_server import ScriptedResponse

from tests.channels.kits import KITS, ChannelKit, Posted, new_id, raw
from tests.utils.agent import answer_with_script
from tests.utils.workers import run_worker_burst

CHANNELS = channel_names()


def test_every_registered_channel_has_a_conformance_kit() -> None:
    assert CHANNELS and [name for name in CHANNELS if name not in KITS] == []


MESSAGE_CHANNELS = [name for name in CHANNELS if name in KITS and KITS[name].webhook_carries_messages]
"""Channels whose webhook carries the messages (``ChannelKit.webhook_carries_messages``): the
message-shaped tests (``kit``) run for these; the checks of any webhook (``any_kit``) for every channel."""


@pytest.fixture(params=MESSAGE_CHANNELS)
def kit(request: pytest.FixtureRequest) -> ChannelKit:
    return KITS[request.param]


@pytest.fixture(params=CHANNELS)
def any_kit(request: pytest.FixtureRequest) -> ChannelKit:
    return KITS[request.param]


@pytest.fixture
def provider_sandbox(kit: ChannelKit, request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    """The state of the sandbox standing in for ``kit``'s provider (``kit.sandbox_fixture``)."""
    return request.getfixturevalue(kit.sandbox_fixture)[1]


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


async def _post(kit: ChannelKit, settings, body, headers=None, path=None):  # type: ignore[no-untyped-def]
    """POST ``body`` to the kit's webhook, authenticated as the provider would (or with ``headers`` to
    ``path``, default the bare webhook path: ``{}`` is unauthenticated)."""
    data = raw(body)
    async with kit.service(settings) as client:
        return await client.post(
            kit.signed_path(settings) if headers is None else (path or kit.webhook_path),
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
    any_kit, make_settings, make_tenant, sessions, arq_pool
) -> None:  # type: ignore[no-untyped-def]
    kit = any_kit
    settings = make_settings()
    tenant = await make_tenant()
    account = await kit.connect(sessions, tenant, settings)
    body = kit.notification(account)
    missing = await _post(kit, settings, body, headers={})
    wrong_path, wrong_headers = kit.wrongly_signed(settings)
    wrong = await _post(kit, settings, body, headers=wrong_headers, path=wrong_path)
    assert (missing.status_code, wrong.status_code) == (401, 403)
    assert await _rows(sessions, tenant.id) == []
    for queue in Queue:  # nothing was enqueued either (no message job, no mailbox sync)
        assert await arq_pool.zrange(queue.value, 0, -1) == []


async def test_an_unknown_account_is_acknowledged_and_logged(any_kit, make_settings, capsys) -> None:  # type: ignore[no-untyped-def]
    kit = any_kit
    settings = make_settings()
    unknown = kit.unknown_account()
    capsys.readouterr()
    response = await _post(kit, settings, kit.notification(unknown))
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
    any_kit, e2e_settings, answering_tenant, model, sessions, arq_pool, request
) -> None:  # type: ignore[no-untyped-def]
    kit = any_kit
    sandbox = request.getfixturevalue(kit.sandbox_fixture)[1]
    state, name, _ = model
    capabilities = channel_capabilities(kit.name)
    assert capabilities is not None
    sentence = "All the details you asked for. "
    # ASCII, so every unit counts alike; a paragraph fits one message of a chat channel, the whole does not
    repeats = (min(capabilities.text_limit, 4096) - 20) // len(sentence)
    paragraphs = [f"Part {i}: " + (sentence * repeats).strip() for i in range(3)]
    reply = "\n\n".join(paragraphs)
    parts = split_text(reply, capabilities.text_limit, capabilities.text_unit)  # one mail for Gmail
    assert parts == (paragraphs if capabilities.text_limit < len(reply) else [reply])
    state.script(name).default = ScriptedResponse(content=reply)
    settings = e2e_settings()
    account = await kit.connect(sessions, answering_tenant, settings)
    sender = kit.new_sender()
    await kit.receive(settings, account, sender, "tell me all")
    await run_worker_burst(settings)
    sent = kit.sent(sandbox, account)
    assert [m["text"] for m in sent] == parts and {m["to"] for m in sent} == {sender}

    # the worker dies after sending but before recording the row as done: the job runs again
    (row,) = await _rows(sessions, answering_tenant.id)
    async with sessions() as session, session.begin():
        await session.exec(
            update(Message).where(col(Message.id) == row.id).values(inbound_state="processing")
        )
    await arq_pool.enqueue_job("process_inbound", str(row.id), _job_id=inbound_job_id(row.id) + ":rerun")
    await run_worker_burst(settings)
    assert kit.sent(sandbox, account) == sent
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
    kit, e2e_settings, answering_tenant, model, sessions, provider_sandbox
) -> None:  # type: ignore[no-untyped-def]
    state, name, _ = model
    state.script(name).default = ScriptedResponse(content="Status check.")
    settings = e2e_settings()
    account = await kit.connect(sessions, answering_tenant, settings)
    await _post(kit, settings, kit.delivery(account, [Posted(new_id("st"), "15550100306", "hi")]))
    await run_worker_burst(settings)
    (sent,) = kit.sent(provider_sandbox, account)
    # out of order, as providers may send them; a late "failed" after "read" changes nothing either
    for status in ("read", "delivered", "sent", "failed"):
        assert (await _post(kit, settings, kit.status(account, sent["id"], status))).status_code == 200
        await run_worker_burst(settings)
    async with sessions() as session:
        (part,) = (await session.exec(select(Outbox).where(Outbox.external_id == sent["id"]))).all()
    assert (part.status, part.error_code) == ("read", None)
