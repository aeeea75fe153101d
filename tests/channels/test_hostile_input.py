"""Hostile and odd input, for every registered channel (its conformance kit): a correctly signed delivery
is answered 2xx while the database is up, every valid message in it is stored, one bad message never
takes its siblings down, the worker never raises on what was stored, and unsigned input stores nothing.

Bodies come from hypothesis (``tests/channels/hostile.py``); the ``ci`` profile draws the same examples
every run. ``loadtests/hostile_webhooks.py`` runs the same checks longer with random seeds.
"""

from __future__ import annotations

import random
import time
import uuid
from typing import Any

import pytest
from arq.constants import result_key_prefix
from arq.jobs import Job
from hypothesis import strategies as st
from sqlmodel import select
from switchboard.channels.base import channel_names
from switchboard.channels.sanitize import clean_text
from switchboard.db.models import Message
from switchboard.standins.offline_server import ScriptedResponse

from tests.channels.hostile import (
    as_received,
    collect,
    encode_hostile,
    hostile_text,
    junk,
    mutate,
    record_figures,
    sprinkle,
)
from tests.channels.kits import KITS, ChannelKit, Posted, new_id
from tests.utils.agent import answer_with_script
from tests.utils.workers import run_worker_burst

MESSAGE_CHANNELS = [name for name in channel_names() if KITS[name].webhook_carries_messages]
"""Channels whose webhook body carries the messages (WhatsApp, Instagram). Gmail's push only names the
mailbox and the mail comes from a sync: its hostile mail is tested in ``tests/channels/gmail``, and the
shared ingest cleans every row it stores, synced mail included."""

_CASES = st.tuples(
    st.lists(hostile_text, min_size=1, max_size=3),  # texts of the valid messages
    st.lists(junk, min_size=1, max_size=6),  # what is added or replaced
    st.integers(min_value=0, max_value=2**32),  # where it goes
)


@pytest.fixture(params=MESSAGE_CHANNELS)
def kit(request: pytest.FixtureRequest) -> ChannelKit:
    return KITS[request.param]


@pytest.fixture
async def answering_tenant(make_tenant, sessions, model, offline_model):  # type: ignore[no-untyped-def]
    state, name, _ = model
    state.script(name).default = ScriptedResponse(content="We got your message.")
    tenant = await make_tenant()
    await answer_with_script(sessions, tenant.id, offline_model, name=name)
    return tenant


def _sender(n: int) -> str:
    return f"1555{random.Random(n).randrange(10**7):07d}"


async def _rows(sessions, tenant_id: uuid.UUID) -> list[Message]:  # type: ignore[no-untyped-def]
    async with sessions() as session:
        rows = await session.exec(
            select(Message).where(Message.tenant_id == tenant_id, Message.direction == "inbound")
        )
        return list(rows.all())


async def _failed_jobs(arq_pool, since_ms: float) -> list[str]:  # type: ignore[no-untyped-def]
    """Jobs that finished with an exception since ``since_ms`` (any queue, any function)."""
    failed = []
    async for key in arq_pool.scan_iter(match=result_key_prefix + "*"):
        job_id = key.decode().removeprefix(result_key_prefix)
        info = await Job(job_id, arq_pool).result_info()
        if info is not None and info.enqueue_time.timestamp() * 1000 >= since_ms and not info.success:
            failed.append(f"{info.function}: {info.result!r}")
    return failed


def _deep(data: bytes) -> bool:
    """Nested past the JSON parser's recursion limit: acknowledged and logged, nothing can be stored."""
    return b"[" * 2000 in data


async def test_signed_hostile_bodies_are_acknowledged_and_every_valid_message_is_stored_and_answered(
    kit, e2e_settings, answering_tenant, sessions, arq_pool, request
) -> None:  # type: ignore[no-untyped-def]
    settings = e2e_settings()
    account = await kit.connect(sessions, answering_tenant, settings)
    started_ms = time.time() * 1000
    cases = collect(_CASES)
    expected: dict[str, Posted] = {}
    unsigned_ids: set[str] = set()
    statuses: list[int] = []
    async with kit.service(settings) as client:
        for n, (texts, junk_values, seed) in enumerate(cases):
            sender = _sender(n)
            posted = [Posted(new_id("hostile"), sender, text) for text in texts]
            body = sprinkle(kit.delivery(account, posted), random.Random(seed), junk_values)
            data = encode_hostile(body)
            response = await client.post(
                kit.webhook_path,
                content=data,
                headers={"Content-Type": "application/json", **kit.sign(data, settings)},
            )
            statuses.append(response.status_code)
            if not _deep(data):
                expected |= {m.external_id: m for m in posted}
            # the same kind of body, unsigned or signed with another secret: refused, nothing stored
            stranger = [Posted(new_id("unsigned"), sender, text) for text in texts]
            unsigned_ids |= {m.external_id for m in stranger}
            forged = encode_hostile(
                sprinkle(kit.delivery(account, stranger), random.Random(seed), junk_values)
            )
            wrong_path, wrong_headers = kit.wrongly_signed(settings)
            refused = await client.post(wrong_path, content=forged, headers=wrong_headers)
            assert refused.status_code in (401, 403)
    stored_now = {row.external_id: row for row in await _rows(sessions, answering_tenant.id)}
    await run_worker_burst(settings)
    failed_jobs = await _failed_jobs(arq_pool, started_ms)
    after = await _rows(sessions, answering_tenant.id)
    sent = kit.sent(request.getfixturevalue(kit.sandbox_fixture)[1], account)  # the channel's own sandbox
    record_figures(
        f"{kit.name}: sprinkled",
        requests=len(statuses) * 2,
        signed=len(statuses),
        http_5xx=sum(s >= 500 for s in statuses),
        signed_non_2xx=sum(s >= 300 for s in statuses),
        valid_messages=len(expected),
        valid_not_stored=len(set(expected) - set(stored_now)),
        unsigned_stored=len(unsigned_ids & set(stored_now)),
        rows=len(after),
        unprocessable=sum((r.last_error or "").startswith("unprocessable") for r in after),
        dead_letters=sum(r.inbound_state == "dead" for r in after),
        failed_jobs=len(failed_jobs),
        replies=len(sent),
    )
    assert [s for s in statuses if s >= 300] == [], statuses
    rows = stored_now
    assert set(expected) <= set(rows), sorted(set(expected) - set(rows))
    assert unsigned_ids.isdisjoint(rows)
    for external_id, message in expected.items():
        row = rows[external_id]
        assert "\x00" not in (row.text or "")
        if row.kind == "text":
            assert row.text == clean_text(as_received(message.text))
    assert failed_jobs == []
    rows = {row.external_id: row for row in await _rows(sessions, answering_tenant.id)}
    assert {row.inbound_state for row in rows.values()} <= {"done"}, [
        (row.kind, row.inbound_state, row.last_error) for row in rows.values() if row.inbound_state != "done"
    ]
    sent_to = {message["to"] for message in sent}
    must_answer = {m.sender for m in expected.values() if clean_text(as_received(m.text)).strip()}
    unanswered = [
        (m.text, rows[m.external_id].kind, rows[m.external_id].last_error)
        for m in expected.values()
        if m.sender in must_answer - sent_to
    ]
    assert unanswered == [], repr(unanswered)
    assert sent_to <= {m.sender for m in expected.values()}


async def test_signed_bodies_with_any_value_replaced_are_acknowledged_and_never_crash_the_worker(
    kit, e2e_settings, answering_tenant, sessions, arq_pool
) -> None:  # type: ignore[no-untyped-def]
    settings = e2e_settings()
    account = await kit.connect(sessions, answering_tenant, settings)
    started_ms = time.time() * 1000
    statuses: list[tuple[int, bytes]] = []
    async with kit.service(settings) as client:
        for n, (texts, junk_values, seed) in enumerate(collect(_CASES)):
            posted = [Posted(new_id("mutated"), _sender(10_000 + n), text) for text in texts]
            for body in (
                mutate(kit.delivery(account, posted), random.Random(seed), junk_values),
                kit.status(account, new_id("status"), "read") | {"entry": junk_values},
                mutate(
                    kit.status(account, new_id("status\x00"), "delivered"), random.Random(seed), junk_values
                ),
            ):
                data = encode_hostile(body)
                response = await client.post(
                    kit.webhook_path,
                    content=data,
                    headers={"Content-Type": "application/json", **kit.sign(data, settings)},
                )
                statuses.append((response.status_code, data[:300]))
    await run_worker_burst(settings)
    failed_jobs = await _failed_jobs(arq_pool, started_ms)
    rows = await _rows(sessions, answering_tenant.id)
    record_figures(
        f"{kit.name}: mutated",
        requests=len(statuses),
        signed=len(statuses),
        http_5xx=sum(s[0] >= 500 for s in statuses),
        signed_non_2xx=sum(s[0] != 200 for s in statuses),
        rows=len(rows),
        unprocessable=sum((r.last_error or "").startswith("unprocessable") for r in rows),
        dead_letters=sum(r.inbound_state == "dead" for r in rows),
        failed_jobs=len(failed_jobs),
    )
    assert [s for s in statuses if s[0] != 200] == []
    assert failed_jobs == []
    stuck = [r for r in rows if r.inbound_state != "done"]
    assert [(r.kind, r.inbound_state, r.last_error) for r in stuck] == []


def _issue_bodies(kit: ChannelKit, account: str) -> list[tuple[str, Any, list[Posted]]]:
    """The hostile cases, each next to a valid sibling that must be stored: ``(case, body, valid)``."""
    cases: list[tuple[str, Any, list[Posted]]] = []
    for name, value in (
        ("nul", "\x00"),
        ("lone surrogate", "\ud800"),
        ("invalid utf-8", "\ue000bad-utf8\ue000"),
        ("nan", float("nan")),
        ("infinity", float("inf")),
        ("1e400", "\ue000huge-float\ue000"),
        ("5000-digit int", "\ue000big-int\ue000"),
        ("superscript two", "²"),
        ("5000-digit string", "9" * 5000),
        ("not a list", 1),
        ("true", True),
        ("1.5", 1.5),
    ):
        valid = [Posted(new_id("sibling"), _sender(hash(name) % 10**6), f"sibling of {name}")]
        bad = [Posted(new_id("bad"), _sender(hash(name) % 10**6 + 1), "x")]
        body = kit.delivery(account, valid + bad)
        cases.append((name, mutate(body, random.Random(name), [value] * 3), []))  # anywhere: acknowledged
        cases.append(
            (name, sprinkle(body, random.Random(name), [value, {"id": value, "type": value}]), valid)
        )
    return cases


async def test_issue_13_bodies_are_acknowledged_and_their_valid_siblings_stored(
    kit, make_settings, make_tenant, sessions, stops_at_the_queue
) -> None:  # type: ignore[no-untyped-def]
    settings = make_settings()
    tenant = await make_tenant()
    account = await kit.connect(sessions, tenant, settings)
    answers = []
    valid: set[str] = set()
    async with kit.service(settings) as client:
        for name, body, siblings in _issue_bodies(kit, account):
            data = encode_hostile(body)
            response = await client.post(
                kit.webhook_path,
                content=data,
                headers={"Content-Type": "application/json", **kit.sign(data, settings)},
            )
            answers.append((name, response.status_code))
            valid |= {m.external_id for m in siblings}
    assert [a for a in answers if a[1] != 200] == []
    stored = {row.external_id for row in await _rows(sessions, tenant.id)}
    assert valid <= stored, sorted(valid - stored)
